// Tests backend/sweep/trialrunner.cpp, scheduler.cpp and backend/launch/programlauncher.cpp:
// real trial processes (trial_program.py, and shardtrain with 2 ranks), a real SQLite run
// log. Every wait has a generous deadline; nothing asserts a duration.
#include <signal.h>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <map>

#include "backend/launch/programlauncher.h"
#include "backend/lifecycle/demodata.h"
#include "backend/store/sqlitedb.h"
#include "backend/sweep/scheduler.h"
#include "backend/sweep/trialrunner.h"
#include "spec/events.h"
#include "tests/support/experiment.h"
#include "tests/support/paths.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;
using search::TrialState;

namespace {

constexpr int kDeadlineMs = 60000;

const char* kProgramSpace = R"(
[search.objectives]
objective = "minimize"

[search.space.x]
type = "float"
low = -5.0
high = 5.0

[search.space.n]
type = "int"
low = 0
high = 10

[search.space.flag]
type = "bool"

[search.space.cond]
type = "int"
low = 1
high = 3
when = {flag = false}

[search.space.opt]
type = "categorical"
choices = ["a", "b c"]
)";

QJsonObject readJson(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(file.readAll()).object();
}

bool processGone(qint64 pid) {
  const QString stat = QStringLiteral("/proc/%1/stat").arg(pid);
  QFile file(stat);
  if (!file.open(QIODevice::ReadOnly)) return true;
  const QByteArray text = file.readAll();
  return text.mid(text.lastIndexOf(')') + 2, 1) == "Z";  // a zombie has ended
}

}  // namespace

class TestTrialRunner : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void programExperimentNeedsNoData();
  void programContractAndEvents();
  void nonZeroExitFails();
  void abortWithoutDoneFails();
  void nonFiniteObjectiveFails();
  void statusNeverFailsBeforeTheVerdict();
  void pruneSendsSigtermThenSigkill();
  void retryReadsItsOwnFilesFromTheStart();
  void infeasibleNeverLaunches();
  void schedulerRunsTwoAtOnce();
  void shardtrainTrialObjectiveFromEval();

 private:
  /// Writes a program-trial experiment beside a copy of trial_program.py; returns its path.
  QString programExperiment(const QString& name, const QString& programArgs,
                            const QString& extra = {});
  std::unique_ptr<TrialRunner> makeRunner(const QString& experiment,
                                          TrialRunner::Options options = {});
  TrialOutcome runOne(TrialRunner& runner, qint64 number, const search::TrialParams& params);

  QTemporaryDir m_dir;
  std::unique_ptr<RunStore> m_store;
  qint64 m_studyId = 0;
  int m_studies = 0;
};

void TestTrialRunner::initTestCase() {
  QVERIFY(m_dir.isValid());
  QFile::copy(shardscope::testing::sourceDir() + "/tests/backend/sweep/trial_program.py",
              m_dir.filePath("trial_program.py"));
  auto store = RunStore::open(m_dir.filePath("runs.db"));
  VERIFY_OK(store);
  m_store = std::move(*store);
}

QString TestTrialRunner::programExperiment(const QString& name, const QString& programArgs,
                                           const QString& extra) {
  QString path = m_dir.filePath(name + ".toml");
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly)) return {};
  const QString text = QStringLiteral(
                           "[experiment]\nname = \"%1\"\n\n[search]\n"
                           "program = [\"python3\", \"trial_program.py\", %2]\n%3%4")
                           .arg(name, programArgs, extra, QLatin1String(kProgramSpace));
  file.write(text.toUtf8());
  return path;
}

std::unique_ptr<TrialRunner> TestTrialRunner::makeRunner(const QString& experiment,
                                                         TrialRunner::Options options) {
  auto exp = spec::load_experiment(experiment.toStdString());
  if (!exp) qWarning("%s", exp.message().c_str());
  auto space =
      search::parse_search_space(exp ? exp->search.toml : std::string(), experiment.toStdString());
  if (!space) qWarning("%s", space.message().c_str());
  NewStudy study;
  study.name = QStringLiteral("study-%1").arg(++m_studies);
  study.objectives = {"objective"};
  study.directions = {"minimize"};
  auto id = m_store->createStudy(study).get();
  if (!id) qWarning("%s", id.message().c_str());
  m_studyId = id ? *id : 0;
  options.studyId = m_studyId;
  options.runsRoot = m_dir.filePath("runs");
  return std::make_unique<TrialRunner>(*m_store, experiment, space ? *space : search::SearchSpace{},
                                       options);
}

