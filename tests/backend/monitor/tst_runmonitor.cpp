// RunMonitor with real rank processes (fake_rank) writing real files into a real run log:
// statuses (complete, oom, failed with last words), one dead rank stopping the others, leases,
// and a follower process killed with SIGKILL mid-run whose successor catches up with nothing
// lost and nothing stored twice. A line the run log refuses is kept as a log line, never read
// again forever.
#include <QFile>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <memory>
#include <string>
#include <vector>

#include "backend/monitor/oommemory.h"
#include "backend/monitor/runmonitor.h"
#include "tests/backend/monitor/dirrunhandle.h"
#include "tests/backend/monitor/monitortest.h"
#include "tests/support/refusedrows.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

using monitortest::kBin;
using monitortest::kDeadlineMs;
using monitortest::lineCount;
using monitortest::queryInt;

RunMonitor::Options fastOptions() {
  RunMonitor::Options options;
  options.pollMs = 50;
  options.heartbeatMs = 200;
  return options;
}

}  // namespace

class TestRunMonitor : public QObject {
  Q_OBJECT

 private slots:
  void init();
  void cleanup();
  void completeRunStoresEveryLine();
  void garbageLinesAreCountedAndKept();
  void linesTheStoreRefusesAreKeptAsLogLines();
  void linesLongerThanAReadAreCutNotWaitedFor();
  void oomIsItsOwnStatus();
  void deadRankFailsTheRunAndStopsTheOthers();
  void killNineOfARank();
  void secondMonitorIsRefused();
  void followerKilledMidRunIsTakenOver();
  void blockedFollowerKeepsItsLease();
  void eventsFileTruncatedWhileFollowed();
  void eventsFileDeletedWhileFollowed();

 private:
  // Starts rank `rank` of the current run: stdout and stderr go to the run directory's files.
  QProcess* startRank(int rank, const QStringList& args);
  QList<qint64> pids() const;
  qint64 createRun(int worldSize);
  // Every line of every rank file is exactly one row (event, or log line).
  void checkRowsEqualLines(qint64 runId, int worldSize);
  void waitForRanksToEnd();

  std::unique_ptr<QTemporaryDir> m_dir;
  QString m_db;  // a file in m_dir, or a database on the PostgreSQL test server (_pg)
  std::unique_ptr<RunStore> m_store;
  std::vector<std::unique_ptr<QProcess>> m_ranks;
};

void TestRunMonitor::init() {
  m_dir = std::make_unique<QTemporaryDir>();
  QVERIFY(m_dir->isValid());
  m_db = shardscope::testing::storeSpec(m_dir->path(), "runs.db");
  auto store = RunStore::open(m_db);
  VERIFY_OK(store);
  m_store = std::move(*store);
}

void TestRunMonitor::cleanup() {
  for (auto& rank : m_ranks) {
    rank->kill();
    rank->waitForFinished(5000);
  }
  m_ranks.clear();
  m_store.reset();
  m_dir.reset();
}

QProcess* TestRunMonitor::startRank(int rank, const QStringList& args) {
  auto process = std::make_unique<QProcess>();
  // Appending, as the launchers open the rank files (O_APPEND): a file truncated from outside
  // is then written on at its new end.
  process->setStandardOutputFile(m_dir->filePath(QString("events-rank-%1.jsonl").arg(rank)),
                                 QIODevice::Append);
  process->setStandardErrorFile(m_dir->filePath(QString("rank-%1.log").arg(rank)),
                                QIODevice::Append);
  process->start(kBin + "fake_rank", QStringList{QString::number(rank)} + args);
  if (!process->waitForStarted(10000)) return nullptr;
  m_ranks.push_back(std::move(process));
  return m_ranks.back().get();
}

QList<qint64> TestRunMonitor::pids() const {
  QList<qint64> list;
  for (const auto& rank : m_ranks) list << rank->processId();
  return list;
}

qint64 TestRunMonitor::createRun(int worldSize) {
  auto id = m_store->createRun({std::nullopt, "run", m_dir->path(), {}, worldSize}).get();
  return id ? *id : -1;
}

void TestRunMonitor::checkRowsEqualLines(qint64 runId, int worldSize) {
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  const QString differs = monitortest::rowsEqualLines(*reader, m_dir->path(), runId, worldSize);
  QVERIFY2(differs.isEmpty(), qPrintable(differs));
}

