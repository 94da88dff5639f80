// The step-by-step check of one SSH host: resolve, connect, host key, authenticate, trainer
// found, GPUs (nvidia-smi) and Slurm (sinfo). Plain functions over SshConfig/SshSession/
// KnownHosts, shared by the Hosts panel (its HostWorker runs them off the GUI thread) and
// `shardscope-cli hosts check --steps`; each step is reported as soon as it is known.
#pragma once

#include <QMetaType>
#include <QString>
#include <QStringList>

#include <functional>
#include <optional>

#include "spec/estimate.h"
#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::backend {

/// One step of a host check and how it went.
struct CheckStep {
  enum class State {
    running,       ///< started, no answer yet
    passed,        ///< green
    failed,        ///< red: the host cannot run trials until this is fixed
    notAvailable,  ///< grey: absent but not a fault of the host (no GPU, no Slurm)
    skipped        ///< not tried because an earlier step failed
  };
  QString id;     ///< "resolve", "connect", "hostkey", "auth", "trainer", "gpus", "slurm"
  QString title;  ///< what the user reads
  State state = State::running;
  QString detail;  ///< the answer, or the error with its fix
};

/// What to check and with which files.
struct HostCheckRequest {
  QString alias;           ///< ~/.ssh/config alias or host name (user@host ok)
  QString sshConfigPath;   ///< empty: ~/.ssh/config
  QString knownHostsPath;  ///< empty: ~/.ssh/known_hosts
  QString trainer = QStringLiteral("shardtrain");  ///< program (or path) looked up remotely
};

/// The key a host offered that known_hosts does not vouch for: what the fingerprint dialog shows.
struct HostKeyOffer {
  QString alias;
  QString address;  ///< host:port as connected
  QString keyType;  ///< "ssh-ed25519", ...
  QString fingerprint;
  QString message;       ///< the known-hosts verdict, with what to do
  bool changed = false;  ///< the key differs from a trusted one (possible attack): no trust button
};

/// One GPU as nvidia-smi reports it.
struct GpuInfo {
  int index = 0;
  QString name;            ///< "NVIDIA H100 80GB HBM3"
  qint64 memoryBytes = 0;  ///< memory.total
};

/// The result of a whole check.
struct HostCheckOutcome {
  bool ok = false;  ///< every required step passed (GPUs and Slurm are optional)
  std::optional<HostKeyOffer> offer;
  QString hostKey;             ///< "ssh-ed25519 SHA256:..." when known_hosts vouches for it
  QStringList gpus;            ///< "0: NVIDIA A100 (81920 MiB)"
  QStringList partitions;      ///< "debug* up 1 node(s)"
  QList<GpuInfo> gpuInfo;      ///< the GPUs of `gpus`, parsed
  qint64 hostMemoryBytes = 0;  ///< physical memory (getconf); 0 when unknown
};

/// nvidia-smi's `--query-gpu=index,name,memory.total --format=csv,noheader,nounits` output.
QList<GpuInfo> parseGpuQuery(const QString& csv);
/// The GPUs of this machine from the same nvidia-smi query the host check runs (none when
/// nvidia-smi is missing or fails), and its physical memory.
HostCheckOutcome checkLocalMemory();
/// What a launch's ranks will have: on this machine (launch.kind local: the GPUs of
/// launch.gpus when set), or on the first of launch.hosts through the SSH host check (ssh).
/// Slurm: nothing is detected (its nodes are not known before the job starts).
Result<spec::DetectedMemory> detectMemory(const spec::LaunchSection& launch,
                                          const HostCheckRequest& sshFiles = {});

/// The steps in order (for a list shown before the check starts).
QList<CheckStep> hostCheckSteps();
/// Runs every step, calling `report` with each step's result as soon as it is known.
HostCheckOutcome runHostCheck(const HostCheckRequest& request,
                              const std::function<void(const CheckStep&)>& report);
/// "passed", "failed", "not available", "skipped", "running".
QString stateName(CheckStep::State state);

}  // namespace shardscope::backend

Q_DECLARE_METATYPE(shardscope::backend::CheckStep)
Q_DECLARE_METATYPE(shardscope::backend::HostCheckRequest)
Q_DECLARE_METATYPE(shardscope::backend::HostKeyOffer)
Q_DECLARE_METATYPE(shardscope::backend::HostCheckOutcome)
