// Tests backend/sweep/pbtloop.cpp with the real trainer: population-based training of the tiny
// demo model, a population of 4 on 2-rank shardtrain trials (Gloo, CPU), local launcher, a real
// SQLite run log (PostgreSQL in the _pg variant); 2 segments of 3 steps.
//   - exploit copies the right checkpoint: the bottom member's second segment resumes from the
//     step-3 checkpoint in the best member's run folder;
//   - its first loss (step 4) equals, exactly, the best member's own step-4 loss: both start from
//     the same weights and the same batch, and the explored learning rate acts only after the
//     step's loss (fp32, 2 ranks each);
//   - the lineage in the study's state is complete (every segment: its run, its source run and
//     checkpoint, its step range, its values and its objective) and reads back from a fresh open;
//   - a segment whose rank is SIGKILLed as it launches is retried inside PBT (attempt 1), from its
//     source's checkpoint (its own failed attempt wrote none), and ends complete.
// The user steers it as any sweep (SweepControl, the run log's study control), on 1-rank trials of
// a population of 2 (2 segments of 2 steps); a segment's ranks are held with SIGSTOP until the
// driver has seen the request, so no race decides the outcome:
//   - paused before segment 0 ends, the next segment is held: no segment 1 starts and no run is
//     made while paused; resumed, the study goes on from the segment-0 checkpoints and ends with
//     a complete lineage;
//   - stopped while both members' first segments run, each is stopped (SIGTERM), recorded
//     `stopped` with its run, the study ends `stopped` with no rank left, and a new driver of it
//     is refused.
// Nothing asserts a duration. Cost: 9 trainer starts of 2 ranks, 3 steps each; 6 of 1 rank, 2
// steps.
#include <signal.h>
#include <QDir>
#include <QFileInfo>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <map>
#include <vector>

#include "backend/launch/launcher.h"
#include "backend/lifecycle/demodata.h"
#include "backend/sweep/pbtloop.h"
#include "backend/sweep/study.h"
#include "spec/events.h"
#include "tests/support/experiment.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

constexpr int kDeadlineMs = 600000;

const QByteArray kTinyPbt = testing::tinyDemoExperiment("tiny-pbt", "tiny-data") + R"([train]
max_steps = 6
batch_size = 8
ckpt_at_end = false
[eval]
every = 3
batches = 1
[launch]
nproc_per_node = 2
[search]
name = "pbt"
seed = 5
concurrency = 4
objectives = {"eval.loss" = "minimize"}
[search.space."train.lr"]
type = "float"
low = 1e-3
high = 3e-1
log = true
[search.pbt]
population = 4
interval_steps = 3
quantile = 0.25
factors = [0.5, 2.0]
mutable = ["train.lr"]
resample_probability = 0.0
)";

// A population of 2 on 1-rank trials, 2 segments of 2 steps: the cheapest PBT study.
QByteArray tinyPair(const char* name) {
  return testing::tinyDemoExperiment("tiny-pair", "tiny-data") + R"([train]
max_steps = 4
batch_size = 8
ckpt_at_end = false
[eval]
every = 2
batches = 1
[launch]
nproc_per_node = 1
threads_per_rank = 1
[search]
name = ")" +
         QByteArray(name) +
         R"("
seed = 11
concurrency = 2
stop_grace_s = 20
objectives = {"eval.loss" = "minimize"}
[search.space."train.lr"]
type = "float"
low = 1e-3
high = 3e-1
log = true
[search.pbt]
population = 2
interval_steps = 2
quantile = 0.5
mutable = ["train.lr"]
)";
}

// The pids of run `runId`'s ranks (empty until its location is stored).
QList<qint64> ranksOf(RunStore& store, qint64 runId) {
  auto reader = store.reader();
  auto run = reader ? reader->run(runId) : Result<std::optional<RunRecord>>(reader.error());
  if (!run || !*run) return {};
  auto location = RunLocation::fromJson((**run).location);
  if (!location) return {};
  QList<qint64> pids;
  for (const auto pid : location->pids) pids.append(qint64(pid));
  return pids;
}

void signalAll(const QList<qint64>& pids, int signal) {
  for (const qint64 pid : pids) ::kill(pid_t(pid), signal);
}

std::map<qint64, double> lossOf(RunReader& reader, qint64 runId) {
  std::map<qint64, double> out;
  auto points = reader.metric(runId, QStringLiteral("loss"));
  if (points) {
    for (const auto& p : *points) out[p.step] = p.value;
  }
  return out;
}

