#include "backend/launch/launchers.h"

#include <QProcessEnvironment>

#include "backend/launch/locallauncher.h"
#include "backend/launch/programlauncher.h"
#include "backend/launch/slurmlauncher.h"
#include "backend/launch/sshlauncher.h"

namespace shardscope::backend {

Result<std::unique_ptr<Launcher>> makeLauncher(const QString& kind, int graceS) {
  if (kind == QLatin1String("local")) {
    return std::unique_ptr<Launcher>(std::make_unique<LocalLauncher>(graceS));
  }
  if (kind == QLatin1String("program")) {  // a search trial's program: attach() needs no argv
    return std::unique_ptr<Launcher>(std::make_unique<ProgramLauncher>(QStringList{}, graceS));
  }
  if (kind == QLatin1String("ssh")) {
    SshLauncherOptions options;
    options.graceS = graceS;
    return std::unique_ptr<Launcher>(std::make_unique<SshLauncher>(options));
  }
  if (kind == QLatin1String("slurm")) {
    SlurmLauncherOptions options;
    options.ssh.graceS = graceS;
    const QString conf = QProcessEnvironment::systemEnvironment().value("SLURM_CONF");
    if (!conf.isEmpty()) options.commandEnv.insert("SLURM_CONF", conf);
    return std::unique_ptr<Launcher>(std::make_unique<SlurmLauncher>(options));
  }
  return fail("launch.kind: \"" + kind.toStdString() +
              "\" is not a launcher of this build; use \"local\", \"ssh\" or \"slurm\"");
}

}  // namespace shardscope::backend
