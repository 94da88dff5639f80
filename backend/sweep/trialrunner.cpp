// The trial runner (see trialrunner.h).
//
// Verdict of a finished trial, in this order: pruned (we stopped it) > oom (an `error` of kind
// oom) > failed (a rank exited non-zero or by a signal, the monitor saw a death, no `done`, a
// `done` other than complete, an objective missing or not finite) > complete. The run monitor
// records its own view first (complete/stopped/failed); the runner then writes the verdict over
// it, so the run log's status is the trial's state.
//
// Objective values, in the order of search.objectives: a metric `eval.X` is X at the last `eval`
// event that reported it (shardtrain's rule: the last evaluation wins); otherwise, or when no
// evaluation reported it, the `done` event's objective: element i when it holds one value per
// objective, its only value when there is one objective. probes.good_rate
// (spec::kGoodRateObjective) comes from neither: it is people's verdicts on the trial's probe
// answers, which the run log writes into the trial's values once it is complete and again with
// every mark (RunStore::refreshGoodRate), so the trial completes with it unknown (null) until then.
#include "backend/sweep/trialrunner.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string_view>

#include "backend/databound.h"
#include "backend/lifecycle/runlifecycle.h"
#include "backend/ssh/hostcheck.h"
#include "backend/store/retrypolicy.h"
#include "backend/sweep/study.h"
#include "spec/estimate.h"
#include "spec/events.h"
#include "spec/experiment_query.h"
#include "spec/replan.h"
#include "spec/search_names.h"

Q_LOGGING_CATEGORY(lcTrialRunner, "shardscope.search.trialrunner")

namespace shardscope::backend {

using search::TrialState;

namespace {

constexpr int kEvalPollMs = 200;
constexpr qint64 kReadBytes = qint64{1} << 20;

Error runnerError(const QString& message) { return fail(message.toStdString()); }

QJsonObject paramsJson(const search::TrialParams& params) {
  QJsonObject json;
  for (const auto& [name, value] : params) {
    const QString key = QString::fromStdString(name);
    if (const auto* d = std::get_if<double>(&value)) {
      json[key] = *d;
    } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
      json[key] = static_cast<qint64>(*i);
    } else if (const auto* b = std::get_if<bool>(&value)) {
      json[key] = *b;
    } else {
      json[key] = QString::fromStdString(std::get<std::string>(value));
    }
  }
  return json;
}

// Rank 0's last `done`; a single objective written as null (the protocol's non-finite number)
// comes back as NaN, not as "no objective".
// Rank 0's last `done` event (none: nullopt); an error when the run log cannot be read.
Result<std::optional<spec::DoneEvent>> lastDone(RunReader& reader, qint64 runId) {
  auto row = reader.lastEvent(runId, 0, "done");
  if (!row) return row.error();
  if (!*row) return std::optional<spec::DoneEvent>();
  const QByteArray& json = (**row).json;
  auto event = spec::parse_event(std::string_view(json.constData(), size_t(json.size())),
                                 spec::ParseMode::lenient);
  if (!event) return std::optional<spec::DoneEvent>();
  auto done = std::get<spec::DoneEvent>(event->body);
  const QJsonObject object = QJsonDocument::fromJson(json).object();
  if (done.objective.empty() && object.contains(QLatin1String("objective")) &&
      object.value(QLatin1String("objective")).isNull()) {
    done.objective.push_back(std::nan(""));
  }
  return std::optional<spec::DoneEvent>(std::move(done));
}

QString mib(qint64 bytes) { return QString::number(double(bytes) / (1024.0 * 1024.0), 'f', 1); }

// Where a launch's ranks run, for the detection cache: kind, first host, GPU pool.
std::string targetKey(const spec::LaunchSection& l) {
  std::string key = std::to_string(static_cast<int>(l.kind));
  if (l.kind == spec::LaunchKind::ssh && !l.hosts.empty()) key += "|" + l.hosts.front();
  key += "|";
  for (int g : l.gpus) key += std::to_string(g) + ",";
  return key;
}

// The detection for `exp`'s target; a host that cannot be checked leaves the budget unknown
// (its launch fails on its own, with the SSH error), named in the source.
Result<spec::DeviceBudget> budgetWith(const spec::Experiment& exp,
                                      const Result<spec::DetectedMemory>& found) {
  if (!found && exp.launch.device_memory_gib <= 0)
    return spec::DeviceBudget{0, "unknown: " + found.message(), true};
  return spec::device_budget(exp, found ? *found : spec::DetectedMemory{});
}

}  // namespace

Result<spec::DeviceBudget> budgetFor(const spec::Experiment& exp) {
  if (exp.launch.device_memory_gib > 0 || exp.launch.kind == spec::LaunchKind::slurm)
    return spec::device_budget(exp, {});
  return budgetWith(exp, detectMemory(exp.launch));
}