// The step of run `runId`'s newest sharded checkpoint (-1: none).
qint64 checkpointStep(RunStore& store, qint64 runId) {
  auto reader = store.reader();
  if (!reader) return -1;
  auto run = reader->run(runId);
  if (!run || !*run) return -1;
  auto point = reader->resumePoint(runId, (**run).attempt);
  return point && *point ? (**point).step : -1;
}

// Rank 0's "resumed from ..." message in the newest attempt of run `runId` (empty: none).
QString resumedFrom(RunReader& reader, qint64 runId, int attempt) {
  auto events = reader.events(runId, 0);
  if (!events) return {};
  for (const EventRow& row : *events) {
    if (row.attempt != attempt) continue;
    auto event = spec::parse_event(std::string_view(row.json.constData(), size_t(row.json.size())));
    if (!event) continue;
    if (const auto* log = std::get_if<spec::LogEvent>(&event->body)) {
      if (log->message.rfind("resumed from ", 0) == 0) return QString::fromStdString(log->message);
    }
  }
  return {};
}

// What each test's PbtLoop runs on: the experiment `text` written to DIR/NAME and read as a sweep
// reads it, its demo data made, a run log in DIR, and the loop's options (its runs under
// DIR/runs, the trainer `trainer`).
struct Bench {
  SweepInput input;
  std::unique_ptr<RunStore> store;
  SweepLoop::Options options;
};

Result<Bench> makeBench(const QTemporaryDir& dir, const QString& name, const QByteArray& text,
                        const QString& trainer) {
  const QString path = dir.filePath(name);
  if (!testing::writeAll(path, text)) return fail("cannot write " + path.toStdString());
  auto input = SweepLoop::readInput(path, {});
  if (!input) return input.error();
  if (auto data = writeDemoData(input->experiment, 64); !data) return data.error();
  auto store = RunStore::open(testing::storeSpec(dir.path(), QStringLiteral("runs.db")));
  if (!store) return store.error();
  Bench bench{std::move(*input), std::move(*store), {}};
  bench.options.runsRoot = dir.filePath("runs");
  bench.options.trainer = trainer;
  return bench;
}

}  // namespace

class TestPbtLoop : public QObject {
  Q_OBJECT

 private slots:
  void populationExploitsExploresAndResumesAKilledSegment();
  void pauseHoldsTheNextSegmentAndResumeGoesOn();
  void stopEndsTheStudyWithItsLineage();

 private:
  QString m_shardtrain = qEnvironmentVariable("SHARDSCOPE_SHARDTRAIN");
};

