// Db / Statement / Transaction: the run log's connection layer, one interface over two stores.
// SQLite (a file; the default) and PostgreSQL (a `postgresql://` URL, through libpq) implement
// it; Db::open picks by the spec's scheme. Statements are written once, with SQLite's `?N` (or
// bare `?`) placeholders, which the PostgreSQL side rewrites to `$N`; SQL that differs between
// the two (JSON access, upserts, the schema) lives in storesql.h / runschema.cpp, keyed by
// Db::kind(). A connection is used by one thread at a time; give every thread its own Db.
#pragma once

#include <QString>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "spec/result.h"

namespace shardscope::backend {

/// Which store a Db talks to.
enum class DbKind { sqlite, postgres };

/// How Db::open opens a store.
struct OpenMode {
  bool readOnly = false;  ///< true: never writes; a SQLite file must exist and already be WAL
  int busyTimeoutMs =
      5000;  ///< how long to wait for another connection's write lock, in ms; 0: fail
};

/// True when `spec` names a PostgreSQL server (postgresql:// or postgres://), not a file.
bool isPostgresSpec(const QString& spec);
/// `spec` as messages may show it: a PostgreSQL URL without its password.
QString displaySpec(const QString& spec);

namespace detail {
class StatementImpl {
 public:
  virtual ~StatementImpl() = default;
  virtual Result<void> bindInt64(int index, std::int64_t value) = 0;
  virtual Result<void> bindDouble(int index, double value) = 0;
  virtual Result<void> bindText(int index, std::string_view text) = 0;
  virtual Result<void> bindNull(int index) = 0;
  virtual Result<bool> step() = 0;
  virtual void reset() = 0;
  virtual void clearBindings() = 0;
  virtual int columnCount() const = 0;
  virtual bool columnIsNull(int column) const = 0;
  virtual std::int64_t columnInt64(int column) const = 0;
  virtual double columnDouble(int column) const = 0;
  virtual std::string columnText(int column) const = 0;
  virtual std::string sql() const = 0;
};

class TransactionImpl {
 public:
  virtual ~TransactionImpl() = default;  // rolls back unless committed
  virtual Result<void> commit() = 0;
  virtual bool isActive() const = 0;
};

class DbImpl {
 public:
  virtual ~DbImpl() = default;
  virtual DbKind kind() const = 0;
  virtual Result<void> exec(std::string_view sql) = 0;
  virtual Result<std::unique_ptr<StatementImpl>> prepare(std::string_view sql) = 0;
  virtual Result<std::unique_ptr<TransactionImpl>> transaction() = 0;
  virtual int changes() const = 0;
  virtual bool inTransaction() const = 0;
  virtual Result<bool> hasTable(std::string_view name) = 0;
  virtual Result<std::int64_t> dataVersion() = 0;
  virtual Result<std::string> integrityCheck() = 0;
};
}  // namespace detail

/// A prepared statement; it must not outlive the Db that prepared it.
class Statement {
 public:
  explicit Statement(std::unique_ptr<detail::StatementImpl> impl) : m_impl(std::move(impl)) {}
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;

  // Parameters are 1-based, as in `?1`.
  [[nodiscard]] Result<void> bindInt64(int index, std::int64_t value) {
    return m_impl->bindInt64(index, value);
  }
  [[nodiscard]] Result<void> bindDouble(int index, double value) {
    return m_impl->bindDouble(index, value);
  }
  /// UTF-8 text, copied: `text` may die right after the call.
  [[nodiscard]] Result<void> bindText(int index, std::string_view text) {
    return m_impl->bindText(index, text);
  }
  [[nodiscard]] Result<void> bindNull(int index) { return m_impl->bindNull(index); }

  /// Runs one step: true when a row is available to read, false when the statement is done.
  [[nodiscard]] Result<bool> step() { return m_impl->step(); }
  /// Rewinds the statement so it can run again; bindings are kept (see clearBindings).
  void reset() { m_impl->reset(); }
  void clearBindings() { m_impl->clearBindings(); }