Result<BudgetCheck> estimateAgainstBudget(const spec::Experiment& exp,
                                          const spec::DeviceBudget& budget,
                                          const spec::Calibrations& calibrations) {
  const int local = exp.launch.nproc_per_node;
  // Chat data bounds the rows by what its samples hold, as the trainer's hello (whose figure the
  // calibration's ratios were measured against) does; data this machine cannot read (a remote
  // host's path) leaves the data.seq_len bound.
  BudgetCheck check;
  std::string why;
  check.rows = rowsBoundOf(exp, &why);
  if (!why.empty()) qCDebug(lcTrialRunner) << "rows bounded by data.seq_len:" << why.c_str();
  auto raw = spec::estimate_memory(exp, spec::launch_world_size(exp.launch), local,
                                   check.rows ? &*check.rows : nullptr);
  if (!raw) return fail("memory estimate: " + raw.message());
  const auto calibration = spec::find_calibration(calibrations, exp, *raw, budget.gpu);
  const auto estimate = spec::calibrated(*raw, calibration);
  check.need = spec::budgeted_bytes(estimate, budget);
  check.calibration = calibration;
  if (budget.bytes <= 0 || check.need <= budget.bytes) return check;
  const QString how = calibration.runs > 0 ? QStringLiteral(" (%1)").arg(QString::fromStdString(
                                                 spec::format_calibration(calibration)))
                                           : QString();
  check.over = QStringLiteral(
                   "memory estimate %1 MiB per rank%2%5 exceeds the budget of %3 MiB per rank "
                   "(%4); lower train.micro_batch_size or data.seq_len, enable "
                   "shard.activation_checkpointing, or search a smaller range")
                   .arg(mib(check.need), budget.gpu ? QStringLiteral(" on the device") : QString(),
                        mib(budget.bytes), QString::fromStdString(budget.source), how);
  return check;
}

spec::RunStatus runStatusOf(TrialState state) {
  switch (state) {
    case TrialState::Running:
      return spec::RunStatus::running;
    case TrialState::Complete:
      return spec::RunStatus::complete;
    case TrialState::Pruned:
      return spec::RunStatus::pruned;
    case TrialState::Failed:
      return spec::RunStatus::failed;
    case TrialState::Infeasible:
      return spec::RunStatus::infeasible;
    case TrialState::Oom:
      return spec::RunStatus::oom;
  }
  return spec::RunStatus::failed;
}

/// A launched trial and what the runner learns while it runs.
struct TrialRunner::Running {
  qint64 number = 0;
  qint64 runId = 0;
  std::unique_ptr<RunFollower> follower;
  QTimer evalTimer;
  qint64 evalOffset = 0;                        // bytes of rank 0's events file read for evals
  std::map<std::string, double> lastEval;       // "eval.loss" -> value at the last evaluation
  std::map<std::int64_t, double> intermediate;  // step -> first objective's eval value
  bool pruned = false;
  bool stopped = false;        // TrialRunner::stop: the user's stop, not a failure
  int recordTries = 0;         // tries to judge and record its end that the run log could not take
  bool ended = false;          // its monitor has finished: evals are read, no longer reported
  search::TrialParams params;  // its sampled values
  std::optional<spec::Experiment> exp;  // as launched, in its current plan (shardtrain trials)
  QString startError;    // why its replanned attempt did not start (then it has no follower)
  bool spawned = false;  // its launcher started its ranks (launch() got that far)
  QJsonObject location;  // its attempt's, as launched (recordLocation retries it)
  // Its ranks run, but its monitor could not start on the run log yet (an error that may
  // pass): followLater tries again; followTries counts the tries.
  bool followPending = false;
  int followTries = 0;
  // What its memory check bounded the estimate's rows by (BudgetCheck::rows), held against every
  // plan of its replan ladder; read once (a reattached trial's at its first replan).
  std::optional<spec::DataBound> rows;
  bool rowsRead = false;
};

TrialRunner::TrialRunner(RunStore& store, const QString& experimentPath, search::SearchSpace space,
                         Options options, QObject* parent)
    : QObject(parent),
      m_store(store),
      m_experimentPath(QFileInfo(experimentPath).absoluteFilePath()),
      m_space(std::move(space)),
      m_options(std::move(options)) {
  qRegisterMetaType<TrialOutcome>();
  if (m_options.experiment) {
    m_base = std::move(m_options.experiment);
    m_options.experiment.reset();
  } else {
    spec::LoadOptions noPaths;
    noPaths.check_paths = false;
    auto base = spec::load_experiment(m_experimentPath.toStdString(), m_options.overrides, noPaths);
    if (base) {
      m_base = std::move(*base);
    } else {
      m_baseError = base.message();
    }
  }
}

TrialRunner::~TrialRunner() = default;

int TrialRunner::ranksPerTrial() const {
  if (programTrials() || !m_base) return 1;
  return std::max(1, m_base->launch.nproc_per_node);
}

bool TrialRunner::runsHere() const {
  return programTrials() || !m_base || m_base->launch.kind == spec::LaunchKind::local;
}

Result<spec::Experiment> TrialRunner::experimentFor(const search::TrialParams& params,
                                                    const std::vector<std::string>& plan,
                                                    const Segment* segment) const {
  if (!m_base) return fail(m_baseError);
  // The trial's values on the parsed experiment (which holds the sweep's own overrides).
  std::vector<std::string> overrides;
  if (!programTrials()) {  // a program's parameters are its own, not experiment fields
    for (const auto& [name, value] : params)
      overrides.push_back(search::experiment_override(name, value));
    overrides.insert(overrides.end(), plan.begin(), plan.end());
    if (segment != nullptr) {
      overrides.insert(overrides.end(), segment->overrides.begin(), segment->overrides.end());
    }
  }
  return RunLifecycle::experimentForTrial(*m_base, overrides, programTrials(), m_options.trainer);
}

