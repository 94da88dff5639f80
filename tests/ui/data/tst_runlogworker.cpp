// Tests ui/data/runlogworker.cpp on a real run log: a retried trial's loss is one curve. The
// failed attempt wrote steps 1..10 and a sharded checkpoint at step 5; the retry resumes there,
// so claiming it keeps steps 1..5 and the retry writes 6..8 with its own values. The worker had
// delivered steps up to 10 and asked only for steps after 10: the plot kept the failed attempt's
// 6..10 and never showed the retry's 6..8. Now a new attempt makes it read the run whole again,
// in one chunk that replaces the plotted series. Also: a run log of an older schema (File > Open
// of an old file) is migrated by the worker before it reads, instead of failing on a column the
// old file lacks. And: the worker follows what another process commits (a sweep the dashboard
// watches but does not run), on a SQLite file and (tst_runlogworker_pg) on a PostgreSQL server.
// And: a run log that does not exist yet is created, so the dashboard shows what it launches.
// And: the figures Compare colours trials by are each run's means over its steps, in one read.
#include <QFile>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "backend/store/runschema.h"
#include "backend/store/runstore.h"
#include "tests/support/paths.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"
#include "ui/data/runlogworker.h"

using namespace shardscope;
using namespace shardscope::backend;
using namespace shardscope::ui;

class TestRunLogWorker : public QObject {
  Q_OBJECT

 private slots:
  void retriedRunIsOneCurve();
  void olderSchemaIsMigratedOnOpen();
  void followsAnotherProcessesCommits();
  void runLogThatDoesNotExistYetIsCreated();
  void trialFiguresAreMeansOverSteps();

 private:
  /// The loss points of the chunks `spy` got since `from`, and whether the first one resets.
  static SeriesChunk lossOf(const QSignalSpy& spy, qsizetype from);
};

SeriesChunk TestRunLogWorker::lossOf(const QSignalSpy& spy, qsizetype from) {
  SeriesChunk loss;
  bool first = true;
  for (qsizetype i = from; i < spy.size(); ++i) {
    for (const SeriesChunk& chunk : spy.at(i).at(0).value<QVector<SeriesChunk>>()) {
      if (chunk.key != QLatin1String("loss")) continue;
      if (first) loss.reset = chunk.reset;
      first = false;
      loss.steps += chunk.steps;
      loss.values += chunk.values;
    }
  }
  return loss;
}

