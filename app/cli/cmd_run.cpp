// `run EXP.toml [--set k=v ...] [--detach]` and the hidden `supervise RUN` that a detached run
// leaves behind. A run: validate (nothing starts on an error: exit 2), create the run in the
// store, write trial.toml into its run directory, start the ranks, then follow them to the end
// (attached) or hand them to a supervisor in its own session (detached). The steps are
// backend/lifecycle's RunLifecycle; this file prints.
#include <unistd.h>

#include <QFileInfo>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <utility>

#include "app/cli/cli_common.h"
#include "app/cli/launching.h"
#include "backend/notifycommand.h"

namespace shardscope::cli {
namespace {

using backend::RunRecord;
using backend::RunStore;

struct RunArgs {
  std::string experiment;
  std::vector<std::string> overrides;
  bool detach = false;
  bool replanOnOom = false;  // an attempt that runs out of memory runs again in the next plan
};

// Loads and validates through the lifecycle (the demo's data is written first when it is
// missing); exits 2 on the experiment's errors, 1 on others.
spec::Experiment loadForRun(const Globals& g, const RunArgs& args) {
  backend::LoadReport report;
  auto exp =
      lifecycle(g).loadForRun(QString::fromStdString(args.experiment), args.overrides, &report);
  if (!report.demoDataWritten.isEmpty()) {
    std::cerr << "generated the demo data in " << report.demoDataWritten.toStdString() << '\n';
  }
  if (!exp) exitWith(report.invalid ? kExitUsage : kExitError, exp.message());
  return std::move(exp).value();
}

void printProgress(const backend::FollowProgress& p) {
  static const bool tty = ::isatty(2) != 0;
  static qint64 lastPrinted = -1;
  char line[160];
  const long eta = p.etaS < 0 ? -1 : std::lround(p.etaS);
  if (eta < 0) {
    std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f  ETA --:--",
                  static_cast<long long>(p.step), static_cast<long long>(p.maxSteps), p.loss);
  } else {
    std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f  ETA %ld:%02ld",
                  static_cast<long long>(p.step), static_cast<long long>(p.maxSteps), p.loss,
                  eta / 60, eta % 60);
  }
  if (tty) {
    std::cerr << '\r' << line << "   " << std::flush;
  } else if (p.step == p.maxSteps || p.step - lastPrinted >= std::max<qint64>(1, p.maxSteps / 20)) {
    std::cerr << line << '\n';
    lastPrinted = p.step;
  }
}

// The facts a [notify] command gets about `run`.
backend::NotifyFacts notifyFacts(const RunRecord& run) {
  backend::NotifyFacts facts;
  facts.runId = run.id;
  facts.runName = run.name;
  facts.status = QString::fromUtf8(spec::to_string(run.status));
  facts.error = run.error;
  facts.runDir = run.runDir;
  facts.objective = run.objective;
  return facts;
}

// The [notify] section a supervised run was started with (its experiment as recorded), and the
// folder its commands run in; none when the record cannot be read (the run is followed anyway).
std::pair<spec::NotifySection, QString> recordedNotify(backend::RunReader& reader,
                                                       const RunRecord& run) {
  if (!run.experimentId) return {};
  auto record = reader.experiment(*run.experimentId);
  if (!record || !*record) return {};
  auto exp = spec::parse_experiment((*record)->toml.toStdString(), (*record)->name.toStdString(),
                                    {}, spec::LoadOptions{false});
  if (!exp) return {};
  const QString dir =
      (*record)->source.isEmpty() ? run.runDir : QFileInfo((*record)->source).absolutePath();
  return {exp->notify, dir};
}