TrialOutcome TestTrialRunner::runOne(TrialRunner& runner, qint64 number,
                                     const search::TrialParams& params) {
  QSignalSpy finished(&runner, &TrialRunner::trialFinished);
  auto runId = runner.start(number, params);
  if (!runId) qWarning("%s", runId.message().c_str());
  if (!runId || !finished.wait(kDeadlineMs)) return {};
  return finished.takeFirst().at(0).value<TrialOutcome>();
}

// spec: `[search] program` makes [data] (and [model], [launch]) optional; without it
// data.train_path stays required.
void TestTrialRunner::programExperimentNeedsNoData() {
  const std::string space = "[search.space.x]\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n";
  VERIFY_OK(
      spec::parse_experiment("[search]\nprogram = [\"python3\", \"obj.py\"]\n" + space, "p.toml"));
  auto shardtrain = spec::parse_experiment(
      "[search]\nn_trials = 3\n[search.space.\"train.lr\"]\nlow = 1e-5\nhigh = 1e-3\n", "s.toml");
  QVERIFY(!shardtrain.ok());
  QVERIFY2(shardtrain.message().find("data.train_path") != std::string::npos,
           shardtrain.message().c_str());
}

// The contract: argv (%.17g floats, ints, bools, categoricals verbatim, inactive conditionals
// omitted), SHARDSCOPE_TRIAL, SHARDSCOPE_RUN_DIR = cwd; JSON lines without the envelope become
// numbered events, other lines and stderr become logs; the last done wins.
void TestTrialRunner::programContractAndEvents() {
  auto runner = makeRunner(programExperiment("contract", "\"--mode\", \"normal\""));
  const search::TrialParams params{
      {"x", 0.1}, {"n", std::int64_t{3}}, {"flag", true}, {"opt", std::string("b c")}};
  const TrialOutcome outcome = runOne(*runner, 7, params);
  QCOMPARE(int(outcome.state), int(TrialState::Complete));
  QCOMPARE(outcome.number, qint64{7});
  QCOMPARE(outcome.values.size(), std::size_t{1});
  const double expected = (0.1 - 2.0) * (0.1 - 2.0) + 3.0;
  QVERIFY2(std::abs(outcome.values[0] - expected) < 1e-12, "the last done's objective wins");
  QCOMPARE(outcome.intermediate.size(), std::size_t{3});
  QCOMPARE(outcome.intermediate.at(3), expected + 1.0 / 3.0);

  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto run = reader->run(outcome.runId);
  VERIFY_OK(run);
  QVERIFY(run->has_value());
  QCOMPARE((*run)->status, spec::RunStatus::complete);
  const QString runDir = (*run)->runDir;

  const QJsonObject received = readJson(QDir(runDir).filePath("received.json"));
  QStringList argv;
  for (const auto& a : received["argv"].toArray()) argv << a.toString();
  // In the space's order (TOML tables are unordered: the parser's order), cond omitted.
  const QMap<QString, QString> expectedArgs{{"x", "--x=0.10000000000000001"},
                                            {"n", "--n=3"},
                                            {"flag", "--flag=true"},
                                            {"opt", "--opt=b c"}};
  QStringList expectedArgv{"--mode", "normal"};
  for (const search::Param& p : runner->space().params) {
    const QString name = QString::fromStdString(p.name);
    if (expectedArgs.contains(name)) expectedArgv << expectedArgs[name];
  }
  QCOMPARE(expectedArgv.size(), 6);
  QCOMPARE(argv, expectedArgv);
  QCOMPARE(received["trial"].toString(), QStringLiteral("7"));
  QCOMPARE(QDir(received["cwd"].toString()).canonicalPath(), QDir(runDir).canonicalPath());
  QCOMPARE(QDir(received["run_dir"].toString()).canonicalPath(), QDir(runDir).canonicalPath());

  // Every normalised line is a strict protocol-v1 event, numbered in arrival order.
  auto events = reader->events(outcome.runId, 0);
  VERIFY_OK(events);
  QCOMPARE(events->size(), std::size_t{5});  // 3 eval + 2 done
  for (std::size_t i = 0; i < events->size(); ++i) {
    const QByteArray& json = (*events)[i].json;
    auto parsed = spec::parse_event(std::string_view(json.constData(), size_t(json.size())));
    QVERIFY2(parsed.ok(), json.constData());
    QCOMPARE(parsed->env.seq, std::int64_t(i));
    QVERIFY(std::isfinite(parsed->env.t));
  }
  auto anomalies = reader->anomalies(outcome.runId);
  VERIFY_OK(anomalies);
  QVERIFY(anomalies->empty());
  auto logs = reader->logLines(outcome.runId, 0);
  VERIFY_OK(logs);
  QStringList texts;
  for (const LogLine& line : *logs) texts << line.text;
  QVERIFY2(texts.contains("starting trial 7") && texts.contains("bye") &&
               texts.contains("a line on stderr"),
           qPrintable(texts.join(" | ")));
  auto evals = reader->metric(outcome.runId, "eval.objective");
  VERIFY_OK(evals);
  QCOMPARE(evals->size(), std::size_t{3});
}

