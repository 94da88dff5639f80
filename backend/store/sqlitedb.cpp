#include "backend/store/sqlitedb.h"

#include <cerrno>
#include <cstring>

#include <sqlite3.h>
#include <QLoggingCategory>

#include <cstdint>
#include <memory>
#include <utility>

Q_LOGGING_CATEGORY(lcSqliteDb, "shardscope.backend.sqlitedb")

namespace shardscope::backend {

namespace {

// SQLITE_TRANSIENT is an old-style cast in a macro; this is the same value, spelt for C++. The
// int-to-pointer cast is SQLite's documented sentinel ("copy the value"), never dereferenced.
const sqlite3_destructor_type kTransient =
    reinterpret_cast<sqlite3_destructor_type>(  // NOLINT(performance-no-int-to-ptr)
        static_cast<std::intptr_t>(-1));

// What the user can do about the common failures; SQLite's own text says what happened.
const char* hintFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
      return " (another writer?)";
    case SQLITE_LOCKED:
      return " (a statement on this connection is still running: reset it first)";
    case SQLITE_CANTOPEN:
      return " (does the folder exist, and may this user write to it?)";
    case SQLITE_READONLY:
      return " (opened read-only, or the file or its folder is not writable)";
    case SQLITE_NOTADB:
      return " (this is not a SQLite database: check the path)";
    case SQLITE_CORRUPT:
      return " (the file is damaged: restore it from a backup)";
    case SQLITE_FULL:
      return " (the disk that holds the run log is full, or the file reached its size limit: "
             "free space on that disk, e.g. delete old checkpoints or run directories, or move the "
             "run log elsewhere with --db; the rows committed so far are safe)";
    default:
      return "";
  }
}

// "<path>: <what>: <sqlite's message> (<hint>)". `db` may be null when there is no handle.
std::string sqliteError(const std::string& path, sqlite3* db, int rc, std::string_view what) {
  std::string message = path + ": ";
  if (!what.empty()) message += std::string(what) + ": ";
  message += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  // A write refused by a file-size limit (EFBIG) or a full disk that SQLite met outside its own
  // size checks comes back as a bare "disk I/O error": the operating system's errno says which.
  const int sys = db && (rc & 0xff) == SQLITE_IOERR ? sqlite3_system_errno(db) : 0;
  if (sys == ENOSPC || sys == EFBIG || sys == EDQUOT) {
    message.append(" (").append(std::strerror(sys)).append(")");
    rc = SQLITE_FULL;
  }
  message += hintFor(rc);
  return message;
}

// SQLite's refusals that the same statement meets again on a retry: a constraint (or a trigger's
// RAISE), a value of the wrong type, a string or blob past the limit, a parameter out of range.
// Everything else (a full disk, an I/O error, a busy or locked database) may pass.
bool isPermanent(int rc) {
  switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
    case SQLITE_RANGE:
      return true;
    default:
      return false;
  }
}

// sqliteError's message as an Error, permanent as isPermanent says.
Error sqliteFailure(const std::string& path, sqlite3* db, int rc, std::string_view what) {
  return Error{sqliteError(path, db, rc, what), isPermanent(rc)};
}

// Statements appear in messages shortened, so one long INSERT does not drown the error.
std::string shortSql(std::string_view sql) {
  constexpr std::size_t kMax = 80;
  if (sql.size() <= kMax) return std::string(sql);
  return std::string(sql.substr(0, kMax)) + "...";
}

}  // namespace

