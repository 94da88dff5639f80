// Starting runs: load and validate the experiment, create the run row, write trial.toml, start
// the ranks; a detached run is handed to its supervisor, an experiment with [search] to a sweep.
#include <QCoreApplication>
#include <QDateTime>
#include <QDeadlineTimer>
#include <QDir>
#include <QFileInfo>
#include <QLoggingCategory>
#include <QSaveFile>
#include <QSysInfo>
#include <QThread>

#include <algorithm>

#include "backend/databound.h"
#include "backend/launch/launchers.h"
#include "backend/launch/programlauncher.h"
#include "backend/lifecycle/checkpoints.h"
#include "backend/lifecycle/demodata.h"
#include "backend/lifecycle/runlifecycle.h"
#include "backend/ssh/hostcheck.h"
#include "backend/store/retrypolicy.h"
#include "spec/experiment_query.h"
#include "spec/search_space.h"

Q_DECLARE_LOGGING_CATEGORY(lcLifecycle)

namespace shardscope::backend {

namespace {

/// Records a started run's location for its supervisor, which attaches by it. The ranks run
/// already, so a run log that refuses it now (a lost server) is asked again as a launch is
/// (kLaunchRetry, about 5 minutes): the first refusal would leave them running unsupervised.
Result<void> recordLocation(RunStore& store, qint64 runId, const QJsonObject& location) {
  for (int tries = 1;; ++tries) {
    auto recorded = store.setRunLocation(runId, location).get();
    if (recorded || recorded.error().permanent || !kLaunchRetry.mayRetry(tries)) return recorded;
    const int delayMs = kLaunchRetry.delayMs(tries);
    qCWarning(lcLifecycle,
              "run %lld: the run log did not take its location: %s (try %d; the next in %.1f s)",
              static_cast<long long>(runId), recorded.message().c_str(), tries, delayMs / 1000.0);
    QThread::msleep(delayMs);
  }
}

/// Run `runId` as the run log holds it; an error when it is not there.
Result<RunRecord> storedRun(RunStore& store, qint64 runId) {
  auto reader = store.reader();
  if (!reader) return reader.error();
  auto found = reader->run(runId);
  if (!found) return found.error();
  if (!*found) return fail("run " + std::to_string(runId) + " is not in the run log");
  return std::move(**found);
}

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
    return fail(run.runDir.toStdString() + ": cannot create the run directory");
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
                                         std::optional<qint64> experimentId,
                                         const AttemptOptions& attempt) const {
  // The launcher kind is checked before a run row exists for it.
  if (auto launcher = makeLauncher(QString::fromUtf8(spec::to_string(exp.launch.kind))); !launcher)
    return launcher.error();
  auto run = createRun(store, exp, experimentPath, overrides, experimentId);
  if (!run) return run.error();
  auto handle = startAttempt(store, *run, exp, attempt);
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
                                               const std::vector<std::string>& overrides,
                                               bool replanOnOom, std::optional<qint64> experimentId,
                                               const AttemptOptions& attempt) const {
  if (auto checked = checkSupervisor(m_settings.supervisor); !checked) return checked.error();
  auto launched = launch(store, exp, experimentPath, overrides, experimentId, attempt);
  if (!launched) return launched.error();
  const RunRecord& run = launched->run;
  if (auto r = recordLocation(store, run.id, launched->location); !r) return r.error();
  store.flush();
  auto supervisor = spawnSupervisor(run, replanOnOom);
  if (!supervisor) return supervisor.error();
  StartedRun started{run.id, run.name, run.runDir, *supervisor, {}};
  started.warning = waitForSupervisor(store, run.id, *supervisor);
  return started;
}

Result<StartedRun> RunLifecycle::resumeDetached(RunStore& store, qint64 runId) const {
  if (auto checked = checkSupervisor(m_settings.supervisor); !checked) return checked.error();
  auto found = storedRun(store, runId);
  if (!found) return found.error();
  const RunRecord before = std::move(*found);
  const std::string label = "run " + before.name.toStdString();
  if (before.studyId) {
    return fail(label +
                " is a trial of a sweep: its sweep retries it from its checkpoint "
                "(search.retry_from_checkpoint)");
  }
  auto reader = store.reader();
  if (!reader) return reader.error();
  AttemptOptions resume;
  if (auto from = resumeArguments(*reader, before, before.attempt); !from) {
    return from.error();
  } else if (from->isEmpty()) {
    return fail(label + " has no complete sharded checkpoint to resume from (train.ckpt_every " +
                "writes them; an oom or config error is not resumed): start it again instead");
  } else {
    resume.extraArgs = *from;
  }
  auto exp = spec::load_experiment(QDir(before.runDir).filePath("trial.toml").toStdString(), {},
                                   spec::LoadOptions{false});
  if (!exp) return fail(label + ": " + exp.message());
  if (auto launcher = makeLauncher(QString::fromUtf8(spec::to_string(exp->launch.kind))); !launcher)
    return launcher.error();
  auto attempt = store.beginResumedAttempt(runId).get();
  if (!attempt) return attempt.error();
  RunRecord next = before;
  next.attempt = *attempt;
  auto launched = startAttemptInSibling(store, std::move(next), QStringLiteral("resume"), *attempt,
                                        *exp, resume);
  if (!launched) return launched.error();
  const RunRecord& run = launched->run;
  if (auto r = recordLocation(store, runId, launched->location); !r) {
    (void)store.setRunStatus(runId, spec::RunStatus::failed, QString::fromStdString(r.message()))
        .get();
    return fail(label + ": " + r.message());
  }
  store.flush();
  auto supervisor = spawnSupervisor(run);
  if (!supervisor) return supervisor.error();
  StartedRun started{runId, run.name, run.runDir, *supervisor, {}};
  started.warning = waitForSupervisor(store, runId, *supervisor);
  return started;
}

Result<StartedRun> RunLifecycle::startFromCheckpoint(RunStore& store, qint64 runId,
                                                     qint64 step) const {
  if (auto checked = checkSupervisor(m_settings.supervisor); !checked) return checked.error();
  auto found = storedRun(store, runId);
  if (!found) return found.error();
  const RunRecord source = std::move(*found);
  const std::string label = "run " + source.name.toStdString();
  auto reader = store.reader();
  if (!reader) return reader.error();
  RunCleaner cleaner;
  auto all = listCheckpoints(*reader, cleaner, source);
  if (!all) return all.error();
  auto point = findCheckpoint(*all, source, step);
  if (!point) return point.error();
  const QString trial = QDir(source.runDir).filePath(QStringLiteral("trial.toml"));
  auto shape = spec::load_experiment(trial.toStdString(), {}, spec::LoadOptions{false});
  if (!shape) return fail(label + ": " + shape.message());
  auto exp = prepareForRun(std::move(*shape));
  if (!exp) return fail(label + ": " + exp.message());
  QString path = trial;
  if (source.experimentId) {
    auto recorded = reader->experiment(*source.experimentId);
    if (recorded && *recorded && !(*recorded)->source.isEmpty()) path = (*recorded)->source;
  }
  // The new run's params: its source's (it trains the same trial.toml), and where it starts.
  std::vector<std::string> params;
  for (auto it = source.params.begin(); it != source.params.end(); ++it) {
    if (it.key() == QLatin1String(kResumedFromParam)) continue;
    const QJsonValue v = it.value();
    const QString text = v.isDouble() ? QString::number(v.toDouble(), 'g', 17)
                         : v.isBool() ? QString::fromLatin1(v.toBool() ? "true" : "false")
                                      : v.toString();
    params.push_back((it.key() + '=' + text).toStdString());
  }
  params.push_back(std::string(kResumedFromParam) + '=' + source.name.toStdString() + '@' +
                   std::to_string(point->step));
  AttemptOptions attempt;
  attempt.extraArgs = {QStringLiteral("--resume"), point->path};
  return startDetached(store, *exp, path, params, false, source.experimentId, attempt);
}

QJsonObject RunLifecycle::replannedParams(QJsonObject params, const spec::Replan& plan,
                                          int oomAttempt) {
  for (const std::string& o : plan.overrides) {
    const QString text = QString::fromStdString(o);
    const qsizetype eq = text.indexOf(QLatin1Char('='));
    const QString field = text.left(eq);
    const QString value = text.mid(eq + 1);
    bool number = false;
    const qint64 n = value.toLongLong(&number);
    if (value == QLatin1String("true") || value == QLatin1String("false")) {
      params[field] = value == QLatin1String("true");
    } else {
      params[field] = number ? QJsonValue(n) : QJsonValue(value);
    }
  }
  const QString step = QStringLiteral("attempt %1 ran out of memory; attempt %2: %3")
                           .arg(oomAttempt)
                           .arg(oomAttempt + 1)
                           .arg(QString::fromStdString(plan.change));
  const QString before = params.value(QLatin1String(kReplanParam)).toString();
  params[QLatin1String(kReplanParam)] =
      before.isEmpty() ? step : before + QStringLiteral(" | ") + step;
  return params;
}

Result<ReplannedRun> RunLifecycle::startReplannedAttempt(RunStore& store, qint64 runId) {
  auto found = storedRun(store, runId);
  if (!found) return found.error();
  const RunRecord before = std::move(*found);
  const std::string label = "run " + before.name.toStdString();
  if (before.studyId) return fail(label + " is a trial of a sweep: search.on_oom replans it");
  auto ran = spec::load_experiment(QDir(before.runDir).filePath("trial.toml").toStdString(), {},
                                   spec::LoadOptions{false});
  if (!ran) return fail(label + ": " + ran.message());
  spec::DeviceBudget budget;  // unknown (0 bytes): every plan fits
  if (ran->launch.device_memory_gib > 0 || ran->launch.kind == spec::LaunchKind::slurm) {
    if (auto b = spec::device_budget(*ran, {})) budget = *b;
  } else if (auto detected = detectMemory(ran->launch)) {
    if (auto b = spec::device_budget(*ran, *detected)) budget = *b;
  }
  // Chat rows bounded by the data's samples, as the run's hello and `estimate` bound them (data
  // this machine cannot read: by data.seq_len).
  const auto rows = rowsBoundOf(*ran);
  auto plan = spec::next_plan(*ran, {}, budget, rows ? &*rows : nullptr);
  if (!plan) return fail(label + " ran out of memory and is not replanned: " + plan.message());
  const QJsonObject params = replannedParams(before.params, *plan, before.attempt);
  auto attempt = store.beginReplannedAttempt(runId, params).get();
  if (!attempt) return attempt.error();
  RunRecord next = before;
  next.attempt = *attempt;
  next.params = params;
  auto launched = startAttemptInSibling(store, std::move(next), QStringLiteral("replan"), *attempt,
                                        plan->experiment);
  if (!launched) return launched.error();
  ReplannedRun out;
  out.run = std::move(launched->run);
  out.handle = std::move(launched->handle);
  out.location = std::move(launched->location);
  out.change = QString::fromStdString(plan->change);
  return out;
}

Result<LaunchedRun> RunLifecycle::startAttemptInSibling(RunStore& store, RunRecord run,
                                                        const QString& kind, int number,
                                                        const spec::Experiment& exp,
                                                        const AttemptOptions& options) {
  const qint64 runId = run.id;
  const std::string label = "run " + run.name.toStdString();
  const QString suffix = QLatin1Char('-') + kind + QLatin1Char('-');
  QString base = run.runDir;
  if (const qsizetype cut = base.lastIndexOf(suffix); cut > 0) base.truncate(cut);
  run.runDir = base + suffix + QString::number(number);
  run.status = spec::RunStatus::running;
  run.error.clear();
  const auto failRun = [&](const std::string& why) -> Error {
    (void)store.setRunStatus(runId, spec::RunStatus::failed, QString::fromStdString(why)).get();
    return fail(label + ": " + why);
  };
  if (auto r = store.setRunDir(runId, run.runDir).get(); !r) return failRun(r.message());
  auto handle = startAttempt(store, run, exp, options);
  if (!handle) return failRun(handle.message());
  LaunchedRun out;
  out.location = (*handle)->location().toJson();
  out.handle = std::move(*handle);
  out.run = std::move(run);
  return out;
}

Result<spec::Experiment> RunLifecycle::experimentForTrial(const spec::Experiment& base,
                                                          const std::vector<std::string>& overrides,
                                                          bool program, const QString& trainer) {
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  auto exp = spec::with_overrides(base, overrides, noPaths);
  if (!exp) return exp.error();
  if (program || exp->launch.kind == spec::LaunchKind::local) {
    if (auto paths = spec::check_experiment_paths(*exp); !paths) return paths.error();
  }
  if (!program) {
    if (auto valid = spec::validate_for_launch(*exp); !valid) return valid.error();
    // A bare name (the default "shardtrain") means the caller's build; a path is the user's.
    const bool bare = exp->launch.trainer.find('/') == std::string::npos;
    if (bare && !trainer.isEmpty()) exp->launch.trainer = trainer.toStdString();
  }
  return exp;
}

// The one place a LaunchRequest is built.
Result<std::unique_ptr<RunHandle>> RunLifecycle::startAttempt(RunStore& store, const RunRecord& run,
                                                              const spec::Experiment& exp,
                                                              const AttemptOptions& options) {
  LaunchRequest request;
  request.runId = run.id;
  request.runName = run.name;
  request.localRunDir = run.runDir;
  request.attempt = int(run.attempt);
  request.launch = exp.launch;
  if (options.graceS) request.launch.grace_s = *options.graceS;
  request.shareGpus = exp.shard.backend == "gloo";
  request.extraEnv = options.environment;
  std::unique_ptr<Launcher> launcher;
  if (options.program.empty()) {
    auto made =
        makeLauncher(QString::fromUtf8(spec::to_string(exp.launch.kind)), request.launch.grace_s);
    if (!made) return made.error();
    launcher = std::move(*made);
    request.trainerArgs = {QStringLiteral("train"), QStringLiteral("trial.toml")};
  } else {
    auto argv = resolveProgram(options.program, options.programDir);
    if (!argv) return argv.error();
    launcher = std::make_unique<ProgramLauncher>(*argv, request.launch.grace_s);
  }
  request.trainerArgs << options.extraArgs;
  auto reader = store.reader();
  if (!reader) return reader.error();
  auto token = reader->runLogToken();
  if (!token) return token.error();
  request.runLogToken = *token;
  if (auto written = writeTrial(run, exp); !written) return written.error();
  return launcher->start(request);
}

Result<QStringList> RunLifecycle::resumeArguments(RunReader& reader, const RunRecord& run,
                                                  qint64 from) {
  if (from < 0 || run.location.isEmpty()) return QStringList();
  auto point = reader.resumePoint(run.id, from);
  if (!point) return point.error();
  if (!*point) return QStringList();
  auto previous = RunLocation::fromJson(run.location);
  if (!previous) return previous.error();
  return QStringList{QStringLiteral("--resume"), previous->runDir + '/' + (*point)->path};
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
  auto pid = spawnDetached(command, sweep.logPath);
  if (!pid) return fail("the sweep of " + path.toStdString() + ": " + pid.message());
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
  auto pid = spawnDetached(command, tune.logPath);
  if (!pid) return fail("the autotune of " + path.toStdString() + ": " + pid.message());
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
  // Two dashboards (or `study adopt` twice) adopting at once: the run log's write lock decides.
  // The one whose claim lands stamps the study as its own, starts the sweep and hands the stamp
  // to it; every other finds a live stamp and starts nothing.
  auto store = RunStore::open(m_settings.dbPath);
  if (!store) return store.error();
  const qint64 me = QCoreApplication::applicationPid();
  const QString host = QSysInfo::machineHostName();
  auto claimed = (*store)->claimSweep(studyId, me, host).get();
  if (!claimed) return claimed.error();
  if (!*claimed) {
    return fail("study " + name +
                " was adopted by another process just now (its sweep is starting): nothing to "
                "adopt");
  }
  auto started = startSweep(source, study.name);
  if (!started) {
    (void)(*store)->clearSweepStamp(studyId, me, host).get();
    return started.error();
  }
  // Not handed over (the run log failed): the stamp stays this process's until it goes stale, and
  // the sweep's own stamps take over then.
  (void)(*store)->handOverSweepStamp(studyId, me, started->pid, host).get();
  return started;
}

}  // namespace shardscope::backend