void TestTrialRunner::nonZeroExitFails() {
  auto runner = makeRunner(programExperiment("exit3", "\"--mode\", \"exit3\""));
  const TrialOutcome outcome =
      runOne(*runner, 0, {{"x", 1.0}, {"n", std::int64_t{0}}, {"flag", true}, {"opt", "a"}});
  QCOMPARE(int(outcome.state), int(TrialState::Failed));
  QVERIFY2(outcome.error.contains("exited with code 3"), qPrintable(outcome.error));
  QVERIFY(outcome.values.empty());
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto run = reader->run(outcome.runId);
  VERIFY_OK(run);
  QCOMPARE((*run)->status, spec::RunStatus::failed);
}

void TestTrialRunner::abortWithoutDoneFails() {
  auto runner = makeRunner(programExperiment("abort", "\"--mode\", \"abort\""));
  const TrialOutcome outcome = runOne(*runner, 0,
                                      {{"x", 1.0},
                                       {"n", std::int64_t{0}},
                                       {"flag", false},
                                       {"cond", std::int64_t{2}},
                                       {"opt", "a"}});
  QCOMPARE(int(outcome.state), int(TrialState::Failed));
  QVERIFY2(outcome.error.contains(QString("signal %1").arg(SIGABRT)), qPrintable(outcome.error));
  QVERIFY2(outcome.error.contains("about to abort"), qPrintable(outcome.error));  // last words
}

void TestTrialRunner::nonFiniteObjectiveFails() {
  auto runner = makeRunner(programExperiment("nan", "\"--mode\", \"nan\""));
  const TrialOutcome outcome =
      runOne(*runner, 0, {{"x", 1.0}, {"n", std::int64_t{0}}, {"flag", true}, {"opt", "a"}});
  QCOMPARE(int(outcome.state), int(TrialState::Failed));
  QVERIFY2(outcome.error.contains("not finite"), qPrintable(outcome.error));
}

// A program that prints its `done` as its very last bytes (no newline) and exits at once
// must never be recorded failed on the way to complete. A trigger on the real run log records
// every status the runs table takes, so a failed that lasts one statement is seen too.
void TestTrialRunner::statusNeverFailsBeforeTheVerdict() {
  auto db = SqliteDb::open(m_dir.filePath("runs.db"));
  VERIFY_OK(db);
  VERIFY_OK(
      db->exec("CREATE TABLE IF NOT EXISTS test_status_log(run_id INTEGER, status TEXT);"
               "CREATE TRIGGER IF NOT EXISTS test_status_trail AFTER UPDATE OF status ON runs "
               "BEGIN INSERT INTO test_status_log VALUES (new.id, new.status); END;"));
  const QString path = m_dir.filePath("lastline.toml");
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(R"([experiment]
name = "lastline"
[search]
program = ["/bin/sh", "-c", "printf '{\"ev\":\"eval\",\"step\":1,\"metrics\":{\"objective\":2}}\\n{\"ev\":\"done\",\"status\":\"complete\",\"objective\":1.5}'"]
objectives = {objective = "minimize"}
[search.space.x]
type = "float"
low = 0.0
high = 1.0
)");
  file.close();
  auto runner = makeRunner(path);
  constexpr int kTrials = 12;
  QList<qint64> runIds;
  for (int n = 0; n < kTrials; ++n) {
    const TrialOutcome outcome = runOne(*runner, n, {{"x", 0.5}});
    QVERIFY2(outcome.state == TrialState::Complete, qPrintable(outcome.error));
    QCOMPARE(outcome.values, std::vector<double>{1.5});
    runIds << outcome.runId;
  }
  auto seen = db->prepare(
      "SELECT run_id, group_concat(status, ' ') FROM test_status_log GROUP BY run_id ORDER BY "
      "run_id");
  VERIFY_OK(seen);
  int rows = 0;
  for (auto row = seen->step(); row && *row; row = seen->step()) {
    if (!runIds.contains(seen->columnInt64(0))) continue;
    ++rows;
    const QString trail = QString::fromStdString(seen->columnText(1));
    QVERIFY2(
        !trail.contains("failed") && trail.endsWith("complete"),
        qPrintable(QStringLiteral("run %1 went through: %2").arg(seen->columnInt64(0)).arg(trail)));
  }
  QCOMPARE(rows, kTrials);
}

