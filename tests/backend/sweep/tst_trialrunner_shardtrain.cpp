// Tests backend/sweep/trialrunner.cpp with the real trainer: 2-rank shardtrain trials of the tiny
// demo model on Gloo (CPU), local launcher, a real SQLite run log.
//   - a prune is a graceful stop of both ranks at one step boundary, with a checkpoint;
//   - a stop agreed right after a periodic checkpoint does not write that step again;
//   - a trial whose rank is SIGKILLed mid-run is retried from its newest sharded checkpoint and
//     its curve goes on from that step;
//   - a trial that runs out of memory at micro-batch 4 (the counting allocator's host limit, as
//     shard_error_oom) is replanned at micro-batch 2 (search.on_oom = "replan", the default) and
//     completes with the very losses of a trial started at micro-batch 2; the study counts it as
//     a complete trial of its values.
// Every wait has a generous deadline; nothing asserts a duration. Cost: about 5 trainer starts of
// 2 ranks and a few dozen steps of a 2-layer hidden-32 model (seconds on one idle core).
#include <signal.h>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSignalSpy>
#include <QStringList>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <map>

#include "backend/lifecycle/demodata.h"
#include "backend/lifecycle/runlifecycle.h"
#include "backend/sweep/study.h"
#include "backend/sweep/trialrunner.h"
#include "spec/events.h"
#include "tests/support/experiment.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;
using search::TrialState;

namespace {

constexpr int kDeadlineMs = 120000;

// Long enough that a trial never ends by itself before the test stops or kills it; each test
// sets what it needs through the runner's overrides.
const QByteArray kTinyExperiment = testing::tinyDemoExperiment("tiny", "tiny-data") + R"([train]
max_steps = 100000
batch_size = 8
ckpt_at_end = false
ckpt_every = 3
[eval]
every = 3
batches = 1
[launch]
nproc_per_node = 2
[search]
objectives = {"eval.loss" = "minimize"}
stop_grace_s = 300
[search.space."train.lr"]
type = "float"
low = 1e-3
high = 1e-1
log = true
)";

template <class T>
std::optional<T> payload(const std::optional<EventRow>& row) {
  if (!row) return std::nullopt;
  auto event = spec::parse_event(std::string_view(row->json.constData(), size_t(row->json.size())));
  if (!event) return std::nullopt;
  if (const auto* body = std::get_if<T>(&event->body)) return *body;
  return std::nullopt;
}

}  // namespace

class TestTrialRunnerShardtrain : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void pruneStopsBothRanksAtOneStepWithACheckpoint();
  void stopRightAfterACheckpointWritesItOnce();
  void killedRankResumesFromTheCheckpoint();
  void oomTrialCompletesInTheNextPlan();

 private:
  std::unique_ptr<TrialRunner> makeRunner(qint64 studyId, std::vector<std::string> overrides);
  qint64 makeStudy(const QString& name);
  TrialOutcome wait(TrialRunner& runner, qint64 number, std::optional<qint64> runId = {});

  QTemporaryDir m_dir;
  QString m_experiment;
  QString m_shardtrain;
  std::unique_ptr<RunStore> m_store;
  search::SearchSpace m_space;
};

void TestTrialRunnerShardtrain::initTestCase() {
  m_shardtrain = qEnvironmentVariable("SHARDSCOPE_SHARDTRAIN");
  if (!QFileInfo(m_shardtrain).isExecutable()) QSKIP("SHARDSCOPE_SHARDTRAIN names no shardtrain");
  QVERIFY(m_dir.isValid());
  m_experiment = m_dir.filePath("tiny.toml");
  QFile file(m_experiment);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(kTinyExperiment);
  file.close();
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  auto exp = spec::load_experiment(m_experiment.toStdString(), {}, noPaths);
  VERIFY_OK(exp);
  VERIFY_OK(writeDemoData(*exp, 64));
  auto space = search::parse_search_space(exp->search.toml, m_experiment.toStdString());
  VERIFY_OK(space);
  m_space = *space;
  QVERIFY(m_space.retry_from_checkpoint);  // the default
  auto store = RunStore::open(m_dir.filePath("runs.db"));
  VERIFY_OK(store);
  m_store = std::move(*store);
}

qint64 TestTrialRunnerShardtrain::makeStudy(const QString& name) {
  NewStudy study;
  study.name = name;
  study.objectives = {"eval.loss"};
  study.directions = {"minimize"};
  auto id = m_store->createStudy(study).get();
  if (!id) qWarning("%s", id.message().c_str());
  return id ? *id : 0;
}