void TestRunMonitor::waitForRanksToEnd() {
  for (auto& rank : m_ranks) {
    QVERIFY(rank->state() == QProcess::NotRunning || rank->waitForFinished(kDeadlineMs));
  }
}

void TestRunMonitor::completeRunStoresEveryLine() {
  const qint64 runId = createRun(2);
  QVERIFY(startRank(0, {"normal", "30", "5"}));
  QVERIFY(startRank(1, {"normal", "30", "5"}));
  DirRunHandle handle(m_dir->path(), pids());
  RunMonitor monitor(*m_store, runId, handle, fastOptions());
  QSignalSpy finished(&monitor, &RunMonitor::finished);
  QSignalSpy changed(&monitor, &RunMonitor::statusChanged);
  VERIFY_OK(monitor.start());
  QVERIFY(finished.wait(kDeadlineMs));
  QCOMPARE(finished.at(0).at(0).value<spec::RunStatus>(), spec::RunStatus::complete);
  QCOMPARE(changed.at(0).at(0).value<spec::RunStatus>(), spec::RunStatus::running);
  checkRowsEqualLines(runId, 2);
  auto reader = m_store->reader();
  auto run = reader->run(runId);
  QCOMPARE((*run)->status, spec::RunStatus::complete);
  QCOMPARE((*run)->objective.value_or(-1), 0.25);
  QVERIFY((*run)->startedAt && (*run)->endedAt);
  QCOMPARE(reader->metric(runId, "loss")->size(), std::size_t(30));
  QCOMPARE(reader->metric(runId, "mem.peak")->size(), std::size_t(60));  // both ranks
  QVERIFY(reader->anomalies(runId)->empty());
  QVERIFY(!reader->lease(runId)->has_value());  // released at the end
  QCOMPARE(handle.stopCalls(), 0);
}

void TestRunMonitor::garbageLinesAreCountedAndKept() {
  const qint64 runId = createRun(2);
  QVERIFY(startRank(0, {"garbage", "30", "5"}));
  QVERIFY(startRank(1, {"partial", "10", "20"}));  // every line arrives in two writes
  DirRunHandle handle(m_dir->path(), pids());
  RunMonitor monitor(*m_store, runId, handle, fastOptions());
  QSignalSpy finished(&monitor, &RunMonitor::finished);
  VERIFY_OK(monitor.start());
  QVERIFY(finished.wait(kDeadlineMs));
  QCOMPARE(finished.at(0).at(0).value<spec::RunStatus>(), spec::RunStatus::complete);
  QCOMPARE(monitor.malformedLines(), 4);  // steps 7, 14, 21, 28
  checkRowsEqualLines(runId, 2);
  auto anomalies = m_store->reader()->anomalies(runId);
  VERIFY_OK(anomalies);
  QCOMPARE(anomalies->size(), std::size_t(4));
  for (const Anomaly& a : *anomalies) QCOMPARE(a.kind, Anomaly::Kind::malformed);
}

// A chunk the run log refuses for a reason that does not pass (here a trigger, installed from
// outside, that refuses every metric row of step 7): before, the monitor read the same chunk on
// every poll, forever, so the run never ended. Now a refusal the store calls permanent sends the
// chunk in line by line; a line refused alone is kept verbatim as a log line with an anomaly
// naming the store's error, and everything after it is stored. (A refusal that may pass, a full
// disk, is only retried: tst_monitor_chaos runLogDiskFullThenFreed.)
void TestRunMonitor::linesTheStoreRefusesAreKeptAsLogLines() {
  const qint64 runId = createRun(1);
  VERIFY_OK(shardscope::testing::refuseMetricsOfStep7(m_db));
  QVERIFY(startRank(0, {"normal", "30", "5"}));
  DirRunHandle handle(m_dir->path(), pids());
  RunMonitor monitor(*m_store, runId, handle, fastOptions());
  QSignalSpy finished(&monitor, &RunMonitor::finished);
  VERIFY_OK(monitor.start());
  QVERIFY(finished.wait(kDeadlineMs));
  QCOMPARE(finished.at(0).at(0).value<spec::RunStatus>(), spec::RunStatus::complete);
  checkRowsEqualLines(runId, 1);  // the refused lines are log lines: nothing lost
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto loss = reader->metric(runId, "loss");
  VERIFY_OK(loss);
  QCOMPARE(loss->size(), std::size_t(29));  // every step but 7
  auto anomalies = reader->anomalies(runId);
  VERIFY_OK(anomalies);
  QVERIFY(!anomalies->empty());
  for (const Anomaly& a : *anomalies) {
    QVERIFY2(a.detail.contains("the run log refused this line") &&
                 a.detail.contains("step 7 refused by the test"),
             qPrintable(a.detail));
  }
  QCOMPARE((*reader->run(runId))->status, spec::RunStatus::complete);
}

