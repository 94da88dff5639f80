// SshLauncher: starts a run's ranks on one or more hosts over SSH (libssh), detached in their own
// sessions so they outlive the backend and the connection. Hosts are ~/.ssh/config aliases; the
// host key must be in known_hosts (KnownHosts); login is by ssh-agent or key, never a password.
//
// On each node: trial.toml is uploaded by SFTP to <launch.remote_dir>/<run dir>/, and every local
// rank starts as `setsid nohup sh -c WRAPPER TRAINER ARGS` with stdout in events-rank-N.jsonl,
// stderr in rank-N.log and its exit status in rank-N.exit; the echoed pid is the rank's session
// (and process group) id. The torchrun environment: MASTER_ADDR = the first node's HostName,
// MASTER_PORT = a port free on it, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
// OMP_NUM_THREADS, then launch.env and the request's extraEnv; NCCL_* and GLOO_* variables of
// this process are passed through. Every word that reaches a remote shell is quoted.
#pragma once

#include <QList>
#include <QLoggingCategory>
#include <QString>
#include <QTimer>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/launch/launcher.h"
#include "backend/launch/remotehandle.h"
#include "backend/ssh/sshconfig.h"
#include "backend/ssh/sshsession.h"

Q_DECLARE_LOGGING_CATEGORY(lcSshLauncher)

namespace shardscope::backend {

/// Where the SSH launcher finds its configuration, and how its handles poll and reconnect.
struct SshLauncherOptions {
  QString sshConfigPath;         ///< empty: ~/.ssh/config
  QString knownHostsPath;        ///< empty: ~/.ssh/known_hosts
  int pollIntervalMs = 1000;     ///< liveness poll (kill -0) and file-size check, ms
  int reconnectInitialMs = 500;  ///< first reconnect delay after a drop, doubled each failure
  int reconnectMaxMs = 15000;    ///< cap of the reconnect delay, ms
  int graceS = 5;                ///< SIGTERM-to-SIGKILL grace for attached runs (started runs
                                 ///< use launch.grace_s)
};

/// The remote run directory's last component: the run name ('/' becomes '_', so it is one
/// folder), then the run id and the run log's token (two run logs may both have a run 1 named
/// "exp-1"), then the attempt when it is a retry (its ranks must not append to the failed
/// attempt's files): "exp-1-r1-3fa9c07d12e4", "exp-1-r1-3fa9c07d12e4-attempt-1".
QString remoteRunDirName(const LaunchRequest& request);

/// The file in a remote run directory (mode 0600) that holds the environment common to all ranks.
inline constexpr const char* kSshEnvFile = "env.sh";
/// That file's text: one `export NAME='value'` line per variable.
std::string sshEnvFile(const std::map<std::string, std::string>& base);
/// The remote shell script that starts `ranks` of this node detached, each printing "RANK PID";
/// it sources kSshEnvFile and carries only the per-rank variables itself (no launch.env value).
std::string sshStartScript(const std::string& runDir, const QList<int>& ranks, int nodeRank,
                           int worldSize, int localWorldSize, const std::string& trainer,
                           const QStringList& args);

class SshLauncher : public Launcher {
 public:
  explicit SshLauncher(SshLauncherOptions options = {});
  QString kind() const override { return QStringLiteral("ssh"); }
  [[nodiscard]] Result<std::unique_ptr<RunHandle>> start(const LaunchRequest& request) override;
  [[nodiscard]] Result<std::unique_ptr<RunHandle>> attach(const RunLocation& location) override;

 private:
  SshLauncherOptions m_options;
};

/// A run started (or re-attached) over SSH: one connection per node, polled on a timer; on a
/// dropped connection it reconnects with backoff and keeps every byte offset the caller holds.
class SshRunHandle : public RemoteRunHandle {
  Q_OBJECT
 public:
  struct Node {
    std::string alias;
    SshTarget target;
    std::optional<SshSession> session;  // empty while disconnected
    QList<int> ranks;                   // ranks that run on this node
    int backoffMs = 0;
    QTimer* reconnectTimer = nullptr;
    /// A signal ("TERM"/"KILL", with the grace kill) asked for while disconnected.
    std::optional<std::pair<const char*, bool>> pendingSignal;
  };

  SshRunHandle(const SshLauncherOptions& options, RunLocation location, std::vector<Node> nodes,
               int graceS, QObject* parent = nullptr);

  Result<RankFileStat> statRankFile(int rank, RankFile file) override;
  void stop() override;
  void kill() override;

  /// Polls every node now (liveness and file sizes); the timer calls this too.
  void pollNow();
  /// True while every node's connection is up.
  bool isConnected() const;

 private:
  Result<QByteArray> readFile(int rank, const QString& fileName, qint64 offset,
                              qint64 maxBytes) override;
  void pollNode(Node& node);
  void connectionLost(Node& node, const std::string& why);
  void tryReconnect(Node& node);
  void signalRanks(const char* signal, bool withGraceKill);
  void signalNode(Node& node, const char* signal, bool withGraceKill);
  /// The node's ranks ended with its reboot (the boot id changed): exited, as if killed.
  void hostRebooted(Node& node);
  QString bootIdOf(const Node& node) const;
  Node* nodeOf(int rank);

  SshLauncherOptions m_options;
  std::vector<Node> m_nodes;
  QList<qint64> m_eventSizes;
  int m_graceS = 5;
  QTimer m_pollTimer;
};

}  // namespace shardscope::backend