void TestPbtLoop::populationExploitsExploresAndResumesAKilledSegment() {
  const QString shardtrain = qEnvironmentVariable("SHARDSCOPE_SHARDTRAIN");
  QVERIFY2(QFileInfo(shardtrain).isExecutable(),
           "SHARDSCOPE_SHARDTRAIN names no shardtrain (build the shardtrain target)");
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  auto bench = makeBench(dir, "tiny-pbt.toml", kTinyPbt, shardtrain);
  VERIFY_OK(bench);
  const SweepInput& input = bench->input;
  RunStore& store = *bench->store;
  const SweepLoop::Options& options = bench->options;
  VERIFY_OK(PbtLoop::check(input));
  auto opened = SweepLoop::openStudy(store, input, {}, 1);
  VERIFY_OK(opened);
  PbtLoop loop(store, std::move(opened->study), input, options);
  QCOMPARE(loop.segmentCount(), 2);

  // Segment 1 of member 2 loses rank 1 the moment its first attempt launches.
  qint64 killedRun = 0;
  connect(&loop, &PbtLoop::segmentLaunched, this, [&](int segment, int member, qint64 runId) {
    if (segment != 1 || member != 2 || killedRun != 0) return;
    auto reader = store.reader();
    auto run = reader ? reader->run(runId) : Result<std::optional<RunRecord>>(reader.error());
    if (!run || !*run) return;
    auto location = RunLocation::fromJson((**run).location);
    if (!location || location->pids.size() != 2) return;
    if (::kill(pid_t(location->pids[1]), SIGKILL) == 0) killedRun = runId;
  });
  QSignalSpy retried(&loop, &PbtLoop::segmentRetried);
  QSignalSpy ended(&loop, &PbtLoop::ended);
  VERIFY_OK(loop.start());
  QVERIFY(ended.wait(kDeadlineMs));
  auto summary = loop.finish();
  VERIFY_OK(summary);

  // The lineage, as a fresh open of the study reads it from the run log.
  auto study = search::Study::open(store, QStringLiteral("pbt"));
  VERIFY_OK(study);
  const PbtLineage lineage = PbtLineage::fromJson(
      study->space(), study->record().state.value(QLatin1String("pbt")).toObject());
  QCOMPARE(lineage.population, 4);
  QCOMPARE(int(lineage.segments.size()), 8);
  auto reader = store.reader();
  VERIFY_OK(reader);
  int exploited = 0;
  for (const PbtSegment& s : lineage.segments) {
    const QString at = QStringLiteral("segment %1 member %2").arg(s.segment).arg(s.member);
    QVERIFY2(s.state == QLatin1String("complete") && s.value && s.runId > 0, qPrintable(at));
    QCOMPARE(s.trial, qint64(s.segment) * 4 + s.member);
    QCOMPARE(s.startStep, qint64(s.segment) * 3);
    QCOMPARE(s.endStep, qint64(s.segment + 1) * 3);
    QVERIFY2(s.params.count("train.lr") == 1, qPrintable(at));
    auto run = reader->run(s.runId);
    VERIFY_OK(run);
    QCOMPARE((**run).status, spec::RunStatus::complete);
    if (s.segment == 0) {
      QCOMPARE(s.fromMember, -1);
      QVERIFY(s.fromCheckpoint.isEmpty());
      continue;
    }
    const PbtSegment* source = lineage.at(0, s.fromMember);
    QVERIFY(source != nullptr);
    QCOMPARE(s.fromRunId, source->runId);
    // Exploit copies the source's step-3 checkpoint, from the source's own folder.
    auto sourceRun = reader->run(source->runId);
    VERIFY_OK(sourceRun);
    QCOMPARE(s.fromCheckpoint, (**sourceRun).runDir + QStringLiteral("/ckpt/step-000003"));
    QVERIFY2(QFileInfo(s.fromCheckpoint + QStringLiteral("/meta.json")).exists(),
             qPrintable(s.fromCheckpoint));
    const int attempt = (**run).attempt;
    QCOMPARE(resumedFrom(*reader, s.runId, attempt),
             QStringLiteral("resumed from %1 at step 3").arg(s.fromCheckpoint));
    const double lr = std::get<double>(s.params.at("train.lr"));
    const double sourceLr = std::get<double>(source->params.at("train.lr"));
    if (!s.exploited) {
      QCOMPARE(s.fromMember, s.member);
      QCOMPARE(lr, sourceLr);
      continue;
    }
    ++exploited;
    // The worst member of segment 0 takes the best one's checkpoint with lr times 0.5 or 2.
    for (int m = 0; m < 4; ++m) {
      QVERIFY(*lineage.at(0, m)->value >= *source->value);
      QVERIFY(*lineage.at(0, m)->value <= *lineage.at(0, s.member)->value);
    }
    QVERIFY2(qFuzzyCompare(lr, sourceLr * 0.5) || qFuzzyCompare(lr, sourceLr * 2.0),
             qPrintable(QStringLiteral("%1 from %2").arg(lr).arg(sourceLr)));
    // The continued trial's first loss is the source member's own loss at that step, exactly.
    const PbtSegment* sourceGoesOn = lineage.at(1, s.fromMember);
    QVERIFY(sourceGoesOn != nullptr && !sourceGoesOn->exploited);
    const auto mine = lossOf(*reader, s.runId);
    const auto theirs = lossOf(*reader, sourceGoesOn->runId);
    QVERIFY(mine.count(4) == 1 && theirs.count(4) == 1);
    QCOMPARE(mine.begin()->first, qint64(4));
    QCOMPARE(mine.at(4), theirs.at(4));  // exact: the same weights, batch and ranks
  }
  QCOMPARE(exploited, 1);

  // The killed segment ran again inside PBT, from its source's checkpoint, and completed.
  QVERIFY2(killedRun > 0, "segment 1 of member 2 launched");
  QCOMPARE(retried.count(), 1);
  QCOMPARE(retried.first().at(0).toInt(), 1);
  QCOMPARE(retried.first().at(1).toInt(), 2);
  QCOMPARE(retried.first().at(2).toInt(), 1);
  QCOMPARE(lineage.at(1, 2)->runId, killedRun);
  auto killed = reader->run(killedRun);
  VERIFY_OK(killed);
  QCOMPARE((**killed).attempt, 1);
  QCOMPARE(lossOf(*reader, killedRun).begin()->first, qint64(4));

  // The best member's schedule: one segment per interval, its values at each.
  const auto schedule = lineage.bestSchedule(true);
  QCOMPARE(int(schedule.size()), 2);
  QCOMPARE(schedule[0].segment, 0);
  QCOMPARE(schedule[1].segment, 1);
  QCOMPARE(schedule[0].member, schedule[1].fromMember);
}