void TestRunMonitor::linesLongerThanAReadAreCutNotWaitedFor() {
  // A 3 MiB event line and 2 MiB of progress bar without a newline, both over the 1 MiB read:
  // the monitor once re-read the same megabyte forever. Each is kept cut, as one row.
  const qint64 runId = createRun(2);
  QVERIFY(startRank(0, {"huge", "10", "5", "4"}));
  QVERIFY(startRank(1, {"normal", "10", "5"}));
  DirRunHandle handle(m_dir->path(), pids());
  RunMonitor monitor(*m_store, runId, handle, fastOptions());
  QSignalSpy finished(&monitor, &RunMonitor::finished);
  VERIFY_OK(monitor.start());
  QVERIFY(finished.wait(kDeadlineMs));
  QCOMPARE(finished.at(0).at(0).value<spec::RunStatus>(), spec::RunStatus::complete);
  QCOMPARE(monitor.malformedLines(), 1);
  checkRowsEqualLines(runId, 2);
  auto reader = m_store->reader();
  QCOMPARE(reader->metric(runId, "loss")->size(), std::size_t(10));  // steps after it too
  const QString where = QString("run_id = %1 AND rank = 0").arg(runId);
  QCOMPARE(queryInt(*reader, "SELECT max(length(text)) FROM log_lines WHERE " + where) <
               2 * kCutLineBytes,
           true);
  auto anomalies = reader->anomalies(runId);
  VERIFY_OK(anomalies);
  QCOMPARE(anomalies->size(), std::size_t(1));
}

void TestRunMonitor::oomIsItsOwnStatus() {
  const qint64 runId = createRun(2);
  QVERIFY(startRank(0, {"hang", "0", "10"}));
  QVERIFY(startRank(1, {"oom", "100", "10", "5"}));
  DirRunHandle handle(m_dir->path(), pids());
  RunMonitor monitor(*m_store, runId, handle, fastOptions());
  QSignalSpy finished(&monitor, &RunMonitor::finished);
  VERIFY_OK(monitor.start());
  QVERIFY(finished.wait(kDeadlineMs));
  QCOMPARE(finished.at(0).at(0).value<spec::RunStatus>(), spec::RunStatus::oom);
  const QString error = finished.at(0).at(1).toString();
  QVERIFY2(error.contains("rank 1: oom: CUDA out of memory (lower the batch size)"),
           qPrintable(error));
  // The event's allocator view, read back: a line of figures, the snapshot under the run dir.
  QVERIFY2(error.contains("\ncuda allocator: request 2.0 GiB, allocated 1.0 GiB, reserved 1.5 GiB, "
                          "largest free block 256.0 MiB, peak 1.5 GiB, device 512.0 MiB free of "
                          "4.0 GiB"),
           qPrintable(error));
  QVERIFY2(error.endsWith("\nmemory snapshot: " + m_dir->path() +
                          "/memory/rank-1.pickle, open with https://pytorch.org/memory_viz"),
           qPrintable(error));
  QCOMPARE(handle.stopCalls(), 1);  // the hanging rank 0 was stopped...
  waitForRanksToEnd();
  QCOMPARE((*m_store->reader()->run(runId))->status, spec::RunStatus::oom);
  auto done = m_store->reader()->lastEvent(runId, 0, "done");  // ...and ended gracefully
  VERIFY_OK(done);
  QVERIFY(done->has_value());
  QVERIFY((*done)->json.contains("\"stopped\""));
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto views = oomMemoryOfRun(*reader, runId, 2);  // what `show` prints per rank
  VERIFY_OK(views);
  QCOMPARE(views->size(), std::size_t(1));
  QCOMPARE(views->front().rank, 1);
  QCOMPARE(*views->front().memory.largest_free, 268435456LL);
  QCOMPARE(oomMemoryToJson(views->front().memory, m_dir->path())["snapshot"].toString(),
           m_dir->path() + "/memory/rank-1.pickle");
  checkRowsEqualLines(runId, 2);
}

