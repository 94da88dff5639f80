#include "backend/launch/sshlauncher.h"

#include <QFile>
#include <QProcessEnvironment>
#include <QRandomGenerator>
#include <QSet>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "backend/ssh/knownhosts.h"
#include "backend/ssh/sftp.h"
#include "backend/ssh/shellquote.h"

Q_LOGGING_CATEGORY(lcSshLauncher, "shardscope.launch.ssh")

namespace shardscope::backend {

namespace {

using EnvMap = std::map<std::string, std::string>;

std::string str(const QString& text) { return text.toStdString(); }

Result<SshSession> openNode(const SshConfig& config, const std::string& alias,
                            const SshLauncherOptions& options) {
  SshTarget target =
      config.target(alias, str(options.knownHostsPath.isEmpty()
                                   ? QString::fromStdString(KnownHosts::defaultPath())
                                   : options.knownHostsPath));
  target.alias = alias;
  auto session = SshSession::create(target);
  if (!session) return session;
  if (auto opened = session->open(); !opened) return opened.error();
  return session;
}

// Ports in use on the remote host, read from /proc/net/tcp{,6} (no tools needed remotely).
Result<int> chooseMasterPort(SshSession& session) {
  auto tables = session.exec("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null", 15000);
  if (!tables) return tables.error();
  QSet<int> used;
  std::istringstream lines(tables->out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string slot, local;
    if (!(words >> slot >> local)) continue;
    const size_t colon = local.rfind(':');
    if (colon == std::string::npos) continue;
    used.insert(static_cast<int>(std::strtol(local.c_str() + colon + 1, nullptr, 16)));
  }
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = QRandomGenerator::global()->bounded(20000, 61000);
    if (!used.contains(port)) return port;
  }
  return fail(session.displayName() + ": found no free port for MASTER_PORT in 20000..60999");
}

Result<EnvMap> rankBaseEnv(const LaunchRequest& request) {
  EnvMap env;
  const QProcessEnvironment system = QProcessEnvironment::systemEnvironment();
  for (const QString& name : system.keys()) {
    if (name.startsWith("NCCL_") || name.startsWith("GLOO_")) {
      env[str(name)] = str(system.value(name));
    }
  }
  env["OMP_NUM_THREADS"] = std::to_string(std::max(1, request.launch.threads_per_rank));
  auto resolved = resolvedLaunchEnv(request.launch);
  if (!resolved) return resolved.error();
  for (const auto& [name, value] : *resolved) {
    if (!isShellVariableName(name)) {
      return fail("launch.env: '" + name +
                  "' is not a valid environment variable name: use letters, digits and _");
    }
    env[name] = value;
  }
  for (auto it = request.extraEnv.begin(); it != request.extraEnv.end(); ++it) {
    if (!isShellVariableName(str(it.key()))) {
      return fail("launch request: extraEnv name '" + str(it.key()) + "' is not a valid name");
    }
    env[str(it.key())] = str(it.value());
  }
  return env;
}

}  // namespace

std::string sshEnvFile(const EnvMap& base) {
  std::string text =
      "# Written by Shardscope (mode 0600): the environment every rank starts with.\n";
  for (const auto& [name, value] : base) {
    text.append("export ").append(name).append("=").append(shellQuote(value)).append("\n");
  }
  return text;
}