// Follows a run to its end in this process through the monitor; prints the outcome; runs the
// experiment's [notify] on_stall and on_end commands (waiting for them); returns the exit code.
int follow(const Globals& g, RunStore& store, backend::RunHandle& handle, const RunRecord& run,
           qint64 maxSteps, bool attached, const spec::NotifySection& notify,
           const QString& notifyDir, const QJsonObject& location = {}) {
  backend::NotifyCommands commands(notify,
                                   {notifyDir, backend::NotifyCommands::Options{}.timeoutMs});
  backend::FollowOptions options;
  options.location = location;
  options.maxSteps = maxSteps;
  if (attached) options.onStep = printProgress;
  if (!notify.on_stall.empty()) {
    options.stallAfterS = notify.stall_after_min * 60.0;
    options.onStall = [&](double silentS) {
      backend::NotifyFacts facts = notifyFacts(run);
      facts.status = QString::fromUtf8(spec::to_string(spec::RunStatus::running));
      facts.stalledMin = silentS / 60.0;
      commands.run(backend::NotifyEvent::stall, facts);
    };
  }
  const backend::FollowOutcome outcome = orExit(followRun(store, handle, run.id, options, true));
  if (!outcome.followed) {
    exitWith(kExitError, "run " + run.name.toStdString() + " is followed by another process");
  }
  auto reader = orExit(store.reader());
  const auto final = orExit(reader.run(run.id));
  if (final) commands.run(backend::NotifyEvent::end, notifyFacts(*final));
  commands.waitForAll();
  if (attached && ::isatty(2)) std::cerr << '\n';
  if (g.json && final) {
    printJson(runToJson(*final));
  } else if (final) {
    std::cout << final->name.toStdString() << " (id " << final->id
              << "): " << spec::to_string(outcome.status);
    if (final->objective) std::cout << ", objective " << *final->objective;
    if (!final->error.isEmpty()) std::cout << ": " << final->error.toStdString();
    std::cout << '\n';
  }
  return exitCodeFor(outcome.status);
}

// --replan-on-oom: while the run's last attempt ran out of memory, its next attempt runs in the
// next plan of the ladder that fits (RunLifecycle::startReplannedAttempt), followed here like the
// first; returns the exit code of the last attempt followed. `code` is the first one's.
int replanWhileOom(const Globals& g, RunStore& store, const RunRecord& run, int code,
                   qint64 maxSteps, const spec::NotifySection& notify, const QString& notifyDir,
                   bool attached) {
  for (;;) {
    auto reader = orExit(store.reader());
    const auto last = orExit(reader.run(run.id));
    if (!last || last->status != spec::RunStatus::oom) return code;
    auto replanned = backend::RunLifecycle::startReplannedAttempt(store, run.id);
    if (!replanned) {
      std::cerr << replanned.message() << '\n';
      return code;
    }
    backend::ReplannedRun& next = *replanned;
    std::cerr << "run " << run.name.toStdString() << " ran out of memory: attempt "
              << next.run.attempt << " replans it, " << next.change.toStdString() << " (in "
              << next.run.runDir.toStdString() << ")\n";
    code = follow(g, store, *next.handle, next.run, maxSteps, attached, notify, notifyDir,
                  next.location);
  }
}

void runVerb(const Globals& g, const RunArgs& args) {
  const spec::Experiment exp = loadForRun(g, args);
  const backend::RunLifecycle life = lifecycle(g);
  auto store = openStore(g);
  const QString path = QString::fromStdString(args.experiment);
  if (args.detach) {
    const backend::StartedRun run =
        orExit(life.startDetached(*store, exp, path, args.overrides, args.replanOnOom));
    if (!run.warning.empty()) std::cerr << "warning: " << run.warning << '\n';
    if (g.json) {
      printJson({{"id", run.id}, {"name", run.name}, {"run_dir", run.runDir}});
    } else {
      std::cout << run.id << '\n';
    }
    throw VerbExit{kExitOk};
  }
  backend::LaunchedRun launched = orExit(life.launch(*store, exp, path, args.overrides));
  const RunRecord& run = launched.run;
  std::cerr << "run " << run.name.toStdString() << " (id " << run.id << ") in "
            << run.runDir.toStdString() << '\n';
  const int code = follow(g, *store, *launched.handle, run, exp.train.max_steps, true, exp.notify,
                          QFileInfo(path).absolutePath(), launched.location);
  if (!args.replanOnOom) throw VerbExit{code};
  throw VerbExit{replanWhileOom(g, *store, run, code, exp.train.max_steps, exp.notify,
                                QFileInfo(path).absolutePath(), true)};
}