void TestRunMonitor::deadRankFailsTheRunAndStopsTheOthers() {
  const qint64 runId = createRun(2);
  QVERIFY(startRank(0, {"hang", "0", "10"}));
  QVERIFY(startRank(1, {"crash", "100", "10", "5"}));
  DirRunHandle handle(m_dir->path(), pids());
  RunMonitor monitor(*m_store, runId, handle, fastOptions());
  QSignalSpy finished(&monitor, &RunMonitor::finished);
  QSignalSpy changed(&monitor, &RunMonitor::statusChanged);
  VERIFY_OK(monitor.start());
  QVERIFY(finished.wait(kDeadlineMs));
  QCOMPARE(finished.at(0).at(0).value<spec::RunStatus>(), spec::RunStatus::failed);
  const QString error = finished.at(0).at(1).toString();
  QVERIFY2(error.startsWith("rank 1 exited without `done`; last words:"), qPrintable(error));
  QVERIFY2(error.contains("rank 1: fatal: segmentation fault in step 5"), qPrintable(error));
  // failed was recorded when the exit was seen, before the other rank had ended.
  QCOMPARE(changed.last().at(0).value<spec::RunStatus>(), spec::RunStatus::failed);
  QCOMPARE(handle.stopCalls(), 1);
  waitForRanksToEnd();
  QCOMPARE(m_ranks[0]->exitCode(), 0);  // rank 0 took SIGTERM and ended with done stopped
  QCOMPARE((*m_store->reader()->run(runId))->error, error);
  checkRowsEqualLines(runId, 2);
}

void TestRunMonitor::killNineOfARank() {
  const qint64 runId = createRun(2);
  QVERIFY(startRank(0, {"hang", "0", "10"}));
  QProcess* victim = startRank(1, {"hang", "0", "10"});
  QVERIFY(victim);
  DirRunHandle handle(m_dir->path(), pids());
  RunMonitor monitor(*m_store, runId, handle, fastOptions());
  QSignalSpy finished(&monitor, &RunMonitor::finished);
  VERIFY_OK(monitor.start());
  QTRY_VERIFY_WITH_TIMEOUT(lineCount(m_dir->filePath("rank-1.log")) >= 3, kDeadlineMs);
  victim->kill();  // SIGKILL
  QVERIFY(finished.wait(kDeadlineMs));
  QCOMPARE(finished.at(0).at(0).value<spec::RunStatus>(), spec::RunStatus::failed);
  const QString error = finished.at(0).at(1).toString();
  QVERIFY2(error.contains("rank 1 exited without `done`"), qPrintable(error));
  QVERIFY2(error.contains("rank 1: step"), qPrintable(error));  // its last stderr lines
  waitForRanksToEnd();  // the other rank is gone too: nothing orphaned
  QCOMPARE(m_ranks[0]->exitStatus(), QProcess::NormalExit);
  checkRowsEqualLines(runId, 2);
}

void TestRunMonitor::secondMonitorIsRefused() {
  const qint64 runId = createRun(1);
  QVERIFY(startRank(0, {"hang", "0", "10"}));
  DirRunHandle handle(m_dir->path(), pids());
  RunMonitor first(*m_store, runId, handle, fastOptions());
  VERIFY_OK(first.start());
  RunMonitor second(*m_store, runId, handle, fastOptions());
  auto refused = second.start();
  QVERIFY(!refused);
  QVERIFY2(refused.message().find("already followed by process") != std::string::npos,
           refused.message().c_str());
  // The rank installs its SIGTERM handler before its first line; a stop sent earlier kills it.
  QTRY_VERIFY_WITH_TIMEOUT(lineCount(m_dir->filePath("rank-0.log")) >= 1, kDeadlineMs);
  handle.stop();
  QSignalSpy finished(&first, &RunMonitor::finished);
  QVERIFY(finished.wait(kDeadlineMs));
  QCOMPARE(finished.at(0).at(0).value<spec::RunStatus>(), spec::RunStatus::stopped);
}

