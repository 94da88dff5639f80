#include "backend/store/sqlitedb.h"

#include <cerrno>
#include <cstring>

#include <sqlite3.h>
#include <QLoggingCategory>

#include <cstdint>
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

// Statements appear in messages shortened, so one long INSERT does not drown the error.
std::string shortSql(std::string_view sql) {
  constexpr std::size_t kMax = 80;
  if (sql.size() <= kMax) return std::string(sql);
  return std::string(sql.substr(0, kMax)) + "...";
}

}  // namespace

// ---------------------------------------------------------------------------------- Statement

Statement::Statement(sqlite3_stmt* stmt, std::string path)
    : m_stmt(stmt), m_path(std::move(path)) {}

Statement::Statement(Statement&& other) noexcept
    : m_stmt(std::exchange(other.m_stmt, nullptr)), m_path(std::move(other.m_path)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(m_stmt);
    m_stmt = std::exchange(other.m_stmt, nullptr);
    m_path = std::move(other.m_path);
  }
  return *this;
}

Statement::~Statement() { sqlite3_finalize(m_stmt); }

Result<void> Statement::checkBind(int rc, int index, const char* kind) {
  if (rc == SQLITE_OK) return ok();
  const std::string what = std::string("binding ") + kind + " to parameter " +
                           std::to_string(index) + " of '" + shortSql(sql()) + "'";
  return fail(sqliteError(m_path, sqlite3_db_handle(m_stmt), rc, what));
}

Result<void> Statement::bindInt64(int index, std::int64_t value) {
  return checkBind(sqlite3_bind_int64(m_stmt, index, value), index, "an integer");
}

Result<void> Statement::bindDouble(int index, double value) {
  return checkBind(sqlite3_bind_double(m_stmt, index, value), index, "a real");
}

Result<void> Statement::bindText(int index, std::string_view text) {
  const int rc =
      sqlite3_bind_text64(m_stmt, index, text.data(), text.size(), kTransient, SQLITE_UTF8);
  return checkBind(rc, index, "text");
}

Result<void> Statement::bindNull(int index) {
  return checkBind(sqlite3_bind_null(m_stmt, index), index, "NULL");
}

Result<bool> Statement::step() {
  const int rc = sqlite3_step(m_stmt);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return fail(
      sqliteError(m_path, sqlite3_db_handle(m_stmt), rc, "running '" + shortSql(sql()) + "'"));
}

void Statement::reset() {
  // sqlite3_reset repeats the last step's error code; step() already reported that error, and
  // the rewind itself cannot fail.
  sqlite3_reset(m_stmt);
}

void Statement::clearBindings() { sqlite3_clear_bindings(m_stmt); }

int Statement::columnCount() const { return sqlite3_column_count(m_stmt); }

bool Statement::columnIsNull(int column) const {
  return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
}

std::int64_t Statement::columnInt64(int column) const {
  return sqlite3_column_int64(m_stmt, column);
}

double Statement::columnDouble(int column) const { return sqlite3_column_double(m_stmt, column); }

std::string Statement::columnText(int column) const {
  // Text first, then its size: the documented order that avoids a second conversion.
  const auto* text = sqlite3_column_text(m_stmt, column);
  const int size = sqlite3_column_bytes(m_stmt, column);
  if (!text) return {};
  return std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(size));
}

std::string Statement::sql() const {
  const char* text = sqlite3_sql(m_stmt);
  return text ? text : "";
}

// -------------------------------------------------------------------------------- Transaction

Transaction::Transaction(sqlite3* db, std::string path) : m_db(db), m_path(std::move(path)) {}

Transaction::Transaction(Transaction&& other) noexcept
    : m_db(std::exchange(other.m_db, nullptr)), m_path(std::move(other.m_path)) {}

Transaction& Transaction::operator=(Transaction&& other) noexcept {
  if (this != &other) {
    rollback();
    m_db = std::exchange(other.m_db, nullptr);
    m_path = std::move(other.m_path);
  }
  return *this;
}

Transaction::~Transaction() { rollback(); }