// One line per rank: start it detached and print "RANK PID". The environment common to all ranks
// (launch.env: tokens, keys) comes from the 0600 file sshEnvFile() wrote, never from this
// script, which the remote shell holds as its command line where `ps` shows it to every user.
// The wrapper shell traps TERM/INT so it outlives a graceful stop long enough to record the
// trainer's exit status; the trap is not inherited (caught signals reset to default on exec), so
// the trainer sees TERM/INT normally.
std::string sshStartScript(const std::string& runDir, const QList<int>& ranks, int nodeRank,
                           int worldSize, int localWorldSize, const std::string& trainer,
                           const QStringList& args) {
  // umask 077: the rank logs and event files this script creates are owner-only (they may echo
  // secrets), like the run directory (0700) and env.sh (0600).
  std::string script = "umask 077\ncd " + shellQuote(runDir) + " || exit 97\n";
  script += ". ./" + std::string(kSshEnvFile) + " || exit 96\n";
  script += "echo boot $(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)\n";
  for (int rank : ranks) {
    EnvMap env;
    env["RANK"] = std::to_string(rank);
    env["WORLD_SIZE"] = std::to_string(worldSize);
    env["LOCAL_RANK"] = std::to_string(rank % localWorldSize);
    env["LOCAL_WORLD_SIZE"] = std::to_string(localWorldSize);
    env["GROUP_RANK"] = std::to_string(nodeRank);
    const std::string r = std::to_string(rank);
    const std::string exitFile = "rank-" + r + ".exit";
    std::string wrapper = "trap : TERM INT; \"$@\"; s=$?; echo $s > ";
    wrapper.append(exitFile).append(".part && mv ").append(exitFile).append(".part ");
    wrapper.append(exitFile);
    script += "env";
    for (const auto& [name, value] : env) {
      std::string assignment = name;
      assignment.append("=").append(value);
      script.append(" ").append(shellQuote(assignment));
    }
    script.append(" setsid nohup sh -c ").append(shellQuote(wrapper));
    script.append(" sh ").append(shellQuote(trainer));
    for (const QString& arg : args) script.append(" ").append(shellQuote(str(arg)));
    script.append(" > events-rank-").append(r).append(".jsonl 2> rank-").append(r);
    script.append(".log < /dev/null &\necho ").append(r).append(" $!\n");
  }
  return script;
}

namespace {

struct Started {
  QList<qint64> pids;  // rank order of the node
  QString bootId;      // the host's boot id, "unknown" without /proc
};

Result<Started> parseStarted(const ExecResult& result, const QList<int>& ranks,
                             const std::string& host) {
  if (result.exitStatus != 0) {
    return fail(host + ": starting the ranks failed (exit " + std::to_string(result.exitStatus) +
                "): " + result.err);
  }
  Started started;
  started.pids = QList<qint64>(ranks.size(), 0);
  std::istringstream lines(result.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (first == "boot") {
      std::string id;
      words >> id;
      started.bootId = QString::fromStdString(id);
      continue;
    }
    long long pid = 0;
    const int rank = std::atoi(first.c_str());
    const auto at = ranks.indexOf(rank);
    if ((words >> pid) && at >= 0) started.pids[at] = pid;
  }
  if (started.pids.contains(0)) {
    return fail(host + ": the remote shell did not report every rank's pid");
  }
  return started;
}

// A script prefix that ends the script with "rebooted" when the host booted since the ranks
// started: their pids may belong to anyone now, so nothing may be signalled or read as alive.
std::string bootGuard(const QString& bootId) {
  if (bootId.isEmpty() || bootId == QLatin1String("unknown")) return {};
  return "[ \"$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)\" = " +
         shellQuote(bootId.toStdString()) + " ] || { echo rebooted; exit 0; }\n";
}

std::string groupList(const QList<qint64>& pids) {
  std::string list;
  for (qint64 pid : pids) list += " -" + std::to_string(pid);
  return list;
}

struct Plan {
  std::vector<std::string> aliases;
  int nproc = 1;
  int world = 1;
};

Result<Plan> planNodes(const LaunchRequest& request) {
  const spec::LaunchSection& launch = request.launch;
  if (request.runName.trimmed().isEmpty() || request.runName == "." || request.runName == "..") {
    return fail("launch request: the run name is empty or a dot: give each run a unique name");
  }
  if (launch.nnodes < 1 || launch.nproc_per_node < 1) {
    return fail("launch.nnodes and launch.nproc_per_node must be >= 1 (got " +
                std::to_string(launch.nnodes) + " and " + std::to_string(launch.nproc_per_node) +
                ")");
  }
  if (static_cast<int>(launch.hosts.size()) < launch.nnodes) {
    return fail("launch.hosts: " + std::to_string(launch.hosts.size()) + " host(s) for " +
                "launch.nnodes = " + std::to_string(launch.nnodes) +
                ": list one ~/.ssh/config alias per node, the first one is MASTER_ADDR");
  }
  Plan plan;
  plan.aliases.assign(launch.hosts.begin(), launch.hosts.begin() + launch.nnodes);
  plan.nproc = launch.nproc_per_node;
  plan.world = launch.nnodes * launch.nproc_per_node;
  return plan;
}

}  // namespace