namespace {

class SqliteStatement final : public detail::StatementImpl {
 public:
  SqliteStatement(sqlite3_stmt* stmt, std::string path) : m_stmt(stmt), m_path(std::move(path)) {}
  ~SqliteStatement() override { sqlite3_finalize(m_stmt); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  Result<void> bindInt64(int index, std::int64_t value) override {
    return checkBind(sqlite3_bind_int64(m_stmt, index, value), index, "an integer");
  }
  Result<void> bindDouble(int index, double value) override {
    return checkBind(sqlite3_bind_double(m_stmt, index, value), index, "a real");
  }
  Result<void> bindText(int index, std::string_view text) override {
    const int rc =
        sqlite3_bind_text64(m_stmt, index, text.data(), text.size(), kTransient, SQLITE_UTF8);
    return checkBind(rc, index, "text");
  }
  Result<void> bindNull(int index) override {
    return checkBind(sqlite3_bind_null(m_stmt, index), index, "NULL");
  }
  Result<bool> step() override {
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return sqliteFailure(m_path, sqlite3_db_handle(m_stmt), rc,
                         "running '" + shortSql(sql()) + "'");
  }
  // sqlite3_reset repeats the last step's error code; step() already reported that error, and
  // the rewind itself cannot fail.
  void reset() override { sqlite3_reset(m_stmt); }
  void clearBindings() override { sqlite3_clear_bindings(m_stmt); }
  int columnCount() const override { return sqlite3_column_count(m_stmt); }
  bool columnIsNull(int column) const override {
    return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
  }
  std::int64_t columnInt64(int column) const override {
    return sqlite3_column_int64(m_stmt, column);
  }
  double columnDouble(int column) const override { return sqlite3_column_double(m_stmt, column); }
  std::string columnText(int column) const override {
    // Text first, then its size: the documented order that avoids a second conversion.
    const auto* text = sqlite3_column_text(m_stmt, column);
    const int size = sqlite3_column_bytes(m_stmt, column);
    if (!text) return {};
    return std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(size));
  }
  std::string sql() const override {
    const char* text = sqlite3_sql(m_stmt);
    return text ? text : "";
  }

 private:
  Result<void> checkBind(int rc, int index, const char* kind) {
    if (rc == SQLITE_OK) return ok();
    const std::string what = std::string("binding ") + kind + " to parameter " +
                             std::to_string(index) + " of '" + shortSql(sql()) + "'";
    return sqliteFailure(m_path, sqlite3_db_handle(m_stmt), rc, what);
  }

  sqlite3_stmt* m_stmt = nullptr;
  std::string m_path;
};

class SqliteTransaction final : public detail::TransactionImpl {
 public:
  SqliteTransaction(sqlite3* db, std::string path) : m_db(db), m_path(std::move(path)) {}
  ~SqliteTransaction() override { rollback(); }
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;

  Result<void> commit() override {
    if (!m_db) return fail(m_path + ": commit of a transaction that is no longer open");
    const int rc = sqlite3_exec(m_db, "COMMIT", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return sqliteFailure(m_path, m_db, rc, "commit");
    m_db = nullptr;
    return ok();
  }
  bool isActive() const override { return m_db != nullptr; }

 private:
  void rollback() {
    if (!m_db) return;
    // A failed statement may already have rolled back; autocommit mode means nothing is open.
    if (!sqlite3_get_autocommit(m_db)) {
      const int rc = sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) {
        qCWarning(lcSqliteDb, "%s", sqliteError(m_path, m_db, rc, "rollback").c_str());
      }
    }
    m_db = nullptr;
  }

  sqlite3* m_db = nullptr;  // null once committed or rolled back
  std::string m_path;
};

class SqliteConnection final : public detail::DbImpl {
 public:
  SqliteConnection(sqlite3* db, std::string path) : m_db(db), m_path(std::move(path)) {}
  // close_v2: statements still alive keep the connection as a zombie instead of leaking it.
  ~SqliteConnection() override { sqlite3_close_v2(m_db); }
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  DbKind kind() const override { return DbKind::sqlite; }

  Result<void> exec(std::string_view sql) override {
    // sqlite3_exec needs a NUL-terminated string; a string_view need not be one.
    const std::string text(sql);
    char* message = nullptr;
    const int rc = sqlite3_exec(m_db, text.c_str(), nullptr, nullptr, &message);
    sqlite3_free(message);  // sqlite3_errmsg holds the same text
    if (rc != SQLITE_OK) {
      return sqliteFailure(m_path, m_db, rc, "running '" + shortSql(sql) + "'");
    }
    return ok();
  }