// A retry of a failed trial runs in a fresh folder and is followed from byte 0 of its own files.
// The run monitor restored the failed attempt's read offsets, seq and events: it skipped the
// retry's first bytes (the failed attempt wrote more), so the retry's `done` was never stored and
// a complete retry was judged failed ("ended without a done event"). Nothing of the failed attempt
// is lost: its events and log lines stay in the run log under attempt 0.
void TestTrialRunner::retryReadsItsOwnFilesFromTheStart() {
  const QString markers = m_dir.filePath("fail-once");
  QVERIFY(QDir().mkpath(markers));
  auto runner = makeRunner(programExperiment(
      "retry", QStringLiteral("\"--mode\", \"fail_once\", \"--meet\", \"%1\"").arg(markers)));
  const search::TrialParams params{
      {"x", 1.0}, {"n", std::int64_t{2}}, {"flag", true}, {"opt", std::string("a")}};
  const TrialOutcome failed = runOne(*runner, 0, params);
  QCOMPARE(int(failed.state), int(TrialState::Failed));
  auto claimed = m_store->claimTrial(m_studyId, 1).get();
  VERIFY_OK(claimed);
  QVERIFY(claimed->has_value());
  QCOMPARE((*claimed)->runId, failed.runId);

  QSignalSpy finished(runner.get(), &TrialRunner::trialFinished);
  VERIFY_OK(runner->start(0, params, failed.runId));
  QVERIFY(finished.wait(kDeadlineMs));
  const auto retried = finished.takeFirst().at(0).value<TrialOutcome>();
  QVERIFY2(retried.state == TrialState::Complete, qPrintable(retried.error));
  QCOMPARE(retried.values, std::vector<double>{3.0});  // (1 - 2)^2 + 2

  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto run = reader->run(failed.runId);
  VERIFY_OK(run);
  QCOMPARE((*run)->attempt, 1);
  QVERIFY2((*run)->runDir.endsWith("trial-0-retry-1"), qPrintable((*run)->runDir));
  auto events = reader->events(failed.runId, 0);
  VERIFY_OK(events);
  std::map<int, int> perAttempt;
  for (const EventRow& row : *events) ++perAttempt[row.attempt];
  QCOMPARE(perAttempt[0], 20);  // the failed attempt's evals, kept
  QCOMPARE(perAttempt[1], 5);   // the retry's 3 evals and 2 done, from its first byte
  auto seq = reader->maxSeq(failed.runId, 0);
  VERIFY_OK(seq);
  QCOMPARE(*seq, qint64{4});
  auto anomalies = reader->anomalies(failed.runId);
  VERIFY_OK(anomalies);
  QVERIFY2(anomalies->empty(), "the retry's seq starts again at 0: no repeat, no gap");
  auto logs = reader->logLines(failed.runId, 0);
  VERIFY_OK(logs);
  QStringList texts;
  for (const LogLine& line : *logs) texts << line.text;
  QVERIFY2(texts.contains("starting trial 0") && !texts.contains("first attempt of trial 0 fails"),
           qPrintable(texts.join(" | ")));
}

