// `stop RUN`: a graceful stop (SIGTERM to every rank; SIGKILL after launch.grace_s), then waits
// for the run's final status. When no live process follows the run (its supervisor is gone),
// this process follows it to the end and records the status itself.
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/verbexit.h"
#include "backend/lifecycle/runlifecycle.h"

namespace shardscope::cli {
namespace {

constexpr int kWaitS = 120;  // generous: the grace plus a checkpoint at the step boundary

void stopVerb(const Globals& g, const std::string& runArg) {
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  const auto run = findRun(reader, runArg);
  if (spec::is_final(run.status)) {
    exitWith(kExitError, "run " + run.name.toStdString() + " is not running (status " +
                             std::string(spec::to_string(run.status)) + "); nothing to stop");
  }
  const backend::RunRecord final = orExit(backend::RunLifecycle::stopAndWait(*store, run, kWaitS));
  if (g.json) {
    printJson(runToJson(final));
  } else {
    std::cout << final.name.toStdString() << " (id " << final.id
              << "): " << spec::to_string(final.status) << '\n';
  }
  const int code = exitCodeFor(final.status);
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