// `resume RUN`: the run's next attempt from its newest complete checkpoint, detached (a
// supervisor follows it, as `run --detach`); prints the run id (--json: id, name, run_dir).
void resumeVerb(const Globals& g, const std::string& runArg) {
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  const RunRecord run = findRun(reader, runArg);
  const backend::StartedRun started = orExit(lifecycle(g).resumeDetached(*store, run.id));
  if (!started.warning.empty()) std::cerr << "warning: " << started.warning << '\n';
  if (g.json) {
    printJson({{"id", started.id}, {"name", started.name}, {"run_dir", started.runDir}});
  } else {
    std::cout << started.id << '\n';
  }
  throw VerbExit{kExitOk};
}

void superviseVerb(const Globals& g, const std::string& runArg, bool replanOnOom) {
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  const RunRecord run = findRun(reader, runArg);
  if (spec::is_final(run.status)) throw VerbExit{exitCodeFor(run.status)};
  auto handle = orExit(backend::RunLifecycle::attach(run));
  std::cerr << "supervising " << run.name.toStdString() << " (id " << run.id << ") as pid "
            << ::getpid() << std::endl;
  const auto [notify, notifyDir] = recordedNotify(reader, run);
  const int code = follow(g, *store, *handle, run, 0, false, notify, notifyDir);
  if (!replanOnOom) throw VerbExit{code};
  throw VerbExit{replanWhileOom(g, *store, run, code, 0, notify, notifyDir, false)};
}

}  // namespace

void addRunVerbs(CLI::App& app, Globals& g) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* run = app.add_subcommand("run", "Start a run of an experiment and follow it");
  run->add_option("EXP", args->experiment, "Experiment file (TOML)")->required();
  run->add_option("--set", args->overrides, "Override a field: dotted.key=value (repeatable)")
      ->type_name("K=V")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  run->add_flag("--detach", args->detach,
                "Print only the run id and leave a supervisor that follows the run");
  run->add_flag("--replan-on-oom", args->replanOnOom,
                "An attempt that runs out of memory runs again from the start in the next plan "
                "that fits: half the micro-batch (same global batch), then activation "
                "checkpointing, then offloading (docs/cli.md)");
  run->callback([&g, args] { runVerb(g, *args); });

  auto resumeArg = std::make_shared<std::string>();
  auto resumeFrom = std::make_shared<qint64>(-1);
  CLI::App* resume = app.add_subcommand(
      "resume",
      "Resume a stopped or failed run from its newest checkpoint, detached; with --from STEP, "
      "start a new run from that checkpoint of it");
  resume->add_option("RUN", *resumeArg, "Run id or name")->required();
  resume
      ->add_option("--from", *resumeFrom,
                   "A new run from the sharded checkpoint of this step (`checkpoints RUN` "
                   "lists them); the run itself is left as it is")
      ->type_name("STEP");
  resume->callback([&g, resumeArg, resumeFrom] {
    if (*resumeFrom >= 0) resumeFromCheckpoint(g, *resumeArg, *resumeFrom);
    resumeVerb(g, *resumeArg);
  });

  auto runArg = std::make_shared<std::string>();
  CLI::App* supervise =
      app.add_subcommand("supervise", "Follow a started run to its end (used by run --detach)");
  supervise->group("");  // hidden from --help
  supervise->add_option("RUN", *runArg, "Run id or name")->required();
  auto superviseReplan = std::make_shared<bool>(false);
  supervise->add_flag("--replan-on-oom", *superviseReplan,
                      "Replan an attempt that runs out of memory (run --detach --replan-on-oom)");
  supervise->callback(
      [&g, runArg, superviseReplan] { superviseVerb(g, *runArg, *superviseReplan); });
}

}  // namespace shardscope::cli