// A program that ignores SIGTERM: the prune sends SIGTERM (it logs it), then SIGKILL after
// stop_grace_s ends it; the run is recorded as pruned with its intermediate values.
void TestTrialRunner::pruneSendsSigtermThenSigkill() {
  auto runner =
      makeRunner(programExperiment("prune", "\"--mode\", \"ignore_term\"", "stop_grace_s = 0.5\n"));
  QCOMPARE(runner->space().stop_grace_s, 0.5);
  QList<qint64> asked;
  runner->setPruneCallback([&](qint64 number, qint64 step, double) {
    asked << step;
    return number == 4 && step >= 3;
  });
  const TrialOutcome outcome =
      runOne(*runner, 4, {{"x", 1.0}, {"n", std::int64_t{0}}, {"flag", true}, {"opt", "a"}});
  QCOMPARE(int(outcome.state), int(TrialState::Pruned));
  QVERIFY(asked.contains(3));
  QVERIFY(outcome.intermediate.count(3) == 1);
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto run = reader->run(outcome.runId);
  VERIFY_OK(run);
  QCOMPARE((*run)->status, spec::RunStatus::pruned);
  const QJsonObject received = readJson(QDir((*run)->runDir).filePath("received.json"));
  QVERIFY(processGone(received["pid"].toInteger()));
  auto logs = reader->logLines(outcome.runId, 0);
  VERIFY_OK(logs);
  bool sawTerm = false;
  for (const LogLine& line : *logs) sawTerm = sawTerm || line.text.contains("got SIGTERM");
  QVERIFY2(sawTerm, "SIGTERM came first, and the program outlived it");
}

// A tiny-model shardtrain experiment whose estimate exceeds the budget: infeasible, no process.
void TestTrialRunner::infeasibleNeverLaunches() {
  const QString path = m_dir.filePath("infeasible.toml");
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(R"([experiment]
name = "infeasible"
[data]
train_path = "nowhere/train.jsonl"
[launch]
nproc_per_node = 2
trainer = "/bin/false"
[search]
objectives = {"eval.loss" = "minimize"}
[search.space."train.lr"]
type = "float"
low = 1e-4
high = 1e-2
log = true
)");
  file.close();
  QVERIFY(QDir().mkpath(m_dir.filePath("nowhere")));
  QFile data(m_dir.filePath("nowhere/train.jsonl"));
  QVERIFY(data.open(QIODevice::WriteOnly));
  data.write("{\"input_ids\":[1,2,3]}\n");
  data.close();
  TrialRunner::Options options;
  options.deviceBudgetBytes = 64 * 1024;  // far below any estimate
  auto runner = makeRunner(path, options);
  const TrialOutcome outcome = runOne(*runner, 0, {{"train.lr", 1e-3}});
  QCOMPARE(int(outcome.state), int(TrialState::Infeasible));
  QVERIFY2(outcome.error.contains("memory estimate") && outcome.error.contains("0.1 MiB"),
           qPrintable(outcome.error));
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto run = reader->run(outcome.runId);
  VERIFY_OK(run);
  QCOMPARE((*run)->status, spec::RunStatus::infeasible);
  QVERIFY(!QFile::exists(QDir((*run)->runDir).filePath("events-rank-0.jsonl")));
  QVERIFY((*run)->location.isEmpty());  // never launched
}