void TestPbtLoop::pauseHoldsTheNextSegmentAndResumeGoesOn() {
  QVERIFY2(QFileInfo(m_shardtrain).isExecutable(),
           "SHARDSCOPE_SHARDTRAIN names no shardtrain (build the shardtrain target)");
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  auto bench = makeBench(dir, "tiny-pair.toml", tinyPair("pbt-pause"), m_shardtrain);
  VERIFY_OK(bench);
  const SweepInput& input = bench->input;
  RunStore& store = *bench->store;
  VERIFY_OK(PbtLoop::check(input));
  auto opened = SweepLoop::openStudy(store, input, {}, 1);
  VERIFY_OK(opened);
  PbtLoop loop(store, std::move(opened->study), input, bench->options);
  QCOMPARE(loop.segmentCount(), 2);
  const qint64 studyId = loop.study().id();

  // Both first segments are held (SIGSTOP) as they launch, until the pause has reached the
  // driver: no segment can end before it. (Holding member 0 alone let member 1's segment end
  // first on a loaded machine.)
  QList<qint64> held;
  int heldSegments = 0;
  bool everyRankKnown = true;
  connect(&loop, &PbtLoop::segmentLaunched, this, [&](int segment, int, qint64 runId) {
    if (segment != 0) return;
    const QList<qint64> ranks = ranksOf(store, runId);
    everyRankKnown = everyRankKnown && !ranks.isEmpty();
    signalAll(ranks, SIGSTOP);
    held += ranks;
    ++heldSegments;
  });
  QSignalSpy starting(&loop, &PbtLoop::segmentStarting);
  QSignalSpy segmentEnded(&loop, &PbtLoop::segmentEnded);
  std::vector<StudyControl> controls;
  connect(&loop, &PbtLoop::controlChanged, this, [&](StudyControl c) { controls.push_back(c); });
  QSignalSpy ended(&loop, &PbtLoop::ended);
  VERIFY_OK(loop.start());
  QTRY_VERIFY_WITH_TIMEOUT(heldSegments == 2, kDeadlineMs);
  QVERIFY(everyRankKnown);
  VERIFY_OK(store.setStudyControl(studyId, StudyControl::pause).get());
  QTRY_VERIFY_WITH_TIMEOUT(loop.control() == StudyControl::pause, kDeadlineMs);
  QCOMPARE(segmentEnded.count(), 0);
  signalAll(held, SIGCONT);

  // Both first segments finish their interval; the next one is decided by nobody yet. The
  // decision would come in the same call as the last segmentEnded: none came.
  QTRY_VERIFY_WITH_TIMEOUT(segmentEnded.count() == 2, kDeadlineMs);
  QCOMPARE(starting.count(), 2);
  QCOMPARE(ended.count(), 0);
  QCOMPARE(int(loop.lineage().segments.size()), 2);
  auto study = search::Study::open(store, QStringLiteral("pbt-pause"));
  VERIFY_OK(study);
  auto trials = study->trials();
  VERIFY_OK(trials);
  QCOMPARE(int(trials->size()), 2);  // no run of segment 1 while paused
  for (const PbtSegment& s : loop.lineage().segments) {
    QCOMPARE(s.state, QStringLiteral("complete"));
    auto point = checkpointStep(store, s.runId);
    QCOMPARE(point, qint64(2));  // its end checkpoint stays for the next segment
  }

  // Resumed: segment 1 starts from the segment-0 checkpoints and the study completes.
  VERIFY_OK(store.setStudyControl(studyId, StudyControl::run).get());
  QVERIFY(ended.wait(kDeadlineMs));
  VERIFY_OK(loop.finish());
  QVERIFY(controls == std::vector<StudyControl>({StudyControl::pause, StudyControl::run}));
  study = search::Study::open(store, QStringLiteral("pbt-pause"));
  VERIFY_OK(study);
  QCOMPARE(study->record().status, StudyStatus::complete);
  const PbtLineage lineage = PbtLineage::fromJson(
      study->space(), study->record().state.value(QLatin1String("pbt")).toObject());
  QCOMPARE(int(lineage.segments.size()), 4);
  for (const PbtSegment& s : lineage.segments) {
    const QString at = QStringLiteral("segment %1 member %2").arg(s.segment).arg(s.member);
    QVERIFY2(s.state == QLatin1String("complete") && s.value && s.runId > 0, qPrintable(at));
    if (s.segment == 0) continue;
    const PbtSegment* source = lineage.at(0, s.fromMember);
    QVERIFY2(source != nullptr, qPrintable(at));
    QCOMPARE(s.fromRunId, source->runId);
    QCOMPARE(s.startStep, qint64(2));
    QVERIFY2(s.fromCheckpoint.endsWith(QStringLiteral("/ckpt/step-000002")),
             qPrintable(s.fromCheckpoint));
  }
}

