#include "backend/store/db.h"

#include <QUrl>

#include "backend/store/pgdb.h"
#include "backend/store/sqlitedb.h"

namespace shardscope::backend {

bool isPostgresSpec(const QString& spec) {
  return spec.startsWith(QLatin1String("postgresql://")) ||
         spec.startsWith(QLatin1String("postgres://"));
}

QString displaySpec(const QString& spec) {
  if (!isPostgresSpec(spec)) return spec;
  QUrl url(spec);
  if (!url.isValid() || url.password().isEmpty()) return spec;
  url.setPassword(QString());
  return url.toString();
}

Result<Db> Db::open(const QString& spec, OpenMode mode) {
  if (isPostgresSpec(spec)) return openPostgres(spec, mode);
  return openSqlite(spec, mode);
}

Result<Statement> Db::prepare(std::string_view sql) {
  auto stmt = m_impl->prepare(sql);
  if (!stmt) return stmt.error();
  return Statement(std::move(*stmt));
}

Result<Transaction> Db::transaction() {
  auto txn = m_impl->transaction();
  if (!txn) return txn.error();
  return Transaction(std::move(*txn));
}

Result<std::string> Db::queryText(std::string_view sql) {
  auto stmt = prepare(sql);
  if (!stmt) return stmt.error();
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) {
    return fail(m_path.toStdString() + ": '" + std::string(sql.substr(0, 80)) +
                "' returned no row");
  }
  return stmt->columnText(0);
}

}  // namespace shardscope::backend
