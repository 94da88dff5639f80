#include "app/cli/launching.h"

#include "backend/launch/locallauncher.h"
#include "backend/launch/sshlauncher.h"

namespace shardscope::cli {

Result<std::unique_ptr<backend::Launcher>> launcherFor(const QString& kind, int graceS) {
  if (kind == QLatin1String("local")) {
    return std::unique_ptr<backend::Launcher>(std::make_unique<backend::LocalLauncher>(graceS));
  }
  if (kind == QLatin1String("ssh")) {
    backend::SshLauncherOptions options;
    options.graceS = graceS;
    return std::unique_ptr<backend::Launcher>(std::make_unique<backend::SshLauncher>(options));
  }
  return fail("launch.kind: \"" + kind.toStdString() +
              "\" runs cannot be started by this build of shardscope-cli yet (the Slurm "
              "launcher is pending); use kind = \"local\" or \"ssh\"");
}

Result<std::unique_ptr<backend::RunHandle>> attachRun(const backend::RunRecord& run) {
  if (run.location.isEmpty()) {
    return fail("run " + run.name.toStdString() +
                " has no recorded location (it never started); nothing to attach to");
  }
  auto location = backend::RunLocation::fromJson(run.location);
  if (!location) return location.error();
  auto launcher = launcherFor(location->kind);
  if (!launcher) return launcher.error();
  return (*launcher)->attach(*location);
}

}  // namespace shardscope::cli
