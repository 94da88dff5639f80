#include "backend/store/db.h"

#include <QRegularExpression>
#include <QStringList>
#include <QUrl>

#include "backend/store/pgdb.h"
#include "backend/store/sqlitedb.h"

namespace shardscope::backend {

bool isPostgresSpec(const QString& spec) {
  return spec.startsWith(QLatin1String("postgresql://")) ||
         spec.startsWith(QLatin1String("postgres://"));
}

namespace {

// The keywords of libpq whose value is a secret: the server password and the passphrase of the
// client's SSL key.
bool isSecretKeyword(const QString& keyword) {
  return keyword == QLatin1String("password") || keyword == QLatin1String("sslpassword");
}

// A postgresql:// URL as libpq reads it (conninfo_uri_parse_options): the user information runs
// to the first '@' before the first '/' (so a multi-host list, h1,h2:5433, and a password with
// '?' or ':' in it are covered, which QUrl cannot parse), and the parameters after '?' are
// key=value pairs separated by '&', their keys percent-encoded or not.
QString stripUrlPassword(const QString& spec) {
  const qsizetype start = spec.indexOf(QLatin1String("://")) + 3;
  QString out = spec.left(start);
  QString rest = spec.mid(start);
  // libpq's rule first; else the last '@' before the parameters (a password with an unencoded
  // '/' is refused by libpq, and its error shows this text).
  const qsizetype slash = rest.indexOf(QLatin1Char('/'));
  qsizetype at = rest.indexOf(QLatin1Char('@'));
  if (at >= 0 && slash >= 0 && at > slash) {
    const qsizetype question = rest.indexOf(QLatin1Char('?'));
    at = rest.lastIndexOf(QLatin1Char('@'), question < 0 ? -1 : question);
  }
  if (at >= 0) {
    const QString userinfo = rest.left(at);
    const qsizetype colon = userinfo.indexOf(QLatin1Char(':'));
    out += (colon >= 0 ? userinfo.left(colon) : userinfo) + QLatin1Char('@');
    rest = rest.mid(at + 1);
  }
  const qsizetype question = rest.indexOf(QLatin1Char('?'));
  if (question < 0) return out + rest;
  out += rest.left(question);
  QStringList kept;
  for (const QString& pair : rest.mid(question + 1).split(QLatin1Char('&'))) {
    const QString key = QUrl::fromPercentEncoding(pair.section(QLatin1Char('='), 0, 0).toUtf8());
    if (!isSecretKeyword(key.trimmed())) kept << pair;
  }
  if (!kept.isEmpty()) out += QLatin1Char('?') + kept.join(QLatin1Char('&'));
  return out;
}

// A key=value connection string (`host=db password='it\'s' user=x`) as libpq reads it
// (conninfo_parse): a keyword, '=' with optional spaces around it, then a value in single quotes
// (backslash escapes) or up to the next space (backslash escapes too). The secret pairs are left
// out; a string that is not of that shape is cut at its first secret keyword, so what follows it
// is never shown.
QString stripConninfoPassword(const QString& spec) {
  static const QRegularExpression kPair(
      QStringLiteral(R"(\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s\\]|\\.)*)\s*)"));
  QStringList kept;
  qsizetype at = 0;
  while (at < spec.size()) {
    const auto m = kPair.match(spec, at, QRegularExpression::NormalMatch,
                               QRegularExpression::AnchorAtOffsetMatchOption);
    if (!m.hasMatch() || m.capturedLength() == 0) {
      // Not a connection string past here: show nothing from a secret keyword on.
      static const QRegularExpression kSecret(QStringLiteral("(ssl)?password"));
      const QString tail = spec.mid(at);
      const qsizetype secret = tail.indexOf(kSecret);
      kept << (secret < 0 ? tail.trimmed() : tail.left(secret).trimmed() + QStringLiteral("…"));
      break;
    }
    if (!isSecretKeyword(m.captured(1))) kept << m.captured(0).trimmed();
    at = m.capturedEnd();
  }
  kept.removeAll(QString());
  return kept.join(QLatin1Char(' '));
}

}  // namespace

QString displaySpec(const QString& spec) {
  if (isPostgresSpec(spec)) return stripUrlPassword(spec);
  // Not a URL: a SQLite file path, or a key=value connection string given where a URL was
  // expected (refused later, but its message shows the spec).
  static const QRegularExpression kKeyword(QStringLiteral("(^|\\s)(ssl)?password\\s*="));
  if (spec.contains(kKeyword)) return stripConninfoPassword(spec);
  return spec;
}

Result<Db> Db::open(const QString& spec, OpenMode mode) {
  if (isPostgresSpec(spec)) return openPostgres(spec, mode);
  if (displaySpec(spec) != spec) {
    // `host=db password=...` is libpq's key=value form; taken as a file name it would make a
    // SQLite file named after the password.
    return fail(displaySpec(spec).toStdString() +
                ": a key=value connection string with a password is not a run log; give a "
                "postgresql://user@host:port/dbname URL, with the password in ~/.pgpass or "
                "PGPASSWORD");
  }
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