std::unique_ptr<TrialRunner> TestTrialRunnerShardtrain::makeRunner(
    qint64 studyId, std::vector<std::string> overrides) {
  TrialRunner::Options options;
  options.studyId = studyId;
  options.runsRoot = m_dir.filePath("runs");
  options.trainer = m_shardtrain;
  options.overrides = std::move(overrides);
  return std::make_unique<TrialRunner>(*m_store, m_experiment, m_space, options);
}

TrialOutcome TestTrialRunnerShardtrain::wait(TrialRunner& runner, qint64 number,
                                             std::optional<qint64> runId) {
  QSignalSpy finished(&runner, &TrialRunner::trialFinished);
  auto started = runner.start(number, {{"train.lr", 1e-2}}, runId);
  if (!started) qWarning("%s", started.message().c_str());
  if (!started || !finished.wait(kDeadlineMs)) return {};
  return finished.takeFirst().at(0).value<TrialOutcome>();
}

// The pruner says stop at the evaluation of step 3: SIGTERM reaches both ranks at different
// moments, they agree (an all-reduce of the flag) at one step boundary, write the stop checkpoint
// (train.ckpt_every is set), both emit `done` stopped with the same step and exit 0, and the run
// log records pruned. A rank that left on its own step, by a signal or with an error fails this.
void TestTrialRunnerShardtrain::pruneStopsBothRanksAtOneStepWithACheckpoint() {
  auto runner = makeRunner(makeStudy("prune"), {"train.ckpt_every=1000"});
  runner->setPruneCallback([](qint64, qint64 step, double) { return step >= 3; });
  const TrialOutcome outcome = wait(*runner, 0);
  QVERIFY2(outcome.state == TrialState::Pruned, qPrintable(outcome.error));
  QCOMPARE(outcome.ranks.size(), 2);
  for (const RankState& rank : outcome.ranks) {
    QVERIFY2(rank.exitCode == 0 && rank.signal == 0,
             qPrintable(QString("rank %1: exit %2, signal %3")
                            .arg(rank.rank)
                            .arg(rank.exitCode)
                            .arg(rank.signal)));
  }
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto run = reader->run(outcome.runId);
  VERIFY_OK(run);
  QCOMPARE((*run)->status, spec::RunStatus::pruned);
  std::optional<std::int64_t> steps;
  for (int rank = 0; rank < 2; ++rank) {
    auto done = reader->lastEvent(outcome.runId, rank, "done");
    VERIFY_OK(done);
    const auto body = payload<spec::DoneEvent>(*done);
    QVERIFY2(body && body->status == spec::DoneStatus::stopped, qPrintable(QString::number(rank)));
    QVERIFY(body->steps.has_value() && *body->steps >= 3);
    if (steps) QCOMPARE(*body->steps, *steps);  // one step boundary for both
    steps = body->steps;
    auto error = reader->lastEvent(outcome.runId, rank, "error");
    VERIFY_OK(error);
    QVERIFY2(!error->has_value(), error->has_value() ? (**error).json.constData() : "");
  }
  auto ckpt = reader->lastEvent(outcome.runId, 0, "ckpt");
  VERIFY_OK(ckpt);
  const auto written = payload<spec::CkptEvent>(*ckpt);
  QVERIFY(written.has_value());
  QCOMPARE(written->step, *steps);
  QCOMPARE(written->kind, std::string("sharded"));
  const QDir dir(QDir((*run)->runDir).filePath(QString::fromStdString(written->path)));
  for (const char* name : {"meta.json", "rank-0.safetensors", "rank-1.safetensors"}) {
    QVERIFY2(dir.exists(name), qPrintable(dir.filePath(name)));
  }
}

// train.ckpt_every = 1: every stop is agreed right after a periodic checkpoint of the same step.
// shardtrain then wrote that step again as its stop checkpoint (two ckpt events of one step),
// deleting the complete one first; now the stop keeps the one it has.
void TestTrialRunnerShardtrain::stopRightAfterACheckpointWritesItOnce() {
  auto runner = makeRunner(makeStudy("stop-at-ckpt"), {"train.ckpt_every=1", "train.ckpt_keep=0"});
  runner->setPruneCallback([](qint64, qint64 step, double) { return step >= 3; });
  const TrialOutcome outcome = wait(*runner, 0);
  QVERIFY2(outcome.state == TrialState::Pruned, qPrintable(outcome.error));
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto done = reader->lastEvent(outcome.runId, 0, "done");
  VERIFY_OK(done);
  const auto body = payload<spec::DoneEvent>(*done);
  QVERIFY(body && body->status == spec::DoneStatus::stopped && body->steps);
  auto events = reader->events(outcome.runId, 0);
  VERIFY_OK(events);
  int atStop = 0;
  for (const EventRow& row : *events) {
    if (row.kind != QLatin1String("ckpt")) continue;
    const auto ckpt = payload<spec::CkptEvent>(row);
    QVERIFY(ckpt.has_value());
    if (ckpt->step == *body->steps) ++atStop;
  }
  QCOMPARE(atStop, 1);
}