Result<std::vector<std::string>> TrialRunner::planOf(qint64 runId) const {
  std::vector<std::string> plan;
  auto reader = m_store.reader();
  if (!reader) return reader.error();
  auto run = reader->run(runId);
  if (!run) return run.error();
  if (!*run || !(*run)->params.contains(QLatin1String(kReplanParam))) return plan;
  // The fields a replan set (RunLifecycle::replannedParams): never a searched one.
  for (const char* field : spec::kReplanFields) {
    const QJsonValue value = (*run)->params.value(QLatin1String(field));
    if (value.isUndefined() || m_space.index_of(field) >= 0) continue;
    plan.push_back(std::string(field) + "=" +
                   (value.isBool() ? std::string(value.toBool() ? "true" : "false")
                                   : std::to_string(value.toInteger())));
  }
  return plan;
}

Result<spec::DeviceBudget> TrialRunner::budgetOf(const spec::Experiment& exp) const {
  if (m_options.deviceBudgetBytes)
    return spec::DeviceBudget{*m_options.deviceBudgetBytes, "the caller's budget", false};
  if (exp.launch.device_memory_gib > 0 || exp.launch.kind == spec::LaunchKind::slurm)
    return spec::device_budget(exp, {});
  const auto key = targetKey(exp.launch);
  auto it = m_detected.find(key);
  if (it == m_detected.end()) {
    auto found = detectMemory(exp.launch);
    if (!found) return budgetWith(exp, found);  // not cached: the host may come back
    it = m_detected.emplace(key, *found).first;
  }
  return spec::device_budget(exp, it->second);
}

std::optional<QString> TrialRunner::infeasibility(const spec::Experiment& exp,
                                                  std::optional<spec::DataBound>* rows) const {
  if (programTrials()) return std::nullopt;  // a program's memory is its own business
  auto budget = budgetOf(exp);
  if (!budget) return QString::fromStdString(budget.message());
  // What the run log's completed runs measured corrects the estimate; a run log that cannot
  // answer leaves it raw (the launch itself reports a broken run log).
  spec::Calibrations calibrations;
  if (auto reader = m_store.reader()) {
    if (auto table = reader->memoryCalibrations()) calibrations = std::move(*table);
  }
  auto check = estimateAgainstBudget(exp, *budget, calibrations);
  if (!check) return QString::fromStdString(check.message());
  if (rows != nullptr) *rows = check->rows;
  if (check->over.isEmpty()) return std::nullopt;
  return check->over;
}

Result<qint64> TrialRunner::createRun(qint64 number, const search::TrialParams& params) {
  backend::NewTrial trial;
  trial.studyId = m_options.studyId;
  trial.trialNumber = number;
  trial.runDir =
      QDir(m_options.runsRoot)
          .filePath(QStringLiteral("study-%1/trial-%2").arg(m_options.studyId).arg(number));
  trial.params = paramsJson(params);
  trial.worldSize = ranksPerTrial();
  auto id = m_store.createTrialRun(trial).get();
  if (!id) return id.error();
  return id->runId;
}

Result<qint64> TrialRunner::start(qint64 number, const search::TrialParams& params,
                                  std::optional<qint64> runId) {
  if (m_trials.count(number) != 0) {
    return runnerError(QStringLiteral("trial %1 is already running").arg(number));
  }
  if (auto check = m_space.check(params); !check) return check.error();
  if (!runId) {
    auto created = createRun(number, params);
    if (!created) return created.error();
    runId = *created;
  }
  launchOrWait(number, *runId, params, 0);
  return *runId;
}

void TrialRunner::launchOrWait(qint64 number, qint64 runId, const search::TrialParams& params,
                               int tries) {
  // Refused by the run log before a rank started, with an error that may pass: the attempt has
  // not begun, so it waits (holding its slot and the asker's lease) instead of failing and using
  // one of the study's retries. False: it may not wait (any more).
  const auto waited = [&](const Error& error) {
    if (error.permanent || !kLaunchRetry.mayRetry(tries)) return false;
    const int delayMs = kLaunchRetry.delayMs(tries + 1);
    qCWarning(lcTrialRunner).noquote()
        << "trial" << number << "waits for the run log to launch:" << error.message.c_str()
        << QStringLiteral("(try %1; the next in %2 s)").arg(tries + 1).arg(delayMs / 1000.0);
    m_waiting[number] = Waiting{runId, params, tries + 1, false};
    QTimer::singleShot(delayMs, this, [this, number] {
      const auto it = m_waiting.find(number);
      if (it == m_waiting.end()) return;
      Waiting waiting = std::move(it->second);
      m_waiting.erase(it);
      if (waiting.stopped) {
        finishEarly(number, waiting.runId, TrialState::Failed,
                    QStringLiteral("stopped by the user before it launched"), true);
        return;
      }
      launchOrWait(number, waiting.runId, waiting.params, waiting.tries);
    });
    return true;
  };
  // A replanned trial launches in its plan, never in the first one because the run log that
  // holds the plan could not be read.
  auto plan = planOf(runId);
  if (!plan) {
    if (!waited(plan.error()))
      finishEarly(number, runId, TrialState::Failed, QString::fromStdString(plan.message()));
    return;
  }
  const auto segment = m_segments.find(number);
  auto exp = experimentFor(params, *plan, segment == m_segments.end() ? nullptr : &segment->second);
  if (!exp) {
    finishEarly(number, runId, TrialState::Failed, QString::fromStdString(exp.message()));
    return;
  }
  std::optional<spec::DataBound> rows;
  if (auto why = infeasibility(*exp, &rows)) {
    finishEarly(number, runId, TrialState::Infeasible, *why);
    return;
  }
  auto trial = std::make_unique<Running>();
  trial->number = number;
  trial->runId = runId;
  trial->params = params;
  trial->rows = std::move(rows);
  trial->rowsRead = !programTrials();
  if (!programTrials()) trial->exp = *exp;
  if (auto launched = launch(*trial, *exp, params); !launched) {
    if (trial->spawned || !waited(launched.error()))
      finishEarly(number, runId, TrialState::Failed, QString::fromStdString(launched.message()));
    return;
  }
  if (tries > 0) {
    qCInfo(lcTrialRunner) << "trial" << number << "launched after" << tries
                          << "tries that the run log refused";
  }
  const bool followPending = trial->followPending;
  m_trials[number] = std::move(trial);
  emit trialStarted(number, runId);
  if (followPending) followLater(number);
}