QString remoteRunDirName(const LaunchRequest& request) {
  QString name = request.runName;
  name.replace('/', '_');
  name += QStringLiteral("-r%1").arg(request.runId);
  if (!request.runLogToken.isEmpty()) name += '-' + QString(request.runLogToken).replace('/', '_');
  if (request.attempt > 0) name += QStringLiteral("-attempt-%1").arg(request.attempt);
  return name;
}

SshLauncher::SshLauncher(SshLauncherOptions options) : m_options(std::move(options)) {}

Result<std::unique_ptr<RunHandle>> SshLauncher::start(const LaunchRequest& request) {
  auto plan = planNodes(request);
  if (!plan) return plan.error();
  auto config = SshConfig::load(str(m_options.sshConfigPath));
  if (!config) return config.error();
  QFile trial(request.localRunDir + "/trial.toml");
  if (!trial.open(QIODevice::ReadOnly)) {
    return fail(str(trial.fileName()) +
                ": cannot read the trial config to upload: " + str(trial.errorString()));
  }
  const std::string trialToml = trial.readAll().toStdString();
  auto env = rankBaseEnv(request);
  if (!env) return env.error();

  std::vector<SshRunHandle::Node> nodes;
  for (size_t i = 0; i < plan->aliases.size(); ++i) {
    auto session = openNode(*config, plan->aliases[i], m_options);
    if (!session) return session.error();
    SshRunHandle::Node node;
    node.alias = plan->aliases[i];
    node.target = session->target();
    for (int local = 0; local < plan->nproc; ++local) {
      node.ranks.append(static_cast<int>(i) * plan->nproc + local);
    }
    node.session.emplace(std::move(session).value());
    nodes.push_back(std::move(node));
  }
  SshSession& master = *nodes.front().session;
  const std::string remoteRoot =
      request.launch.remote_dir.empty() ? "~/shardscope-runs" : request.launch.remote_dir;
  auto root = sftpAbsolutePath(master, remoteRoot);
  if (!root) return root.error();
  const std::string runDir = *root + "/" + str(remoteRunDirName(request));
  for (auto& node : nodes) {
    if (auto made = sftpMakeDirs(*node.session, runDir, 0700); !made) return made.error();
    if (auto put = sftpWriteFile(*node.session, runDir + "/trial.toml", trialToml, 0600); !put) {
      return put.error();
    }
  }
  if (!env->count("MASTER_PORT")) {
    auto port = chooseMasterPort(master);
    if (!port) return port.error();
    (*env)["MASTER_PORT"] = std::to_string(*port);
  }
  (*env)["MASTER_ADDR"] = nodes.front().target.host;
  // The run's rendezvous token reaches the ranks through the 0600 env.sh, never a command line.
  (*env)["SHARDSCOPE_RDZV_TOKEN"] = str(rendezvousToken());

  RunLocation location;
  location.kind = "ssh";
  location.host = QString::fromStdString(nodes.front().alias);
  location.runDir = QString::fromStdString(runDir);
  location.worldSize = plan->world;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto& node = nodes[i];
    location.hosts.append(QString::fromStdString(node.alias));
    const std::string envPath = runDir + "/" + kSshEnvFile;
    if (auto put = sftpWriteFile(*node.session, envPath, sshEnvFile(*env), 0600); !put) {
      return put.error();
    }
    const std::string script =
        sshStartScript(runDir, node.ranks, static_cast<int>(i), plan->world, plan->nproc,
                       request.launch.trainer, request.trainerArgs);
    auto exec = node.session->exec(script, 30000);
    Result<Started> started =
        exec ? parseStarted(*exec, node.ranks, node.alias) : Result<Started>(exec.error());
    if (!started) {
      // Do not leave half a run behind: end the ranks already started on earlier nodes.
      for (size_t j = 0; j < i; ++j) {
        const QList<qint64> done = location.pids.mid(nodes[j].ranks.front(), plan->nproc);
        (void)nodes[j].session->exec("kill -KILL" + groupList(done) + " 2>/dev/null; true");
      }
      return started.error();
    }
    location.pids.append(started->pids);
    location.bootIds.append(started->bootId);
    qCInfo(lcSshLauncher) << "started ranks" << node.ranks << "on" << node.alias.c_str() << "pids"
                          << started->pids << "in" << location.runDir;
  }
  auto handle =
      std::make_unique<SshRunHandle>(m_options, location, std::move(nodes), request.launch.grace_s);
  handle->pollNow();
  return std::unique_ptr<RunHandle>(std::move(handle));
}