void TestPbtLoop::stopEndsTheStudyWithItsLineage() {
  QVERIFY2(QFileInfo(m_shardtrain).isExecutable(),
           "SHARDSCOPE_SHARDTRAIN names no shardtrain (build the shardtrain target)");
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  auto bench = makeBench(dir, "tiny-pair.toml", tinyPair("pbt-stop"), m_shardtrain);
  VERIFY_OK(bench);
  const SweepInput& input = bench->input;
  RunStore& store = *bench->store;
  const SweepLoop::Options& options = bench->options;
  QList<qint64> ranks;
  {
    auto opened = SweepLoop::openStudy(store, input, {}, 1);
    VERIFY_OK(opened);
    PbtLoop loop(store, std::move(opened->study), input, options);
    // Both members' first segments are held (SIGSTOP) as they launch, until the stop has
    // reached the driver: both are running when it is told.
    int launched = 0;
    connect(&loop, &PbtLoop::segmentLaunched, this, [&](int, int, qint64 runId) {
      const QList<qint64> pids = ranksOf(store, runId);
      signalAll(pids, SIGSTOP);
      ranks += pids;
      ++launched;
    });
    QSignalSpy ended(&loop, &PbtLoop::ended);
    VERIFY_OK(loop.start());
    QTRY_VERIFY_WITH_TIMEOUT(launched == 2, kDeadlineMs);
    QCOMPARE(ranks.size(), 2);
    VERIFY_OK(store.setStudyControl(loop.study().id(), StudyControl::stop).get());
    QTRY_VERIFY_WITH_TIMEOUT(loop.control() == StudyControl::stop, kDeadlineMs);
    signalAll(ranks, SIGCONT);  // the SIGTERM waiting for them arrives
    QVERIFY(ended.count() == 1 || ended.wait(kDeadlineMs));
    VERIFY_OK(loop.finish());
    QVERIFY(loop.stopped());
  }
  for (const qint64 pid : ranks) QVERIFY2(!testing::alive(pid), qPrintable(QString::number(pid)));

  // Every member's segment is recorded with its run, stopped; the study ended stopped.
  auto study = search::Study::open(store, QStringLiteral("pbt-stop"));
  VERIFY_OK(study);
  QCOMPARE(study->record().status, StudyStatus::stopped);
  const PbtLineage lineage = PbtLineage::fromJson(
      study->space(), study->record().state.value(QLatin1String("pbt")).toObject());
  QCOMPARE(int(lineage.segments.size()), 2);
  auto reader = store.reader();
  VERIFY_OK(reader);
  for (const PbtSegment& s : lineage.segments) {
    QCOMPARE(s.segment, 0);
    QCOMPARE(s.state, QStringLiteral("stopped"));
    QVERIFY(s.runId > 0);
    auto run = reader->run(s.runId);
    VERIFY_OK(run);
    QCOMPARE((**run).status, spec::RunStatus::stopped);
  }

  // A stopped PBT study does not go on: a new driver says so and starts nothing.
  auto again = SweepLoop::openStudy(store, input, {}, 1);
  VERIFY_OK(again);
  PbtLoop loop(store, std::move(again->study), input, options);
  auto refused = loop.start();
  QVERIFY(!refused);
  QVERIFY2(QString::fromStdString(refused.message()).contains("was stopped by the user"),
           refused.message().c_str());
}

QTEST_GUILESS_MAIN(TestPbtLoop)
#include "tst_pbtloop.moc"