// A sweep that died finds its trial again by the stored location (Study's lost trials,
// attach()): one the run log refused (a lost server) is asked again with the launch's backoff,
// while no later attempt of the trial has launched with its own.
void TrialRunner::recordLocation(qint64 number, qint64 runId, const QJsonObject& location,
                                 int tries) {
  auto recorded = m_store.setRunLocation(runId, location).get();
  if (recorded) return;
  if (recorded.error().permanent || !kLaunchRetry.mayRetry(tries)) {
    qCWarning(lcTrialRunner, "trial %lld: its location is not recorded: %s",
              static_cast<long long>(number), recorded.message().c_str());
    return;
  }
  const int delayMs = kLaunchRetry.delayMs(tries);
  qCWarning(lcTrialRunner,
            "trial %lld: the run log did not take its location: %s (try %d; the next in %.1f s)",
            static_cast<long long>(number), recorded.message().c_str(), tries, delayMs / 1000.0);
  QTimer::singleShot(delayMs, this, [this, number, runId, location, tries] {
    const auto it = m_trials.find(number);
    if (it != m_trials.end() && it->second->location != location) return;  // a later attempt's
    recordLocation(number, runId, location, tries + 1);
  });
}

void TrialRunner::followLater(qint64 number) {
  const auto unfollowed = m_trials.find(number);
  if (unfollowed == m_trials.end()) return;
  const int tries = ++unfollowed->second->followTries;
  QTimer::singleShot(kLaunchRetry.delayMs(tries), this, [this, number] {
    const auto it = m_trials.find(number);
    if (it == m_trials.end()) return;
    Running& trial = *it->second;
    auto started = startFollowing(trial);
    if (started) {
      trial.followPending = false;
      qCInfo(lcTrialRunner) << "trial" << number << "followed after" << trial.followTries
                            << "tries that the run log refused";
      return;
    }
    if (!started.error().permanent && kLaunchRetry.mayRetry(trial.followTries)) {
      qCWarning(lcTrialRunner).noquote()
          << "trial" << number
          << "still waits for the run log to follow it:" << started.message().c_str()
          << QStringLiteral("(try %1)").arg(trial.followTries);
      followLater(number);
      return;
    }
    // Nobody can follow its ranks: they are killed, and the trial fails with the run log's error
    // (a retry, when the study has one left, runs it again).
    trial.follower->kill();
    TrialOutcome outcome;
    outcome.number = number;
    outcome.runId = trial.runId;
    outcome.state = TrialState::Failed;
    outcome.error = QStringLiteral("its ranks were killed: the run log could not follow them: %1")
                        .arg(QString::fromStdString(started.message()));
    if (auto r = m_store.setRunStatus(trial.runId, spec::RunStatus::failed, outcome.error).get();
        !r) {
      qCWarning(lcTrialRunner) << "trial" << number << r.message().c_str();
    }
    m_trials.erase(it);
    qCInfo(lcTrialRunner).noquote() << "trial" << number << "ended: failed" << outcome.error;
    emit trialFinished(outcome);
  });
}

