#include "backend/store/pgdb.h"

#include <libpq-fe.h>
#include <QLoggingCategory>
#include <QString>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

Q_LOGGING_CATEGORY(lcPgDb, "shardscope.backend.pgdb")

namespace shardscope::backend {

namespace {

// The run log's write lock: a transaction-scoped advisory lock of this key, per database.
constexpr std::int64_t kWriteLockKey = 0x5348415244;  // "SHARD"

/// Seconds a connection attempt may take when the URL does not set connect_timeout.
constexpr int kConnectTimeoutS = 10;
// A server (or its host) that vanishes mid-session is given up as soon as a new connection would
// be: TCP keepalives probe an idle connection after kConnectTimeoutS and drop it when three
// probes go unanswered, and data the server has not acknowledged for kConnectTimeoutS ends the
// connection (tcp_user_timeout), instead of the kernel's retries of a quarter of an hour. A URL
// that sets any of these keeps its own.
constexpr std::pair<const char*, const char*> kSessionLiveness[] = {
    {"keepalives", "1"},       {"keepalives_idle", "10"},     {"keepalives_interval", "3"},
    {"keepalives_count", "3"}, {"tcp_user_timeout", "10000"},
};
// A client that stops inside a write transaction (SIGSTOP, a debugger, a laptop lid) would hold
// the run log's write lock for ever: the server ends a session left idle inside a transaction
// this long, rolling it back (nothing of it was acknowledged). Writers never pause inside one
// (StoreWriter runs a batch's statements back to back). A URL that sets it (options=-c ...)
// keeps its own.
constexpr const char* kIdleInTransactionTimeout = "15s";
constexpr Oid kInt8Oid = 20;
constexpr Oid kFloat8Oid = 701;
constexpr Oid kUnknownOid = 0;  // text and NULL: the server infers the type from the statement

std::string shortSql(std::string_view sql) {
  constexpr std::size_t kMax = 80;
  if (sql.size() <= kMax) return std::string(sql);
  return std::string(sql.substr(0, kMax)) + "...";
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// What one connection's statements share (stable while the Db is moved: it lives on the heap).
struct PgConn {
  PGconn* conn = nullptr;
  std::string where;  // the URL without its password
  int changes = 0;
  int nextStatement = 0;
  int generation = 0;  // bumped by a reconnect: prepared statements are gone
  bool hasDataVersion = false;
  OpenMode mode;
  bool ownIdleTimeout = true;  // false: the URL sets idle_in_transaction_session_timeout

  std::string server() const {
    const char* host = conn ? PQhost(conn) : nullptr;
    const char* port = conn ? PQport(conn) : nullptr;
    return std::string("host ") + (host && *host ? host : "(default socket)") + " port " +
           (port && *port ? port : "5432");
  }
  bool lost() const { return !conn || PQstatus(conn) == CONNECTION_BAD; }
  bool inTransaction() const {
    if (lost()) return false;
    const auto status = PQtransactionStatus(conn);
    return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE;
  }
  // Outside a transaction, a connection that dropped (a server restart) is opened again.
  void reconnectIfLost() {
    if (!conn || PQstatus(conn) != CONNECTION_BAD) return;
    PQreset(conn);
    if (PQstatus(conn) == CONNECTION_OK) {
      ++generation;
      hasDataVersion = false;
      PGresult* res = PQexec(conn, setupSql().c_str());  // a new session: its settings again
      PQclear(res);
      qCInfo(lcPgDb, "%s: reconnected", where.c_str());
    }
  }
  // The session settings every connection starts with.
  std::string setupSql() const {
    std::string sql = "SET client_encoding = 'UTF8'; SET client_min_messages = warning;";
    if (mode.readOnly) sql += " SET default_transaction_read_only = on;";
    if (ownIdleTimeout) {
      sql += std::string(" SET idle_in_transaction_session_timeout = '") +
             kIdleInTransactionTimeout + "';";
    }
    return sql;
  }
};

// "<url>: <what>: <server's message>", with SQLite's wording for a unique violation (callers
// recognise "UNIQUE" and the table.column it names), and the server named when the connection
// is gone.
std::string pgError(const PgConn& c, const PGresult* res, std::string_view what) {
  std::string message = c.where + ": ";
  if (!what.empty()) message += std::string(what) + ": ";
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  if (state && std::string_view(state) == "23505") {
    const char* table = PQresultErrorField(res, PG_DIAG_TABLE_NAME);
    const char* detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    std::string columns;
    if (detail) {
      const std::string_view d(detail);
      const auto open = d.find("Key (");
      const auto close = d.find(")=", open == std::string_view::npos ? 0 : open);
      if (open != std::string_view::npos && close != std::string_view::npos) {
        std::string_view list = d.substr(open + 5, close - open - 5);
        while (!list.empty()) {
          const auto comma = list.find(", ");
          const std::string_view column = list.substr(0, comma);
          if (!columns.empty()) columns += ", ";
          columns += std::string(table ? table : "") + "." + std::string(column);
          if (comma == std::string_view::npos) break;
          list.remove_prefix(comma + 2);
        }
      }
    }
    message += "UNIQUE constraint failed: " + columns + " (";
    message += trimmed(res ? PQresultErrorMessage(res) : "") + ")";
    return message;
  }
  std::string text = res ? trimmed(PQresultErrorMessage(res)) : std::string();
  if (text.empty() && c.conn) text = trimmed(PQerrorMessage(c.conn));
  message += text;
  if (c.lost()) {
    message += " (the connection to the PostgreSQL server at " + c.server() +
               " is lost: is the server running and reachable?)";
  } else if (state && std::string_view(state) == "55P03") {
    message += " (another writer holds the run log's write lock)";
  } else if (state && std::string_view(state) == "53100") {
    message +=
        " (the disk that holds the run log on the PostgreSQL server at " + c.server() +
        " is full: free space on that disk, or move the database to a tablespace with room "
        "(ALTER DATABASE ... SET TABLESPACE); a writer that may retry loses nothing meanwhile)";
  } else if (state && std::string_view(state) == "25006") {
    message += " (opened read-only)";
  }
  return message;
}

// The server's refusals that the same statement meets again on a retry, by SQLSTATE class: 22
// data exception (a value out of range, a bad encoding), 23 integrity constraint, 42 syntax or
// access rule, 54 program limit (a row too big), P0 a PL/pgSQL RAISE (a trigger refusing the
// row). Everything else (08 connection, 40 serialization or deadlock, 53 out of disk or
// memory, 55 a lock not available, 57 an administrator's shutdown, 58 an I/O error) may pass,
// and so does an error without a state (the connection gone before the server answered).
bool isPermanent(const PGresult* res) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  if (state == nullptr || std::string_view(state).size() < 2) return false;
  const std::string_view cls = std::string_view(state).substr(0, 2);
  return cls == "22" || cls == "23" || cls == "42" || cls == "54" || cls == "P0";
}

// pgError's message as an Error, permanent as isPermanent says.
Error pgFailure(const PgConn& c, const PGresult* res, std::string_view what) {
  return Error{pgError(c, res, what), isPermanent(res)};
}

// Owns a PGresult.
struct ResultDeleter {
  void operator()(PGresult* res) const { PQclear(res); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

// PostgreSQL text holds neither a NUL byte nor invalid UTF-8, which SQLite stores as given; a
// rank's log may carry both (a crashed writer's garbage). Such text is stored with U+FFFD in their
// place rather than failing the whole chunk (which would stop the monitor's ingest for good).
std::string storableText(std::string_view text) {
  bool plain = true;
  for (const char ch : text) {
    if (ch == '\0' || static_cast<unsigned char>(ch) >= 0x80) {
      plain = false;
      break;
    }
  }
  if (plain) return std::string(text);
  QString decoded = QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
  decoded.replace(QChar(u'\0'), QChar(QChar::ReplacementCharacter));
  return decoded.toStdString();
}

bool resultOk(const PGresult* res) {
  const auto status = PQresultStatus(res);
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

bool changesRows(const PGresult* res) {
  const std::string_view tag(PQcmdStatus(const_cast<PGresult*>(res)));
  return tag.starts_with("INSERT") || tag.starts_with("UPDATE") || tag.starts_with("DELETE");
}

int affectedRows(const PGresult* res) {
  const char* tuples = PQcmdTuples(const_cast<PGresult*>(res));
  return tuples && *tuples ? std::atoi(tuples) : 0;
}

class PgStatement final : public detail::StatementImpl {
 public:
  PgStatement(PgConn* c, std::string_view sql) : m_c(c), m_sql(sql) {
    int parameters = 0;
    m_pgSql = toPostgresPlaceholders(sql, &parameters);
    const auto n = static_cast<std::size_t>(parameters);
    m_values.resize(n);
    m_null.assign(n, true);
    m_types.assign(n, kUnknownOid);
  }
  ~PgStatement() override { deallocate(); }
  PgStatement(const PgStatement&) = delete;
  PgStatement& operator=(const PgStatement&) = delete;

  Result<void> bindInt64(int index, std::int64_t value) override {
    return bind(index, std::to_string(value), kInt8Oid, "an integer");
  }
  Result<void> bindDouble(int index, double value) override {
    if (std::isnan(value)) return bind(index, "NaN", kFloat8Oid, "a real");
    if (std::isinf(value)) {
      return bind(index, value > 0 ? "Infinity" : "-Infinity", kFloat8Oid, "a real");
    }
    char buffer[64];
    const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
    return bind(index, std::string(buffer, end), kFloat8Oid, "a real");
  }
  Result<void> bindText(int index, std::string_view text) override {
    return bind(index, storableText(text), kUnknownOid, "text");
  }
  Result<void> bindNull(int index) override {
    if (auto r = checkIndex(index, "NULL"); !r) return r;
    const auto i = static_cast<std::size_t>(index - 1);
    m_null[i] = true;
    m_types[i] = kUnknownOid;
    return ok();
  }

  Result<bool> step() override {
    if (!m_executed) {
      if (auto r = execute(); !r) return r.error();
      m_executed = true;
      m_row = -1;
    }
    if (!m_res) return false;
    ++m_row;
    return m_row < PQntuples(m_res.get());
  }
  void reset() override {
    m_res.reset();
    m_executed = false;
    m_row = -1;
  }
  void clearBindings() override {
    m_null.assign(m_null.size(), true);
    m_types.assign(m_types.size(), kUnknownOid);
  }
  int columnCount() const override { return m_res ? PQnfields(m_res.get()) : 0; }
  bool columnIsNull(int column) const override {
    return !valid(column) || PQgetisnull(m_res.get(), m_row, column);
  }
  std::int64_t columnInt64(int column) const override {
    if (columnIsNull(column)) return 0;
    const char* text = PQgetvalue(m_res.get(), m_row, column);
    if (text[0] == 't' && text[1] == '\0') return 1;  // a boolean, as SQLite's 1 and 0
    if (text[0] == 'f' && text[1] == '\0') return 0;
    char* end = nullptr;
    const long long value = std::strtoll(text, &end, 10);
    if (end && (*end == '.' || *end == 'e' || *end == 'E')) {
      return static_cast<std::int64_t>(std::strtod(text, nullptr));
    }
    return value;
  }
  double columnDouble(int column) const override {
    if (columnIsNull(column)) return 0;
    return std::strtod(PQgetvalue(m_res.get(), m_row, column), nullptr);
  }
  std::string columnText(int column) const override {
    if (columnIsNull(column)) return {};
    return std::string(PQgetvalue(m_res.get(), m_row, column),
                       static_cast<std::size_t>(PQgetlength(m_res.get(), m_row, column)));
  }
  std::string sql() const override { return m_sql; }

 private:
  bool valid(int column) const {
    return m_res && m_row >= 0 && m_row < PQntuples(m_res.get()) && column >= 0 &&
           column < PQnfields(m_res.get());
  }
  Result<void> checkIndex(int index, const char* kind) const {
    if (index >= 1 && static_cast<std::size_t>(index) <= m_values.size()) return ok();
    return fail(m_c->where + ": binding " + kind + " to parameter " + std::to_string(index) +
                " of '" + shortSql(m_sql) + "': column index out of range");
  }
  Result<void> bind(int index, std::string value, Oid type, const char* kind) {
    if (auto r = checkIndex(index, kind); !r) return r;
    const auto i = static_cast<std::size_t>(index - 1);
    m_values[i] = std::move(value);
    m_null[i] = false;
    m_types[i] = type;
    return ok();
  }
  std::string signature() const {
    std::string sig;
    for (const Oid t : m_types) sig += std::to_string(t) + ",";
    return sig;
  }
  void deallocate() {
    if (m_name.empty() || m_generation != m_c->generation || m_c->lost()) return;
    if (PQtransactionStatus(m_c->conn) == PQTRANS_INERROR) return;  // it would fail; it leaks
    PgResult res(PQexec(m_c->conn, ("DEALLOCATE " + m_name).c_str()));
    m_name.clear();
  }

  // A statement that runs once costs one round trip (an unnamed statement); one that runs again
  // is prepared on the server under a name, for the types it is bound with.
  Result<void> execute() {
    if (!m_c->inTransaction()) m_c->reconnectIfLost();
    const int n = static_cast<int>(m_values.size());
    std::vector<const char*> values(m_values.size());
    for (std::size_t i = 0; i < m_values.size(); ++i) {
      values[i] = m_null[i] ? nullptr : m_values[i].c_str();
    }
    const std::string sig = signature();
    if (!m_name.empty() && (sig != m_signature || m_generation != m_c->generation)) {
      deallocate();
      m_name.clear();
    }
    PgResult res;
    if (m_name.empty() && m_runs > 0 && !m_c->lost() &&
        PQtransactionStatus(m_c->conn) != PQTRANS_INERROR) {
      const std::string name = "ss" + std::to_string(++m_c->nextStatement);
      PgResult prepared(PQprepare(m_c->conn, name.c_str(), m_pgSql.c_str(), n, m_types.data()));
      if (!prepared || !resultOk(prepared.get())) {
        return pgFailure(*m_c, prepared.get(), "preparing '" + shortSql(m_sql) + "'");
      }
      m_name = name;
      m_signature = sig;
      m_generation = m_c->generation;
    }
    if (!m_name.empty()) {
      res.reset(PQexecPrepared(m_c->conn, m_name.c_str(), n, values.data(), nullptr, nullptr, 0));
    } else {
      res.reset(PQexecParams(m_c->conn, m_pgSql.c_str(), n, m_types.data(), values.data(), nullptr,
                             nullptr, 0));
    }
    ++m_runs;
    if ((!res || !resultOk(res.get())) && m_c->lost() && m_c->mode.readOnly) {
      // A reader's query changes nothing, so one whose connection was dropped (a restart, a
      // network blip) runs again on a new one, as an unnamed statement.
      m_c->reconnectIfLost();
      m_name.clear();
      res.reset(PQexecParams(m_c->conn, m_pgSql.c_str(), n, m_types.data(), values.data(), nullptr,
                             nullptr, 0));
    }
    if (!res || !resultOk(res.get())) {
      return pgFailure(*m_c, res.get(), "running '" + shortSql(m_sql) + "'");
    }
    // As sqlite3_changes: the rows an INSERT, UPDATE or DELETE changed (with RETURNING too); a
    // SELECT leaves the count alone.
    if (changesRows(res.get())) m_c->changes = affectedRows(res.get());
    m_res = std::move(res);
    return ok();
  }

  PgConn* m_c;
  std::string m_sql;
  std::string m_pgSql;
  std::vector<std::string> m_values;
  std::vector<bool> m_null;
  std::vector<Oid> m_types;
  PgResult m_res;
  bool m_executed = false;
  int m_row = -1;
  int m_runs = 0;
  std::string m_name;  // the server-side prepared statement, once it ran twice
  std::string m_signature;
  int m_generation = 0;
};

class PgTransaction final : public detail::TransactionImpl {
 public:
  explicit PgTransaction(PgConn* c) : m_c(c) {}
  ~PgTransaction() override { rollback(); }
  PgTransaction(const PgTransaction&) = delete;
  PgTransaction& operator=(const PgTransaction&) = delete;

  Result<void> commit() override {
    if (!m_active) return fail(m_c->where + ": commit of a transaction that is no longer open");
    if (!m_c->lost() && PQtransactionStatus(m_c->conn) == PQTRANS_INERROR) {
      rollback();
      return fail(m_c->where +
                  ": commit: a statement of the transaction failed, so it was "
                  "rolled back");
    }
    // Readers poll data_version (Db::dataVersion) to learn that someone committed.
    const char* sql =
        m_c->hasDataVersion ? "UPDATE data_version SET version = version + 1; COMMIT" : "COMMIT";
    PgResult res(PQexec(m_c->conn, sql));
    if (!res || !resultOk(res.get())) {
      Error error = pgFailure(*m_c, res.get(), "commit");
      rollback();
      return error;
    }
    if (std::string_view(PQcmdStatus(res.get())) != "COMMIT") {
      m_active = false;
      return fail(m_c->where + ": commit: the server rolled the transaction back");
    }
    m_active = false;
    return ok();
  }
  bool isActive() const override { return m_active; }

 private:
  void rollback() {
    if (!m_active) return;
    m_active = false;
    if (m_c->lost() || PQtransactionStatus(m_c->conn) == PQTRANS_IDLE) return;
    PgResult res(PQexec(m_c->conn, "ROLLBACK"));
    if (!res || !resultOk(res.get())) {
      qCWarning(lcPgDb, "%s", pgError(*m_c, res.get(), "rollback").c_str());
    }
  }

  PgConn* m_c;
  bool m_active = true;
};

class PgConnection final : public detail::DbImpl {
 public:
  explicit PgConnection(std::unique_ptr<PgConn> c) : m_c(std::move(c)) {}
  ~PgConnection() override { PQfinish(m_c->conn); }
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  DbKind kind() const override { return DbKind::postgres; }

  Result<void> exec(std::string_view sql) override {
    if (!m_c->inTransaction()) m_c->reconnectIfLost();
    const std::string text(sql);
    PgResult res(PQexec(m_c->conn, text.c_str()));
    if (!res || !resultOk(res.get())) {
      return pgFailure(*m_c, res.get(), "running '" + shortSql(sql) + "'");
    }
    if (changesRows(res.get())) m_c->changes = affectedRows(res.get());
    return ok();
  }

  Result<std::unique_ptr<detail::StatementImpl>> prepare(std::string_view sql) override {
    // Prepared lazily, with the types it is first bound with: errors surface at step().
    return std::unique_ptr<detail::StatementImpl>(new PgStatement(m_c.get(), sql));
  }

  Result<std::unique_ptr<detail::TransactionImpl>> transaction() override {
    m_c->reconnectIfLost();
    // Every commit of the run log is durable before it returns, whatever the server, the
    // database or the role default to (ALTER DATABASE ... SET synchronous_commit = off): an
    // acknowledged event survives a crash of the server.
    std::string sql = "BEGIN; SET LOCAL synchronous_commit = on; ";
    if (m_c->mode.busyTimeoutMs > 0) {
      sql += "SET LOCAL lock_timeout = " + std::to_string(m_c->mode.busyTimeoutMs) + "; ";
      sql += "SELECT pg_advisory_xact_lock(" + std::to_string(kWriteLockKey) + "), ";
    } else {
      sql += "SELECT pg_try_advisory_xact_lock(" + std::to_string(kWriteLockKey) + "), ";
    }
    sql += "to_regclass('data_version') IS NOT NULL";
    PgResult res(PQexec(m_c->conn, sql.c_str()));
    if ((!res || !resultOk(res.get())) && m_c->lost()) {
      // The server dropped the connection while it was idle (a restart, a network blip): nothing
      // of this transaction ran yet, so it begins again on a new connection.
      m_c->reconnectIfLost();
      res.reset(PQexec(m_c->conn, sql.c_str()));
    }
    auto txn = std::make_unique<PgTransaction>(m_c.get());  // rolls back on every failure below
    if (!res || PQresultStatus(res.get()) != PGRES_TUPLES_OK || PQntuples(res.get()) != 1) {
      return pgFailure(*m_c, res.get(), "cannot begin a write transaction");
    }
    if (m_c->mode.busyTimeoutMs <= 0 && std::string_view(PQgetvalue(res.get(), 0, 0)) != "t") {
      return fail(m_c->where +
                  ": cannot begin a write transaction: another writer holds the run log's write "
                  "lock");
    }
    m_c->hasDataVersion = std::string_view(PQgetvalue(res.get(), 0, 1)) == "t";
    return std::unique_ptr<detail::TransactionImpl>(std::move(txn));
  }

  int changes() const override { return m_c->changes; }
  bool inTransaction() const override { return m_c->inTransaction(); }

  Result<bool> hasTable(std::string_view name) override {
    PgStatement stmt(m_c.get(),
                     "SELECT count(*) FROM information_schema.tables WHERE "
                     "table_schema = current_schema() AND table_name = ?1");
    if (auto r = stmt.bindText(1, name); !r) return r.error();
    auto row = stmt.step();
    if (!row) return row.error();
    return *row && stmt.columnInt64(0) > 0;
  }

  Result<std::int64_t> dataVersion() override {
    auto exists = hasTable("data_version");
    if (!exists) return exists.error();
    if (!*exists) return 0;
    PgStatement stmt(m_c.get(), "SELECT version FROM data_version");
    auto row = stmt.step();
    if (!row) return row.error();
    return *row ? stmt.columnInt64(0) : 0;
  }

  Result<std::string> integrityCheck() override {
    // The server keeps committed rows whole (its WAL); what can be checked here is that it
    // answers.
    PgStatement stmt(m_c.get(), "SELECT 'ok'");
    auto row = stmt.step();
    if (!row) return row.error();
    return *row ? stmt.columnText(0) : std::string("no answer");
  }

 private:
  std::unique_ptr<PgConn> m_c;
};

void ignoreNotice(void*, const char*) {}

}  // namespace

std::string toPostgresPlaceholders(std::string_view sql, int* parameters) {
  std::string out;
  out.reserve(sql.size() + 16);
  int highest = 0;
  std::size_t i = 0;
  auto copyUntil = [&](std::string_view end) {
    const auto found = sql.find(end, i);
    const std::size_t stop = found == std::string_view::npos ? sql.size() : found + end.size();
    out.append(sql.substr(i, stop - i));
    i = stop;
  };
  while (i < sql.size()) {
    const char ch = sql[i];
    if (ch == '\'') {
      // A literal ends at a quote that is not doubled.
      out += sql[i++];
      while (i < sql.size()) {
        out += sql[i];
        if (sql[i++] == '\'') {
          if (i < sql.size() && sql[i] == '\'') {
            out += sql[i++];
            continue;
          }
          break;
        }
      }
    } else if (ch == '"') {
      out += sql[i++];
      copyUntil("\"");
    } else if (ch == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      copyUntil("\n");
    } else if (ch == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      copyUntil("*/");
    } else if (ch == '?') {
      ++i;
      std::size_t digits = i;
      while (digits < sql.size() && sql[digits] >= '0' && sql[digits] <= '9') ++digits;
      int number = 0;
      if (digits > i) {
        number = std::atoi(std::string(sql.substr(i, digits - i)).c_str());
        i = digits;
      } else {
        number = highest + 1;
      }
      highest = std::max(highest, number);
      out += '$';
      out += std::to_string(number);
    } else {
      out += sql[i++];
    }
  }
  if (parameters) *parameters = highest;
  return out;
}

Result<Db> openPostgres(const QString& url, OpenMode mode) {
  auto c = std::make_unique<PgConn>();
  c->where = displaySpec(url).toStdString();
  c->mode = mode;
  const QByteArray utf8 = url.toUtf8();
  char* parseError = nullptr;
  PQconninfoOption* options = PQconninfoParse(utf8.constData(), &parseError);
  if (!options) {
    std::string why = parseError ? trimmed(parseError) : "out of memory";
    PQfreemem(parseError);
    return fail(c->where + ": not a PostgreSQL URL libpq understands: " + why +
                " (expected postgresql://user@host:port/dbname)");
  }
  // libpq waits for an unreachable host as long as TCP does (minutes): a run log that cannot be
  // reached should say so within seconds. A URL that sets connect_timeout keeps its own.
  auto urlSets = [options](std::string_view keyword) {
    for (const PQconninfoOption* o = options; o->keyword; ++o) {
      if (std::string_view(o->keyword) == keyword && o->val && *o->val) return true;
    }
    return false;
  };
  QByteArray conninfo = utf8;
  auto add = [&conninfo](const char* keyword, const QByteArray& value) {
    conninfo += (conninfo.contains('?') ? "&" : "?");
    conninfo += QByteArray(keyword) + "=" + value;
  };
  if (!urlSets("connect_timeout")) add("connect_timeout", QByteArray::number(kConnectTimeoutS));
  for (const auto& [keyword, value] : kSessionLiveness) {
    if (!urlSets(keyword)) add(keyword, value);
  }
  for (const PQconninfoOption* o = options; o->keyword; ++o) {
    if (std::string_view(o->keyword) == "options" && o->val &&
        std::string_view(o->val).find("idle_in_transaction_session_timeout") !=
            std::string_view::npos) {
      c->ownIdleTimeout = false;
    }
  }
  PQconninfoFree(options);
  c->conn = PQconnectdb(conninfo.constData());
  if (!c->conn) return fail(c->where + ": cannot connect: out of memory");
  if (PQstatus(c->conn) != CONNECTION_OK) {
    const std::string message = c->where + ": cannot connect to the PostgreSQL server at " +
                                c->server() + ": " + trimmed(PQerrorMessage(c->conn));
    PQfinish(c->conn);
    return fail(message);
  }
  PQsetNoticeProcessor(c->conn, ignoreNotice, nullptr);
  PgResult res(PQexec(c->conn, c->setupSql().c_str()));
  if (!res || !resultOk(res.get())) {
    const std::string message = pgError(*c, res.get(), "configuring the connection");
    PQfinish(c->conn);
    return fail(message);
  }
  if (PQserverVersion(c->conn) < 110000) {
    const std::string message = c->where + ": the PostgreSQL server at " + c->server() +
                                " is version " + std::to_string(PQserverVersion(c->conn)) +
                                "; the run log needs 11 or newer";
    PQfinish(c->conn);
    return fail(message);
  }
  return Db(std::make_unique<PgConnection>(std::move(c)), displaySpec(url), mode.readOnly);
}

}  // namespace shardscope::backend
