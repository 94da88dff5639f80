// `sweep EXP.toml [--set k=v ...] [--name NAME] [--max-retries N]`: runs the experiment's
// [search] study to its end through backend::SweepLoop (backend/sweep/sweeploop.h: ask -> run
// the trial -> record, pruning, the user's control, continuing a study and reattaching the trials
// a killed sweep left running; with [search.pbt], backend::PbtLoop: cmd_pbt.h). This verb only
// reads the arguments, wires the loop to the run log and this process's event loop, and prints a
// line per event and the best trial at the end; exit 0 when the study finished (even with failed
// trials), 1 on an error, 2 on bad input, 3 when no trial completed (a search by verdicts,
// probes.good_rate, whose complete trials wait for marks is no failure: exit 0), 4 when the user
// stopped it.
#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/cli/cli_common.h"
#include "app/cli/cmd_pbt.h"
#include "backend/sweep/sweeploop.h"
#include "spec/search_names.h"

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

// Prints the loop's events, a line each, as docs/cli.md shows them.
void printEvents(backend::SweepLoop& loop) {
  const QString name = loop.study().name();
  const std::vector<spec::Objective> objectives = loop.study().space().objectives;
  QObject::connect(&loop, &backend::SweepLoop::trialStarting,
                   [](qint64 number, int attempt, const search::TrialParams& params) {
                     std::printf(
                         "trial %lld start%s: %s\n", static_cast<long long>(number),
                         attempt > 0 ? (" (retry " + std::to_string(attempt) + ")").c_str() : "",
                         paramsText(params).c_str());
                     std::fflush(stdout);
                   });
  QObject::connect(&loop, &backend::SweepLoop::trialReplanned,
                   [](qint64 number, qint64, int attempt, const QString& change) {
                     std::printf("trial %lld ran out of memory: attempt %d replans it, %s\n",
                                 static_cast<long long>(number), attempt,
                                 change.toStdString().c_str());
                     std::fflush(stdout);
                   });
  QObject::connect(
      &loop, &backend::SweepLoop::trialEnded, [objectives](const backend::TrialOutcome& o) {
        const std::string state = o.stopped ? "stopped" : search::trialStateName(o.state);
        std::printf(
            "trial %lld %s%s%s\n", static_cast<long long>(o.number), state.c_str(),
            o.values.empty() ? "" : (" " + objectiveValuesText(o.values, objectives)).c_str(),
            o.error.isEmpty() ? "" : (": " + o.error.toStdString()).c_str());
        std::fflush(stdout);
      });
  QObject::connect(
      &loop, &backend::SweepLoop::trialRejected, [](qint64 number, const QString& error) {
        std::printf("trial %lld rejected: %s\n", static_cast<long long>(number), qPrintable(error));
        std::fflush(stdout);
      });
  QObject::connect(&loop, &backend::SweepLoop::trialReattached,
                   [](qint64 number, const search::TrialParams& params) {
                     std::printf("trial %lld reattached: %s\n", static_cast<long long>(number),
                                 paramsText(params).c_str());
                     std::fflush(stdout);
                   });
  QObject::connect(&loop, &backend::SweepLoop::trialNotReattached,
                   [](qint64 number, const QString& error) {
                     std::printf("trial %lld not reattached: %s\n", static_cast<long long>(number),
                                 qPrintable(error));
                     std::fflush(stdout);
                   });
  QObject::connect(
      &loop, &backend::SweepLoop::reportFailed, [](qint64 number, const QString& error) {
        std::fprintf(stderr, "trial %lld: %s\n", static_cast<long long>(number), qPrintable(error));
      });
  QObject::connect(&loop, &backend::SweepLoop::controlChanged, [name](backend::StudyControl c) {
    const char* what = c == backend::StudyControl::pause ? "paused: no new trial"
                       : c == backend::StudyControl::stop
                           ? "stopped: the running trials are told to stop"
                           : "resumed";
    std::printf("study %s %s\n", qPrintable(name), what);
    std::fflush(stdout);
  });
  QObject::connect(&loop, &backend::SweepLoop::trialRequestHandled,
                   [](qint64 number, backend::TrialRequest request, bool done) {
                     if (!done) return;
                     std::printf("trial %lld: %s as asked\n", static_cast<long long>(number),
                                 request == backend::TrialRequest::prune ? "pruning" : "stopping");
                     std::fflush(stdout);
                   });
}

void runSweep(const SweepArgs& a, const Globals& g) {
  using backend::SweepLoop;
  auto input =
      orExit(SweepLoop::readInput(QString::fromStdString(a.experiment), a.overrides), kExitUsage);
  orExit(SweepLoop::prepareData(input));
  auto store = openStore(g);
  auto opened =
      orExit(SweepLoop::openStudy(*store, input, QString::fromStdString(a.name), a.maxRetries),
             kExitUsage);
  if (opened.continued) std::printf("continuing study %s\n", qPrintable(opened.study.name()));
  SweepLoop::Options options;
  options.runsRoot = runsRoot(g);
  const QString trainer = QDir(QCoreApplication::applicationDirPath()).filePath("shardtrain");
  if (QFileInfo(trainer).isExecutable()) options.trainer = trainer;
  if (input.space.pbt) return runPbtSweep(*store, std::move(opened), input, options);
  SweepLoop loop(*store, std::move(opened.study), input, options);
  const Study& study = loop.study();
  std::printf(
      "study %s: %lld trials, %d at once (%s sampler%s)\n", qPrintable(study.name()),
      static_cast<long long>(study.space().n_trials), loop.slotCount(),
      study.space().sampler.type.c_str(),
      study.autoChoice().has_value() ? (": " + search::describe(*study.autoChoice())).c_str() : "");
  std::fflush(stdout);
  printEvents(loop);
  QObject::connect(&loop, &SweepLoop::ended, [] { QCoreApplication::quit(); });
  orExit(loop.start());
  QCoreApplication::exec();

  const auto outcome = orExit(loop.finish());
  const search::StudySummary& summary = outcome.summary;
  const search::StudyCounts& c = summary.counts;
  std::printf("study %s %s: %d complete, %d pruned, %d failed, %d infeasible, %d oom\n",
              qPrintable(study.name()), outcome.stopped ? "stopped by the user" : "finished",
              c.complete, c.pruned, c.failed, c.infeasible, c.oom);
  if (summary.best) {
    std::printf("best trial %lld: %s  (%s)\n", static_cast<long long>(summary.best->trial.number),
                objectiveValuesText(summary.best->trial.values, study.space().objectives).c_str(),
                paramsText(summary.best->trial.params).c_str());
  }
  std::fflush(stdout);
  if (outcome.stopped) throw VerbExit{kExitStopped};  // `sweep` again continues it
  if (summary.best) return;
  // A search by people's verdicts: complete trials have no value until their answers are marked.
  const auto& objectives = study.space().objectives;
  const bool byVerdicts = std::any_of(objectives.begin(), objectives.end(), [](const auto& o) {
    return o.metric == spec::kGoodRateObjective;
  });
  if (byVerdicts && c.complete > 0) {
    std::printf(
        "no trial has a value yet: %s is read from verdicts; mark the trials' answers in the "
        "Samples view or with `shardscope-cli verdict RUN PROBE STEP good|bad`\n",
        std::string(spec::kGoodRateObjective).c_str());
    return;
  }
  // Nothing to show for the sweep: a failure for scripts (docs/cli.md, exit 3), with the one
  // reason when every trial was refused by the memory check before it started.
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