Result<void> TrialRunner::launch(Running& trial, const spec::Experiment& exp,
                                 const search::TrialParams& params) {
  auto reader = m_store.reader();
  if (!reader) return reader.error();
  auto run = reader->run(trial.runId);
  if (!run) return run.error();
  if (!*run) return runnerError(QStringLiteral("run %1 is not in the run log").arg(trial.runId));
  QString runDir = (*run)->runDir;
  // A study's ask() makes runs without a folder; a retry gets a fresh one (its own files).
  if (runDir.isEmpty() || (*run)->attempt > 0) {
    QString leaf = QStringLiteral("study-%1/trial-%2").arg(m_options.studyId).arg(trial.number);
    if ((*run)->attempt > 0) leaf += QStringLiteral("-retry-%1").arg((*run)->attempt);
    runDir = QDir(m_options.runsRoot).filePath(leaf);
    if (auto r = m_store.setRunDir(trial.runId, runDir).get(); !r) return r;
  }
  RunRecord attempt = **run;
  attempt.runDir = runDir;
  AttemptOptions options;
  // The stop grace of a trial is search.stop_grace_s (a prune is a stop).
  options.graceS = std::max(0, int(std::ceil(m_space.stop_grace_s)));
  options.environment.insert(QStringLiteral("SHARDSCOPE_TRIAL"), QString::number(trial.number));
  if (programTrials()) {
    options.program = m_space.program;
    options.programDir = QFileInfo(m_experimentPath).absolutePath();
    for (const std::string& arg : search::program_arguments(m_space, params)) {
      options.extraArgs << QString::fromStdString(arg);
    }
  } else {
    auto resume = resumeArgumentsOf(*reader, trial.number, attempt);
    if (!resume) return resume.error();
    if (!resume->isEmpty()) {
      qCInfo(lcTrialRunner).noquote() << "run" << attempt.id << "attempt" << attempt.attempt
                                      << "resumes from" << resume->back();
    }
    options.extraArgs << *resume;
    options.environment.insert(QStringLiteral("SHARDSCOPE_RUN_DIR"), runDir);
  }
  auto handle = RunLifecycle::startAttempt(m_store, attempt, exp, options);
  if (!handle) return handle.error();
  trial.spawned = true;
  trial.location = (*handle)->location().toJson();
  recordLocation(trial.number, trial.runId, trial.location, 1);
  (void)m_store.setRunStatus(trial.runId, spec::RunStatus::running).get();
  if (auto followed = follow(trial, std::move(*handle)); !followed) {
    if (!followed.error().permanent) {
      // The ranks have started: killing them for a run log that cannot be reached now would
      // run the trial again (its program's side effects twice, its attempt spent). They run
      // on and the caller has the monitor try again (followLater); it reads from the start.
      trial.followPending = true;
      qCWarning(lcTrialRunner).noquote()
          << "trial" << trial.number
          << "started; its monitor waits for the run log:" << followed.message().c_str();
      return ok();
    }
    trial.follower->kill();
    return followed;
  }
  qCInfo(lcTrialRunner) << "trial" << trial.number << "run" << trial.runId << "started in"
                        << runDir;
  return ok();
}

Result<QStringList> TrialRunner::resumeArgumentsOf(RunReader& reader, qint64 number,
                                                   const RunRecord& attempt) const {
  // A retry of a crashed trial resumes from its failed attempt's newest complete sharded
  // checkpoint (the stored location is still that attempt's until this one starts).
  if (m_space.retry_from_checkpoint && attempt.attempt > 0) {
    auto resume = RunLifecycle::resumeArguments(reader, attempt, attempt.attempt - 1);
    if (!resume) return resume.error();
    if (!resume->isEmpty()) return resume;
  }
  // A segment that has no checkpoint of its own yet starts where its source ended.
  const auto segment = m_segments.find(number);
  if (segment == m_segments.end() || segment->second.resumeFrom.isEmpty()) return QStringList();
  return QStringList{QStringLiteral("--resume"), segment->second.resumeFrom};
}

// Follows a started or reattached trial (the follower takes the run's lease) and reads its evals.
Result<void> TrialRunner::follow(Running& trial, std::unique_ptr<RunHandle> handle) {
  trial.follower = std::make_unique<RunFollower>(m_store, trial.runId, std::move(handle));
  const qint64 number = trial.number;
  Running* raw = &trial;
  const qint64 runId = trial.runId;
  trial.follower->setStallAfter(m_stallAfterS);
  connect(trial.follower.get(), &RunFollower::stalled, this,
          [this, number, runId](double silentS) { emit trialStalled(number, runId, silentS); });
  connect(trial.follower.get(), &RunFollower::finished, this, [this, number, raw] {
    // The monitor has stored the run's end: its evals are no longer reported (the study would
    // refuse them, "already ended"), only read into the outcome by onMonitorFinished.
    raw->ended = true;
    raw->evalTimer.stop();
    // Not inside the follower's own signal: onMonitorFinished destroys it.
    QTimer::singleShot(0, this, [this, number] { onMonitorFinished(number); });
  });
  return startFollowing(trial);
}

Result<void> TrialRunner::startFollowing(Running& trial) {
  // The asker's lease (Study::tryAsk with an owner) kept the trial from being taken for lost
  // until now; the run monitor's lease replaces it (it is released first: the monitor would
  // find it held by a live process).
  auto reader = m_store.reader();
  if (!reader) return reader.error();
  auto lease = reader->lease(trial.runId);
  if (!lease) return lease.error();
  if (*lease && search::Study::isAskLease((*lease)->token)) {
    if (auto r = m_store.releaseLease(**lease).get(); !r) return r;
  }
  if (auto started = trial.follower->start(); !started) return started;
  Running* raw = &trial;
  connect(trial.follower.get(), &RunFollower::filesGrew, this, [this, raw] {
    if (!raw->ended) readEvals(*raw);
  });
  connect(&trial.evalTimer, &QTimer::timeout, this, [this, raw] { readEvals(*raw); });
  trial.evalTimer.start(kEvalPollMs);
  return ok();
}

