// `autotune EXP.toml [--set k=v ...] [--budget-minutes N] [--objective tokens_per_s|mfu]
// [--out WINNER.toml] [--steps N] [--warmup N] [--name STUDY]`: the fastest sharding and batching
// setup of the experiment that fits the device budget, found by measuring short runs
// (backend/sweep/ autotune.h: coordinate descent from the estimate's most frugal fitting start).
// This verb loads the experiment, wires the tuner to the run log and this process's SIGINT, prints
// a line per candidate on stderr, then the table of every candidate (or one JSON object) and writes
// the winner as a new experiment file. The run log holds the search as study STUDY (autotune.h),
// which the dashboard reads for its progress and its Compare panel; the study's control stops it as
// SIGINT does (the dashboard starts this verb in its own session and stops it so). Exit 0 with a
// winner, 3 when no candidate could be measured, 4 when the user stopped it (the best so far is
// still written), 2 on bad input, 1 on an error.
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonObject>
#include <QSaveFile>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/cli/cli_common.h"
#include "app/cli/launching.h"
#include "backend/sweep/autotune.h"
#include "backend/sweep/trialrunner.h"

namespace shardscope::cli {

void addAutotuneVerb(CLI::App& app, Globals& g);

namespace {

using backend::TuneCandidate;
using backend::TuneStatus;

struct AutotuneArgs {
  std::string experiment;
  std::vector<std::string> overrides;
  double budgetMinutes = 30;
  std::string objective = "tokens_per_s";
  std::string out;
  std::int64_t steps = 10;
  std::int64_t warmup = 3;
  std::string name;
};

// The winner file's default path: "<stem>.autotuned.toml" beside the experiment.
QString defaultOut(const QString& experiment) {
  const QFileInfo info(experiment);
  return info.absoluteDir().filePath(info.completeBaseName() + ".autotuned.toml");
}

QString statusText(const TuneCandidate& c) {
  if (c.status == TuneStatus::infeasible) return QStringLiteral("infeasible(estimate)");
  if (c.status == TuneStatus::duplicate)
    return QStringLiteral("duplicate of #%1").arg(c.duplicateOf);
  return QString::fromLatin1(backend::tuneStatusName(c.status));
}

// One line of the settings for people: the values in tuneFields() order, shortened.
std::string settingsText(const backend::TuneSettings& s) {
  char line[160];
  std::snprintf(line, sizeof line, "%-13s %-5s %-5s %-5s %4lld %-4s %-5s %2d %-5s",
                spec::to_string(s.strategy).data(), s.offloadParams ? "on" : "off",
                s.offloadOptimizer ? "on" : "off", s.activationCheckpointing ? "on" : "off",
                static_cast<long long>(s.microBatchSize),
                spec::to_string(s.backwardPrefetch).data(), s.forwardPrefetch ? "on" : "off",
                s.maxInflightGathers, spec::to_string(s.wrapPolicy).data());
  return line;
}

constexpr double kMiB = 1024.0 * 1024.0;

void printTable(const backend::TuneOutcome& outcome) {
  std::printf("%3s %-13s %-5s %-5s %-5s %4s %-4s %-5s %2s %-5s %9s %9s %12s %7s  %s\n", "#",
              "strategy", "offp", "offo", "ac", "mbs", "bwd", "fwd", "ig", "wrap", "est MiB",
              "peak MiB", "tok/s/rank", "mfu", "status (run)");
  for (const TuneCandidate& c : outcome.candidates) {
    const std::string tokens =
        std::isfinite(c.tokensPerS) ? std::to_string(std::lround(c.tokensPerS)) : "-";
    char mfu[16] = "-";
    if (std::isfinite(c.mfu)) std::snprintf(mfu, sizeof mfu, "%.4f", c.mfu);
    char peak[16] = "-";
    if (c.peakBytes > 0) std::snprintf(peak, sizeof peak, "%.2f", double(c.peakBytes) / kMiB);
    std::printf("%3d %s %9.2f %9s %12s %7s  %s%s%s\n", c.number, settingsText(c.settings).c_str(),
                double(c.estimateBytes) / kMiB, peak, tokens.c_str(), mfu,
                qPrintable(statusText(c)), c.runName.isEmpty() ? "" : " (",
                c.runName.isEmpty() ? "" : (c.runName.toStdString() + ")").c_str());
  }
}

// The experiment file as the user wrote it (with --set, without the runner's trainer path),
// with the winner's settings.
QString writeWinner(const AutotuneArgs& a, spec::Experiment exp,
                    const backend::TuneSettings& winner) {
  backend::applyTune(exp, winner);
  QString path = a.out.empty() ? defaultOut(QString::fromStdString(a.experiment))
                               : QString::fromStdString(a.out);
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly) ||
      file.write(QByteArray::fromStdString(spec::write_experiment_toml(exp))) < 0 ||
      !file.commit()) {
    exitWith(kExitError,
             path.toStdString() + ": cannot write the winner: " + file.errorString().toStdString());
  }
  return path;
}

