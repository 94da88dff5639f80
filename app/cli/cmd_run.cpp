// `run EXP.toml [--set k=v ...] [--detach]` and the hidden `supervise RUN` that a detached run
// leaves behind. A run: validate (nothing starts on an error: exit 2), create the run in the
// store, write trial.toml into its run directory, start the ranks, then follow them to the end
// (attached) or hand them to a supervisor in its own session (detached).
#include <unistd.h>
#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QSaveFile>
#include <QThread>
#include <QTimer>

#include <cmath>
#include <cstdio>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/launching.h"
#include "backend/launch/demodata.h"
#include "backend/launch/launchers.h"

namespace shardscope::cli {
namespace {

using backend::RunRecord;
using backend::RunStore;

struct RunArgs {
  std::string experiment;
  std::vector<std::string> overrides;
  bool detach = false;
};

// Loads and validates; the demo's data is written first when it is missing. Exits 2 on errors.
spec::Experiment loadForRun(const RunArgs& args) {
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  auto shape = spec::load_experiment(args.experiment, args.overrides, noPaths);
  if (!shape) exitWith(kExitUsage, shape.message());
  const bool local = shape->launch.kind == spec::LaunchKind::local;
  if (local) {
    auto written = backend::ensureDemoData(*shape);
    if (!written) exitWith(kExitError, written.message());
    if (*written) std::cerr << "generated the demo data in " << shape->data.train_path << '\n';
  }
  spec::LoadOptions options;
  options.check_paths = local;
  auto exp = spec::load_experiment(args.experiment, args.overrides, options);
  if (!exp) exitWith(kExitUsage, exp.message());
  auto valid = spec::validate_for_launch(*exp);
  if (!valid) exitWith(kExitUsage, args.experiment + ": " + valid.message());
  return std::move(exp).value();
}

// A bare launch.trainer name: the one built beside this executable wins over PATH.
void preferSiblingTrainer(spec::Experiment& exp) {
  const QString name = QString::fromStdString(exp.launch.trainer);
  if (exp.launch.kind != spec::LaunchKind::local || name.contains('/')) return;
  const QString sibling = QDir(QCoreApplication::applicationDirPath()).filePath(name);
  if (QFileInfo(sibling).isExecutable()) exp.launch.trainer = sibling.toStdString();
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

// Creates the experiment and the run rows; the run is named NAME-<n> with the next free n.
RunRecord createRun(RunStore& store, const Globals& g, const spec::Experiment& exp,
                    const RunArgs& args) {
  const QString toml = QString::fromStdString(spec::write_experiment_toml(exp));
  const QString expName = QString::fromStdString(exp.experiment.name);
  const qint64 expId = orExit(
      store
          .createExperiment({0, expName,
                             QFileInfo(QString::fromStdString(args.experiment)).absoluteFilePath(),
                             toml, 0})
          .get());
  auto reader = orExit(store.reader());
  qint64 next = 1;
  for (const auto& r : orExit(reader.listRuns())) next = std::max(next, r.id + 1);
  for (int attempt = 0; attempt < 1000; ++attempt, ++next) {
    const QString name = QStringLiteral("%1-%2").arg(expName).arg(next);
    if (orExit(reader.runByName(name))) continue;
    backend::NewRun run{expId, name, QDir(runsRoot(g)).filePath(name),
                        overridesAsParams(args.overrides), spec::launch_world_size(exp.launch)};
    auto id = store.createRun(run).get();
    if (!id) continue;  // taken by a concurrent run: try the next number
    auto created = orExit(reader.run(*id));
    if (!created) exitWith(kExitError, "run " + name.toStdString() + " vanished after creation");
    return *created;
  }
  exitWith(kExitError, "could not find a free run name for " + expName.toStdString());
}

void writeTrial(const RunRecord& run, const spec::Experiment& exp) {
  if (!QDir().mkpath(run.runDir)) {
    exitWith(kExitError, "cannot create the run directory " + run.runDir.toStdString());
  }
  QSaveFile file(QDir(run.runDir).filePath("trial.toml"));
  if (!file.open(QIODevice::WriteOnly) ||
      file.write(QByteArray::fromStdString(spec::write_experiment_toml(exp))) < 0 ||
      !file.commit()) {
    exitWith(kExitError, "cannot write trial.toml in " + run.runDir.toStdString() + ": " +
                             file.errorString().toStdString());
  }
}

void printProgress(const Progress& p) {
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

// Follows a run to its end in this process through the monitor; prints the outcome; returns
// the exit code.
int follow(const Globals& g, RunStore& store, backend::RunHandle& handle, const RunRecord& run,
           qint64 maxSteps, bool attached, const std::function<void()>& onFollowing = {}) {
  FollowOptions options;
  options.onFollowing = onFollowing;
  options.maxSteps = maxSteps;
  options.stopOnInterrupt = true;
  if (attached) options.onStep = printProgress;
  const FollowOutcome outcome = orExit(followRun(store, handle, run.id, options));
  if (!outcome.followed) {
    exitWith(kExitError, "run " + run.name.toStdString() + " is followed by another process");
  }
  auto reader = orExit(store.reader());
  const auto final = orExit(reader.run(run.id));
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

// Waits (at most 10 s) until the supervisor holds the run's lease, so that once `run --detach`
// returns no other process takes the run for an orphan. A supervisor that is slower only leaves
// a window in which a concurrent `ls` may start a second one; the lease lets one of them follow.
void waitForSupervisor(RunStore& store, qint64 runId, qint64 supervisor) {
  auto reader = store.reader();
  if (!reader) return;
  QDeadlineTimer deadline(10000);
  while (!deadline.hasExpired()) {
    auto lease = reader->lease(runId);
    if (!lease || (*lease && (*lease)->pid == supervisor)) return;
    QThread::msleep(20);
  }
  std::cerr << "warning: the supervisor (pid " << supervisor
            << ") has not taken the run yet; see supervisor.log in the run directory\n";
}

void runVerb(const Globals& g, const RunArgs& args) {
  spec::Experiment exp = loadForRun(args);
  preferSiblingTrainer(exp);
  auto launcher = orExit(
      backend::makeLauncher(QString::fromStdString(std::string(spec::to_string(exp.launch.kind))),
                            exp.launch.grace_s),
      kExitUsage);
  auto store = openStore(g);
  const RunRecord run = createRun(*store, g, exp, args);
  writeTrial(run, exp);
  backend::LaunchRequest request;
  request.runId = run.id;
  request.runName = run.name;
  request.localRunDir = run.runDir;
  request.runLogToken = orExit(orExit(store->reader()).runLogToken());
  request.launch = exp.launch;
  request.shareGpus = exp.shard.backend == "gloo";
  request.trainerArgs = {"train", "trial.toml"};
  auto handle = launcher->start(request);
  if (!handle) {
    (void)store
        ->setRunStatus(run.id, spec::RunStatus::failed, QString::fromStdString(handle.message()))
        .get();
    exitWith(kExitError, handle.message());
  }
  orExit(store->setRunStatus(run.id, spec::RunStatus::running).get());
  const QJsonObject location = (*handle)->location().toJson();
  if (args.detach) {
    orExit(store->setRunLocation(run.id, location).get());
    store->flush();
    const qint64 supervisor = orExit(spawnSupervisor(g, run));
    waitForSupervisor(*store, run.id, supervisor);
    if (g.json) {
      printJson({{"id", run.id}, {"name", run.name}, {"run_dir", run.runDir}});
    } else {
      std::cout << run.id << '\n';
    }
    throw VerbExit{kExitOk};
  }
  std::cerr << "run " << run.name.toStdString() << " (id " << run.id << ") in "
            << run.runDir.toStdString() << '\n';
  // The location is recorded once this process holds the lease: before that, a concurrent `ls`
  // could take the run for an orphan.
  throw VerbExit{follow(g, *store, **handle, run, exp.train.max_steps, true,
                        [&] { orExit(store->setRunLocation(run.id, location).get()); })};
}

void superviseVerb(const Globals& g, const std::string& runArg) {
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  const RunRecord run = findRun(reader, runArg);
  if (spec::is_final(run.status)) throw VerbExit{exitCodeFor(run.status)};
  auto handle = orExit(attachRun(run));
  std::cerr << "supervising " << run.name.toStdString() << " (id " << run.id << ") as pid "
            << ::getpid() << std::endl;
  throw VerbExit{follow(g, *store, *handle, run, 0, false)};
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
  run->callback([&g, args] { runVerb(g, *args); });

  auto runArg = std::make_shared<std::string>();
  CLI::App* supervise =
      app.add_subcommand("supervise", "Follow a started run to its end (used by run --detach)");
  supervise->group("");  // hidden from --help
  supervise->add_option("RUN", *runArg, "Run id or name")->required();
  supervise->callback([&g, runArg] { superviseVerb(g, *runArg); });
}

}  // namespace shardscope::cli
