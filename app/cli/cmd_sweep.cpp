// `sweep EXP.toml [--set k=v ...] [--name NAME] [--max-retries N]`: runs the experiment's
// [search] study to its end on this machine's slots (or as Slurm jobs, at most
// search.concurrency queued or running): ask (backend/search/study.h) -> run the trial
// (trialrunner.h, scheduler.h) -> the runner records its end in the run log, which the next ask
// reads. Intermediate `eval` values go through the study's pruner. Started again on the same
// study it continues: the trials a killed sweep left running are reattached (their ranks outlive
// it) and followed to their own end; those that never launched are failed as lost and retried;
// numbers go on. Prints a line per trial start and end and the best trial at the end; exit 0
// when the study finished (even with failed trials), 1 on an error, 2 on bad input.
#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QTimer>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "app/cli/cli_common.h"
#include "backend/launch/demodata.h"
#include "backend/search/scheduler.h"
#include "backend/search/study.h"
#include "backend/search/sweepcontrol.h"
#include "backend/search/trialrunner.h"
#include "trainer/spec/experiment.h"

namespace shardscope::cli {

void addSweepVerb(CLI::App& app, Globals& g);

namespace {

using search::Study;

struct SweepArgs {
  std::string experiment;
  std::string name;
  int maxRetries = Study::kDefaultMaxRetries;
  std::vector<std::string> overrides;  // --set k=v, as `run --set`
};

std::string paramsText(const search::TrialParams& params) {
  std::string out;
  for (const auto& [name, value] : params) {
    out += (out.empty() ? "" : " ") + name + "=" + search::format_value(value);
  }
  return out;
}

std::string valuesText(const std::vector<double>& values) {
  std::string out;
  for (const double v : values) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    out += (out.empty() ? "" : ",") + std::string(buf);
  }
  return out;
}

// The ask -> run -> record loop of one study, driven by the scheduler's signals.
class SweepLoop : public QObject {
 public:
  SweepLoop(Study& study, backend::TrialRunner& runner, backend::Scheduler& scheduler,
            backend::SweepControl& control)
      : m_study(study), m_scheduler(scheduler), m_control(control) {
    m_clock.start();
    connect(&control, &backend::SweepControl::controlChanged, this,
            [this](backend::StudyControl c) {
              const char* what = c == backend::StudyControl::pause ? "paused: no new trial"
                                 : c == backend::StudyControl::stop
                                     ? "stopped: the running trials are told to stop"
                                     : "resumed";
              std::printf("study %s %s\n", qPrintable(m_study.name()), what);
              std::fflush(stdout);
              if (c == backend::StudyControl::stop) m_stopped = true;
              fill();
            });
    connect(&control, &backend::SweepControl::trialRequestHandled, this,
            [](qint64 number, backend::TrialRequest request, bool done) {
              if (!done) return;
              std::printf("trial %lld: %s as asked\n", static_cast<long long>(number),
                          request == backend::TrialRequest::prune ? "pruning" : "stopping");
              std::fflush(stdout);
            });
    runner.setPruneCallback(
        [this](qint64 number, qint64 step, double value) { return judge(number, step, value); });
    connect(&scheduler, &backend::Scheduler::trialFinished, this,
            [this](const backend::TrialOutcome& outcome) { onFinished(outcome); });
    connect(&scheduler, &backend::Scheduler::trialRejected, this,
            [this](qint64 number, const QString& error) {
              std::printf("trial %lld rejected: %s\n", static_cast<long long>(number),
                          qPrintable(error));
              std::fflush(stdout);
              fill();
            });
  }

  // Asks for as many trials as there are free slots; quits when nothing runs and nothing is
  // left to ask. "Nothing to ask" is not final: a trial that fails later may be retried.
  void fill() {
    const double budget = m_study.space().timeout_s;
    if (budget > 0 && double(m_clock.elapsed()) / 1000.0 >= budget) m_stopped = true;
    bool more = !m_stopped;
    // Paused: ask for no trial and wait for a resume or a stop, even with nothing running.
    if (more && m_control.control() == backend::StudyControl::pause) return;
    while (more && m_scheduler.freeSlots() > 0) {
      // Owned by this process until its run monitor takes over: a sweep killed in between
      // leaves the trial to be failed as lost, not running forever.
      search::AskOptions owner;
      owner.ownerPid = QCoreApplication::applicationPid();
      auto asked = m_study.tryAsk(owner);
      if (!asked) {
        m_error = asked.message();
        m_stopped = true;
        more = false;
        break;
      }
      if (!*asked) {
        more = false;
        break;
      }
      const search::AskedTrial& t = **asked;
      std::printf("trial %lld start%s: %s\n", static_cast<long long>(t.number),
                  t.attempt > 0 ? (" (retry " + std::to_string(t.attempt) + ")").c_str() : "",
                  paramsText(t.params).c_str());
      std::fflush(stdout);
      m_scheduler.enqueue(t.number, t.params, t.runId);
    }
    if (!more && m_scheduler.idle()) QCoreApplication::quit();
  }