Result<void> TrialRunner::attach(qint64 number, qint64 runId) {
  if (m_trials.count(number) != 0) {
    return runnerError(QStringLiteral("trial %1 is already running").arg(number));
  }
  auto reader = m_store.reader();
  if (!reader) return reader.error();
  auto run = reader->run(runId);
  if (!run) return run.error();
  if (!*run || (*run)->location.isEmpty()) {
    return runnerError(QStringLiteral("trial %1 (run %2) has no stored location: it never "
                                      "launched, so there is nothing to reattach")
                           .arg(number)
                           .arg(runId));
  }
  auto trial = std::make_unique<Running>();
  trial->number = number;
  trial->runId = runId;
  // A program trial's location has kind "program": its handle reads the normalised files and
  // needs no argv, so the attach is the lifecycle's, as for a shardtrain trial.
  auto handle = RunLifecycle::attach(**run, std::max(0, int(std::ceil(m_space.stop_grace_s))));
  if (!handle) return handle.error();
  if (!programTrials()) {  // what it runs, in its plan, for a replan (search.on_oom)
    spec::LoadOptions noPaths;
    noPaths.check_paths = false;
    auto ran = spec::load_experiment(
        QDir((*run)->runDir).filePath(QStringLiteral("trial.toml")).toStdString(), {}, noPaths);
    if (ran) trial->exp = std::move(*ran);
  }
  if (auto followed = follow(*trial, std::move(*handle)); !followed) return followed;
  // What it evaluated while nobody followed it is history, already judged by the dead sweep.
  readEvals(*trial, false);
  qCInfo(lcTrialRunner) << "trial" << number << "run" << runId << "reattached in"
                        << trial->follower->runDir();
  m_trials[number] = std::move(trial);
  emit trialStarted(number, runId);
  return ok();
}

void TrialRunner::finishEarly(qint64 number, qint64 runId, TrialState state, const QString& error,
                              bool stopped) {
  qCInfo(lcTrialRunner).noquote() << "trial" << number << "not launched:" << error;
  const spec::RunStatus status = stopped ? spec::RunStatus::stopped : runStatusOf(state);
  if (auto r = m_store.setRunStatus(runId, status, error).get(); !r) {
    qCWarning(lcTrialRunner) << "trial" << number << r.message().c_str();
  }
  TrialOutcome outcome;
  outcome.number = number;
  outcome.runId = runId;
  outcome.state = state;
  outcome.error = error;
  outcome.stopped = stopped;
  QTimer::singleShot(0, this, [this, outcome] { emit trialFinished(outcome); });
}

// Reads rank 0's new complete lines for `eval` events and asks the prune callback about each
// (unless `judgePrunes` is false).
void TrialRunner::readEvals(Running& trial, bool judgePrunes) {
  if (!trial.follower) return;
  auto bytes = trial.follower->readEvents(0, trial.evalOffset, kReadBytes);
  if (!bytes || bytes->isEmpty()) return;
  const qsizetype last = bytes->lastIndexOf('\n');
  if (last < 0) {
    // A whole read without a newline is part of a line longer than any eval event: passed over
    // (its end then fails to parse and is skipped too), or no later eval would ever be read.
    if (bytes->size() >= kReadBytes) trial.evalOffset += bytes->size();
    return;
  }
  trial.evalOffset += last + 1;
  const std::string firstMetric =
      m_space.objectives.empty() ? std::string() : m_space.objectives.front().metric;
  for (const QByteArray& line : bytes->left(last).split('\n')) {
    auto event = spec::parse_event(std::string_view(line.constData(), size_t(line.size())),
                                   spec::ParseMode::lenient);
    if (!event) continue;
    const auto* eval = std::get_if<spec::EvalEvent>(&event->body);
    if (eval == nullptr) continue;
    for (const auto& [name, value] : eval->metrics) trial.lastEval["eval." + name] = value;
    std::optional<double> value;
    if (firstMetric.rfind("eval.", 0) == 0 && eval->metrics.count(firstMetric.substr(5)) != 0) {
      value = eval->metrics.at(firstMetric.substr(5));
    } else if (eval->metrics.size() == 1) {
      value = eval->metrics.begin()->second;
    }
    if (!value) continue;
    trial.intermediate[eval->step] = *value;
    if (judgePrunes && !trial.pruned && m_prune && m_prune(trial.number, eval->step, *value)) {
      prune(trial.number);
    }
  }
}

bool TrialRunner::prune(qint64 number) {
  const auto it = m_trials.find(number);
  if (it == m_trials.end() || it->second->pruned || it->second->stopped) return false;
  Running& trial = *it->second;
  trial.pruned = true;
  qCInfo(lcTrialRunner) << "trial" << number << "pruned: SIGTERM, SIGKILL after"
                        << m_space.stop_grace_s << "s";
  trial.follower->stop(m_space.stop_grace_s);
  return true;
}

bool TrialRunner::stop(qint64 number) {
  if (const auto waiting = m_waiting.find(number); waiting != m_waiting.end()) {
    if (waiting->second.stopped) return false;
    waiting->second.stopped = true;  // its timer ends it, never launched
    qCInfo(lcTrialRunner) << "trial" << number << "stopped by the user before it launched";
    return true;
  }
  const auto it = m_trials.find(number);
  if (it == m_trials.end() || it->second->pruned || it->second->stopped) return false;
  Running& trial = *it->second;
  trial.stopped = true;
  qCInfo(lcTrialRunner) << "trial" << number << "stopped by the user: SIGTERM, SIGKILL after"
                        << m_space.stop_grace_s << "s";
  trial.follower->stop(m_space.stop_grace_s);
  return true;
}

void TrialRunner::stopAll() {
  std::vector<qint64> numbers;
  for (const auto& [number, trial] : m_trials) numbers.push_back(number);
  for (const auto& [number, waiting] : m_waiting) numbers.push_back(number);
  for (const qint64 number : numbers) stop(number);
}

