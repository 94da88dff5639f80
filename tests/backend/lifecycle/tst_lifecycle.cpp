// RunLifecycle (backend/lifecycle/runlifecycle.h) with real processes and a real run log: a run
// of the fake trainer (2 local ranks) started detached is followed to its end by the real
// `shardscope-cli supervise`, which holds the run's lease; a stop by id ends a detached run
// `stopped`; a supervisor killed with SIGKILL is replaced by adoptOrphans and the new one follows
// the run to its end without losing a row; a run launched and followed in this process reports
// its steps; an experiment with [search] starts `shardscope-cli sweep` in its own session; a
// sweep process killed with SIGKILL is seen as gone (its study's stamp names a dead pid) and
// adoptSweep starts it again, which reattaches the trial left running and finishes the study.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>

#include <QDir>
#include <QFile>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTest>

#include "backend/lifecycle/runlifecycle.h"
#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "spec/events.h"
#include "tests/support/experiment.h"
#include "tests/support/files.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using backend::RunLifecycle;

using shardscope::testing::alive;

namespace {

const QString kCli =
    shardscope::testing::envPath("SHARDSCOPE_TEST_CLI", "the shardscope-cli executable");
const QString kFake =
    shardscope::testing::envPath("SHARDSCOPE_TEST_FAKETRAINER", "the faketrainer executable");

constexpr int kWaitMs = 60000;  // generous: the machine is shared and loaded

}  // namespace