  const std::string& error() const { return m_error; }

 private:
  bool judge(qint64 number, qint64 step, double value) {
    if (auto r = m_study.report(number, step, value); !r) {
      std::fprintf(stderr, "trial %lld: %s\n", static_cast<long long>(number), r.message().c_str());
      return false;
    }
    auto prune = m_study.shouldPrune(number);
    return prune && *prune;
  }

  void onFinished(const backend::TrialOutcome& o) {
    const std::string state = o.stopped ? "stopped" : search::trialStateName(o.state);
    std::printf("trial %lld %s%s%s\n", static_cast<long long>(o.number), state.c_str(),
                o.values.empty() ? "" : (" " + valuesText(o.values)).c_str(),
                o.error.isEmpty() ? "" : (": " + o.error.toStdString()).c_str());
    std::fflush(stdout);
    fill();
  }

  Study& m_study;
  backend::Scheduler& m_scheduler;
  backend::SweepControl& m_control;
  QElapsedTimer m_clock;
  bool m_stopped = false;  // an error, search.timeout_s or the user's stop: ask no more
  std::string m_error;
};

// Opens the study named by --name or [search] name, creating it on the first sweep (a sweep
// started at the same moment may create it first: then it is opened).
Study openOrCreate(backend::RunStore& store, const SweepArgs& a, const search::SearchSpace& space) {
  const QString name =
      a.name.empty() ? QString::fromStdString(space.name) : QString::fromStdString(a.name);
  const QString path = QString::fromStdString(a.experiment);
  if (auto existing = Study::open(store, name)) {
    orExit(existing->checkOverrides(path, a.overrides), kExitUsage);
    std::printf("continuing study %s\n", qPrintable(name));
    return std::move(*existing);
  }
  Study::CreateOptions options;
  options.name = name;
  options.maxRetries = a.maxRetries;
  options.overrides = a.overrides;
  auto created = Study::create(store, path, options);
  if (!created && created.message().find("is taken") != std::string::npos) {
    if (auto existing = Study::open(store, name)) {
      orExit(existing->checkOverrides(path, a.overrides), kExitUsage);
      std::printf("continuing study %s\n", qPrintable(name));
      return std::move(*existing);
    }
  }
  return orExit(std::move(created), kExitUsage);
}

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
  }
  return space;
}

// Follows the trials a killed sweep left running (Study::orphanedTrials) to their own end.
void reattachOrphans(Study& study, backend::TrialRunner& runner) {
  auto orphans = orExit(study.orphanedTrials());
  for (const search::StudyTrial& t : orphans) {
    const auto number = static_cast<long long>(t.trial.number);
    if (auto r = runner.attach(t.trial.number, t.runId); !r) {
      std::printf("trial %lld not reattached: %s\n", number, r.message().c_str());
    } else {
      std::printf("trial %lld reattached: %s\n", number, paramsText(t.trial.params).c_str());
    }
  }
  std::fflush(stdout);
}