// The backend dies (SIGKILL) while it follows a live run; the ranks keep running; a second
// follower is refused while the first is alive; a third takes over after the kill, catches up,
// and the run's rows equal the files' lines.
void TestRunMonitor::followerKilledMidRunIsTakenOver() {
  const qint64 runId = createRun(2);
  QVERIFY(startRank(0, {"normal", "150", "10"}));
  QVERIFY(startRank(1, {"garbage", "150", "10"}));
  QStringList args{m_db, QString::number(runId), m_dir->path()};
  for (const qint64 pid : pids()) args << QString::number(pid);
  QProcess first;
  first.start(kBin + "monitor_follower", args);
  QVERIFY(first.waitForReadyRead(kDeadlineMs));
  QVERIFY(first.readLine().startsWith("following took-over=0"));
  QProcess second;
  second.start(kBin + "monitor_follower", args);
  QVERIFY(second.waitForFinished(kDeadlineMs));
  QCOMPARE(second.exitCode(), 3);
  QVERIFY(second.readAllStandardOutput().contains("already followed by process"));
  QTRY_VERIFY_WITH_TIMEOUT(lineCount(m_dir->filePath("rank-0.log")) >= 40, kDeadlineMs);
  first.kill();  // kill -9 of the backend mid-run
  QVERIFY(first.waitForFinished(kDeadlineMs));
  for (const auto& rank : m_ranks) QCOMPARE(rank->state(), QProcess::Running);
  QProcess third;
  third.start(kBin + "monitor_follower", args);
  QVERIFY(third.waitForFinished(kDeadlineMs));
  const QByteArray out = third.readAllStandardOutput();
  QVERIFY2(out.contains("following took-over=1"), out.constData());
  QVERIFY2(out.contains("finished complete"), out.constData());
  checkRowsEqualLines(runId, 2);
  auto reader = m_store->reader();
  QCOMPARE(reader->metric(runId, "loss")->size(), std::size_t(150));
  auto anomalies = reader->anomalies(runId);
  VERIFY_OK(anomalies);
  for (const Anomaly& a : *anomalies) {
    QCOMPARE(a.kind, Anomaly::Kind::malformed);  // no gap or repeat from the takeover
  }
}

// A follower whose thread is stuck in slow reads (here 7 s each, longer than the 5 s after
// which a lease is stale) keeps its lease: the heartbeat has its own thread. It went stale, and a
// second follower took over a run whose first one was alive.
void TestRunMonitor::blockedFollowerKeepsItsLease() {
  const qint64 runId = createRun(1);
  QVERIFY(startRank(0, {"normal", "400", "50"}));
  QStringList args{m_db, QString::number(runId), m_dir->path()};
  for (const qint64 pid : pids()) args << QString::number(pid);
  QProcess slow;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("SHARDSCOPE_TEST_READ_DELAY_MS", "7000");
  slow.setProcessEnvironment(env);
  slow.start(kBin + "monitor_follower", args);
  QVERIFY(slow.waitForReadyRead(kDeadlineMs));  // after its first (7 s) catch-up read
  QVERIFY(slow.readLine().startsWith("following took-over=0"));
  QProcess second;
  second.start(kBin + "monitor_follower", args);
  QVERIFY(second.waitForFinished(kDeadlineMs));
  const QByteArray out = second.readAllStandardOutput();
  QVERIFY2(second.exitCode() == 3 && out.contains("already followed by process"), out.constData());
  slow.kill();
  QVERIFY(slow.waitForFinished(kDeadlineMs));
}