class TestLifecycle : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  std::unique_ptr<backend::RunStore> m_store;

  QString db() const { return m_dir.filePath("runs.db"); }

  RunLifecycle lifecycle() const {
    RunLifecycle::Settings settings;
    settings.dbPath = db();
    settings.supervisor = kCli;
    return RunLifecycle(settings);
  }

  QString writeExperiment(const QString& name) {
    testing::TinyExperiment e;
    e.name = name;
    e.trainer = kFake;
    return testing::writeExperiment(m_dir.path(), e);
  }

  // Starts `name` detached with the fake trainer in `mode`; fails the test on an error.
  backend::StartedRun startDetached(const QString& name, const QByteArray& mode) {
    qputenv("SHARDSCOPE_FAKE_MODE", mode);
    const RunLifecycle life = lifecycle();
    const QString path = writeExperiment(name);
    auto exp = life.loadForRun(path, {});
    if (!exp) qFatal("%s", exp.message().c_str());
    auto started = life.startDetached(*m_store, *exp, path, {});
    if (!started) qFatal("%s", started.message().c_str());
    return *started;
  }

  backend::RunReader reader() {
    auto r = backend::RunReader::open(db());
    if (!r) qFatal("%s", r.message().c_str());
    return std::move(r).value();
  }

  QString status(qint64 runId) {
    backend::RunReader r = reader();
    auto run = r.run(runId);
    if (!run || !*run) return QStringLiteral("(missing)");
    return QString::fromUtf8(spec::to_string((*run)->status));
  }

  backend::StudyRecord study(const QString& name) {
    backend::RunReader r = reader();
    auto found = r.studyByName(name);
    return found && *found ? **found : backend::StudyRecord{};
  }

  bool fed(const QString& name) {
    return backend::RunStore::sweepAlive(study(name), QSysInfo::machineHostName(),
                                         backend::RunStore::kSweepStaleS);
  }

  // Trials of study `name` with status `status`.
  int trialsWith(const QString& name, spec::RunStatus status) {
    backend::RunReader r = reader();
    auto trials = r.trials(study(name).id);
    if (!trials) return -1;
    return int(std::count_if(trials->begin(), trials->end(),
                             [status](const backend::RunRecord& t) { return t.status == status; }));
  }

  // Running trials whose ranks were started (a stored location): a trial row says running from
  // its claim, before its ranks start.
  int launchedTrials(const QString& name) {
    backend::RunReader r = reader();
    auto trials = r.trials(study(name).id);
    if (!trials) return -1;
    return int(std::count_if(trials->begin(), trials->end(), [](const backend::RunRecord& t) {
      return t.status == spec::RunStatus::running && !t.location.isEmpty();
    }));
  }

  qint64 leaseHolder(qint64 runId) {
    backend::RunReader r = reader();
    auto lease = r.lease(runId);
    return lease && *lease ? (*lease)->pid : 0;
  }

  qint64 lossRows(qint64 runId) {
    backend::RunReader r = reader();
    auto rows = r.metric(runId, QStringLiteral("loss"));
    return rows ? qint64(rows->size()) : 0;
  }

  // Step events rank `rank` wrote to its events file.
  int fileSteps(const QString& runDir, int rank) {
    return int(
        testing::readAll(QDir(runDir).filePath(QStringLiteral("events-rank-%1.jsonl").arg(rank)))
            .count("\"ev\":\"step\""));
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    auto store = backend::RunStore::open(db());
    QVERIFY2(store.ok(), store.ok() ? "" : store.message().c_str());
    m_store = std::move(*store);
  }

  void runsRootIsBesideTheRunLog() {
    QCOMPARE(RunLifecycle::runsRootFor("/x/runs.db"), QStringLiteral("/x/runs"));
    QCOMPARE(RunLifecycle::runsRootFor("/x/a.db"), QStringLiteral("/x/a-runs"));
    QCOMPARE(lifecycle().settings().runsRoot, m_dir.filePath("runs"));
  }

  void detachedRunIsSupervisedToItsEnd() {
    const backend::StartedRun run = startDetached("solo", "--steps 40 --step-ms 50");
    QVERIFY(run.id > 0);
    QVERIFY2(run.warning.empty(), run.warning.c_str());
    QCOMPARE(run.runDir, QDir(m_dir.filePath("runs")).filePath(run.name));
    QVERIFY(QFile::exists(QDir(run.runDir).filePath("trial.toml")));
    // The start returns once the supervisor holds the lease.
    QVERIFY(run.supervisorPid > 0);
    QCOMPARE(leaseHolder(run.id), run.supervisorPid);
    QTRY_COMPARE_WITH_TIMEOUT(status(run.id), QStringLiteral("complete"), kWaitMs);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(run.supervisorPid), 30000);  // it ends with the run
    QVERIFY(testing::readAll(QDir(run.runDir).filePath("supervisor.log")).contains("supervising"));
    QCOMPARE(lossRows(run.id), qint64(fileSteps(run.runDir, 0) + fileSteps(run.runDir, 1)));
    QCOMPARE(fileSteps(run.runDir, 0), 40);
    // Owner-only (issue 29, item 7): the run directory 0700, the supervisor's and the ranks'
    // output 0600, as created (the supervisor and ranks may echo secrets).
    const auto mode = [](const QString& path) {
      struct stat st {};
      return ::stat(QFile::encodeName(path).constData(), &st) == 0 ? (st.st_mode & 07777) : 0xFFFFU;
    };
    QCOMPARE(mode(run.runDir), 0700U);
    for (const char* name : {"supervisor.log", "rank-0.log", "rank-1.log", "events-rank-0.jsonl",
                             "events-rank-1.jsonl"})
      QCOMPARE(mode(QDir(run.runDir).filePath(name)), 0600U);
  }

  void stopEndsADetachedRunStopped() {
    const backend::StartedRun run = startDetached("stopme", "--steps 100000");
    QTRY_VERIFY_WITH_TIMEOUT(lossRows(run.id) > 0, kWaitMs);
    QObject context;  // the handle lives here for the grace period (its SIGKILL timer)
    const Result<void> stopped = lifecycle().stop(&context, run.id, 5);
    QVERIFY2(stopped.ok(), stopped.ok() ? "" : stopped.message().c_str());
    QTRY_COMPARE_WITH_TIMEOUT(status(run.id), QStringLiteral("stopped"), kWaitMs);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(run.supervisorPid), 30000);
    // An id the run log does not have is an error that names it.
    const Result<void> unknown = lifecycle().stop(&context, 999999, 5);
    QVERIFY(!unknown.ok());
    QVERIFY2(unknown.message().find("999999") != std::string::npos, unknown.message().c_str());
  }

  void killedSupervisorIsAdoptedAndTheRunEnds() {
    const backend::StartedRun run = startDetached("orphan", "--steps 150 --step-ms 60");
    QTRY_VERIFY_WITH_TIMEOUT(lossRows(run.id) >= 10, kWaitMs);
    QCOMPARE(::kill(pid_t(run.supervisorPid), SIGKILL), 0);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(run.supervisorPid), 10000);
    // The ranks keep running with nobody following them: adoptOrphans starts a new supervisor
    // that takes the lease and catches up from the stored offsets.
    backend::RunReader r = reader();
    auto runs = r.listRuns();
    QVERIFY(runs.ok());
    const std::vector<backend::Adoption> adopted = lifecycle().adoptOrphans(r, *runs);
    QCOMPARE(adopted.size(), std::size_t(1));
    QCOMPARE(adopted[0].runId, run.id);
    QVERIFY2(adopted[0].error.empty(), adopted[0].error.c_str());
    const qint64 second = adopted[0].supervisorPid;
    QVERIFY(second > 0 && second != run.supervisorPid);
    QTRY_COMPARE_WITH_TIMEOUT(leaseHolder(run.id), second, kWaitMs);
    QTRY_COMPARE_WITH_TIMEOUT(status(run.id), QStringLiteral("complete"), kWaitMs);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(second), 30000);
    QCOMPARE(fileSteps(run.runDir, 0), 150);
    QCOMPARE(lossRows(run.id), qint64(fileSteps(run.runDir, 0) + fileSteps(run.runDir, 1)));
    // A followed or final run is not adopted again.
    auto after = r.listRuns();
    QVERIFY(after.ok());
    QVERIFY(lifecycle().adoptOrphans(r, *after).empty());
  }

  // A stopped run goes on from its newest complete checkpoint as a new attempt in its own
  // folder, followed by a new supervisor; the loss curve is one curve, each step once.
  void stoppedRunResumesFromItsCheckpoint() {
    const backend::StartedRun run =
        startDetached("resumable", "--steps 60 --step-ms 40 --ckpt-every 5");
    const auto checkpoint = [&](int attempt) -> qint64 {
      backend::RunReader r = reader();
      auto point = r.resumePoint(run.id, attempt);
      return point && *point ? (*point)->step : -1;
    };
    QTRY_VERIFY_WITH_TIMEOUT(checkpoint(0) >= 10, kWaitMs);
    // Resuming a run that is still running is refused, and starts nothing.
    auto early = lifecycle().resumeDetached(*m_store, run.id);
    QVERIFY(!early.ok());
    QVERIFY2(early.message().find("is running") != std::string::npos, early.message().c_str());
    QObject context;
    QVERIFY(lifecycle().stop(&context, run.id, 5).ok());
    QTRY_COMPARE_WITH_TIMEOUT(status(run.id), QStringLiteral("stopped"), kWaitMs);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(run.supervisorPid), 30000);
    const qint64 k = checkpoint(0);
    QVERIFY(k >= 10 && k < 60);

    auto resumed = lifecycle().resumeDetached(*m_store, run.id);
    QVERIFY2(resumed.ok(), resumed.ok() ? "" : resumed.message().c_str());
    QCOMPARE(resumed->runDir, run.runDir + "-resume-1");
    QVERIFY(resumed->supervisorPid > 0 && resumed->supervisorPid != run.supervisorPid);
    QTRY_COMPARE_WITH_TIMEOUT(status(run.id), QStringLiteral("complete"), kWaitMs);
    backend::RunReader r = reader();
    QCOMPARE((*r.run(run.id))->attempt, 1);
    // The new attempt's first step is k + 1, and rank 0's curve holds steps 1..60 once each.
    auto events = r.events(run.id, 0);
    QVERIFY(events.ok());
    qint64 firstStep = -1;
    for (const backend::EventRow& row : *events) {
      if (row.attempt != 1 || row.kind != QLatin1String("step") || firstStep >= 0) continue;
      auto event =
          spec::parse_event(std::string_view(row.json.constData(), size_t(row.json.size())));
      QVERIFY(event.ok());
      firstStep = std::get<spec::StepEvent>(event->body).step;
    }
    QCOMPARE(firstStep, k + 1);
    auto loss = r.metric(run.id, QStringLiteral("loss"));
    QVERIFY(loss.ok());
    std::vector<qint64> steps;
    for (const backend::MetricPoint& p : *loss)
      if (p.rank == 0) steps.push_back(p.step);
    QCOMPARE(steps.size(), std::size_t(60));
    for (std::size_t i = 0; i < steps.size(); ++i) QCOMPARE(steps[i], qint64(i + 1));

    // A complete run is not resumed; the message says what is.
    auto again = lifecycle().resumeDetached(*m_store, run.id);
    QVERIFY(!again.ok());
    QVERIFY2(again.message().find("only a stopped, failed or oom run") != std::string::npos,
             again.message().c_str());
  }

  void launchedRunIsFollowedInThisProcess() {
    qputenv("SHARDSCOPE_FAKE_MODE", "--steps 12 --step-ms 20");
    const RunLifecycle life = lifecycle();
    const QString path = writeExperiment("attached");
    auto exp = life.loadForRun(path, {});
    QVERIFY2(exp.ok(), exp.ok() ? "" : exp.message().c_str());
    auto launched = life.launch(*m_store, *exp, path, {});
    QVERIFY2(launched.ok(), launched.ok() ? "" : launched.message().c_str());
    QCOMPARE(status(launched->run.id), QStringLiteral("running"));
    backend::FollowOptions options;
    options.maxSteps = 12;
    qint64 lastStep = 0;
    options.onStep = [&](const backend::FollowProgress& p) { lastStep = p.step; };
    options.location = launched->location;
    auto outcome = RunLifecycle::follow(*m_store, *launched->handle, launched->run.id, options);
    QVERIFY2(outcome.ok(), outcome.ok() ? "" : outcome.message().c_str());
    QVERIFY(outcome->followed);
    auto reader = m_store->reader();
    VERIFY_OK(reader);
    auto followed = reader->run(launched->run.id);
    VERIFY_OK(followed);
    QVERIFY(followed->has_value());
    QCOMPARE((*followed)->location, launched->location);  // recorded once the lease was held
    QCOMPARE(outcome->status, spec::RunStatus::complete);
    QCOMPARE(lastStep, qint64(12));
    // A run without a location has nothing to attach to, and says so.
    backend::RunRecord never = launched->run;
    never.location = {};
    auto handle = RunLifecycle::attach(never);
    QVERIFY(!handle.ok());
    QVERIFY2(handle.message().find("no recorded location") != std::string::npos,
             handle.message().c_str());
  }

  void invalidExperimentIsTheExperimentsError() {
    const QString path = m_dir.filePath("bad.toml");
    QVERIFY(testing::writeAll(path, "[experiment]\nname = \"bad\"\n[train]\nmax_steps = -1\n"));
    backend::LoadReport report;
    auto exp = lifecycle().loadForRun(path, {}, &report);
    QVERIFY(!exp.ok());
    QVERIFY(report.invalid);
  }

  void missingSupervisorStartsNothing() {
    RunLifecycle::Settings settings = lifecycle().settings();
    settings.supervisor = m_dir.filePath("no-such-cli");
    const RunLifecycle life(settings);
    const QString path = writeExperiment("nosup");
    auto exp = life.loadForRun(path, {});
    QVERIFY2(exp.ok(), exp.ok() ? "" : exp.message().c_str());
    auto started = life.startDetached(*m_store, *exp, path, {});
    QVERIFY(!started.ok());
    QVERIFY2(started.message().find("no-such-cli") != std::string::npos, started.message().c_str());
    // No run row and no run directory: nothing was started.
    auto reader = backend::RunReader::open(db());
    QVERIFY(reader.ok());
    auto runs = reader->listRuns();
    QVERIFY(runs.ok());
    for (const backend::RunRecord& run : *runs)
      QVERIFY2(!run.name.startsWith("nosup"), qPrintable(run.name));
    const QStringList dirs = QDir(m_dir.filePath("runs")).entryList({"nosup-*"}, QDir::Dirs);
    QVERIFY2(dirs.isEmpty(), qPrintable(dirs.join(", ")));
  }

  void experimentWithSearchStartsASweep() {
    const QString dir = m_dir.filePath("sweep");
    QVERIFY(QDir().mkpath(dir));
    const QString path = testing::writeQuadSweep(dir, 2);
    QVERIFY(!path.isEmpty());
    // Whether a file is a sweep is read from the parsed experiment (the dashboard's Launch).
    spec::LoadOptions noPaths;
    noPaths.check_paths = false;
    auto search = spec::load_experiment(path.toStdString(), {}, noPaths);
    QVERIFY2(search.ok(), search.ok() ? "" : search.message().c_str());
    QVERIFY(search->search.present);
    auto noSearch = spec::load_experiment(writeExperiment("plain").toStdString(), {}, noPaths);
    QVERIFY(noSearch.ok() && !noSearch->search.present);

    auto sweep = lifecycle().startSweep(path);
    QVERIFY2(sweep.ok(), sweep.ok() ? "" : sweep.message().c_str());
    QCOMPARE(sweep->study, QStringLiteral("quadstudy"));
    QVERIFY(sweep->pid > 0);
    QVERIFY2(sweep->logPath.startsWith(m_dir.filePath("runs/sweep-quadstudy-")),
             qPrintable(sweep->logPath));
    QTRY_VERIFY_WITH_TIMEOUT(!alive(sweep->pid), 120000);
    const QByteArray log = testing::readAll(sweep->logPath);
    QVERIFY2(log.contains("study quadstudy finished: 2 complete"), log.constData());
    backend::RunReader r = reader();
    auto runs = r.listRuns();
    QVERIFY(runs.ok());
    int trials = 0;
    for (const backend::RunRecord& run : *runs) {
      if (!run.studyId) continue;
      ++trials;
      QCOMPARE(run.status, spec::RunStatus::complete);
    }
    QCOMPARE(trials, 2);
  }

  // A sweep whose process died is shown as such and adopted in one call. The sweep runs 3
  // trials of the fake trainer one at a time; it is killed while trial 0 runs.
  void killedSweepIsSeenAndAdopted() {
    const QString dir = m_dir.filePath("adopt");
    QVERIFY(QDir().mkpath(dir));
    testing::TinyExperiment e;
    e.name = QStringLiteral("adopted");
    e.trainer = kFake;
    e.tables =
        "[search]\nname = \"adoptme\"\nsampler = \"random\"\nseed = 2\nn_trials = 3\n"
        "concurrency = 1\nobjectives = {objective = \"minimize\"}\n"
        "[search.space.\"train.lr\"]\ntype = \"float\"\nlow = 1e-4\nhigh = 1e-2\nlog = true\n";
    const QString path = testing::writeExperiment(dir, e);
    QVERIFY(!path.isEmpty());
    // 15 s a trial: trial 0 must still run when the adopting process starts, which on a loaded
    // machine came after a 3.6 s trial had ended (two test jobs beside a fuzzer), and once after
    // an 8 s one (tst_monitor_chaos beside it): the adopter then retried it instead.
    qputenv("SHARDSCOPE_FAKE_MODE", "--steps 150 --step-ms 100");
    const QString name = QStringLiteral("adoptme");
    auto sweep = lifecycle().startSweep(path);
    QVERIFY2(sweep.ok(), sweep.ok() ? "" : sweep.message().c_str());
    // The sweep stamps its study; while it lives there is nothing to adopt.
    QTRY_COMPARE_WITH_TIMEOUT(study(name).sweepPid, sweep->pid, kWaitMs);
    QVERIFY(fed(name));
    // Killed once trial 0's ranks run (killed before, the trial is lost and retried: nothing
    // of it was started); the kill may still come before its follower holds the run's lease.
    QTRY_VERIFY_WITH_TIMEOUT(launchedTrials(name) == 1, kWaitMs);
    {
      backend::RunReader r = reader();
      auto refused = lifecycle().adoptSweep(r, study(name).id);
      QVERIFY(!refused.ok());
      QVERIFY2(refused.message().find("is fed by process") != std::string::npos,
               refused.message().c_str());
    }
    QCOMPARE(::kill(pid_t(sweep->pid), SIGKILL), 0);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(sweep->pid), 10000);
    QVERIFY(!fed(name));  // the stamp names a dead pid of this machine
    QCOMPARE(study(name).status, backend::StudyStatus::running);
    // The trial left running belongs to its sweep: no supervisor takes it over.
    backend::RunReader r = reader();
    auto runs = r.listRuns();
    QVERIFY(runs.ok());
    QVERIFY(lifecycle().adoptOrphans(r, *runs).empty());
    auto adopted = lifecycle().adoptSweep(r, study(name).id);
    QVERIFY2(adopted.ok(), adopted.ok() ? "" : adopted.message().c_str());
    QCOMPARE(adopted->study, name);
    QVERIFY(adopted->pid > 0 && adopted->pid != sweep->pid);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(adopted->pid), 180000);
    const QByteArray log = testing::readAll(adopted->logPath);
    QVERIFY2(log.contains("trial 0 reattached"), log.constData());
    QVERIFY2(log.contains("study adoptme finished: 3 complete"), log.constData());
    QCOMPARE(trialsWith(name, spec::RunStatus::complete), 3);
    QCOMPARE(study(name).status, backend::StudyStatus::complete);
    QCOMPARE(study(name).sweepPid, qint64(0));  // cleared by the process that ended it
    auto ended = lifecycle().adoptSweep(r, study(name).id);
    QVERIFY(!ended.ok());
    QVERIFY2(ended.message().find("has ended") != std::string::npos, ended.message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestLifecycle)
#include "tst_lifecycle.moc"
