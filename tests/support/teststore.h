// Where a test keeps its run log. By default a SQLite file in the test's folder; when
// SHARDSCOPE_TEST_DB names a PostgreSQL server (postgresql://user@host:port, no database: the
// `postgres` ctest variants set it through tests/support/with_postgres.py), a fresh database on
// that server, so the same test runs on both stores. A server that cannot make the database ends
// the test with a failure (qFatal), never a skip.
#pragma once

#include <QAtomicInt>
#include <QCoreApplication>
#include <QDir>
#include <QRegularExpression>
#include <QString>

#include "backend/store/db.h"

namespace shardscope::testing {

/// The PostgreSQL server the tests run against, or empty for SQLite.
inline QString testServer() { return qEnvironmentVariable("SHARDSCOPE_TEST_DB"); }
inline bool onPostgres() { return !testServer().isEmpty(); }

/// A new, empty run log named after `name`: `dir`/`name` (SQLite), or a new database on the
/// test server whose URL is returned.
inline QString storeSpec(const QString& dir, const QString& name) {
  if (!onPostgres()) return QDir(dir).filePath(name);
  static QAtomicInt counter;
  QString base = testServer();
  while (base.endsWith('/')) base.chop(1);
  QString stem = name.toLower();
  stem.replace(QRegularExpression("[^a-z0-9]+"), "_");
  const QString database = QString("t%1_%2_%3")
                               .arg(QCoreApplication::applicationPid())
                               .arg(counter.fetchAndAddRelaxed(1))
                               .arg(stem)
                               .left(63);
  auto admin = backend::Db::open(base + "/postgres");
  if (!admin) qFatal("test server %s: %s", qPrintable(base), admin.message().c_str());
  if (auto r = admin->exec(("CREATE DATABASE \"" + database + "\"").toStdString()); !r) {
    qFatal("test server %s: %s", qPrintable(base), r.message().c_str());
  }
  return base + "/" + database;
}

}  // namespace shardscope::testing