QTEST_GUILESS_MAIN(TestRunMonitor)
// A rank's events file truncated from outside while followed (`: > events-rank-1.jsonl`, here
// QFile::resize, the same ftruncate): before, the monitor read on from its old offset past the
// new end, found nothing until the file grew back there, then read from the middle of a line, and
// rank 1's done event came too late or never, so the run failed. Now the truncation is seen, noted
// as an anomaly, and the file is read again from its start: every line the rank wrote after the
// truncation is stored (under offsets that follow the earlier ones), and the run completes.
void TestRunMonitor::eventsFileTruncatedWhileFollowed() {
  const qint64 runId = createRun(2);
  QVERIFY(startRank(0, {"normal", "150", "10"}));
  QVERIFY(startRank(1, {"normal", "150", "10"}));
  DirRunHandle handle(m_dir->path(), pids());
  RunMonitor monitor(*m_store, runId, handle, fastOptions());
  QSignalSpy finished(&monitor, &RunMonitor::finished);
  VERIFY_OK(monitor.start());
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  const QString where = QString("run_id = %1 AND rank = 1").arg(runId);
  const QString count = "SELECT count(*) FROM events WHERE " + where;
  QTRY_VERIFY_WITH_TIMEOUT(monitortest::queryInt(*reader, count) >= 30, kDeadlineMs);
  QFile events(m_dir->filePath("events-rank-1.jsonl"));
  QVERIFY(events.resize(0));
  QVERIFY(finished.wait(kDeadlineMs));
  QCOMPARE(finished.at(0).at(0).value<spec::RunStatus>(), spec::RunStatus::complete);
  // Every line now in the file is a row, rank 1's done event among them.
  const qint64 linesAfter = monitortest::lineCount(events.fileName());
  QVERIFY(linesAfter > 0);
  const qint64 lastSeq =
      monitortest::queryInt(*reader, "SELECT max(seq) FROM events WHERE " + where);
  const qint64 doneRows = monitortest::queryInt(
      *reader, "SELECT count(*) FROM events WHERE kind = 'done' AND " + where);
  QCOMPARE(doneRows, qint64(1));
  const qint64 afterRows = monitortest::queryInt(
      *reader,
      QString("SELECT count(*) FROM events WHERE seq > %1 AND ").arg(lastSeq - linesAfter) + where);
  QCOMPARE(afterRows, linesAfter);
  auto anomalies = reader->anomalies(runId);
  VERIFY_OK(anomalies);
  const bool noted = std::any_of(anomalies->begin(), anomalies->end(), [](const Anomaly& a) {
    return a.rank == 1 && a.detail.contains("events-rank-1.jsonl shrank") &&
           a.detail.contains("truncated from outside");
  });
  QVERIFY2(noted, "no anomaly names the truncation");
  QCOMPARE(monitor.malformedLines(), 0);  // never read from the middle of a line
}

// A rank's events file deleted while followed (`rm events-rank-1.jsonl`): before, every read of
// it failed, the rank was never caught up, and the run stayed `running` after its ranks ended:
// the CLI's follow and a sweep waited forever. Now the deletion is noted once as an anomaly, the
// run ends when its ranks do, and rank 1's exit code 0 says it completed.
void TestRunMonitor::eventsFileDeletedWhileFollowed() {
  const qint64 runId = createRun(2);
  QVERIFY(startRank(0, {"normal", "60", "10"}));
  QProcess* rank1 = startRank(1, {"normal", "60", "10"});
  QVERIFY(rank1);
  // Rank 1's end comes with its exit code, as the local launcher knows its children's: the
  // handle watches no pid for it and is told by its QProcess.
  QList<qint64> watched = pids();
  watched[1] = 0;
  DirRunHandle handle(m_dir->path(), watched);
  connect(rank1, &QProcess::finished, &handle, [&](int code, QProcess::ExitStatus how) {
    handle.markExited(1, how == QProcess::NormalExit ? code : -1);
  });
  RunMonitor monitor(*m_store, runId, handle, fastOptions());
  QSignalSpy finished(&monitor, &RunMonitor::finished);
  VERIFY_OK(monitor.start());
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  const QString count =
      QString("SELECT count(*) FROM events WHERE run_id = %1 AND rank = 1").arg(runId);
  QTRY_VERIFY_WITH_TIMEOUT(monitortest::queryInt(*reader, count) >= 10, kDeadlineMs);
  QVERIFY(QFile::remove(m_dir->filePath("events-rank-1.jsonl")));
  QVERIFY(finished.wait(kDeadlineMs));
  QCOMPARE(finished.at(0).at(0).value<spec::RunStatus>(), spec::RunStatus::complete);
  auto anomalies = reader->anomalies(runId);
  VERIFY_OK(anomalies);
  const auto deleted = std::count_if(anomalies->begin(), anomalies->end(), [](const Anomaly& a) {
    return a.rank == 1 && a.detail.contains("events-rank-1.jsonl was deleted while followed");
  });
  QCOMPARE(deleted, 1);
  // What was read before the deletion stays; rank 0 is complete.
  QVERIFY(monitortest::queryInt(*reader, count) >= 10);
  QCOMPARE(monitortest::queryInt(*reader, QString("SELECT count(*) FROM events WHERE run_id = %1 "
                                                  "AND rank = 0 AND kind = 'done'")
                                              .arg(runId)),
           qint64(1));
}

#include "tst_runmonitor.moc"