  Result<std::unique_ptr<detail::StatementImpl>> prepare(std::string_view sql) override {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(m_db, sql.data(), static_cast<int>(sql.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return sqliteFailure(m_path, m_db, rc, "preparing '" + shortSql(sql) + "'");
    }
    return std::unique_ptr<detail::StatementImpl>(new SqliteStatement(stmt, m_path));
  }

  Result<std::unique_ptr<detail::TransactionImpl>> transaction() override {
    const int rc = sqlite3_exec(m_db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) {
      return sqliteFailure(m_path, m_db, rc, "cannot begin a write transaction");
    }
    return std::unique_ptr<detail::TransactionImpl>(new SqliteTransaction(m_db, m_path));
  }

  int changes() const override { return sqlite3_changes(m_db); }
  bool inTransaction() const override { return !sqlite3_get_autocommit(m_db); }

  Result<bool> hasTable(std::string_view name) override {
    auto stmt = prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1");
    if (!stmt) return stmt.error();
    if (auto r = (*stmt)->bindText(1, name); !r) return r.error();
    auto row = (*stmt)->step();
    if (!row) return row.error();
    return *row && (*stmt)->columnInt64(0) > 0;
  }

  Result<std::int64_t> dataVersion() override {
    auto stmt = prepare("PRAGMA data_version");
    if (!stmt) return stmt.error();
    auto row = (*stmt)->step();
    if (!row) return row.error();
    return *row ? (*stmt)->columnInt64(0) : 0;
  }

  Result<std::string> integrityCheck() override {
    auto stmt = prepare("PRAGMA integrity_check");
    if (!stmt) return stmt.error();
    auto row = (*stmt)->step();
    if (!row) return row.error();
    return *row ? (*stmt)->columnText(0) : std::string("no answer");
  }

  sqlite3* handle() const { return m_db; }

 private:
  sqlite3* m_db = nullptr;
  std::string m_path;
};

Result<void> configure(Db& db, sqlite3* raw, const OpenMode& mode) {
  const std::string where = db.path().toStdString();
  sqlite3_busy_timeout(raw, mode.busyTimeoutMs);
  // The answer is the mode actually in force: a read-only connection cannot convert a file,
  // and some file systems (network mounts) cannot do WAL at all.
  auto journal = db.queryText("PRAGMA journal_mode=WAL");
  if (!journal) return journal.error();
  if (*journal != "wal") {
    return fail(where + ": journal_mode is '" + *journal + "', not 'wal'" +
                (mode.readOnly
                     ? " (open it read-write once to convert it)"
                     : " (is it on a network file system? keep the store on a local disk)"));
  }
  if (auto r = db.exec("PRAGMA synchronous=NORMAL"); !r) return r;
  if (auto r = db.exec("PRAGMA foreign_keys=ON"); !r) return r;
  return ok();
}

}  // namespace

Result<Db> openSqlite(const QString& path, OpenMode mode) {
  const QByteArray utf8 = path.toUtf8();
  const std::string where = utf8.toStdString();
  if (path.isEmpty()) return fail("run store path is empty: give the database file to open");
  // NOMUTEX: each connection belongs to one thread at a time, so SQLite's own lock is waste.
  const int flags =
      (mode.readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
      SQLITE_OPEN_NOMUTEX;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(utf8.constData(), &raw, flags, nullptr);
  // The connection owns the handle even when opening failed.
  Db db(std::make_unique<SqliteConnection>(raw, where), path, mode.readOnly);
  if (rc != SQLITE_OK) return sqliteFailure(where, raw, rc, "cannot open");
  sqlite3_extended_result_codes(raw, 1);
  if (auto configured = configure(db, raw, mode); !configured) return configured.error();
  return db;
}

}  // namespace shardscope::backend