Result<std::unique_ptr<RunHandle>> SshLauncher::attach(const RunLocation& location) {
  if (location.kind != "ssh") {
    return fail("attach: a '" + str(location.kind) +
                "' run cannot be attached by the SSH launcher");
  }
  QStringList hosts = location.hosts.isEmpty() ? QStringList{location.host} : location.hosts;
  if (location.worldSize < 1 || location.pids.size() != location.worldSize ||
      location.worldSize % hosts.size() != 0 || location.runDir.isEmpty()) {
    return fail("attach: the stored run location is incomplete (world size " +
                std::to_string(location.worldSize) + ", " + std::to_string(location.pids.size()) +
                " pids, " + std::to_string(hosts.size()) + " hosts); the run cannot be followed");
  }
  auto config = SshConfig::load(str(m_options.sshConfigPath));
  if (!config) return config.error();
  const int nproc = location.worldSize / static_cast<int>(hosts.size());
  std::vector<SshRunHandle::Node> nodes;
  for (int i = 0; i < hosts.size(); ++i) {
    auto session = openNode(*config, str(hosts[i]), m_options);
    if (!session) return session.error();
    SshRunHandle::Node node;
    node.alias = str(hosts[i]);
    node.target = session->target();
    for (int local = 0; local < nproc; ++local) node.ranks.append(i * nproc + local);
    node.session.emplace(std::move(session).value());
    nodes.push_back(std::move(node));
  }
  auto handle =
      std::make_unique<SshRunHandle>(m_options, location, std::move(nodes), m_options.graceS);
  handle->pollNow();
  return std::unique_ptr<RunHandle>(std::move(handle));
}

// ---- SshRunHandle -------------------------------------------------------------------------

SshRunHandle::SshRunHandle(const SshLauncherOptions& options, RunLocation location,
                           std::vector<Node> nodes, int graceS, QObject* parent)
    : RemoteRunHandle(std::move(location), parent),
      m_options(options),
      m_nodes(std::move(nodes)),
      m_graceS(graceS) {
  for (int rank = 0; rank < m_location.worldSize; ++rank) {
    RankState state;
    state.rank = rank;
    state.phase = RankState::Phase::running;
    if (Node* node = nodeOf(rank)) state.host = QString::fromStdString(node->alias);
    m_ranks.append(state);
    m_eventSizes.append(0);
  }
  for (Node& node : m_nodes) {
    node.backoffMs = m_options.reconnectInitialMs;
    node.reconnectTimer = new QTimer(this);
    node.reconnectTimer->setSingleShot(true);
    Node* raw = &node;  // m_nodes is never resized after construction
    connect(node.reconnectTimer, &QTimer::timeout, this, [this, raw] { tryReconnect(*raw); });
  }
  connect(&m_pollTimer, &QTimer::timeout, this, &SshRunHandle::pollNow);
  m_pollTimer.start(m_options.pollIntervalMs);
}

SshRunHandle::Node* SshRunHandle::nodeOf(int rank) {
  for (Node& node : m_nodes) {
    if (node.ranks.contains(rank)) return &node;
  }
  return nullptr;
}

bool SshRunHandle::isConnected() const {
  return std::all_of(m_nodes.begin(), m_nodes.end(),
                     [](const Node& node) { return node.session.has_value(); });
}

Result<RankFileStat> SshRunHandle::statRankFile(int rank, RankFile file) {
  Node* node = nodeOf(rank);
  if (!node) {
    return fail("rank " + std::to_string(rank) + " is not in this run (world size " +
                std::to_string(m_location.worldSize) + ")");
  }
  if (!node->session) return fail(node->alias + ": disconnected; reconnecting");
  const QString name = rankFileName(rank, file);
  auto stat = sftpStat(*node->session, str(m_location.runDir + "/" + name));
  if (!stat) {
    if (!node->session->isConnected()) connectionLost(*node, stat.message());
    return stat.error();
  }
  return RankFileStat{*stat >= 0, std::max<qint64>(0, *stat)};
}