  // Columns are 0-based and valid only after step() returned true.
  int columnCount() const { return m_impl->columnCount(); }
  bool columnIsNull(int column) const { return m_impl->columnIsNull(column); }
  std::int64_t columnInt64(int column) const { return m_impl->columnInt64(column); }
  double columnDouble(int column) const { return m_impl->columnDouble(column); }
  /// The column as UTF-8 bytes (embedded NULs kept).
  std::string columnText(int column) const { return m_impl->columnText(column); }
  /// The SQL text this statement was prepared from (as written, with `?N`).
  std::string sql() const { return m_impl->sql(); }

 private:
  std::unique_ptr<detail::StatementImpl> m_impl;
};

/// A write transaction; rolled back on destruction unless committed. SQLite: BEGIN IMMEDIATE.
/// PostgreSQL: BEGIN and the run log's write lock (a transaction-scoped advisory lock), so
/// writers of one run log take turns exactly as SQLite's single writer does, in any process on
/// any machine. It must not outlive the Db that began it.
class Transaction {
 public:
  explicit Transaction(std::unique_ptr<detail::TransactionImpl> impl) : m_impl(std::move(impl)) {}
  Transaction(Transaction&&) noexcept = default;
  Transaction& operator=(Transaction&&) noexcept = default;
  ~Transaction() = default;

  /// Commits; on failure the transaction is rolled back (at once or by the destructor).
  [[nodiscard]] Result<void> commit() { return m_impl->commit(); }
  bool isActive() const { return m_impl && m_impl->isActive(); }

 private:
  std::unique_ptr<detail::TransactionImpl> m_impl;
};

/// One connection to one store.
class Db {
 public:
  /// Opens `spec`: a `postgresql://user@host:port/db` URL (libpq) or a SQLite file path
  /// (read-write: creates it). Errors name the file, or the server's host and port and the cause.
  [[nodiscard]] static Result<Db> open(const QString& spec, OpenMode mode = {});

  Db(std::unique_ptr<detail::DbImpl> impl, QString path, bool readOnly)
      : m_impl(std::move(impl)), m_path(std::move(path)), m_readOnly(readOnly) {}
  Db(Db&&) noexcept = default;
  Db& operator=(Db&&) noexcept = default;

  DbKind kind() const { return m_impl->kind(); }
  bool isPostgres() const { return kind() == DbKind::postgres; }
  bool isOpen() const { return m_impl != nullptr; }

  /// Runs one or more statements that return no rows we need.
  [[nodiscard]] Result<void> exec(std::string_view sql) { return m_impl->exec(sql); }
  [[nodiscard]] Result<Statement> prepare(std::string_view sql);
  /// Begins a write transaction; a second writer waits up to busyTimeoutMs, then fails.
  [[nodiscard]] Result<Transaction> transaction();
  /// Runs a query that yields one text value.
  [[nodiscard]] Result<std::string> queryText(std::string_view sql);

  /// The spec it was opened with, as messages show it (no password).
  const QString& path() const { return m_path; }
  bool isReadOnly() const { return m_readOnly; }
  /// Rows changed by the last INSERT, UPDATE or DELETE on this connection.
  int changes() const { return m_impl->changes(); }
  /// True while a transaction is open (PostgreSQL: also one that failed and awaits a rollback).
  bool inTransaction() const { return m_impl->inTransaction(); }
  /// True when table `name` exists.
  [[nodiscard]] Result<bool> hasTable(std::string_view name) { return m_impl->hasTable(name); }
  /// A number that changes whenever any connection (any process) commits a write.
  [[nodiscard]] Result<std::int64_t> dataVersion() { return m_impl->dataVersion(); }
  /// "ok" when the store is sound (SQLite: PRAGMA integrity_check; PostgreSQL: the server
  /// answers, its own WAL keeps committed rows whole).
  [[nodiscard]] Result<std::string> integrityCheck() { return m_impl->integrityCheck(); }

  detail::DbImpl* impl() const { return m_impl.get(); }

 private:
  std::unique_ptr<detail::DbImpl> m_impl;
  QString m_path;
  bool m_readOnly = false;
};

}  // namespace shardscope::backend
