// `stop RUN`: a graceful stop (SIGTERM to every rank; SIGKILL after launch.grace_s), then waits
// for the run's final status. When no live process follows the run (its supervisor is gone),
// this process follows it to the end and records the status itself.
#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QEventLoop>
#include <QTimer>

#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/verbexit.h"
#include "backend/lifecycle/runlifecycle.h"

namespace shardscope::cli {
namespace {

constexpr int kWaitS = 120;  // generous: the grace plus a checkpoint at the step boundary

// Runs the event loop (the handle's SIGKILL timer needs it) until the run's status is final.
std::optional<backend::RunRecord> waitForFinal(backend::RunReader& reader, qint64 runId) {
  QDeadlineTimer deadline{std::chrono::seconds(kWaitS)};
  std::optional<backend::RunRecord> last;
  QEventLoop loop;
  QTimer poll;
  QObject::connect(&poll, &QTimer::timeout, &loop, [&] {
    auto run = reader.run(runId);
    if (run && *run) last = **run;
    if ((last && spec::is_final(last->status)) || deadline.hasExpired()) loop.quit();
  });
  poll.start(200);
  loop.exec();
  return last;
}

void stopVerb(const Globals& g, const std::string& runArg) {
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  const auto run = findRun(reader, runArg);
  if (spec::is_final(run.status)) {
    exitWith(kExitError, "run " + run.name.toStdString() + " is not running (status " +
                             std::string(spec::to_string(run.status)) + "); nothing to stop");
  }
  auto handle = orExit(backend::RunLifecycle::attach(run));
  backend::FollowOptions options;
  options.stopAtOnce = true;
  const backend::FollowOutcome outcome =
      orExit(backend::RunLifecycle::follow(*store, *handle, run.id, options));
  std::optional<backend::RunRecord> final;
  if (outcome.followed) {
    final = orExit(reader.run(run.id));
  } else {
    handle->stop();  // the process that follows the run records its end
    final = waitForFinal(reader, run.id);
  }
  if (!final || !spec::is_final(final->status)) {
    exitWith(kExitError, "run " + run.name.toStdString() + " did not end within " +
                             std::to_string(kWaitS) + " s after the stop request");
  }
  if (g.json) {
    printJson(runToJson(*final));
  } else {
    std::cout << final->name.toStdString() << " (id " << final->id
              << "): " << spec::to_string(final->status) << '\n';
  }
  const int code = exitCodeFor(final->status);
  throw VerbExit{code == kExitStopped ? kExitOk : code};
}

}  // namespace

void addStopVerb(CLI::App& app, Globals& g) {
  auto runArg = std::make_shared<std::string>();
  CLI::App* stop = app.add_subcommand("stop", "Stop a run gracefully and wait for its end");
  stop->add_option("RUN", *runArg, "Run id or name")->required();
  stop->callback([&g, runArg] { stopVerb(g, *runArg); });
}

}  // namespace shardscope::cli
