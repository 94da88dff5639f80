// SlurmLauncher: runs a trial as one Slurm batch job, submitted locally or over SSH to
// launch.slurm_host. The generated script (slurmBatchScript) asks for launch.nnodes nodes with
// launch.nproc_per_node tasks each, --signal=TERM@<grace> so a job that reaches its time limit
// checkpoints, and starts the ranks with one srun whose per-task --output/--error are the run
// directory's events-rank-%t.jsonl / rank-%t.log. MASTER_ADDR is the allocation's first node and
// MASTER_PORT a port free on it, both chosen inside the script; a requeued job
// (SLURM_RESTART_COUNT > 0) appends `--resume auto` to the trainer arguments.
// Tracking: squeue, then scontrol, then sacct (when the cluster keeps accounting); the run's end
// state comes from the event files (the monitor's job), since Slurm forgets finished jobs.
#pragma once

#include <QLoggingCategory>
#include <QMap>
#include <QString>
#include <QTimer>
#include <memory>

#include "backend/launch/launcher.h"
#include "backend/launch/remotehandle.h"
#include "backend/launch/sshlauncher.h"

Q_DECLARE_LOGGING_CATEGORY(lcSlurmLauncher)

namespace shardscope::backend {

/// How the Slurm launcher reaches the cluster and how often its handles poll.
struct SlurmLauncherOptions {
  SshLauncherOptions ssh;             ///< ssh config and known_hosts for launch.slurm_host
  QMap<QString, QString> commandEnv;  ///< environment for sbatch/squeue/... (e.g. SLURM_CONF)
  int pollIntervalMs = 2000;          ///< squeue poll, ms
};

/// Runs Slurm commands and touches files where the cluster is (here, or over SSH).
class SlurmTransport {
 public:
  virtual ~SlurmTransport() = default;
  /// Runs `argv` in `workDir` (empty: anywhere) with the options' commandEnv.
  [[nodiscard]] virtual Result<ExecResult> run(const QStringList& argv, const QString& workDir,
                                               int timeoutMs = 60000) = 0;
  /// Owner-only (0600): the files written are trial.toml and job.sbatch, which holds launch.env.
  [[nodiscard]] virtual Result<void> writeFile(const QString& path, const QByteArray& data) = 0;
  [[nodiscard]] virtual Result<QByteArray> readFile(const QString& path, qint64 offset,
                                                    qint64 maxBytes) = 0;
  /// The size of `path` in bytes, or -1 when it does not exist.
  [[nodiscard]] virtual Result<qint64> fileSize(const QString& path) = 0;
  /// `mkdir -p`, and `~` resolved: returns the absolute directory.
  [[nodiscard]] virtual Result<QString> makeDirs(const QString& path) = 0;
};

/// The sbatch script for `request`, whose ranks run in `runDir`. Every value that reaches the
/// shell is quoted; the job name is the run name with characters other than [A-Za-z0-9._-]
/// replaced by '_' (#SBATCH lines are not shell lines). Errors name the launch.* field.
[[nodiscard]] Result<QString> slurmBatchScript(const LaunchRequest& request, const QString& runDir);

class SlurmLauncher : public Launcher {
 public:
  explicit SlurmLauncher(SlurmLauncherOptions options = {});
  QString kind() const override { return QStringLiteral("slurm"); }
  [[nodiscard]] Result<std::unique_ptr<RunHandle>> start(const LaunchRequest& request) override;
  [[nodiscard]] Result<std::unique_ptr<RunHandle>> attach(const RunLocation& location) override;

 private:
  Result<std::unique_ptr<SlurmTransport>> transportFor(const QString& slurmHost) const;
  SlurmLauncherOptions m_options;
};

/// A Slurm job followed by squeue/scontrol/sacct; files read through the transport.
class SlurmRunHandle : public RemoteRunHandle {
  Q_OBJECT
 public:
  SlurmRunHandle(std::unique_ptr<SlurmTransport> transport, RunLocation location, int graceS,
                 int pollIntervalMs, QObject* parent = nullptr);

  Result<RankFileStat> statRankFile(int rank, RankFile file) override;
  void stop() override;
  void kill() override;

  /// The job's last state as Slurm names it (PENDING, RUNNING, COMPLETED, CANCELLED, ...).
  QString jobState() const { return m_jobState; }
  /// Asks Slurm now; the timer calls this too.
  void pollNow();

 private:
  void setAll(RankState::Phase phase, int exitCode, int signal);
  /// True when Slurm answered `what` (an "Invalid job id" is an answer); false, logged every
  /// 20th time, when the query itself failed.
  bool controllerAnswered(const Result<ExecResult>& result, const char* what);
  Result<QByteArray> readFile(int rank, const QString& name, qint64 offset,
                              qint64 maxBytes) override;

  std::unique_ptr<SlurmTransport> m_transport;
  QString m_jobState;
  int m_queryFailures = 0;  // consecutive failed squeue/scontrol queries
  int m_graceS = 5;
  QTimer m_pollTimer;
};

}  // namespace shardscope::backend
