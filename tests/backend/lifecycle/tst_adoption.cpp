// No adoption across hosts, and one adopter at a time (#29 item 5). RunLifecycle::adoptOrphans
// adopts only the runs of its own host: a live run that another machine launched (or one recorded
// before runs had a host) is reported and never gets a supervisor here, where its pids mean
// nothing. Processes racing to adopt one orphaned sweep (two dashboards) start one feeder. On both
// stores (tst_adoption_pg).
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QProcess>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <memory>
#include <vector>

#include "backend/lifecycle/runlifecycle.h"
#include "backend/store/db.h"
#include "backend/store/runstore.h"
#include "tests/support/paths.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

class TestAdoption : public QObject {
  Q_OBJECT

 private slots:
  void adoptsOnlyItsOwnHostsRuns();
  void racingAdoptersStartOneFeeder();

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

void TestAdoption::racingAdoptersStartOneFeeder() {
  QVERIFY(m_dir.isValid());
  const QString path = testing::storeSpec(m_dir.path(), "race.db");
  const QString experiment = m_dir.filePath("race.toml");
  {
    QFile file(experiment);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("[search]\nname = \"race\"\n");
  }
  // The feeder each adopter would start: a process that lives while the test runs.
  const QString supervisor = m_dir.filePath("fake-cli.sh");
  {
    QFile file(supervisor);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("#!/bin/sh\nexec sleep 120\n");
    QVERIFY(file.setPermissions(file.permissions() | QFileDevice::ExeOwner));
  }
  qint64 studyId = 0;
  {
    auto store = RunStore::open(path);
    VERIFY_OK(store);
    auto exp = (*store)->createExperiment({0, "race", experiment, "", 1}).get();
    VERIFY_OK(exp);
    NewStudy study;
    study.name = "race";
    study.experimentId = *exp;
    study.objectives = {"loss"};
    study.directions = {"minimize"};
    study.sampler = "random";
    auto created = (*store)->createStudy(study).get();
    VERIFY_OK(created);
    studyId = *created;
    // Its sweep process died: a stamp of a pid that no longer runs on this host.
    VERIFY_OK((*store)->stampSweep(studyId, 999999999, QSysInfo::machineHostName()).get());
  }
  constexpr int kRacers = 4;
  std::vector<std::unique_ptr<QProcess>> racers;
  for (int i = 0; i < kRacers; ++i) {
    auto racer = std::make_unique<QProcess>();
    racer->start(testing::binaryDir() + "/tests/bin/adopt_racer",
                 {path, QString::number(studyId), supervisor, m_dir.filePath("runs")});
    QVERIFY2(racer->waitForStarted(), qPrintable(racer->errorString()));
    racers.push_back(std::move(racer));
  }
  for (auto& racer : racers) {
    while (!racer->canReadLine() && racer->state() == QProcess::Running) {
      racer->waitForReadyRead(30000);
    }
    QCOMPARE(racer->readLine().trimmed(), QByteArray("ready"));
  }
  for (auto& racer : racers) racer->write("go\n");
  int started = 0;
  QByteArray said;
  std::vector<qint64> feeders;
  for (auto& racer : racers) {
    QVERIFY(racer->waitForFinished(60000));
    const QByteArray line = racer->readAllStandardOutput().trimmed();
    said += line + "\n" + racer->readAllStandardError();
    if (line.startsWith("started ")) {
      ++started;
      feeders.push_back(line.mid(8).toLongLong());
    } else {
      // Refused at its claim, or before it when the winner's stamp was already there.
      QVERIFY2(line.startsWith("refused ") && (line.contains("adopted by another process") ||
                                               line.contains("is fed by process")),
               line.constData());
    }
  }
  for (const qint64 pid : feeders) ::kill(static_cast<pid_t>(pid), SIGKILL);
  QVERIFY2(started == 1,
           qPrintable(QString("%1 adopters started a feeder:\n").arg(started) + said));
  // The study is stamped with the feeder's pid, not the adopter's (which has exited).
  auto reader = RunReader::open(path);
  VERIFY_OK(reader);
  auto record = reader->study(studyId);
  VERIFY_OK(record);
  QVERIFY(record->has_value());
  QCOMPARE((*record)->sweepPid, feeders.front());
}

QTEST_GUILESS_MAIN(TestAdoption)
#include "tst_adoption.moc"