void TestRunLogWorker::retriedRunIsOneCurve() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath("runs.db");
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  NewStudy study;
  study.name = "retry";
  study.objectives = {"eval.loss"};
  study.directions = {"minimize"};
  auto studyId = (*store)->createStudy(study).get();
  VERIFY_OK(studyId);
  NewTrial trial;
  trial.studyId = *studyId;
  trial.worldSize = 1;
  auto id = (*store)->createTrialRun(trial).get();
  VERIFY_OK(id);
  const qint64 run = id->runId;
  std::vector<MetricRow> first;
  for (int s = 1; s <= 10; ++s) first.push_back({run, s, "loss", 10.0 + s, 0, 1.7e9 + s});
  VERIFY_OK((*store)->appendMetrics(first).get());
  // Attempt 0's rank 0 reported a complete sharded checkpoint at step 5, then the trial failed.
  FileChunk chunk;
  chunk.runId = run;
  const QByteArray ckpt =
      R"({"v":1,"ev":"ckpt","rank":0,"seq":0,"t":1.7e9,"step":5,"path":"ckpt/step-000005","kind":"sharded"})";
  chunk.events.push_back({0, run, 0, 0, "ckpt", ckpt, 0});
  chunk.endOffset = ckpt.size() + 1;
  VERIFY_OK((*store)->ingest(chunk).get());
  VERIFY_OK((*store)->setRunStatus(run, spec::RunStatus::failed, "rank 1 was killed").get());

  qRegisterMetaType<QVector<SeriesChunk>>();
  RunLogWorker worker(3600 * 1000);
  QSignalSpy series(&worker, &RunLogWorker::seriesLoaded);
  worker.open(path);
  worker.watchRuns({run});
  SeriesChunk seen = lossOf(series, 0);
  QCOMPARE(seen.steps.size(), 10);

  auto claimed = (*store)->claimTrial(*studyId, 1, true).get();
  VERIFY_OK(claimed);
  QVERIFY(claimed->has_value());
  std::vector<MetricRow> retry;
  for (int s = 6; s <= 8; ++s) retry.push_back({run, s, "loss", 100.0 + s, 0, 1.8e9 + s});
  VERIFY_OK((*store)->appendMetrics(retry).get());
  const qsizetype before = series.size();
  worker.refresh();
  seen = lossOf(series, before);
  QVERIFY(seen.reset);
  QCOMPARE(seen.steps, (QVector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
  QCOMPARE(seen.values, (QVector<double>{11, 12, 13, 14, 15, 106, 107, 108}));
}

// The dashboard opens a run log that another process fills (on a server: a fresh database, whose
// tables the worker makes): its poll sees each commit of `shardscope-cli study ask` there.
void TestRunLogWorker::followsAnotherProcessesCommits() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = shardscope::testing::storeSpec(dir.path(), "followed.db");
  if (!shardscope::testing::onPostgres()) VERIFY_OK(RunStore::open(path));  // the file exists
  qRegisterMetaType<QVector<RunSummary>>();
  RunLogWorker worker(50);
  QSignalSpy opened(&worker, &RunLogWorker::opened);
  QSignalSpy runs(&worker, &RunLogWorker::runsLoaded);
  worker.open(path);
  QCOMPARE(opened.size(), 1);
  QVERIFY2(opened.at(0).at(0).toBool(), qPrintable(opened.at(0).at(1).toString()));
  QFile exp(dir.filePath("exp.toml"));
  QVERIFY(exp.open(QIODevice::WriteOnly));
  exp.write(
      "[search]\nsampler = \"random\"\nseed = 1\nn_trials = 5\n"
      "objectives = {objective = \"minimize\"}\n\n[search.space.x]\ntype = \"float\"\n"
      "low = 0.0\nhigh = 1.0\n");
  exp.close();
  const QString cli = shardscope::testing::binaryDir() + "/bin/shardscope-cli";
  for (const QStringList& args :
       {QStringList{"study", "create", "followed", exp.fileName()},
        QStringList{"study", "ask", "followed"}, QStringList{"study", "ask", "followed"}}) {
    QProcess p;
    p.start(cli, QStringList{"--db", path} + args);
    QVERIFY(p.waitForFinished(60000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
  }
  auto names = [&runs] {
    QStringList seen;
    if (runs.isEmpty()) return seen;
    for (const RunSummary& run : runs.last().at(0).value<QVector<RunSummary>>()) {
      seen << run.record.name;
    }
    seen.sort();
    return seen;
  };
  QTRY_COMPARE_WITH_TIMEOUT(names(), (QStringList{"followed-0", "followed-1"}), 20000);
}

// `shardscope --db new.db`, or the default path on a fresh account: the run log does not exist
// when the dashboard starts. Before, the worker failed to open it and never looked again, so the
// runs its own Launch then recorded never showed, not even after Refresh. Now it creates the
// empty run log (its folder too) and follows it like any other.
void TestRunLogWorker::runLogThatDoesNotExistYetIsCreated() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath("fresh-account/shardscope/runs.db");
  qRegisterMetaType<QVector<RunSummary>>();
  RunLogWorker worker(50);
  QSignalSpy opened(&worker, &RunLogWorker::opened);
  QSignalSpy runs(&worker, &RunLogWorker::runsLoaded);
  worker.open(path);
  QCOMPARE(opened.size(), 1);
  QVERIFY2(opened.at(0).at(0).toBool(), qPrintable(opened.at(0).at(1).toString()));
  QVERIFY(QFile::exists(path));
  auto store = RunStore::open(path);  // what Launch does
  VERIFY_OK(store);
  NewStudy study;
  study.name = "launched";
  study.objectives = {"loss"};
  study.directions = {"minimize"};
  auto studyId = (*store)->createStudy(study).get();
  VERIFY_OK(studyId);
  NewTrial trial;
  trial.studyId = *studyId;
  trial.worldSize = 1;
  VERIFY_OK((*store)->createTrialRun(trial).get());
  auto count = [&runs] {
    return runs.isEmpty() ? 0 : runs.last().at(0).value<QVector<RunSummary>>().size();
  };
  QTRY_COMPARE_WITH_TIMEOUT(count(), 1, 20000);
}

QTEST_GUILESS_MAIN(TestRunLogWorker)
#include "tst_runlogworker.moc"

// The schema-2 asset of tst_runstore (three runs) opens in the worker: before, every read
// failed with "no such column" and the window stayed empty.
void TestRunLogWorker::olderSchemaIsMigratedOnOpen() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath("old.db");
  QVERIFY(QFile::copy(shardscope::testing::sourceDir() + "/tests/backend/store/assets/runs-v2.db",
                      path));
  QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner);
  qRegisterMetaType<QVector<RunSummary>>();
  RunLogWorker worker(3600 * 1000);
  QSignalSpy opened(&worker, &RunLogWorker::opened);
  QSignalSpy runs(&worker, &RunLogWorker::runsLoaded);
  QSignalSpy failed(&worker, &RunLogWorker::failed);
  worker.open(path);
  QCOMPARE(opened.size(), 1);
  QVERIFY2(opened.at(0).at(0).toBool(), qPrintable(opened.at(0).at(1).toString()));
  QVERIFY(!runs.isEmpty());
  QCOMPARE(runs.last().at(0).value<QVector<RunSummary>>().size(), 3);
  QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(0).toString()));
  auto reader = RunReader::open(path);
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
}