// concurrency = 2 on 2 cores: each `meet` trial completes only if another trial's process has
// started while it runs; the third waits in the queue until a slot frees.
void TestTrialRunner::schedulerRunsTwoAtOnce() {
  const QString meet = m_dir.filePath("meet");
  QVERIFY(QDir().mkpath(meet));
  auto runner = makeRunner(programExperiment(
      "meet", QStringLiteral("\"--mode\", \"meet\", \"--meet\", \"%1\"").arg(meet),
      "concurrency = 2\n"));
  {
    Scheduler oneCore(*runner, 1);
    QCOMPARE(oneCore.slotCount(), 1);  // 1 core / 1 rank per trial
  }
  Scheduler scheduler(*runner, 2);
  QCOMPARE(scheduler.slotCount(), 2);
  QStringList order;
  int maxRunning = 0;
  connect(runner.get(), &TrialRunner::trialStarted, this, [&](qint64 number, qint64) {
    order << QStringLiteral("start %1").arg(number);
    maxRunning = std::max(maxRunning, scheduler.running());
  });
  QList<TrialOutcome> outcomes;
  connect(&scheduler, &Scheduler::trialFinished, this, [&](const TrialOutcome& o) {
    order << QStringLiteral("end %1").arg(o.number);
    outcomes << o;
  });
  QSignalSpy drained(&scheduler, &Scheduler::drained);
  for (qint64 n = 0; n < 3; ++n) {
    scheduler.enqueue(n, {{"x", double(n)}, {"n", std::int64_t{1}}, {"flag", true}, {"opt", "a"}});
  }
  QCOMPARE(scheduler.running(), 2);
  QCOMPARE(scheduler.queued(), 1);
  QVERIFY(drained.wait(kDeadlineMs));
  QCOMPARE(outcomes.size(), 3);
  for (const TrialOutcome& o : outcomes) {
    QVERIFY2(o.state == TrialState::Complete, qPrintable(o.error));
  }
  QCOMPARE(maxRunning, 2);
  QCOMPARE(order.mid(0, 2), (QStringList{"start 0", "start 1"}));
  QVERIFY2(order.indexOf("start 2") > order.indexOf(QRegularExpression("end .")),
           qPrintable(order.join(", ")));
  // Two different processes were alive at once (each saw the other's start file).
  const QString pid0 = QString::fromUtf8([&] {
    QFile f(QDir(meet).filePath("start-0"));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }());
  const QString pid1 = QString::fromUtf8([&] {
    QFile f(QDir(meet).filePath("start-1"));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }());
  QVERIFY(!pid0.isEmpty() && !pid1.isEmpty());
  QVERIFY(pid0.section(' ', 0, 0) != pid1.section(' ', 0, 0));
}

// One shardtrain trial: the tiny demo model, 2 ranks, 6 steps, eval every 3: the objective is
// eval.loss at the last evaluation, and each evaluation reached the prune callback.
void TestTrialRunner::shardtrainTrialObjectiveFromEval() {
  const QString shardtrain = qEnvironmentVariable("SHARDSCOPE_SHARDTRAIN");
  if (!QFileInfo(shardtrain).isExecutable()) QSKIP("SHARDSCOPE_SHARDTRAIN names no shardtrain");
  const QString path = m_dir.filePath("tiny.toml");
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(testing::tinyDemoExperiment("demo", "tiny-data") + R"([train]
max_steps = 6
batch_size = 8
ckpt_at_end = false
[eval]
every = 3
batches = 1
[launch]
nproc_per_node = 2
[search]
objectives = {"eval.loss" = "minimize"}
[search.space."train.lr"]
type = "float"
low = 1e-3
high = 1e-1
log = true
)");
  file.close();
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  auto exp = spec::load_experiment(path.toStdString(), {}, noPaths);
  VERIFY_OK(exp);
  VERIFY_OK(writeDemoData(*exp, 64));
  TrialRunner::Options options;
  options.trainer = shardtrain;
  auto runner = makeRunner(path, options);
  QCOMPARE(runner->ranksPerTrial(), 2);
  QList<qint64> evalSteps;
  runner->setPruneCallback([&](qint64, qint64 step, double) {
    evalSteps << step;
    return false;
  });
  const TrialOutcome outcome = runOne(*runner, 0, {{"train.lr", 1e-2}});
  QVERIFY2(outcome.state == TrialState::Complete, qPrintable(outcome.error));
  QCOMPARE(evalSteps, (QList<qint64>{3, 6}));
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto evals = reader->metric(outcome.runId, "eval.loss");
  VERIFY_OK(evals);
  QVERIFY(!evals->empty());
  QCOMPARE(evals->back().step, qint64{6});
  QCOMPARE(outcome.values, std::vector<double>{evals->back().value});
  QVERIFY(std::isfinite(outcome.values[0]));
  auto run = reader->run(outcome.runId);
  VERIFY_OK(run);
  QCOMPARE((*run)->status, spec::RunStatus::complete);
  QVERIFY(QFile::exists(QDir((*run)->runDir).filePath("events-rank-1.jsonl")));
  // The trial's value reached the trainer through the override.
  auto trialExp =
      spec::load_experiment(QDir((*run)->runDir).filePath("trial.toml").toStdString(), {}, noPaths);
  VERIFY_OK(trialExp);
  QCOMPARE(trialExp->train.lr, 1e-2);
}

QTEST_GUILESS_MAIN(TestTrialRunner)
#include "tst_trialrunner.moc"
