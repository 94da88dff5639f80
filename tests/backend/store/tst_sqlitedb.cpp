// Toolchain proof 2: SQLite in WAL mode does what the run store relies on. A writer holding an
// open write transaction (with enough uncommitted rows to spill into the -wal file) must not
// block a reader on another thread, and the reader must see exactly the committed rows.
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <sqlite3.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <thread>

#include "backend/store/sqlitedb.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;
using shardscope::testing::why;

namespace {

constexpr int kCommitted = 1000;
constexpr int kUncommitted = 5000;  // x 200-byte notes: far beyond the 64 KiB page cache

// The error text of a failed Result, for QVERIFY2 (empty when it succeeded).
Result<void> insertSteps(SqliteDb& db, int first, int count) {
  auto stmt = db.prepare("INSERT INTO step(id, loss, note) VALUES (?1, ?2, ?3)");
  if (!stmt) return stmt.error();
  const std::string note(200, 'n');
  for (int id = first; id < first + count; ++id) {
    if (auto r = stmt->bindInt64(1, id); !r) return r;
    if (auto r = stmt->bindDouble(2, 1.0 / (id + 1)); !r) return r;
    if (auto r = stmt->bindText(3, note); !r) return r;
    if (auto row = stmt->step(); !row) return row.error();
    stmt->reset();
  }
  return ok();
}

Result<void> createStepTable(SqliteDb& db) {
  // A tiny page cache makes the writer spill uncommitted pages to disk before COMMIT.
  if (auto r = db.exec("PRAGMA cache_size=16"); !r) return r;
  return db.exec("CREATE TABLE step(id INTEGER PRIMARY KEY, loss REAL NOT NULL, note TEXT)");
}

// What a reader saw: the row count and highest id, or why it could not read.
struct ReaderView {
  std::string error;
  std::int64_t count = -1;
  std::int64_t maxId = -1;
};

ReaderView readSteps(SqliteDb& reader) {
  ReaderView view;
  auto stmt = reader.prepare("SELECT count(*), coalesce(max(id), -1) FROM step");
  if (!stmt) return {stmt.message()};
  auto row = stmt->step();
  if (!row) return {row.message()};
  if (!*row) return {"no row from count(*)"};
  view.count = stmt->columnInt64(0);
  view.maxId = stmt->columnInt64(1);
  return view;
}

// Opens a read-only connection (if `reader` is empty) and reads, on a thread of its own.
// busyTimeoutMs = 0: any lock wait fails at once with SQLITE_BUSY instead of waiting, so "did
// not block" is checked without measuring time.
ReaderView readOnOtherThread(const QString& path, std::optional<SqliteDb>& reader) {
  ReaderView view;
  std::thread thread([&] {
    if (!reader) {
      auto opened = SqliteDb::open(path, OpenMode{.readOnly = true, .busyTimeoutMs = 0});
      if (!opened) {
        view.error = opened.message();
        return;
      }
      reader.emplace(std::move(opened).value());
    }
    view = readSteps(*reader);
  });
  thread.join();
  return view;
}

}  // namespace

class TestSqliteDb : public QObject {
  Q_OBJECT

 private:
  std::optional<QTemporaryDir> m_dir;
  QString dbPath() const { return m_dir->filePath("runs.db"); }

 private slots:
  void init() {
    m_dir.emplace();
    QVERIFY(m_dir->isValid());
  }

  void opensInWalModeWithAWalFile() {
    auto db = SqliteDb::open(dbPath());
    QVERIFY2(db, why(db).c_str());
    VERIFY_OK(db->exec("CREATE TABLE t(x INTEGER)"));
    auto mode = db->queryText("PRAGMA journal_mode");
    QVERIFY2(mode, why(mode).c_str());
    QCOMPARE(*mode, std::string("wal"));
    auto sync = db->queryText("PRAGMA synchronous");
    QVERIFY2(sync, why(sync).c_str());
    QCOMPARE(*sync, std::string("1"));  // NORMAL
    auto keys = db->queryText("PRAGMA foreign_keys");
    QVERIFY2(keys, why(keys).c_str());
    QCOMPARE(*keys, std::string("1"));
    QVERIFY2(QFileInfo::exists(dbPath() + "-wal"), "no -wal file next to the database");
  }