void TrialRunner::onMonitorFinished(qint64 number) {
  const auto it = m_trials.find(number);
  if (it == m_trials.end()) return;
  Running& running = *it->second;
  running.evalTimer.stop();
  // The last lines: kept in the outcome, not judged (the monitor has ended the run already).
  readEvals(running, false);
  TrialOutcome outcome;
  outcome.number = number;
  outcome.runId = running.runId;
  outcome.intermediate = running.intermediate;
  if (running.follower) outcome.ranks = running.follower->ranks();
  // The verdict and its record need the run log. One it cannot reach now (a lost server, a full
  // disk) is waited for, with a backoff, before the trial is reported ended: a result recorded
  // as failed or not at all while the sweep prints it complete would be lost.
  std::string unreachable;
  if (auto judged = judge(running, outcome); !judged) {
    unreachable = judged.message();
  } else if (outcome.state == TrialState::Oom && m_space.on_oom == spec::OnOom::replan &&
             running.exp && !running.pruned && !running.stopped && replan(running, outcome)) {
    return;  // the same trial goes on in its next plan
  } else if (auto recorded = recordOutcome(running, outcome); !recorded) {
    unreachable = recorded.message();
  }
  if (!unreachable.empty() && kRecordRetry.mayRetry(running.recordTries)) {
    ++running.recordTries;
    const int delayMs = kRecordRetry.delayMs(running.recordTries);
    qCWarning(lcTrialRunner).noquote()
        << "trial" << number << "ended; its result waits for the run log:" << unreachable.c_str()
        << QStringLiteral("(try %1; the next in %2 s)")
               .arg(running.recordTries)
               .arg(delayMs / 1000.0);
    QTimer::singleShot(delayMs, this, [this, number] { onMonitorFinished(number); });
    return;
  }
  if (!unreachable.empty()) {
    outcome.state = TrialState::Failed;
    outcome.values.clear();
    outcome.error = QStringLiteral("its result could not be stored: %1")
                        .arg(QString::fromStdString(unreachable));
  }
  std::unique_ptr<Running> trial = std::move(it->second);
  m_trials.erase(it);
  qCInfo(lcTrialRunner).noquote() << "trial" << number << "ended:"
                                  << spec::to_string(outcome.stopped ? spec::RunStatus::stopped
                                                                     : runStatusOf(outcome.state))
                                         .data()
                                  << outcome.error;
  emit trialFinished(outcome);
}

bool TrialRunner::replan(Running& trial, TrialOutcome& outcome) {
  std::vector<std::string> searched;
  for (const search::Param& p : m_space.params) searched.push_back(p.name);
  auto budget = budgetOf(*trial.exp);
  if (!trial.rowsRead) {  // reattached: its memory check ran in the sweep that launched it
    trial.rows = rowsBoundOf(*trial.exp);
    trial.rowsRead = true;
  }
  // The plans are estimated as the trial's memory check estimated it (the same rows).
  auto plan = spec::next_plan(*trial.exp, searched, budget ? *budget : spec::DeviceBudget{},
                              trial.rows ? &*trial.rows : nullptr);
  const auto notReplanned = [&](const std::string& why) {
    outcome.error += (outcome.error.isEmpty() ? QString() : QStringLiteral("; ")) +
                     QStringLiteral("not replanned: ") + QString::fromStdString(why);
    qCInfo(lcTrialRunner).noquote() << "trial" << trial.number << "not replanned:" << why.c_str();
    return false;
  };
  if (!plan) return notReplanned(plan.message());
  auto reader = m_store.reader();
  if (!reader) return notReplanned(reader.message());
  auto run = reader->run(trial.runId);
  if (!run || !*run) return notReplanned(run ? "the run is not in the run log" : run.message());
  const int oomAttempt = (*run)->attempt;
  const QJsonObject params = RunLifecycle::replannedParams((*run)->params, *plan, oomAttempt);
  auto attempt = m_store.beginReplannedAttempt(trial.runId, params).get();
  if (!attempt) return notReplanned(attempt.message());
  // The attempt that ran out of memory is over: a fresh follower, reader and history.
  const QString change = QString::fromStdString(plan->change);
  qCInfo(lcTrialRunner).noquote() << "trial" << trial.number << "ran out of memory; attempt"
                                  << *attempt << "runs" << change;
  QObject::disconnect(&trial.evalTimer, nullptr, this, nullptr);
  trial.follower.reset();
  trial.evalOffset = 0;
  trial.lastEval.clear();
  trial.intermediate.clear();
  trial.recordTries = 0;
  trial.ended = false;
  trial.exp = plan->experiment;
  if (auto launched = launch(trial, *trial.exp, trial.params); !launched) {
    outcome.state = TrialState::Failed;
    outcome.intermediate.clear();
    outcome.ranks.clear();
    trial.follower.reset();
    trial.startError = QStringLiteral("its replanned attempt %1 (%2) did not start: %3")
                           .arg(*attempt)
                           .arg(change, QString::fromStdString(launched.message()));
    outcome.error = trial.startError;
    return false;
  }
  emit trialReplanned(trial.number, trial.runId, *attempt, change);
  if (trial.followPending) followLater(trial.number);
  return true;
}