// Rank 1 is SIGKILLed at the evaluation of step 6 (train.ckpt_every = 3, so the step-3 checkpoint
// is complete; later ones may be too): the trial fails (rank 0 loses its peer). Its retry (attempt
// 1, a fresh folder) resumes from the failed attempt's newest complete sharded checkpoint, at step
// k, and runs to k + 6. The run's loss curve is one curve: steps 1..k from attempt 0 (kept) and
// k+1..k+6 from the retry. Before, the retry started from step 1, and claiming it deleted the whole
// curve.
void TestTrialRunnerShardtrain::killedRankResumesFromTheCheckpoint() {
  const qint64 study = makeStudy("resume");
  auto first = makeRunner(study, {});
  bool killed = false;
  first->setPruneCallback([&](qint64, qint64 step, double) {
    if (killed || step < 6) return false;  // the step-3 checkpoint is complete by then
    auto reader = m_store->reader();
    auto runs = reader ? reader->trials(study) : Result<std::vector<RunRecord>>(fail("no reader"));
    if (!runs || runs->empty()) return false;
    auto location = RunLocation::fromJson(runs->front().location);
    if (!location || location->pids.size() != 2) return false;
    killed = ::kill(pid_t(location->pids[1]), SIGKILL) == 0;
    return false;
  });
  const TrialOutcome failed = wait(*first, 0);
  QVERIFY(killed);
  QCOMPARE(int(failed.state), int(TrialState::Failed));
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto point = reader->resumePoint(failed.runId, 0);
  VERIFY_OK(point);
  QVERIFY2(point->has_value(), "attempt 0 wrote a checkpoint before the kill");
  const qint64 k = (*point)->step;
  QVERIFY(k >= 3 && k % 3 == 0);
  auto before = reader->metric(failed.runId, "loss");
  VERIFY_OK(before);
  std::map<qint64, double> attempt0;
  for (const auto& p : *before) attempt0[p.step] = p.value;
  const QString failedDir = (*reader->run(failed.runId))->runDir;

  auto claimed = m_store->claimTrial(study, 1, m_space.retry_from_checkpoint).get();
  VERIFY_OK(claimed);
  QVERIFY(claimed->has_value());
  auto second = makeRunner(study, {"train.max_steps=" + std::to_string(k + 6)});
  const TrialOutcome retried = wait(*second, 0, failed.runId);
  QVERIFY2(retried.state == TrialState::Complete, qPrintable(retried.error));

  // The retry said where it resumed from, and its first step is k + 1.
  auto events = reader->events(failed.runId, 0);
  VERIFY_OK(events);
  QString resumed;
  std::optional<std::int64_t> firstStep;
  for (const EventRow& row : *events) {
    if (row.attempt != 1) continue;
    auto event = spec::parse_event(std::string_view(row.json.constData(), size_t(row.json.size())));
    if (!event) continue;
    if (const auto* log = std::get_if<spec::LogEvent>(&event->body)) {
      if (log->message.rfind("resumed from ", 0) == 0)
        resumed = QString::fromStdString(log->message);
    } else if (const auto* s = std::get_if<spec::StepEvent>(&event->body); s && !firstStep) {
      firstStep = s->step;
    }
  }
  const QString expected = QStringLiteral("resumed from %1/ckpt/step-%2 at step %3")
                               .arg(failedDir, QStringLiteral("%1").arg(k, 6, 10, QLatin1Char('0')))
                               .arg(k);
  QCOMPARE(resumed, expected);
  QCOMPARE(firstStep, std::optional<std::int64_t>(k + 1));

  auto curve = reader->metric(failed.runId, "loss");
  VERIFY_OK(curve);
  QCOMPARE(qint64(curve->size()), k + 6);
  for (qint64 i = 0; i < qint64(curve->size()); ++i) {
    const auto& p = (*curve)[std::size_t(i)];
    QCOMPARE(p.step, i + 1);
    if (p.step <= k) QCOMPARE(p.value, attempt0.at(p.step));  // attempt 0's, kept
  }
}