void autotune(const AutotuneArgs& a, const Globals& g) {
  const backend::RunLifecycle life = lifecycle(g);
  // Read once: as written (with --set) for the winner's file, prepared for the runs.
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  const spec::Experiment written =
      orExit(spec::load_experiment(a.experiment, a.overrides, noPaths), kExitUsage);
  backend::LoadReport report;
  auto exp = life.prepareForRun(written, &report);
  if (!exp) exitWith(report.invalid ? kExitUsage : kExitError, exp.message());
  const auto budget = orExit(backend::budgetFor(*exp), kExitUsage);
  auto store = openStore(g);
  backend::Autotuner::Options options;
  options.objective =
      a.objective == "mfu" ? backend::TuneObjective::mfu : backend::TuneObjective::tokensPerS;
  options.steps = a.steps;
  options.warmup = a.warmup;
  options.budgetMinutes = a.budgetMinutes;
  options.studyName = QString::fromStdString(a.name);
  auto follow = [](backend::RunStore& s, backend::RunHandle& h, qint64 id,
                   backend::FollowOptions o) { return followRun(s, h, id, std::move(o), true); };
  backend::Autotuner tuner(*store, life,
                           QFileInfo(QString::fromStdString(a.experiment)).absoluteFilePath(), *exp,
                           budget, options, follow);
  const auto outcome = orExit(tuner.run([](const TuneCandidate& c) {
    std::fprintf(
        stderr, "candidate %d %s: %s%s%s\n", c.number, qPrintable(statusText(c)),
        settingsText(c.settings).c_str(),
        std::isfinite(c.tokensPerS)
            ? (" " + std::to_string(std::lround(c.tokensPerS)) + " tokens/s per rank").c_str()
            : "",
        c.error.isEmpty() ? "" : (": " + c.error.toStdString()).c_str());
  }));
  QString winnerFile;
  if (outcome.winner)
    winnerFile = writeWinner(a, written, outcome.candidates[*outcome.winner].settings);
  // The study ends after the file is written: whoever sees it end (the dashboard) can open it.
  if (auto recorded = tuner.finish(winnerFile); !recorded)
    std::fprintf(stderr, "warning: %s\n", recorded.message().c_str());
  if (g.json) {
    QJsonArray candidates;
    for (const TuneCandidate& c : outcome.candidates)
      candidates.append(backend::tuneCandidateJson(c));
    printJson({{"experiment", QFileInfo(QString::fromStdString(a.experiment)).absoluteFilePath()},
               {"objective", QString::fromStdString(a.objective)},
               {"study", tuner.studyName()},
               {"budget", QJsonObject{{"bytes", qint64(budget.bytes)},
                                      {"source", QString::fromStdString(budget.source)},
                                      {"gpu", budget.gpu}}},
               {"target", !outcome.cpuTarget   ? "unknown"
                          : *outcome.cpuTarget ? "cpu"
                                               : "cuda"},
               {"candidates", candidates},
               {"winner", outcome.winner ? QJsonValue(*outcome.winner) : QJsonValue()},
               {"winner_file", winnerFile.isEmpty() ? QJsonValue() : QJsonValue(winnerFile)},
               {"stopped", outcome.stopped},
               {"out_of_time", outcome.outOfTime}});
  } else {
    printTable(outcome);
    if (outcome.winner) {
      const TuneCandidate& w = outcome.candidates[*outcome.winner];
      std::printf("winner: #%d, %ld tokens/s per rank (mfu %.4f), written to %s\n", w.number,
                  std::lround(w.tokensPerS), w.mfu, qPrintable(winnerFile));
    }
    if (outcome.outOfTime)
      std::printf("the time budget (%g min) ended the search\n", a.budgetMinutes);
    std::printf("study %s in the run log holds every candidate (the dashboard's Compare panel)\n",
                qPrintable(tuner.studyName()));
  }
  std::fflush(stdout);
  if (outcome.stopped) throw VerbExit{kExitStopped};
  if (!outcome.winner) exitWith(kExitFailed, "no candidate could be measured");
}

}  // namespace

void addAutotuneVerb(CLI::App& app, Globals& g) {
  auto args = std::make_shared<AutotuneArgs>();
  auto* cmd = app.add_subcommand(
      "autotune", "Find the fastest sharding and batching setup that fits, by measuring it");
  cmd->add_option("EXP.toml", args->experiment, "Experiment file (TOML)")->required();
  cmd->add_option("--set", args->overrides, "Override a field first: dotted.key=value (repeatable)")
      ->type_name("K=V")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option(
         "--budget-minutes", args->budgetMinutes,
         "No candidate starts after this many minutes (the first run always does); 0: no limit "
         "(default 30)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--objective", args->objective,
                  "What to maximise: tokens/s per rank or MFU (default tokens_per_s)")
      ->check(CLI::IsMember({"tokens_per_s", "mfu"}));
  cmd->add_option("--out", args->out,
                  "Winner's experiment file (default: EXP's stem + .autotuned.toml beside it)")
      ->type_name("PATH");
  cmd->add_option("--steps", args->steps, "Measured steps per candidate (default 10)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", args->warmup, "Steps run first and not measured (default 3)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--name", args->name,
                  "Study recording the candidates in the run log (default: the experiment's name "
                  "+ -autotune, numbered when taken)")
      ->type_name("STUDY");
  cmd->callback([args, &g] { autotune(*args, g); });
}

}  // namespace shardscope::cli
