// Helper of tst_pgfaults: one PostgreSQL client that the test freezes or cuts off from its server.
//
//   pg_fault_client hold URL    begins a write transaction (the run log's write lock), inserts
//                               n = 1 into table `held`, prints "holding", and commits once a
//                               line arrives on stdin: prints "committed" or "commit failed: ..."
//   pg_fault_client query URL   connects, prints "connected", and once a line arrives on stdin
//                               runs SELECT 1 twice (the second on a new connection when the
//                               first lost its own), printing "first: ..." and "second: ..."
#include <QCoreApplication>

#include <cstdio>
#include <iostream>
#include <string>

#include "backend/store/db.h"

using namespace shardscope::backend;

namespace {

int die(const std::string& message) {
  std::fprintf(stderr, "pg_fault_client: %s\n", message.c_str());
  return 1;
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void awaitLine() {
  std::string line;
  std::getline(std::cin, line);
}

int hold(const QString& url) {
  auto db = Db::open(url);
  if (!db) return die(db.message());
  auto txn = db->transaction();
  if (!txn) return die(txn.message());
  if (auto r = db->exec("INSERT INTO held(n) VALUES (1)"); !r) return die(r.message());
  say("holding");
  awaitLine();
  auto committed = txn->commit();
  say(committed ? "committed" : "commit failed: " + committed.message());
  return 0;
}

std::string selectOne(Db& db) {
  auto value = db.queryText("SELECT 1");
  return value ? "ok " + *value : "failed: " + value.message();
}

int query(const QString& url) {
  auto db = Db::open(url);
  if (!db) return die(db.message());
  if (auto value = db->queryText("SELECT 1"); !value) return die(value.message());
  say("connected");
  awaitLine();
  say("first: " + selectOne(*db));
  say("second: " + selectOne(*db));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  const QStringList args = app.arguments();
  if (args.size() == 3 && args[1] == "hold") return hold(args[2]);
  if (args.size() == 3 && args[1] == "query") return query(args[2]);
  return die("usage: pg_fault_client hold|query URL");
}