void runSweep(const SweepArgs& a, const Globals& g) {
  const QString path = QFileInfo(QString::fromStdString(a.experiment)).absoluteFilePath();
  auto space = orExit(Study::readSpace(path, a.overrides), kExitUsage);
  if (space.program.empty()) {  // shardtrain trials: the bundled demo makes its data first
    spec::LoadOptions noPaths;
    noPaths.check_paths = false;
    auto shape =
        orExit(spec::load_experiment(path.toStdString(), a.overrides, noPaths), kExitUsage);
    if (shape.launch.kind == spec::LaunchKind::local) orExit(backend::ensureDemoData(shape));
    // The budget's own errors (Slurm without launch.device_memory_gib) before any trial.
    if (shape.launch.kind == spec::LaunchKind::slurm)
      (void)orExit(backend::budgetFor(shape), kExitUsage);
  }
  auto store = openStore(g);
  SweepArgs args = a;
  args.experiment = path.toStdString();
  Study study = openOrCreate(*store, args, space);
  backend::TrialRunner::Options options;
  options.studyId = study.id();
  options.runsRoot = runsRoot(g);
  options.overrides = a.overrides;
  const QString trainer = QDir(QCoreApplication::applicationDirPath()).filePath("shardtrain");
  if (QFileInfo(trainer).isExecutable()) options.trainer = trainer;
  backend::TrialRunner runner(*store, path, sweepSpace(study, space, a.overrides), options);
  backend::Scheduler scheduler(runner);
  std::printf("study %s: %lld trials, %d at once (%s sampler)\n", qPrintable(study.name()),
              static_cast<long long>(study.space().n_trials), scheduler.slotCount(),
              study.space().sampler.type.c_str());
  std::fflush(stdout);
  // A study that ended (complete, or stopped by the user) and is swept again is running again.
  if (study.record().status != backend::StudyStatus::running)
    orExit(store->setStudyStatus(study.id(), backend::StudyStatus::running).get());
  backend::SweepControl control(*store, study.id(), runner);
  orExit(control.start());
  SweepLoop loop(study, runner, scheduler, control);
  reattachOrphans(study, runner);
  QTimer::singleShot(0, &loop, [&loop] { loop.fill(); });
  QCoreApplication::exec();
  if (!loop.error().empty()) exitWith(kExitError, loop.error());

  auto summary = orExit(study.summary());
  const search::StudyCounts& c = summary.counts;
  const bool stopped = control.control() == backend::StudyControl::stop;
  // The study has ended unless another process still runs some of its trials; a study left
  // running with no process is what the dashboard offers to adopt.
  if (stopped) {
    orExit(store->setStudyStatus(study.id(), backend::StudyStatus::stopped).get());
  } else if (c.running == 0 && c.queued == 0) {
    orExit(store->setStudyStatus(study.id(), backend::StudyStatus::complete).get());
  }
  std::printf("study %s %s: %d complete, %d pruned, %d failed, %d infeasible, %d oom\n",
              qPrintable(study.name()), stopped ? "stopped by the user" : "finished", c.complete,
              c.pruned, c.failed, c.infeasible, c.oom);
  if (summary.best) {
    std::printf("best trial %lld: %s  (%s)\n", static_cast<long long>(summary.best->trial.number),
                valuesText(summary.best->trial.values).c_str(),
                paramsText(summary.best->trial.params).c_str());
  }
  std::fflush(stdout);
  if (stopped) throw VerbExit{kExitStopped};  // `sweep` again continues it
  if (summary.best) return;
  // Nothing to show for the sweep: a failure for scripts (docs/cli.md, exit 3), with the one
  // reason when every trial was refused by the memory check before it started.
  std::fflush(stdout);
  const int ended = c.complete + c.pruned + c.failed + c.infeasible + c.oom;
  if (ended > 0 && c.infeasible == ended) {
    QString why;
    for (const auto& t : summary.trials)
      if (t.status == spec::RunStatus::infeasible && !t.error.isEmpty()) {
        why = t.error;
        break;
      }
    exitWith(kExitFailed, "no trial completed: every trial (" + std::to_string(ended) +
                              ") was infeasible, none was started: " + why.toStdString());
  }
  exitWith(kExitFailed, "no trial completed");
}

}  // namespace

void addSweepVerb(CLI::App& app, Globals& g) {
  auto args = std::make_shared<SweepArgs>();
  auto* sweep = app.add_subcommand(
      "sweep", "Run the experiment's [search] study to its end (continues it when started again)");
  sweep->add_option("EXP.toml", args->experiment, "Experiment file with a [search] section")
      ->required();
  sweep->add_option("--set", args->overrides,
                    "Override a field before the study is created or continued: dotted.key=value "
                    "(repeatable; as `run --set`)");
  sweep->add_option("--name", args->name, "Study name (default: search.name or the file's stem)");
  sweep->add_option("--max-retries", args->maxRetries,
                    "Retries of a failed trial, for a new study (default 1)");
  sweep->callback([args, &g] { runSweep(*args, g); });
}

}  // namespace shardscope::cli