  void readerSeesOnlyCommittedRowsWithoutBlocking() {
    auto writer = SqliteDb::open(dbPath());
    QVERIFY2(writer, why(writer).c_str());
    VERIFY_OK(createStepTable(*writer));
    {
      auto tx = writer->transaction();
      QVERIFY2(tx, why(tx).c_str());
      VERIFY_OK(insertSteps(*writer, 0, kCommitted));
      VERIFY_OK(tx->commit());
    }
    auto open = writer->transaction();
    QVERIFY2(open, why(open).c_str());
    VERIFY_OK(insertSteps(*writer, kCommitted, kUncommitted));
    QVERIFY(open->isActive());
    // The uncommitted rows are already in the -wal file (spilled from the small cache), so
    // the reader below must skip them by snapshot, not merely because they are still in memory.
    const qint64 walBytes = QFileInfo(dbPath() + "-wal").size();
    QVERIFY2(walBytes > qint64{kUncommitted} * 200, qPrintable(QString::number(walBytes)));

    std::optional<SqliteDb> reader;
    ReaderView during = readOnOtherThread(dbPath(), reader);
    QVERIFY2(during.error.empty(), during.error.c_str());
    QCOMPARE(during.count, std::int64_t{kCommitted});
    QCOMPARE(during.maxId, std::int64_t{kCommitted - 1});
    auto readerMode = reader->queryText("PRAGMA journal_mode");
    QVERIFY2(readerMode, why(readerMode).c_str());
    QCOMPARE(*readerMode, std::string("wal"));

    VERIFY_OK(open->commit());
    ReaderView after = readOnOtherThread(dbPath(), reader);  // same connection, new snapshot
    QVERIFY2(after.error.empty(), after.error.c_str());
    QCOMPARE(after.count, std::int64_t{kCommitted + kUncommitted});
    QCOMPARE(after.maxId, std::int64_t{kCommitted + kUncommitted - 1});
  }

  // The control for the test above: without WAL the same reader is refused at once, so that
  // test would fail if the store ever left WAL mode.
  void rollbackJournalWouldBlockTheReader() {
    const QByteArray path = dbPath().toUtf8();
    sqlite3* raw = nullptr;
    QCOMPARE(sqlite3_open(path.constData(), &raw), SQLITE_OK);
    const char* setup =
        "PRAGMA journal_mode=DELETE; PRAGMA cache_size=16;"
        "CREATE TABLE step(id INTEGER PRIMARY KEY, loss REAL NOT NULL, note TEXT);"
        "BEGIN IMMEDIATE; WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n "
        "WHERE i < 4999) INSERT INTO step SELECT i, 1.0, printf('%200d', i) FROM n;";
    QCOMPARE(sqlite3_exec(raw, setup, nullptr, nullptr, nullptr), SQLITE_OK);
    std::optional<SqliteDb> reader;
    ReaderView during = readOnOtherThread(dbPath(), reader);
    sqlite3_close_v2(raw);  // rolls the open transaction back
    QVERIFY2(!during.error.empty(), "a rollback-journal reader was not blocked: control broken");
    QVERIFY2(during.error.find("database is locked") != std::string::npos, during.error.c_str());
  }

  void secondWriterIsRefusedNamingThePath() {
    auto first = SqliteDb::open(dbPath());
    QVERIFY2(first, why(first).c_str());
    VERIFY_OK(first->exec("CREATE TABLE t(x INTEGER)"));
    auto second = SqliteDb::open(dbPath(), OpenMode{.busyTimeoutMs = 0});
    QVERIFY2(second, why(second).c_str());
    auto held = first->transaction();
    QVERIFY2(held, why(held).c_str());
    auto refused = second->transaction();
    QVERIFY(!refused);
    const std::string expected = dbPath().toStdString() + ": ";
    QVERIFY2(refused.message().rfind(expected, 0) == 0, refused.message().c_str());
    QVERIFY2(refused.message().find("database is locked (another writer?)") != std::string::npos,
             refused.message().c_str());
    QVERIFY(
        !refused.error().permanent);  // the lock passes: the monitor retries, sets nothing aside
  }

  void missingFolderIsAnErrorNamingThePath() {
    const QString path = m_dir->filePath("no-such-folder/runs.db");
    auto db = SqliteDb::open(path);
    QVERIFY(!db);
    QVERIFY2(db.message().find(path.toStdString()) != std::string::npos, db.message().c_str());
    QVERIFY2(db.message().find("does the folder exist") != std::string::npos, db.message().c_str());
  }

  void readOnlyConnectionRefusesWrites() {
    {
      auto db = SqliteDb::open(dbPath());
      QVERIFY2(db, why(db).c_str());
      VERIFY_OK(db->exec("CREATE TABLE t(x INTEGER)"));
    }
    auto reader = SqliteDb::open(dbPath(), OpenMode{.readOnly = true});
    QVERIFY2(reader, why(reader).c_str());
    QVERIFY(reader->isReadOnly());
    auto write = reader->exec("INSERT INTO t VALUES (1)");
    QVERIFY(!write);
    QVERIFY2(write.message().find(dbPath().toStdString()) == 0, write.message().c_str());
    QVERIFY2(write.message().find("readonly") != std::string::npos, write.message().c_str());
    auto missing = SqliteDb::open(m_dir->filePath("absent.db"), OpenMode{.readOnly = true});
    QVERIFY(!missing);
  }

