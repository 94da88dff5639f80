// SqliteDb: a thin RAII layer over the SQLite C API (not QtSql: the run store's writer binds
// prepared statements at hundreds of thousands of rows a second). Every database is in WAL mode,
// so one writer and any number of readers, each on its own connection, never block each other.
// A connection is used by one thread at a time; give every thread its own SqliteDb.
#pragma once

#include <QString>

#include <cstdint>
#include <string>
#include <string_view>

#include "trainer/spec/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace shardscope::backend {

/// How SqliteDb::open opens a file.
struct OpenMode {
  bool readOnly = false;     ///< true: never writes; the file must exist and already be WAL
  int busyTimeoutMs = 5000;  ///< how long to wait for another connection's lock, in ms; 0: fail
};

/// A prepared statement; it must not outlive the SqliteDb that prepared it.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Parameters are 1-based, as in SQLite's `?1`.
  [[nodiscard]] Result<void> bindInt64(int index, std::int64_t value);
  [[nodiscard]] Result<void> bindDouble(int index, double value);
  /// UTF-8 text; SQLite copies it, so `text` may die right after the call.
  [[nodiscard]] Result<void> bindText(int index, std::string_view text);
  [[nodiscard]] Result<void> bindNull(int index);

  /// Runs one step: true when a row is available to read, false when the statement is done.
  [[nodiscard]] Result<bool> step();
  /// Rewinds the statement so it can run again; bindings are kept (see clearBindings).
  void reset();
  void clearBindings();

  // Columns are 0-based and valid only after step() returned true.
  int columnCount() const;
  bool columnIsNull(int column) const;
  std::int64_t columnInt64(int column) const;
  double columnDouble(int column) const;
  /// The column as UTF-8 bytes (embedded NULs kept).
  std::string columnText(int column) const;

  /// The SQL text this statement was prepared from.
  std::string sql() const;

 private:
  friend class SqliteDb;
  Statement(sqlite3_stmt* stmt, std::string path);
  Result<void> checkBind(int rc, int index, const char* kind);

  sqlite3_stmt* m_stmt = nullptr;
  std::string m_path;
};

/// A write transaction (BEGIN IMMEDIATE); rolled back on destruction unless committed.
/// It must not outlive the SqliteDb that began it.
class Transaction {
 public:
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&& other) noexcept;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  /// Commits; on failure the transaction stays open and the destructor rolls it back.
  [[nodiscard]] Result<void> commit();
  bool isActive() const { return m_db != nullptr; }

 private:
  friend class SqliteDb;
  Transaction(sqlite3* db, std::string path);
  void rollback();

  sqlite3* m_db = nullptr;  // null once committed, rolled back or moved from
  std::string m_path;
};

/// One connection to one SQLite file, in WAL mode with synchronous=NORMAL and foreign keys on.
class SqliteDb {
 public:
  /// Opens (read-write: creates) the file and configures the connection; errors name the path.
  [[nodiscard]] static Result<SqliteDb> open(const QString& path, OpenMode mode = {});

  SqliteDb(SqliteDb&& other) noexcept;
  SqliteDb& operator=(SqliteDb&& other) noexcept;
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;
  ~SqliteDb();

  /// Runs one or more statements that return no rows we need.
  [[nodiscard]] Result<void> exec(std::string_view sql);
  [[nodiscard]] Result<Statement> prepare(std::string_view sql);
  /// Begins a write transaction: BEGIN IMMEDIATE, so a second writer fails at once (after
  /// busyTimeoutMs) rather than halfway through its writes.
  [[nodiscard]] Result<Transaction> transaction();
  /// Runs a query that yields one text value (e.g. a PRAGMA's answer).
  [[nodiscard]] Result<std::string> queryText(std::string_view sql);

  const QString& path() const { return m_path; }
  bool isReadOnly() const { return m_readOnly; }
  std::int64_t lastInsertRowId() const;
  /// The raw handle, for SQLite calls this class does not wrap.
  sqlite3* handle() const { return m_db; }

 private:
  SqliteDb(sqlite3* db, QString path, bool readOnly);
  Result<void> configure(const OpenMode& mode);

  sqlite3* m_db = nullptr;
  QString m_path;
  bool m_readOnly = false;
};

}  // namespace shardscope::backend