namespace {

// The highest mem.peak any step reported on `rank` of run `runId` (0: none).
double peakOf(RunReader& reader, qint64 runId, int rank) {
  auto points = reader.metricOfRuns({runId}, QStringLiteral("mem.peak"), rank);
  double peak = 0;
  if (points && points->contains(runId)) {
    for (const auto& p : points->value(runId)) peak = std::max(peak, p.value);
  }
  return peak;
}

std::vector<std::pair<qint64, double>> lossesOf(RunReader& reader, qint64 runId) {
  std::vector<std::pair<qint64, double>> out;
  auto curve = reader.metric(runId, QStringLiteral("loss"));
  if (curve) {
    for (const auto& p : *curve) out.emplace_back(p.step, p.value);
  }
  return out;
}

}  // namespace

// Calibration (as shard_error_oom): a trial at micro-batch 2 (the reference) and one at 4 measure
// each rank's peak of live tensor bytes; the limit lies between. Then a study's trial at
// micro-batch 4 under that limit runs out of memory, is replanned with the same value of train.lr
// at micro-batch 2 (2 accumulation steps: the same global batch of 8), and completes: its
// losses and objective are the reference's, exactly (fp32, the same samples and reduction
// order), the run says which plan ran and why, and the study counts one complete trial.
void TestTrialRunnerShardtrain::oomTrialCompletesInTheNextPlan() {
  // Rows of 256 tokens, so that a step's activations dominate every rank's peak (rank 0's start
  // holds more than a step of the default 32-token rows); no evaluation (the objective is done's).
  {
    QFile data(m_dir.filePath("tiny-data/long.jsonl"));
    QVERIFY(data.open(QIODevice::WriteOnly));
    const int strides[] = {1, 2, 3, 5, 7};
    for (int i = 0; i < 64; ++i) {  // arithmetic progressions modulo the vocabulary, as ranks.py
      QStringList ids;
      for (int k = 0; k < 256; ++k)
        ids << QString::number((i * 37 + 11 + strides[i % 5] * k) % 256);
      data.write(("{\"input_ids\": [" + ids.join(", ") + "]}\n").toUtf8());
    }
  }
  const std::vector<std::string> shape = {"train.max_steps=4",
                                          "train.mem_every=1",
                                          "train.ckpt_every=0",
                                          "eval.every=0",
                                          "data.seq_len=256",
                                          "model.tiny_max_seq_len=256",
                                          "data.train_path=\"tiny-data/long.jsonl\"",
                                          "data.eval_path=\"tiny-data/long.jsonl\""};
  const auto with = [&](const std::string& mbs) {
    std::vector<std::string> o = shape;
    o.push_back("train.micro_batch_size=" + mbs);
    return o;
  };
  const qint64 calibration = makeStudy("replan-calibration");
  auto two = makeRunner(calibration, with("2"));
  const TrialOutcome reference = wait(*two, 0);
  QVERIFY2(reference.state == TrialState::Complete, qPrintable(reference.error));
  auto four = makeRunner(calibration, with("4"));
  const TrialOutcome big = wait(*four, 1);
  QVERIFY2(big.state == TrialState::Complete, qPrintable(big.error));
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  const double peak2 =
      std::max(peakOf(*reader, reference.runId, 0), peakOf(*reader, reference.runId, 1));
  const double peak4 = std::min(peakOf(*reader, big.runId, 0), peakOf(*reader, big.runId, 1));
  QVERIFY2(peak2 > 0 && peak4 > peak2 * 1.05,
           qPrintable(QStringLiteral("peaks: micro-batch 2 %1, 4 %2 bytes: the activations must "
                                     "dominate")
                          .arg(peak2)
                          .arg(peak4)));
  const auto limit = static_cast<qint64>((peak2 + peak4) / 2);

  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  auto exp = spec::load_experiment(m_experiment.toStdString(), {}, noPaths);
  VERIFY_OK(exp);
  search::Study::CreateOptions create;
  create.name = QStringLiteral("replan");
  auto study = search::Study::create(*m_store, *exp, create);
  VERIFY_OK(study);
  QCOMPARE(int(study->space().on_oom), int(spec::OnOom::replan));  // the default
  auto runner = makeRunner(study->id(), with("4"));
  QSignalSpy replanned(runner.get(), &TrialRunner::trialReplanned);
  qputenv("SHARDSCOPE_HOST_MEMORY_LIMIT", QByteArray::number(limit));
  const TrialOutcome outcome = wait(*runner, 0);
  qunsetenv("SHARDSCOPE_HOST_MEMORY_LIMIT");
  QVERIFY2(outcome.state == TrialState::Complete, qPrintable(outcome.error));
  QCOMPARE(replanned.count(), 1);
  QCOMPARE(replanned.at(0).at(2).toInt(), 1);
  const QString change = replanned.at(0).at(3).toString();
  QCOMPARE(change, QStringLiteral("train.micro_batch_size 4 -> 2 (gradient accumulation 1 -> 2)"));

  // Attempt 0 ran out of memory on some rank; attempt 1 completed at micro-batch 2.
  auto run = reader->run(outcome.runId);
  VERIFY_OK(run);
  QCOMPARE((*run)->status, spec::RunStatus::complete);
  QCOMPARE((*run)->attempt, 1);
  QCOMPARE((*run)->params.value("train.micro_batch_size").toInteger(), 2);
  QCOMPARE((*run)->params.value("train.lr").toDouble(), 1e-2);
  QCOMPARE((*run)->params.value("replan").toString(),
           QStringLiteral("attempt 0 ran out of memory; attempt 1: ") + change);
  bool oom = false;
  for (int rank = 0; rank < 2; ++rank) {
    auto events = reader->events(outcome.runId, rank);
    VERIFY_OK(events);
    for (const EventRow& row : *events) {
      if (row.attempt == 0 && row.kind == QLatin1String("error") &&
          row.json.contains("\"kind\":\"oom\""))
        oom = true;
    }
  }
  QVERIFY2(oom, "attempt 0 has no oom error event");
  QVERIFY(QFileInfo((*run)->runDir).fileName().endsWith(QLatin1String("-retry-1")));

  // The same losses and objective as the run started at micro-batch 2, bit for bit.
  const auto losses = lossesOf(*reader, outcome.runId);
  QCOMPARE(losses.size(), std::size_t{4});
  QCOMPARE(losses, lossesOf(*reader, reference.runId));
  QCOMPARE(outcome.values, reference.values);

  // The study: one complete trial of its values, none oom.
  auto summary = study->summary();
  VERIFY_OK(summary);
  QCOMPARE(summary->counts.complete, 1);
  QCOMPARE(summary->counts.oom, 0);
  QCOMPARE(summary->trials.size(), std::size_t{1});
  const search::StudyTrial& trial = summary->trials.front();
  QCOMPARE(trial.trial.params, (search::TrialParams{{"train.lr", 1e-2}}));
  QCOMPARE(trial.trial.values, reference.values);
  QCOMPARE(trial.replan, (*run)->params.value("replan").toString());

  // One run (run --replan-on-oom, the builder's Launch option): the same ladder through
  // RunLifecycle::startReplannedAttempt, the same losses.
  RunLifecycle::Settings settings;
  settings.dbPath = m_store->path();
  settings.runsRoot = m_dir.filePath("single");
  const RunLifecycle life(settings);
  std::vector<std::string> single = with("4");
  single.push_back("train.lr=1e-2");
  single.push_back("launch.trainer=\"" + m_shardtrain.toStdString() + "\"");
  auto singleExp = spec::load_experiment(m_experiment.toStdString(), single, noPaths);
  VERIFY_OK(singleExp);
  qputenv("SHARDSCOPE_HOST_MEMORY_LIMIT", QByteArray::number(limit));
  auto launched = life.launch(*m_store, *singleExp, m_experiment, single);
  VERIFY_OK(launched);
  auto first = RunLifecycle::follow(*m_store, *launched->handle, launched->run.id, {});
  VERIFY_OK(first);
  QCOMPARE(first->status, spec::RunStatus::oom);
  auto again = RunLifecycle::startReplannedAttempt(*m_store, launched->run.id);
  VERIFY_OK(again);
  QCOMPARE(again->change, change);
  QCOMPARE(again->run.attempt, 1);
  auto second = RunLifecycle::follow(*m_store, *again->handle, launched->run.id, {});
  qunsetenv("SHARDSCOPE_HOST_MEMORY_LIMIT");
  VERIFY_OK(second);
  QCOMPARE(second->status, spec::RunStatus::complete);
  auto singleRun = reader->run(launched->run.id);
  VERIFY_OK(singleRun);
  QCOMPARE((*singleRun)->params.value("train.micro_batch_size").toInteger(), 2);
  QCOMPARE((*singleRun)->params.value("replan").toString(),
           QStringLiteral("attempt 0 ran out of memory; attempt 1: ") + change);
  QVERIFY((*singleRun)->runDir.endsWith(QLatin1String("-replan-1")));
  QCOMPARE(lossesOf(*reader, launched->run.id), lossesOf(*reader, reference.runId));
}

QTEST_GUILESS_MAIN(TestTrialRunnerShardtrain)
#include "tst_trialrunner_shardtrain.moc"
