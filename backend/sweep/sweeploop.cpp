#include "backend/sweep/sweeploop.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QLoggingCategory>
#include <QTimer>

#include <utility>

#include "backend/lifecycle/demodata.h"
#include "backend/store/retrypolicy.h"

namespace shardscope::backend {

Q_LOGGING_CATEGORY(lcSweepLoop, "shardscope.backend.sweeploop")

namespace {

using search::Study;

// The study's space with the sweep settings an override may change on an existing study
// (Study::overridableOnExistingStudy) taken from the experiment as overridden.
search::SearchSpace sweepSpace(const Study& study, const search::SearchSpace& effective,
                               const std::vector<std::string>& overrides) {
  search::SearchSpace space = study.space();
  for (const std::string& o : overrides) {
    const std::string key = o.substr(0, o.find('='));
    if (key == "search.concurrency") space.concurrency = effective.concurrency;
    if (key == "search.timeout_s") space.timeout_s = effective.timeout_s;
    if (key == "search.stop_grace_s") space.stop_grace_s = effective.stop_grace_s;
    if (key == "search.on_oom") space.on_oom = effective.on_oom;
  }
  return space;
}

}  // namespace

TrialRunner::Options sweepRunnerOptions(const Study& study, const SweepInput& input,
                                        const SweepLoop::Options& options) {
  TrialRunner::Options o;
  o.studyId = study.id();
  o.runsRoot = options.runsRoot;
  o.overrides = input.overrides;
  o.experiment = input.experiment;
  o.trainer = options.trainer;
  return o;
}

Result<SweepInput> SweepLoop::readInput(const QString& experimentPath,
                                        std::vector<std::string> overrides) {
  SweepInput input;
  input.experimentPath = QFileInfo(experimentPath).absoluteFilePath();
  input.overrides = std::move(overrides);
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  auto exp = spec::load_experiment(input.experimentPath.toStdString(), input.overrides, noPaths);
  if (!exp) return exp.error();
  if (!exp->search.present) {
    return fail(exp->source +
                ": no [search] section: a sweep needs one (objectives, sampler and "
                "[search.space.\"<field>\"] tables; see docs/config.md)");
  }
  auto space = search::parse_search_space(exp->search.toml, exp->source);
  if (!space) return space.error();
  input.space = std::move(*space);
  input.experiment = std::move(*exp);
  if (input.space.program.empty()) {  // shardtrain trials
    // The budget's own errors (Slurm without launch.device_memory_gib) before any trial.
    if (input.experiment.launch.kind == spec::LaunchKind::slurm) {
      if (auto budget = budgetFor(input.experiment); !budget) return budget.error();
    }
    input.shape = input.experiment;
  }
  return input;
}

Result<void> SweepLoop::prepareData(const SweepInput& input) {
  if (!input.shape || input.shape->launch.kind != spec::LaunchKind::local) return ok();
  if (auto made = ensureDemoData(*input.shape); !made) return made.error();
  return ok();
}

Result<SweptStudy> SweepLoop::openStudy(RunStore& store, const SweepInput& input,
                                        const QString& name, int maxRetries) {
  const QString studyName = name.isEmpty() ? QString::fromStdString(input.space.name) : name;
  const auto continued = [&](Study existing) -> Result<SweptStudy> {
    if (auto r = existing.checkOverrides(input.experiment, input.overrides); !r) return r.error();
    return SweptStudy{std::move(existing), true};
  };
  if (auto existing = Study::open(store, studyName)) return continued(std::move(*existing));
  Study::CreateOptions options;
  options.name = studyName;
  options.maxRetries = maxRetries;
  auto created = Study::create(store, input.experiment, options);
  if (!created && created.message().find("is taken") != std::string::npos) {
    if (auto existing = Study::open(store, studyName)) return continued(std::move(*existing));
  }
  if (!created) return created.error();
  return SweptStudy{std::move(*created), false};
}

SweepLoop::SweepLoop(RunStore& store, search::Study study, const SweepInput& input,
                     const Options& options, QObject* parent)
    : QObject(parent),
      m_store(store),
      m_study(std::move(study)),
      m_runner(store, input.experimentPath, sweepSpace(m_study, input.space, input.overrides),
               sweepRunnerOptions(m_study, input, options)),
      m_scheduler(m_runner),
      m_control(store, m_study.id(), m_runner),
      m_notify(input.experiment.notify, {QFileInfo(input.experimentPath).absolutePath(),
                                         NotifyCommands::Options{}.timeoutMs}) {
  const spec::NotifySection& notify = input.experiment.notify;
  if (!notify.on_stall.empty()) m_runner.setStallAfter(notify.stall_after_min * 60.0);
  connect(&m_runner, &TrialRunner::trialStalled, this,
          [this](qint64, qint64 runId, double silentS) {
            NotifyFacts facts = factsOf(runId);
            facts.stalledMin = silentS / 60.0;
            m_notify.run(NotifyEvent::stall, facts);
          });
  connect(&m_control, &SweepControl::controlChanged, this, [this](StudyControl c) {
    emit controlChanged(c);
    if (c == StudyControl::stop) m_stopped = true;
    fill();
  });
  connect(&m_control, &SweepControl::trialRequestHandled, this, &SweepLoop::trialRequestHandled);
  connect(&m_runner, &TrialRunner::trialReplanned, this, &SweepLoop::trialReplanned);
  m_runner.setPruneCallback(
      [this](qint64 number, qint64 step, double value) { return judge(number, step, value); });
  connect(&m_scheduler, &Scheduler::trialFinished, this, [this](const TrialOutcome& outcome) {
    if (!m_notify.commandFor(NotifyEvent::end).isEmpty()) {
      NotifyFacts facts = factsOf(outcome.runId);
      if (facts.status.isEmpty())
        facts.status = QString::fromUtf8(to_string(runStatusOf(outcome.state)));
      if (facts.error.isEmpty()) facts.error = outcome.error;
      if (!outcome.values.empty()) facts.objective = outcome.values.front();
      m_notify.run(NotifyEvent::end, facts);
    }
    emit trialEnded(outcome);
    fill();
  });
  connect(&m_scheduler, &Scheduler::trialRejected, this,
          [this](qint64 number, const QString& error) {
            emit trialRejected(number, error);
            fill();
          });
}

SweepLoop::~SweepLoop() = default;

Result<void> SweepLoop::start() {
  // A study that ended (complete, or stopped by the user) and is swept again is running again.
  if (m_study.record().status != StudyStatus::running) {
    if (auto r = m_store.setStudyStatus(m_study.id(), StudyStatus::running).get(); !r) return r;
  }
  if (auto r = m_control.start(); !r) return r;
  m_clock.start();
  // Follows the trials a killed sweep left running (Study::orphanedTrials) to their own end.
  auto orphans = m_study.orphanedTrials();
  if (!orphans) return orphans.error();
  for (const search::StudyTrial& t : *orphans) {
    if (auto r = m_runner.attach(t.trial.number, t.runId); !r) {
      emit trialNotReattached(t.trial.number, QString::fromStdString(r.message()));
    } else {
      emit trialReattached(t.trial.number, t.trial.params);
    }
  }
  QTimer::singleShot(0, this, [this] { fill(); });
  return ok();
}

// Asks for as many trials as there are free slots; ends when nothing runs and nothing is left
// to ask. "Nothing to ask" is not final: a trial that fails later may be retried.
void SweepLoop::fill() {
  if (m_askWaiting) return;  // the run log refused the last ask: its retry's timer calls again
  const double budget = m_study.space().timeout_s;
  if (budget > 0 && double(m_clock.elapsed()) / 1000.0 >= budget) m_stopped = true;
  bool more = !m_stopped;
  // Paused: ask for no trial and wait for a resume or a stop, even with nothing running.
  if (more && m_control.control() == StudyControl::pause) return;
  while (more && m_scheduler.freeSlots() > 0) {
    // Owned by this process until its run monitor takes over: a sweep killed in between
    // leaves the trial to be failed as lost, not running forever.
    search::AskOptions owner;
    owner.ownerPid = QCoreApplication::applicationPid();
    auto asked = m_study.tryAsk(owner);
    if (!asked && !asked.error().permanent && kRecordRetry.mayRetry(m_askTries)) {
      // The run log cannot be reached now: the running trials go on (their monitors retry
      // too), and the ask is tried again later instead of ending the sweep.
      ++m_askTries;
      const int delayMs = kRecordRetry.delayMs(m_askTries);
      qCWarning(lcSweepLoop, "study %s: cannot ask for a trial: %s (try %d; the next in %.1f s)",
                qPrintable(m_study.name()), asked.message().c_str(), m_askTries, delayMs / 1000.0);
      if (!m_askWaiting) {
        m_askWaiting = true;
        QTimer::singleShot(delayMs, this, [this] {
          m_askWaiting = false;
          fill();
        });
      }
      return;
    }
    if (!asked) {
      m_error = asked.message();
      m_stopped = true;
      more = false;
      break;
    }
    m_askTries = 0;
    if (!*asked) {
      more = false;
      break;
    }
    const search::AskedTrial& t = **asked;
    emit trialStarting(t.number, t.attempt, t.params);
    m_scheduler.enqueue(t.number, t.params, t.runId);
  }
  if (!more && m_scheduler.idle()) emit ended();
}

bool SweepLoop::judge(qint64 number, qint64 step, double value) {
  if (auto r = m_study.report(number, step, value); !r) {
    emit reportFailed(number, QString::fromStdString(r.message()));
    return false;
  }
  auto prune = m_study.shouldPrune(number);
  return prune && *prune;
}

Result<SweepOutcome> SweepLoop::finish() {
  if (!m_error.empty()) return fail(m_error);
  auto summary = m_study.summary();
  if (!summary) return summary.error();
  const search::StudyCounts& c = summary->counts;
  const bool stopped = m_control.control() == StudyControl::stop;
  // The study has ended unless another process still runs some of its trials; a study left
  // running with no process is what the dashboard offers to adopt.
  QString status = QStringLiteral("running");  // another process still runs some of its trials
  if (stopped) {
    if (auto r = m_store.setStudyStatus(m_study.id(), StudyStatus::stopped).get(); !r)
      return r.error();
    status = studyStatusName(StudyStatus::stopped);
  } else if (c.running == 0 && c.queued == 0) {
    if (auto r = m_store.setStudyStatus(m_study.id(), StudyStatus::complete).get(); !r)
      return r.error();
    status = studyStatusName(StudyStatus::complete);
  }
  SweepOutcome outcome{std::move(*summary), stopped};
  notifySweepEnd(outcome, status);
  return outcome;
}

NotifyFacts SweepLoop::factsOf(qint64 runId) {
  NotifyFacts facts;
  facts.runId = runId;
  facts.study = m_study.name();
  if (!m_notifyReader) {
    auto reader = m_store.reader();
    if (!reader) return facts;
    m_notifyReader.emplace(std::move(*reader));
  }
  auto run = m_notifyReader->run(runId);
  if (!run || !*run) return facts;
  const RunRecord& record = **run;
  facts.runName = record.name;
  facts.status = QString::fromUtf8(to_string(record.status));
  facts.error = record.error;
  facts.runDir = record.runDir;
  facts.objective = record.objective;
  return facts;
}

void SweepLoop::notifySweepEnd(const SweepOutcome& outcome, const QString& status) {
  if (!m_notify.commandFor(NotifyEvent::sweepEnd).isEmpty()) {
    NotifyFacts facts;
    facts.study = m_study.name();
    facts.sweepStatus = status;
    if (const auto& best = outcome.summary.best) {
      const NotifyFacts run = factsOf(best->runId);
      facts.bestTrial = best->trial.number;
      facts.bestRun = run.runName;
      if (!best->trial.values.empty()) facts.bestObjective = best->trial.values.front();
    }
    m_notify.run(NotifyEvent::sweepEnd, facts);
  }
  m_notify.waitForAll();
}

}  // namespace shardscope::backend