// Compare's "Colour by": per run the mean `mfu` of rank 0's steps (rank 1's ignored), and per
// rank the mean of phase.comm_exposed / phase.wall over its steps with a positive wall, averaged
// over the ranks; a run with neither is absent. Read in one statement on SQLite and PostgreSQL.
void TestRunLogWorker::trialFiguresAreMeansOverSteps() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = shardscope::testing::storeSpec(dir.path(), "figures.db");
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  NewStudy study;
  study.name = "figures";
  study.objectives = {"loss"};
  study.directions = {"minimize"};
  auto studyId = (*store)->createStudy(study).get();
  VERIFY_OK(studyId);
  qint64 runs[2] = {0, 0};
  for (qint64& run : runs) {
    NewTrial trial;
    trial.studyId = *studyId;
    trial.worldSize = 2;
    auto id = (*store)->createTrialRun(trial).get();
    VERIFY_OK(id);
    run = id->runId;
  }
  const qint64 a = runs[0];
  const double t = 1.7e9;
  std::vector<MetricRow> rows{{a, 0, "mfu", 0.2, 0, t},
                              {a, 1, "mfu", 0.4, 0, t},
                              {a, 0, "mfu", 0.9, 1, t},
                              {a, 0, "phase.wall", 0.1, 0, t},
                              {a, 0, "phase.comm_exposed", 0.01, 0, t},
                              {a, 1, "phase.wall", 0.2, 0, t},
                              {a, 1, "phase.comm_exposed", 0.04, 0, t},
                              {a, 0, "phase.wall", 0.1, 1, t},
                              {a, 0, "phase.comm_exposed", 0.05, 1, t},
                              {a, 1, "phase.wall", 0.0, 1, t},
                              {a, 1, "phase.comm_exposed", 0.02, 1, t},
                              {runs[1], 0, "loss", 1.0, 0, t}};
  VERIFY_OK((*store)->appendMetrics(rows).get());
  (*store)->flush();

  qRegisterMetaType<TrialFigures>();
  RunLogWorker worker(3600 * 1000);
  QSignalSpy figures(&worker, &RunLogWorker::trialFiguresLoaded);
  QSignalSpy failed(&worker, &RunLogWorker::failed);
  worker.open(path);
  worker.loadTrialFigures(7, {a, runs[1]});
  QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(0).toString()));
  QCOMPARE(figures.size(), 1);
  const auto got = figures.at(0).at(0).value<TrialFigures>();
  QCOMPARE(got.experimentId, qint64(7));
  QCOMPARE(got.mfu.keys(), QList<qint64>{a});
  QCOMPARE(got.mfu.value(a), 0.3);
  QCOMPARE(got.exposedShare.keys(), QList<qint64>{a});
  QCOMPARE(got.exposedShare.value(a), (0.15 + 0.5) / 2);
}