Result<QByteArray> SshRunHandle::readFile(int rank, const QString& fileName, qint64 offset,
                                          qint64 maxBytes) {
  Node* node = nodeOf(rank);
  if (!node) {
    return fail("rank " + std::to_string(rank) + " is not in this run (world size " +
                std::to_string(m_location.worldSize) + ")");
  }
  if (!node->session) {
    return fail(node->alias +
                ": disconnected; reconnecting (the ranks keep running and reading "
                "resumes from the same offset)");
  }
  auto data = sftpRead(*node->session, str(m_location.runDir + "/" + fileName), offset, maxBytes);
  if (!data) {
    if (!node->session->isConnected()) connectionLost(*node, data.message());
    return data.error();
  }
  return QByteArray::fromStdString(*data);
}

void SshRunHandle::pollNow() {
  for (Node& node : m_nodes) {
    if (node.session) pollNode(node);
  }
}

QString SshRunHandle::bootIdOf(const Node& node) const {
  const auto index = static_cast<qsizetype>(&node - m_nodes.data());
  return m_location.bootIds.value(index);
}

void SshRunHandle::pollNode(Node& node) {
  std::string script = bootGuard(bootIdOf(node));
  script += "cd " + shellQuote(str(m_location.runDir)) + " 2>/dev/null || exit 3\n";
  for (int rank : node.ranks) {
    const std::string r = std::to_string(rank);
    const std::string pid = std::to_string(m_location.pids.value(rank));
    // "RANK SIZE alive" | "RANK SIZE exit CODE" | "RANK SIZE gone" (group gone, no exit file)
    script.append("if kill -0 -").append(pid).append(" 2>/dev/null; then s=alive; ");
    script.append("elif [ -r rank-").append(r).append(".exit ]; then s=\"exit $(cat rank-");
    script.append(r).append(".exit)\"; else s=gone; fi; echo ").append(r);
    script.append(" $(stat -c %s events-rank-")
        .append(r)
        .append(".jsonl 2>/dev/null || echo 0) $s\n");
  }
  auto result = node.session->exec(script, 15000);
  if (!result) {
    // No answer within the timeout on a link that libssh still calls up is a half-open
    // connection (a peer that vanished): it is dropped and dialled again like a closed one.
    connectionLost(node, result.message());
    return;
  }
  if (result->out.rfind("rebooted", 0) == 0) {
    hostRebooted(node);
    return;
  }
  bool changed = false, grew = false;
  std::istringstream lines(result->out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    int rank = -1;
    qint64 size = 0;
    std::string phase;
    int code = -1;
    if (!(words >> rank >> size >> phase) || rank < 0 || rank >= m_ranks.size()) continue;
    RankState next = m_ranks[rank];
    if (phase == "alive") {
      next.phase = RankState::Phase::running;
    } else {
      next.phase = RankState::Phase::exited;
      // The wrapper records 128+N for a trainer killed by signal N; no exit file means the
      // wrapper itself was killed, which only an untrapped signal (in practice SIGKILL) does.
      if (phase == "exit" && (words >> code) && code <= 128) {
        next.exitCode = code;
      } else {
        next.signal = phase == "exit" ? code - 128 : 9;
      }
    }
    if (next.phase != m_ranks[rank].phase || next.exitCode != m_ranks[rank].exitCode ||
        next.signal != m_ranks[rank].signal) {
      m_ranks[rank] = next;
      changed = true;
    }
    if (size > m_eventSizes[rank]) grew = true;
    m_eventSizes[rank] = std::max(size, m_eventSizes[rank]);
  }
  if (changed) emit ranksChanged();
  if (grew) emit filesGrew();
}

void SshRunHandle::hostRebooted(Node& node) {
  bool changed = false;
  for (int rank : node.ranks) {
    if (m_ranks[rank].phase == RankState::Phase::exited) continue;
    m_ranks[rank].phase = RankState::Phase::exited;
    m_ranks[rank].exitCode = -1;
    m_ranks[rank].signal = 9;  // as if killed: the reboot ended them without a word
    changed = true;
  }
  if (!changed) return;
  qCWarning(lcSshLauncher) << node.alias.c_str()
                           << "rebooted since the ranks started: they are gone, and their pids "
                              "are no longer this run's";
  emit ranksChanged();
}