// Stores the judged outcome: the run's status, error and objectives. An error that may pass
// (Error::permanent false) is returned for a retry; both writes set values, so a retry repeats
// them safely.
Result<void> TrialRunner::recordOutcome(Running& trial, TrialOutcome& outcome) {
  // The user's stop: a trial that did not complete before the signal ends `stopped` (a study
  // counts it as failed for its samplers but never retries it).
  spec::RunStatus status = runStatusOf(outcome.state);
  if (trial.stopped && outcome.state != TrialState::Complete) {
    outcome.stopped = true;
    outcome.state = TrialState::Failed;
    outcome.error = QStringLiteral("stopped by the user");
    status = spec::RunStatus::stopped;
  }
  const std::optional<double> first =
      outcome.values.empty() ? std::nullopt : std::optional<double>(outcome.values.front());
  if (auto r = m_store.setRunStatus(trial.runId, status, outcome.error, first).get(); !r) {
    if (!r.error().permanent) return r.error();
    qCWarning(lcTrialRunner) << "trial" << outcome.number << r.message().c_str();
  }
  if (!outcome.values.empty()) {
    if (auto r = m_store.setRunObjectives(trial.runId, outcome.values).get(); !r) {
      if (!r.error().permanent) return r.error();
      qCWarning(lcTrialRunner) << "trial" << outcome.number << r.message().c_str();
    }
  }
  const bool byVerdicts =
      std::any_of(m_space.objectives.begin(), m_space.objectives.end(),
                  [](const search::Objective& o) { return o.metric == spec::kGoodRateObjective; });
  if (byVerdicts && outcome.state == TrialState::Complete) {
    // The good rate as marked so far (none yet: null), in one transaction with the count, so a
    // mark made while the trial ended is not overwritten by a stale value.
    if (auto r = m_store.refreshGoodRate(trial.runId).get(); !r) {
      if (!r.error().permanent) return r.error();
      qCWarning(lcTrialRunner) << "trial" << outcome.number << r.message().c_str();
    }
  }
  return ok();
}

std::optional<double> TrialRunner::objectiveValue(const Running& trial, std::size_t index,
                                                  const std::vector<double>& done) const {
  const std::string& metric = m_space.objectives[index].metric;
  if (metric.rfind("eval.", 0) == 0) {
    if (const auto found = trial.lastEval.find(metric); found != trial.lastEval.end()) {
      return found->second;
    }
  }
  if (done.size() == m_space.objectives.size()) return done[index];
  if (done.size() == 1 && m_space.objectives.size() == 1) return done.front();
  return std::nullopt;
}

// The trial's verdict (see the top of this file).
Result<void> TrialRunner::judge(Running& trial, TrialOutcome& outcome) {
  outcome.state = TrialState::Failed;
  if (!trial.follower) {  // a replanned attempt that did not start
    outcome.error = trial.startError;
    return ok();
  }
  if (trial.pruned) {
    outcome.state = TrialState::Pruned;
    return ok();
  }
  auto reader = m_store.reader();
  if (!reader) {
    if (!reader.error().permanent) return reader.error();
    outcome.error = QString::fromStdString(reader.message());
    return ok();
  }
  auto run = reader->run(trial.runId);
  if (!run && !run.error().permanent) return run.error();
  const QString monitorError = run && *run ? (*run)->error : QString();
  if (trial.follower->status() == spec::RunStatus::oom) {
    outcome.state = TrialState::Oom;
    outcome.error = monitorError;
    return ok();
  }
  for (const RankState& rank : trial.follower->ranks()) {
    if (rank.signal != 0 || rank.exitCode > 0) {
      outcome.error =
          rank.signal != 0
              ? QStringLiteral("rank %1 was killed by signal %2").arg(rank.rank).arg(rank.signal)
              : QStringLiteral("rank %1 exited with code %2").arg(rank.rank).arg(rank.exitCode);
      if (!monitorError.isEmpty()) outcome.error += "; " + monitorError;
      return ok();
    }
  }
  if (trial.follower->status() == spec::RunStatus::failed) {
    outcome.error = monitorError.isEmpty() ? QStringLiteral("the run failed") : monitorError;
    return ok();
  }
  auto read = lastDone(*reader, trial.runId);
  if (!read && !read.error().permanent) return read.error();
  std::optional<spec::DoneEvent> done = read ? *read : std::nullopt;
  if (!done) {
    outcome.error = QStringLiteral(
        "the trial ended without a done event; a trial program prints "
        "{\"ev\":\"done\",\"status\":\"complete\",\"objective\":VALUE}");
    return ok();
  }
  if (done->status != spec::DoneStatus::complete) {
    outcome.error = QStringLiteral("the trial's done event says %1, not complete")
                        .arg(QString::fromUtf8(spec::to_string(done->status)));
    return ok();
  }
  for (std::size_t i = 0; i < m_space.objectives.size(); ++i) {
    const QString name = QString::fromStdString(m_space.objectives[i].metric);
    if (m_space.objectives[i].metric == spec::kGoodRateObjective) {
      outcome.values.push_back(std::numeric_limits<double>::quiet_NaN());  // recordOutcome's
      continue;
    }
    const auto value = objectiveValue(trial, i, done->objective);
    if (!value) {
      outcome.values.clear();
      outcome.error = QStringLiteral(
                          "objective %1: no eval event reported it and done's "
                          "objective has %2 value(s) for %3 objective(s)")
                          .arg(name)
                          .arg(done->objective.size())
                          .arg(m_space.objectives.size());
      return ok();
    }
    if (!std::isfinite(*value)) {
      outcome.values.clear();
      outcome.error = QStringLiteral("objective %1 is not finite (%2)").arg(name).arg(*value);
      return ok();
    }
    outcome.values.push_back(*value);
  }
  outcome.state = TrialState::Complete;
  return ok();
}

}  // namespace shardscope::backend
