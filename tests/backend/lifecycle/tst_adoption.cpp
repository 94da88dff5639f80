// RunLifecycle::adoptOrphans adopts only the runs of its own host (#29 item 5): a live run that
// another machine launched (or one recorded before runs had a host) is reported and never gets a
// supervisor here, where its pids mean nothing. On both stores (tst_adoption_pg).
#include <QDir>
#include <QJsonArray>
#include <QJsonObject>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTest>

#include "backend/lifecycle/runlifecycle.h"
#include "backend/store/db.h"
#include "backend/store/runstore.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

class TestAdoption : public QObject {
  Q_OBJECT

 private slots:
  void adoptsOnlyItsOwnHostsRuns();

 private:
  QTemporaryDir m_dir;
};

void TestAdoption::adoptsOnlyItsOwnHostsRuns() {
  QVERIFY(m_dir.isValid());
  const QString path = testing::storeSpec(m_dir.path(), "adopt.db");
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  // Three live runs nobody follows (no lease): launched here, on another host, and before
  // schema 8 recorded hosts.
  std::vector<qint64> ids;
  for (const QString name : {"mine", "theirs", "unknown"}) {
    const QString runDir = m_dir.filePath(name);
    QVERIFY(QDir().mkpath(runDir));
    auto id = (*store)->createRun({std::nullopt, name, runDir, {}, 1}).get();
    VERIFY_OK(id);
    VERIFY_OK((*store)
                  ->setRunLocation(*id, QJsonObject{{"kind", "local"},
                                                    {"runDir", runDir},
                                                    {"pids", QJsonArray{999999999}}})
                  .get());
    VERIFY_OK((*store)->setRunStatus(*id, spec::RunStatus::running).get());
    ids.push_back(*id);
  }
  {
    auto db = Db::open(path);
    VERIFY_OK(db);
    VERIFY_OK(db->exec("UPDATE runs SET host = 'gpu-node-7' WHERE name = 'theirs'"));
    VERIFY_OK(db->exec("UPDATE runs SET host = '', boot_id = '' WHERE name = 'unknown'"));
  }
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  auto runs = reader->listRuns();
  VERIFY_OK(runs);
  RunLifecycle lifecycle({path, m_dir.path(), "/bin/true", {}, 1000});
  const std::vector<Adoption> adopted = lifecycle.adoptOrphans(*reader, *runs);
  QCOMPARE(adopted.size(), std::size_t{3});
  for (const Adoption& a : adopted) {
    if (a.runName == "mine") {
      QVERIFY2(a.error.empty(), a.error.c_str());
      QVERIFY(a.supervisorPid > 0);
    } else {
      QVERIFY2(a.supervisorPid == 0,
               qPrintable(a.runName + ": another host's run got a supervisor here"));
      const std::string host = a.runName == "theirs" ? "host gpu-node-7" : "an unknown host";
      QVERIFY2(a.error.find("launched on " + host) != std::string::npos, a.error.c_str());
      QVERIFY2(a.error.find("not adopted") != std::string::npos, a.error.c_str());
      QVERIFY2(a.error.find(QSysInfo::machineHostName().toStdString()) != std::string::npos,
               a.error.c_str());
    }
  }
}

QTEST_GUILESS_MAIN(TestAdoption)
#include "tst_adoption.moc"