void SshRunHandle::connectionLost(Node& node, const std::string& why) {
  if (!node.session) return;
  node.session.reset();
  for (int rank : node.ranks) m_ranks[rank].phase = RankState::Phase::unknown;
  const QString message = QString::fromStdString(node.alias + ": connection lost (" + why +
                                                 "); the ranks keep running; reconnecting");
  qCWarning(lcSshLauncher).noquote() << message;
  emit connectionChanged(false, message);
  emit ranksChanged();
  node.backoffMs = m_options.reconnectInitialMs;
  node.reconnectTimer->start(node.backoffMs);
}

void SshRunHandle::tryReconnect(Node& node) {
  if (node.session) return;
  auto session = SshSession::create(node.target);
  Result<void> opened = session ? session->open() : Result<void>(session.error());
  if (!opened) {
    node.backoffMs = std::min(node.backoffMs * 2, m_options.reconnectMaxMs);
    qCInfo(lcSshLauncher) << "reconnect to" << node.alias.c_str()
                          << "failed:" << opened.message().c_str() << "- next try in"
                          << node.backoffMs << "ms";
    node.reconnectTimer->start(node.backoffMs);
    return;
  }
  node.session.emplace(std::move(session).value());
  node.backoffMs = m_options.reconnectInitialMs;
  const QString message = QString::fromStdString(node.alias + ": reconnected");
  qCInfo(lcSshLauncher).noquote() << message;
  emit connectionChanged(true, message);
  if (node.pendingSignal) {
    // A stop or kill asked for while this node was unreachable is delivered now, not dropped.
    const auto [signal, graceKill] = *node.pendingSignal;
    node.pendingSignal.reset();
    qCInfo(lcSshLauncher) << "delivering the" << signal << "sent while" << node.alias.c_str()
                          << "was unreachable";
    signalNode(node, signal, graceKill);
  }
  if (node.session) pollNode(node);
}

void SshRunHandle::signalRanks(const char* signal, bool withGraceKill) {
  for (Node& node : m_nodes) signalNode(node, signal, withGraceKill);
}

void SshRunHandle::signalNode(Node& node, const char* signal, bool withGraceKill) {
  if (!node.session) {
    // KILL outranks a pending TERM; a TERM does not weaken a pending KILL.
    if (!node.pendingSignal || std::string(signal) == "KILL") {
      node.pendingSignal = std::make_pair(signal, withGraceKill);
    }
    qCWarning(lcSshLauncher) << node.alias.c_str() << "is disconnected:" << signal
                             << "is sent once it is reachable again";
    return;
  }
  {
    QList<qint64> pids;
    for (int rank : node.ranks) pids.append(m_location.pids.value(rank));
    const std::string groups = groupList(pids);
    std::string script = bootGuard(bootIdOf(node));
    script += std::string("kill -") + signal + groups + " 2>/dev/null\n";
    if (withGraceKill) {
      // The SIGKILL after the grace runs remotely and detached, so it happens even if this
      // backend exits or loses the connection meanwhile.
      const std::string later = "sleep " + std::to_string(std::max(0, m_graceS)) + "; kill -KILL" +
                                groups + " 2>/dev/null";
      script += "setsid nohup sh -c " + shellQuote(later) + " > /dev/null 2>&1 < /dev/null &\n";
    }
    script += "true\n";
    auto result = node.session->exec(script, 15000);
    if (!result) {
      qCWarning(lcSshLauncher) << "sending" << signal << "to" << node.alias.c_str()
                               << "failed:" << result.message().c_str();
      node.pendingSignal = std::make_pair(signal, withGraceKill);  // sent again on reconnect
      connectionLost(node, result.message());
    } else if (result->out.rfind("rebooted", 0) == 0) {
      hostRebooted(node);
    }
  }
}

void SshRunHandle::stop() { signalRanks("TERM", true); }

void SshRunHandle::kill() { signalRanks("KILL", false); }

}  // namespace shardscope::backend
