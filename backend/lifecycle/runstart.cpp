// Starting runs: load and validate the experiment, create the run row, write trial.toml, start
// the ranks; a detached run is handed to its supervisor, an experiment with [search] to a sweep.
#include <QDateTime>
#include <QDeadlineTimer>
#include <QDir>
#include <QFileInfo>
#include <QSaveFile>
#include <QSysInfo>
#include <QThread>

#include <algorithm>

#include "backend/launch/demodata.h"
#include "backend/launch/launchers.h"
#include "backend/lifecycle/runlifecycle.h"
#include "backend/lifecycle/sessionprocess.h"
#include "spec/experiment_query.h"
#include "spec/search_space.h"

namespace shardscope::backend {

namespace {

// A failure of the experiment itself (bad input): the CLI exits 2 on these.
Error invalid(LoadReport* report, std::string message) {
  if (report) report->invalid = true;
  return fail(std::move(message));
}

QJsonObject overridesAsParams(const std::vector<std::string>& overrides) {
  QJsonObject params;
  for (const auto& o : overrides) {
    const QString text = QString::fromStdString(o);
    const qsizetype eq = text.indexOf('=');
    if (eq <= 0) continue;
    const QString value = text.mid(eq + 1).trimmed();
    bool numeric = false;
    const double number = value.toDouble(&numeric);
    params[text.left(eq).trimmed()] = numeric ? QJsonValue(number) : QJsonValue(value);
  }
  return params;
}

Result<void> writeTrial(const RunRecord& run, const spec::Experiment& exp) {
  if (!makeRunDir(run.runDir)) {
    return fail("cannot create the run directory " + run.runDir.toStdString());
  }
  QSaveFile file(QDir(run.runDir).filePath("trial.toml"));
  if (!file.open(QIODevice::WriteOnly) ||
      file.write(QByteArray::fromStdString(spec::write_experiment_toml(exp))) < 0 ||
      !file.commit()) {
    return fail("cannot write trial.toml in " + run.runDir.toStdString() + ": " +
                file.errorString().toStdString());
  }
  return ok();
}

// The supervisor must exist before ranks start: a run whose supervisor cannot run would go on
// with nobody following it until an `ls` adopted it (with the same missing executable).
Result<void> checkSupervisor(const QString& supervisor) {
  if (QFileInfo(supervisor).isExecutable()) return ok();
  return fail("the supervisor " + supervisor.toStdString() +
              " is not an executable; shardscope-cli is built beside shardscope");
}

}  // namespace

Result<spec::Experiment> RunLifecycle::loadForRun(const QString& path,
                                                  const std::vector<std::string>& overrides,
                                                  LoadReport* report) const {
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  auto exp = spec::load_experiment(path.toStdString(), overrides, noPaths);
  if (!exp) return invalid(report, exp.message());
  return prepareForRun(std::move(*exp), report);
}

Result<spec::Experiment> RunLifecycle::prepareForRun(spec::Experiment shape,
                                                     LoadReport* report) const {
  spec::Experiment exp = std::move(shape);
  const std::string file = exp.source;
  const bool local = exp.launch.kind == spec::LaunchKind::local;
  if (local) {
    auto written = ensureDemoData(exp);
    if (!written) return written.error();
    if (*written && report) report->demoDataWritten = QString::fromStdString(exp.data.train_path);
    if (auto paths = spec::check_experiment_paths(exp); !paths)
      return invalid(report, paths.message());
  }
  auto valid = spec::validate_for_launch(exp);
  if (!valid) return invalid(report, file + ": " + valid.message());
  // A bare launch.trainer name: the one built beside the caller wins over PATH.
  const QString name = QString::fromStdString(exp.launch.trainer);
  if (local && !name.contains('/') && !m_settings.trainerDir.isEmpty()) {
    const QString sibling = QDir(m_settings.trainerDir).filePath(name);
    if (QFileInfo(sibling).isExecutable()) exp.launch.trainer = sibling.toStdString();
  }
  auto launcher = makeLauncher(QString::fromUtf8(spec::to_string(exp.launch.kind)));
  if (!launcher) return invalid(report, launcher.message());
  return exp;
}

// Creates the experiment and the run rows; the run is named NAME-<n> with the next free n.
Result<RunRecord> RunLifecycle::createRun(RunStore& store, const spec::Experiment& exp,
                                          const QString& experimentPath,
                                          const std::vector<std::string>& overrides,
                                          std::optional<qint64> experimentId) const {
  const QString expName = QString::fromStdString(exp.experiment.name);
  Result<qint64> expId = experimentId ? Result<qint64>(*experimentId) : Result<qint64>(qint64(0));
  if (!experimentId) {
    const QString toml = QString::fromStdString(spec::write_experiment_toml(exp));
    expId =
        store.createExperiment({0, expName, QFileInfo(experimentPath).absoluteFilePath(), toml, 0})
            .get();
  }
  if (!expId) return expId.error();
  auto reader = store.reader();
  if (!reader) return reader.error();
  auto runs = reader->listRuns();
  if (!runs) return runs.error();
  qint64 next = 1;
  for (const auto& r : *runs) next = std::max(next, r.id + 1);
  for (int attempt = 0; attempt < 1000; ++attempt, ++next) {
    const QString name = QStringLiteral("%1-%2").arg(expName).arg(next);
    auto taken = reader->runByName(name);
    if (!taken) return taken.error();
    if (*taken) continue;
    NewRun run{*expId, name, QDir(m_settings.runsRoot).filePath(name), overridesAsParams(overrides),
               spec::launch_world_size(exp.launch)};
    auto id = store.createRun(run).get();
    if (!id) continue;  // taken by a concurrent run: try the next number
    auto created = reader->run(*id);
    if (!created) return created.error();
    if (!*created) return fail("run " + name.toStdString() + " vanished after creation");
    return **created;
  }
  return fail("could not find a free run name for " + expName.toStdString());
}

Result<LaunchedRun> RunLifecycle::launch(RunStore& store, const spec::Experiment& exp,
                                         const QString& experimentPath,
                                         const std::vector<std::string>& overrides,
                                         std::optional<qint64> experimentId) const {
  auto launcher =
      makeLauncher(QString::fromUtf8(spec::to_string(exp.launch.kind)), exp.launch.grace_s);
  if (!launcher) return launcher.error();
  auto run = createRun(store, exp, experimentPath, overrides, experimentId);
  if (!run) return run.error();
  if (auto written = writeTrial(*run, exp); !written) return written.error();
  auto reader = store.reader();
  if (!reader) return reader.error();
  auto token = reader->runLogToken();
  if (!token) return token.error();
  LaunchRequest request;
  request.runId = run->id;
  request.runName = run->name;
  request.localRunDir = run->runDir;
  request.runLogToken = *token;
  request.launch = exp.launch;
  request.shareGpus = exp.shard.backend == "gloo";
  request.trainerArgs = {"train", "trial.toml"};
  auto handle = (*launcher)->start(request);
  if (!handle) {
    (void)store
        .setRunStatus(run->id, spec::RunStatus::failed, QString::fromStdString(handle.message()))
        .get();
    return handle.error();
  }
  if (auto r = store.setRunStatus(run->id, spec::RunStatus::running).get(); !r) return r.error();
  LaunchedRun launched;
  launched.run = std::move(*run);
  launched.location = (*handle)->location().toJson();
  launched.handle = std::move(*handle);
  return launched;
}

Result<StartedRun> RunLifecycle::startDetached(RunStore& store, const spec::Experiment& exp,
                                               const QString& experimentPath,
                                               const std::vector<std::string>& overrides) const {
  if (auto checked = checkSupervisor(m_settings.supervisor); !checked) return checked.error();
  auto launched = launch(store, exp, experimentPath, overrides);
  if (!launched) return launched.error();
  const RunRecord& run = launched->run;
  if (auto r = store.setRunLocation(run.id, launched->location).get(); !r) return r.error();
  store.flush();
  auto supervisor = spawnSupervisor(run);
  if (!supervisor) return supervisor.error();
  StartedRun started{run.id, run.name, run.runDir, *supervisor, {}};
  started.warning = waitForSupervisor(store, run.id, *supervisor);
  return started;
}

Result<StartedRun> RunLifecycle::resumeDetached(RunStore& store, qint64 runId) const {
  if (auto checked = checkSupervisor(m_settings.supervisor); !checked) return checked.error();
  auto reader = store.reader();
  if (!reader) return reader.error();
  auto found = reader->run(runId);
  if (!found) return found.error();
  if (!*found) return fail("run " + std::to_string(runId) + " is not in the run log");
  const RunRecord before = **found;
  const std::string label = "run " + before.name.toStdString();
  if (before.studyId) {
    return fail(label +
                " is a trial of a sweep: its sweep retries it from its checkpoint "
                "(search.retry_from_checkpoint)");
  }
  auto point = reader->resumePoint(runId, before.attempt);
  if (!point) return point.error();
  if (!*point) {
    return fail(label + " has no complete sharded checkpoint to resume from (train.ckpt_every " +
                "writes them; an oom or config error is not resumed): start it again instead");
  }
  auto previous = RunLocation::fromJson(before.location);
  if (!previous) return previous.error();
  const QString checkpoint = previous->runDir + '/' + (*point)->path;
  auto exp = spec::load_experiment(QDir(before.runDir).filePath("trial.toml").toStdString(), {},
                                   spec::LoadOptions{false});
  if (!exp) return fail(label + ": " + exp.message());
  auto launcher =
      makeLauncher(QString::fromUtf8(spec::to_string(exp->launch.kind)), exp->launch.grace_s);
  if (!launcher) return launcher.error();
  auto attempt = store.beginResumedAttempt(runId).get();
  if (!attempt) return attempt.error();
  // Each attempt has its own folder (its event files count bytes and seq from 0).
  QString base = before.runDir;
  if (const qsizetype cut = base.lastIndexOf(QStringLiteral("-resume-")); cut > 0)
    base.truncate(cut);
  RunRecord run = before;
  run.attempt = *attempt;
  run.runDir = base + QStringLiteral("-resume-%1").arg(*attempt);
  const auto failRun = [&](const std::string& why) -> Error {
    (void)store.setRunStatus(runId, spec::RunStatus::failed, QString::fromStdString(why)).get();
    return fail(label + ": " + why);
  };
  if (auto r = store.setRunDir(runId, run.runDir).get(); !r) return failRun(r.message());
  if (auto written = writeTrial(run, *exp); !written) return failRun(written.message());
  auto token = reader->runLogToken();
  if (!token) return failRun(token.message());
  LaunchRequest request;
  request.runId = runId;
  request.runName = run.name;
  request.localRunDir = run.runDir;
  request.attempt = run.attempt;
  request.runLogToken = *token;
  request.launch = exp->launch;
  request.shareGpus = exp->shard.backend == "gloo";
  request.trainerArgs = {QStringLiteral("train"), QStringLiteral("trial.toml"),
                         QStringLiteral("--resume"), checkpoint};
  auto handle = (*launcher)->start(request);
  if (!handle) return failRun(handle.message());
  if (auto r = store.setRunLocation(runId, (*handle)->location().toJson()).get(); !r)
    return failRun(r.message());
  store.flush();
  auto supervisor = spawnSupervisor(run);
  if (!supervisor) return supervisor.error();
  StartedRun started{runId, run.name, run.runDir, *supervisor, {}};
  started.warning = waitForSupervisor(store, runId, *supervisor);
  return started;
}

// Waits until the supervisor holds the run's lease, so that once the start returns no other
// process takes the run for an orphan. A supervisor that is slower only leaves a window in which
// a concurrent `ls` may start a second one; the lease lets one of them follow. Returns a warning
// when it has not taken it.
std::string RunLifecycle::waitForSupervisor(RunStore& store, qint64 runId,
                                            qint64 supervisor) const {
  auto reader = store.reader();
  if (!reader) return {};
  QDeadlineTimer deadline(m_settings.supervisorWaitMs);
  while (!deadline.hasExpired()) {
    auto lease = reader->lease(runId);
    if (!lease || (*lease && (*lease)->pid == supervisor)) return {};
    QThread::msleep(20);
  }
  return "the supervisor (pid " + std::to_string(supervisor) +
         ") has not taken the run yet; see supervisor.log in the run directory";
}

Result<StartedSweep> RunLifecycle::startSweep(const QString& experimentPath,
                                              const QString& studyName) const {
  const QString path = QFileInfo(experimentPath).absoluteFilePath();
  StartedSweep sweep;
  sweep.study = studyName;
  if (sweep.study.isEmpty()) {  // search.name, whose default is the file's stem
    spec::LoadOptions noPaths;
    noPaths.check_paths = false;
    auto exp = spec::load_experiment(path.toStdString(), {}, noPaths);
    if (!exp) return exp.error();
    auto space = spec::parse_search_space(exp->search.toml, exp->source);
    if (!space) return space.error();
    sweep.study = QString::fromStdString(space->name);
  }
  if (auto checked = checkSupervisor(m_settings.supervisor); !checked) return checked.error();
  if (!QDir().mkpath(m_settings.runsRoot)) {
    return fail("cannot create the runs folder " + m_settings.runsRoot.toStdString());
  }
  const QString stamp = QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss"));
  sweep.logPath =
      QDir(m_settings.runsRoot).filePath(QStringLiteral("sweep-%1-%2.log").arg(sweep.study, stamp));
  QStringList command{m_settings.supervisor, QStringLiteral("sweep"), path};
  if (!studyName.isEmpty()) command << QStringLiteral("--name") << studyName;
  auto pid =
      spawnInSession(command, sweep.logPath, "the sweep",
                     "the sweep of " + path.toStdString() + " did not start", dbEnvironment());
  if (!pid) return pid.error();
  sweep.pid = *pid;
  return sweep;
}

Result<StartedSweep> RunLifecycle::startAutotune(const QString& experimentPath,
                                                 const AutotuneRequest& request) const {
  const QString path = QFileInfo(experimentPath).absoluteFilePath();
  if (request.studyName.isEmpty()) return fail("autotune: the study needs a name");
  if (auto checked = checkSupervisor(m_settings.supervisor); !checked) return checked.error();
  if (!QDir().mkpath(m_settings.runsRoot)) {
    return fail("cannot create the runs folder " + m_settings.runsRoot.toStdString());
  }
  StartedSweep tune;
  tune.study = request.studyName;
  const QString stamp = QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss"));
  tune.logPath = QDir(m_settings.runsRoot)
                     .filePath(QStringLiteral("autotune-%1-%2.log").arg(tune.study, stamp));
  const QStringList command{m_settings.supervisor,
                            QStringLiteral("autotune"),
                            path,
                            QStringLiteral("--name"),
                            request.studyName,
                            QStringLiteral("--objective"),
                            request.objective,
                            QStringLiteral("--budget-minutes"),
                            QString::number(request.budgetMinutes),
                            QStringLiteral("--steps"),
                            QString::number(request.steps),
                            QStringLiteral("--warmup"),
                            QString::number(request.warmup)};
  auto pid =
      spawnInSession(command, tune.logPath, "the autotune",
                     "the autotune of " + path.toStdString() + " did not start", dbEnvironment());
  if (!pid) return pid.error();
  tune.pid = *pid;
  return tune;
}

Result<StartedSweep> RunLifecycle::adoptSweep(RunReader& reader, qint64 studyId) const {
  auto found = reader.study(studyId);
  if (!found) return found.error();
  if (!*found) return fail("study " + std::to_string(studyId) + " is not in the run log");
  const StudyRecord& study = **found;
  const std::string name = study.name.toStdString();
  if (study.status != StudyStatus::running) {
    return fail("study " + name + " has ended (" + studyStatusName(study.status).toStdString() +
                "): no sweep to adopt");
  }
  if (RunStore::sweepAlive(study, QSysInfo::machineHostName(), RunStore::kSweepStaleS)) {
    return fail("study " + name + " is fed by process " + std::to_string(study.sweepPid) + " on " +
                study.sweepHost.toStdString() + ": nothing to adopt");
  }
  if (!study.experimentId) {
    return fail("study " + name +
                " has no recorded experiment: start its sweep again with `shardscope-cli sweep "
                "EXP.toml --name " +
                name + "`");
  }
  auto experiment = reader.experiment(*study.experimentId);
  if (!experiment) return experiment.error();
  const QString source = *experiment ? (*experiment)->source : QString();
  if (source.isEmpty() || !QFileInfo(source).isFile()) {
    return fail("the experiment file of study " + name + " (" +
                (source.isEmpty() ? std::string("not recorded") : source.toStdString()) +
                ") is gone: restore it, or start the sweep with `shardscope-cli sweep EXP.toml "
                "--name " +
                name + "`");
  }
  return startSweep(source, study.name);
}

}  // namespace shardscope::backend