Result<void> Transaction::commit() {
  if (!m_db) return fail(m_path + ": commit of a transaction that is no longer open");
  const int rc = sqlite3_exec(m_db, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return fail(sqliteError(m_path, m_db, rc, "commit"));
  m_db = nullptr;
  return ok();
}

void Transaction::rollback() {
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

// ----------------------------------------------------------------------------------- SqliteDb

SqliteDb::SqliteDb(sqlite3* db, QString path, bool readOnly)
    : m_db(db), m_path(std::move(path)), m_readOnly(readOnly) {}

SqliteDb::SqliteDb(SqliteDb&& other) noexcept
    : m_db(std::exchange(other.m_db, nullptr)),
      m_path(std::move(other.m_path)),
      m_readOnly(other.m_readOnly) {}

SqliteDb& SqliteDb::operator=(SqliteDb&& other) noexcept {
  if (this != &other) {
    sqlite3_close_v2(m_db);
    m_db = std::exchange(other.m_db, nullptr);
    m_path = std::move(other.m_path);
    m_readOnly = other.m_readOnly;
  }
  return *this;
}

// close_v2: statements still alive keep the connection as a zombie instead of leaking it.
SqliteDb::~SqliteDb() { sqlite3_close_v2(m_db); }

Result<SqliteDb> SqliteDb::open(const QString& path, OpenMode mode) {
  const QByteArray utf8 = path.toUtf8();
  const std::string where = utf8.toStdString();
  if (path.isEmpty()) return fail("run store path is empty: give the database file to open");
  // NOMUTEX: each connection belongs to one thread at a time, so SQLite's own lock is waste.
  const int flags =
      (mode.readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
      SQLITE_OPEN_NOMUTEX;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(utf8.constData(), &raw, flags, nullptr);
  SqliteDb db(raw, path, mode.readOnly);  // owns the handle even when opening failed
  if (rc != SQLITE_OK) return fail(sqliteError(where, raw, rc, "cannot open"));
  sqlite3_extended_result_codes(raw, 1);
  if (auto configured = db.configure(mode); !configured) return configured.error();
  return db;
}

Result<void> SqliteDb::configure(const OpenMode& mode) {
  const std::string where = m_path.toStdString();
  sqlite3_busy_timeout(m_db, mode.busyTimeoutMs);
  // The answer is the mode actually in force: a read-only connection cannot convert a file,
  // and some file systems (network mounts) cannot do WAL at all.
  auto journal = queryText("PRAGMA journal_mode=WAL");
  if (!journal) return journal.error();
  if (*journal != "wal") {
    return fail(where + ": journal_mode is '" + *journal + "', not 'wal'" +
                (mode.readOnly
                     ? " (open it read-write once to convert it)"
                     : " (is it on a network file system? keep the store on a local disk)"));
  }
  if (auto r = exec("PRAGMA synchronous=NORMAL"); !r) return r;
  if (auto r = exec("PRAGMA foreign_keys=ON"); !r) return r;
  return ok();
}

Result<void> SqliteDb::exec(std::string_view sql) {
  // sqlite3_exec needs a NUL-terminated string; a string_view need not be one.
  const std::string text(sql);
  char* message = nullptr;
  const int rc = sqlite3_exec(m_db, text.c_str(), nullptr, nullptr, &message);
  sqlite3_free(message);  // sqlite3_errmsg holds the same text
  if (rc != SQLITE_OK) {
    return fail(sqliteError(m_path.toStdString(), m_db, rc, "running '" + shortSql(sql) + "'"));
  }
  return ok();
}

Result<Statement> SqliteDb::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(m_db, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return fail(sqliteError(m_path.toStdString(), m_db, rc, "preparing '" + shortSql(sql) + "'"));
  }
  return Statement(stmt, m_path.toStdString());
}

Result<Transaction> SqliteDb::transaction() {
  const int rc = sqlite3_exec(m_db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return fail(sqliteError(m_path.toStdString(), m_db, rc, "cannot begin a write transaction"));
  }
  return Transaction(m_db, m_path.toStdString());
}

Result<std::string> SqliteDb::queryText(std::string_view sql) {
  auto stmt = prepare(sql);
  if (!stmt) return stmt.error();
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return fail(m_path.toStdString() + ": '" + shortSql(sql) + "' returned no row");
  return stmt->columnText(0);
}

std::int64_t SqliteDb::lastInsertRowId() const { return sqlite3_last_insert_rowid(m_db); }

}  // namespace shardscope::backend