  void transactionRollsBackUnlessCommitted() {
    auto db = SqliteDb::open(dbPath());
    QVERIFY2(db, why(db).c_str());
    VERIFY_OK(db->exec("CREATE TABLE t(x INTEGER)"));
    {
      auto tx = db->transaction();
      QVERIFY2(tx, why(tx).c_str());
      VERIFY_OK(db->exec("INSERT INTO t VALUES (1)"));
    }  // destroyed uncommitted: rolled back
    auto count = db->queryText("SELECT count(*) FROM t");
    QVERIFY2(count, why(count).c_str());
    QCOMPARE(*count, std::string("0"));
    {
      auto tx = db->transaction();
      QVERIFY2(tx, why(tx).c_str());
      VERIFY_OK(db->exec("INSERT INTO t VALUES (2)"));
      VERIFY_OK(tx->commit());
      QVERIFY(!tx->isActive());
      QVERIFY(!tx->commit());  // a second commit is an error, not a crash
    }
    count = db->queryText("SELECT count(*) FROM t");
    QVERIFY2(count, why(count).c_str());
    QCOMPARE(*count, std::string("1"));
  }

  void bindingsRoundTrip() {
    auto db = SqliteDb::open(dbPath());
    QVERIFY2(db, why(db).c_str());
    VERIFY_OK(db->exec("CREATE TABLE v(i INTEGER, d REAL, s TEXT, n)"));
    const std::int64_t ints[] = {std::numeric_limits<std::int64_t>::max(),
                                 std::numeric_limits<std::int64_t>::min(), 0, -1};
    const double reals[] = {0.1, -1e-300, std::numeric_limits<double>::max(), 6.02214076e23};
    const std::string texts[] = {"Grüße, 世界 🚀", std::string("a\0b", 3), "", "'; DROP TABLE v;--"};
    auto insert = db->prepare("INSERT INTO v(rowid, i, d, s, n) VALUES (?1, ?2, ?3, ?4, ?5)");
    QVERIFY2(insert, why(insert).c_str());
    for (int row = 0; row < 4; ++row) {
      VERIFY_OK(insert->bindInt64(1, row));
      VERIFY_OK(insert->bindInt64(2, ints[row]));
      VERIFY_OK(insert->bindDouble(3, reals[row]));
      VERIFY_OK(insert->bindText(4, texts[row]));
      VERIFY_OK(insert->bindNull(5));
      auto done = insert->step();
      QVERIFY2(done, why(done).c_str());
      QVERIFY(!*done);
      insert->reset();
    }
    auto select = db->prepare("SELECT i, d, s, n, typeof(i), typeof(s) FROM v ORDER BY rowid");
    QVERIFY2(select, why(select).c_str());
    QCOMPARE(select->columnCount(), 6);
    for (int row = 0; row < 4; ++row) {
      auto more = select->step();
      QVERIFY2(more, why(more).c_str());
      QVERIFY(*more);
      QCOMPARE(select->columnInt64(0), ints[row]);
      const double real = select->columnDouble(1);
      QVERIFY(std::memcmp(&real, &reals[row], sizeof real) == 0);  // bit for bit
      QCOMPARE(select->columnText(2), texts[row]);
      QVERIFY(select->columnIsNull(3));
      QCOMPARE(select->columnText(4), std::string("integer"));
      QCOMPARE(select->columnText(5), std::string("text"));
    }
    auto end = select->step();
    QVERIFY2(end, why(end).c_str());
    QVERIFY(!*end);
  }

  void badBindAndBadSqlNameTheProblem() {
    auto db = SqliteDb::open(dbPath());
    QVERIFY2(db, why(db).c_str());
    VERIFY_OK(db->exec("CREATE TABLE t(x INTEGER NOT NULL)"));
    auto stmt = db->prepare("INSERT INTO t VALUES (?1)");
    QVERIFY2(stmt, why(stmt).c_str());
    auto bad = stmt->bindInt64(2, 5);
    QVERIFY(!bad);
    QVERIFY2(bad.message().find("parameter 2") != std::string::npos, bad.message().c_str());
    QVERIFY2(bad.message().find("column index out of range") != std::string::npos,
             bad.message().c_str());
    VERIFY_OK(stmt->bindNull(1));
    auto violated = stmt->step();
    QVERIFY(!violated);
    QVERIFY2(violated.message().find("NOT NULL constraint failed: t.x") != std::string::npos,
             violated.message().c_str());
    QVERIFY(violated.error().permanent);  // the same row is refused again on every retry
    QVERIFY(bad.error().permanent);       // and so is a parameter out of range
    auto typo = db->prepare("SELEC 1");
    QVERIFY(!typo);
    QVERIFY2(typo.message().find("SELEC 1") != std::string::npos, typo.message().c_str());
  }

  void movedConnectionKeepsWorking() {
    auto opened = SqliteDb::open(dbPath());
    QVERIFY2(opened, why(opened).c_str());
    SqliteDb db = std::move(opened).value();
    SqliteDb moved = std::move(db);
    QVERIFY(!db.isOpen());  // NOLINT(bugprone-use-after-move): moved-from is empty
    VERIFY_OK(moved.exec("CREATE TABLE t(x INTEGER)"));
    QCOMPARE(moved.path(), dbPath());
  }
};

QTEST_APPLESS_MAIN(TestSqliteDb)
#include "tst_sqlitedb.moc"
