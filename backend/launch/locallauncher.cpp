// The local launcher.
//
// Rendezvous port: rank 0 picks it. Each run gets MASTER_ADDR=127.0.0.1, MASTER_PORT=0 and
// SHARDSCOPE_RDZV_FILE=<run dir>/rendezvous-port; rank 0 binds port 0 (the kernel hands it a port
// no other socket holds), keeps the listener open for the whole run and publishes the number by
// writing a temporary file and renaming it; the other ranks wait for the file. Picking a port in
// the launcher and passing it on would leave a window between the launcher's probe and rank 0's
// bind in which another program (or another run) could take the port; here there is no window.
// The launcher deletes a stale port file before it starts ranks (a re-launch in the same run
// directory must not read the previous attempt's port). A port set in launch.env wins and is
// then the user's to keep unique.
//
// Rendezvous token: a fresh random SHARDSCOPE_RDZV_TOKEN per start, in every rank's environment
// (never its command line); each rank proves it knows it before it registers at rank 0's store,
// so no process outside the run can join it (docs/trainer.md, "Rendezvous"). The port file and
// the ranks' output files are created owner-only (0600): a rank's log may echo secrets.
//
// Environment of rank r (of W): the backend's own, then MASTER_ADDR, MASTER_PORT,
// SHARDSCOPE_RDZV_FILE, WORLD_SIZE=W, LOCAL_WORLD_SIZE=W, OMP_NUM_THREADS=launch.threads_per_rank,
// then launch.env and the request's extraEnv, then RANK=r, LOCAL_RANK=r and, when launch.gpus is
// given, CUDA_VISIBLE_DEVICES = rank r's share of launch.gpus (the trainer sees only its own
// devices, so cuda:0, or LOCAL_RANK modulo the device count, is the right device).
//
// Failure policy: a rank killed by a signal, a non-zero exit, or (for a run found by attach(),
// whose exit codes this process cannot learn) an exit without a final `done` line makes the
// handle send SIGTERM to every other rank's session and SIGKILL to whatever is left after
// launch.grace_s. A rank of this process that exits 0 ends normally here, even without `done`:
// judging the event stream is the monitor's job, and it calls stop(). Whatever a rank leaves in
// its session when it exits (a worker that outlived it) gets SIGTERM, then SIGKILL after the
// grace, whatever the exit code. This runs in the process that holds the handle: if the backend
// itself dies, the ranks keep running (they are in their own sessions) and nothing enforces the
// policy until a backend attaches again; the detached supervisor of `shardscope-cli run --detach`
// is the process that holds a handle for a run nobody watches.
#include "backend/launch/locallauncher.h"

#include <sys/wait.h>
#include <unistd.h>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLoggingCategory>
#include <QMap>
#include <QProcessEnvironment>
#include <QSocketNotifier>
#include <QStandardPaths>
#include <csignal>
#include <cstring>
#include <limits>
#include <utility>
#include <variant>

#include "backend/launch/localprocess.h"
#include "backend/launch/rankfiles.h"
#include "spec/events.h"

Q_LOGGING_CATEGORY(lcLocalLauncher, "shardscope.launch.local")
Q_LOGGING_CATEGORY(lcLocalRunHandle, "shardscope.launch.local.run")

namespace shardscope::backend {

namespace {

using localproc::signalSession;

constexpr int kPollMs = 200;
constexpr qint64 kTailBytes = qint64{64} * 1024;

Error requestError(const QString& message) { return fail(message.toStdString()); }

/// launch.trainer as an absolute executable path: a bare name is looked up on PATH.
Result<QString> resolveTrainer(const std::string& trainer) {
  QString name = QString::fromStdString(trainer);
  if (name.isEmpty()) {
    return requestError(QStringLiteral(
        "launch.trainer: empty; set it to the trainer executable (shardtrain) or its path"));
  }
  if (name.startsWith(QLatin1String("~/"))) name = QDir::homePath() + name.mid(1);
  QString path;
  if (name.contains(QLatin1Char('/'))) {
    path = QFileInfo(name).absoluteFilePath();
  } else {
    path = QStandardPaths::findExecutable(name);
    if (path.isEmpty()) {
      return requestError(
          QStringLiteral("launch.trainer: \"%1\" is not on PATH (%2); give its full path in "
                         "launch.trainer or add its folder to PATH")
              .arg(name, qEnvironmentVariable("PATH")));
    }
  }
  const QFileInfo info(path);
  if (!info.exists()) {
    return requestError(
        QStringLiteral("launch.trainer: %1 does not exist; set launch.trainer to the path of the "
                       "trainer (shardtrain) on this machine")
            .arg(path));
  }
  if (info.isDir() || !info.isExecutable()) {
    return requestError(QStringLiteral("launch.trainer: %1 is not an executable file; set "
                                       "launch.trainer to the trainer program (shardtrain)")
                            .arg(path));
  }
  return info.absoluteFilePath();
}

/// What start() needs after validation.
struct Plan {
  QString program;
  QString runDir;
  int world = 0;
  QMap<QString, QString> env;  // shared by every rank
  QStringList gpuShares;       // CUDA_VISIBLE_DEVICES per rank; empty: not set
};

Result<void> checkShape(const spec::LaunchSection& launch) {
  if (launch.kind != spec::LaunchKind::local) {
    return requestError(
        QStringLiteral("launch.kind: the local launcher got a run for another "
                       "kind; set launch.kind = \"local\" or use that launcher"));
  }
  if (launch.nnodes != 1) {
    return requestError(QStringLiteral("launch.nnodes: the local launcher runs 1 node, got %1; "
                                       "set launch.nnodes = 1, or launch.kind = \"ssh\" or "
                                       "\"slurm\" for several nodes")
                            .arg(launch.nnodes));
  }
  if (launch.nproc_per_node < 1) {
    return requestError(QStringLiteral("launch.nproc_per_node: expected at least 1 rank, got %1")
                            .arg(launch.nproc_per_node));
  }
  if (launch.threads_per_rank < 1) {
    return requestError(QStringLiteral("launch.threads_per_rank: expected at least 1, got %1")
                            .arg(launch.threads_per_rank));
  }
  if (launch.grace_s < 0) {
    return requestError(
        QStringLiteral("launch.grace_s: expected seconds >= 0, got %1").arg(launch.grace_s));
  }
  return ok();
}

/// Splits launch.gpus evenly over the ranks: rank r gets the r-th consecutive slice. With `share`
/// (Gloo collectives) fewer GPUs than ranks may be listed when they divide the ranks: rank r then
/// gets GPU r * n / world, consecutive ranks sharing one.
Result<QStringList> gpuShares(const std::vector<int>& gpus, int world, bool share) {
  QStringList shares;
  if (gpus.empty()) return shares;
  const int n = static_cast<int>(gpus.size());
  if (share && n < world && world % n == 0) {
    for (int rank = 0; rank < world; ++rank) {
      shares << QString::number(gpus[static_cast<size_t>(rank * n / world)]);
    }
    return shares;
  }
  if (n % world != 0) {
    return requestError(QStringLiteral("launch.gpus: %1 GPUs do not split evenly over %2 ranks "
                                       "(launch.nproc_per_node); list a multiple of %2 GPUs or "
                                       "leave launch.gpus empty")
                            .arg(n)
                            .arg(world));
  }
  const size_t per = gpus.size() / static_cast<size_t>(world);
  QStringList ids;
  for (size_t i = 0; i < gpus.size(); ++i) {
    ids << QString::number(gpus[i]);
    if (ids.size() == static_cast<qsizetype>(per)) {
      shares << ids.join(QLatin1Char(','));
      ids.clear();
    }
  }
  return shares;
}

/// Adds user variables; those the launcher sets per rank or from [launch] are refused.
Result<void> addUserEnv(QMap<QString, QString>& env, const QMap<QString, QString>& user,
                        const QString& field, bool gpusGiven) {
  static const QStringList kPerRank{QStringLiteral("RANK"), QStringLiteral("LOCAL_RANK"),
                                    QStringLiteral("WORLD_SIZE"),
                                    QStringLiteral("LOCAL_WORLD_SIZE")};
  for (auto it = user.begin(); it != user.end(); ++it) {
    if (kPerRank.contains(it.key())) {
      return requestError(QStringLiteral("%1: %2 is set by the launcher for each rank; remove it "
                                         "(launch.nproc_per_node sets the world size)")
                              .arg(field, it.key()));
    }
    if (it.key() == QLatin1String("OMP_NUM_THREADS")) {
      return requestError(QStringLiteral("%1: OMP_NUM_THREADS comes from launch.threads_per_rank; "
                                         "set that instead")
                              .arg(field));
    }
    if (gpusGiven && it.key() == QLatin1String("CUDA_VISIBLE_DEVICES")) {
      return requestError(QStringLiteral("%1: CUDA_VISIBLE_DEVICES comes from launch.gpus; set "
                                         "one of the two")
                              .arg(field));
    }
    env.insert(it.key(), it.value());
  }
  return ok();
}

Result<Plan> planRun(const LaunchRequest& request) {
  const spec::LaunchSection& launch = request.launch;
  if (auto shape = checkShape(launch); !shape) return shape.error();
  Plan plan;
  plan.world = launch.nproc_per_node;
  const QFileInfo dir(request.localRunDir);
  if (request.localRunDir.isEmpty() || !dir.isDir()) {
    return requestError(QStringLiteral("run directory \"%1\" does not exist; the backend creates "
                                       "it and writes trial.toml there before launching")
                            .arg(request.localRunDir));
  }
  plan.runDir = dir.absoluteFilePath();
  auto program = resolveTrainer(launch.trainer);
  if (!program) return program.error();
  plan.program = *program;
  auto shares = gpuShares(launch.gpus, plan.world, request.shareGpus);
  if (!shares) return shares.error();
  plan.gpuShares = *shares;

  const QProcessEnvironment system = QProcessEnvironment::systemEnvironment();
  for (const QString& key : system.keys()) plan.env.insert(key, system.value(key));
  plan.env.insert(QStringLiteral("MASTER_ADDR"), QStringLiteral("127.0.0.1"));
  plan.env.insert(QStringLiteral("MASTER_PORT"), QStringLiteral("0"));
  plan.env.insert(QStringLiteral("SHARDSCOPE_RDZV_FILE"), LocalLauncher::portFile(plan.runDir));
  plan.env.insert(QStringLiteral("WORLD_SIZE"), QString::number(plan.world));
  plan.env.insert(QStringLiteral("LOCAL_WORLD_SIZE"), QString::number(plan.world));
  plan.env.insert(QStringLiteral("OMP_NUM_THREADS"), QString::number(launch.threads_per_rank));
  auto resolved = resolvedLaunchEnv(launch);
  if (!resolved) return resolved.error();
  QMap<QString, QString> launchEnv;
  for (const auto& [key, value] : *resolved) {
    launchEnv.insert(QString::fromStdString(key), QString::fromStdString(value));
  }
  const bool gpus = !plan.gpuShares.isEmpty();
  if (auto r = addUserEnv(plan.env, launchEnv, QStringLiteral("launch.env"), gpus); !r) {
    return r.error();
  }
  if (auto r = addUserEnv(plan.env, request.extraEnv, QStringLiteral("launch request env"), gpus);
      !r) {
    return r.error();
  }
  // The run's own rendezvous token, drawn per start, after the user's variables so nothing
  // overrides it; the environment (owner-only in /proc), never the command line.
  plan.env.insert(QStringLiteral("SHARDSCOPE_RDZV_TOKEN"), rendezvousToken());
  return plan;
}

QStringList rankEnv(const Plan& plan, int rank) {
  QMap<QString, QString> env = plan.env;
  env.insert(QStringLiteral("RANK"), QString::number(rank));
  env.insert(QStringLiteral("LOCAL_RANK"), QString::number(rank));
  if (!plan.gpuShares.isEmpty()) {
    env.insert(QStringLiteral("CUDA_VISIBLE_DEVICES"), plan.gpuShares.at(rank));
  }
  QStringList out;
  for (auto it = env.begin(); it != env.end(); ++it) out << it.key() + '=' + it.value();
  return out;
}

/// Undoes a half-started run: the ranks already started are killed and reaped.
void killStarted(const RunLocation& loc) {
  for (qsizetype i = 0; i < loc.pids.size(); ++i) {
    for (int round = 0; round < 5; ++round) {
      if (signalSession(loc.pids[i], loc.startTicks[i], SIGKILL) == 0) break;
    }
    ::waitpid(static_cast<pid_t>(loc.pids[i]), nullptr, 0);
  }
}

QString signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? QStringLiteral("SIG") + QLatin1String(abbrev) : QString::number(sig);
}

}  // namespace

QString LocalLauncher::portFile(const QString& runDir) {
  return QDir(runDir).filePath(QStringLiteral("rendezvous-port"));
}

Result<std::unique_ptr<RunHandle>> LocalLauncher::start(const LaunchRequest& request) {
  auto plan = planRun(request);
  if (!plan) return plan.error();
  QFile::remove(portFile(plan->runDir));
  RunLocation loc;
  loc.kind = kind();
  loc.runDir = plan->runDir;
  loc.worldSize = plan->world;
  const QDir dir(plan->runDir);
  for (int rank = 0; rank < plan->world; ++rank) {
    localproc::SpawnSpec spec;
    spec.program = plan->program;
    spec.args = request.trainerArgs;
    spec.env = rankEnv(*plan, rank);
    spec.workDir = plan->runDir;
    spec.stdoutPath = dir.filePath(rankFileName(rank, RankFile::events));
    spec.stderrPath = dir.filePath(rankFileName(rank, RankFile::log));
    auto spawned = localproc::spawnInSession(spec);
    if (!spawned) {
      killStarted(loc);
      return fail("rank " + std::to_string(rank) + ": " + spawned.message());
    }
    loc.pids << spawned->pid;
    loc.startTicks << spawned->startTicks;
  }
  qCInfo(lcLocalLauncher) << "run" << request.runId << request.runName << "started" << loc.worldSize
                          << "ranks of" << plan->program << "pids" << loc.pids;
  return std::unique_ptr<RunHandle>(std::make_unique<LocalRunHandle>(loc, request.launch.grace_s));
}

Result<std::unique_ptr<RunHandle>> LocalLauncher::attach(const RunLocation& location) {
  if (location.kind != kind()) {
    return requestError(QStringLiteral("run location: kind \"%1\" is not a local run; attach "
                                       "with the %1 launcher")
                            .arg(location.kind));
  }
  if (location.pids.size() != location.worldSize || location.worldSize < 1) {
    return requestError(QStringLiteral("run location: a local run needs one pid per rank (%1), "
                                       "got %2; the run log row is damaged")
                            .arg(location.worldSize)
                            .arg(location.pids.size()));
  }
  RunLocation loc = location;
  if (loc.startTicks.isEmpty()) {
    qCWarning(lcLocalLauncher) << "run location of" << loc.runDir
                               << "has no start times: a reused pid cannot be told apart";
    loc.startTicks = QList<qint64>(loc.pids.size(), 0);
  }
  return std::unique_ptr<RunHandle>(std::make_unique<LocalRunHandle>(loc, m_attachGraceS));
}

// ---------------------------------------------------------------------------------------------

LocalRunHandle::LocalRunHandle(RunLocation location, int graceS, QObject* parent)
    : RunHandle(parent), m_location(std::move(location)), m_graceS(graceS) {
  m_graceTimer.setSingleShot(true);
  connect(&m_graceTimer, &QTimer::timeout, this, &LocalRunHandle::onGraceTimer);
  connect(&m_pollTimer, &QTimer::timeout, this, &LocalRunHandle::poll);
  m_startTimer.setSingleShot(true);
  connect(&m_startTimer, &QTimer::timeout, this, &LocalRunHandle::reportExitedAtStart);
  for (int i = 0; i < m_location.worldSize; ++i) {
    Rank r;
    r.state.rank = i;
    r.state.phase = RankState::Phase::running;
    r.pid = m_location.pids.value(i);
    r.startTicks = m_location.startTicks.value(i);
    m_ranks.append(r);
  }
  for (int i = 0; i < m_ranks.size(); ++i) {
    watch(i);
    // A rank that is already gone (attach to a finished run, or an instant exec failure) is
    // seen now; its consequences run from the event loop, where signals have listeners.
    const auto probe = localproc::probe(m_ranks[i].pid, m_ranks[i].startTicks);
    if (!probe.running) {
      m_ranks[i].state.phase = RankState::Phase::exited;
      m_ranks[i].state.exitCode = probe.exit.known ? probe.exit.exitCode : -1;
      m_ranks[i].state.signal = probe.exit.signal;
      unwatch(m_ranks[i]);
      m_exitedAtStart.append(i);
    }
  }
  if (!m_exitedAtStart.isEmpty()) m_startTimer.start(0);
  m_pollTimer.start(kPollMs);
}

void LocalRunHandle::reportExitedAtStart() {
  for (int rank : std::as_const(m_exitedAtStart)) onRankExited(rank);
  m_exitedAtStart.clear();
}

LocalRunHandle::~LocalRunHandle() {
  for (Rank& r : m_ranks) unwatch(r);
}

void LocalRunHandle::watch(int rank) {
  Rank& r = m_ranks[rank];
  // SHARDSCOPE_LAUNCH_POLL=1 takes the timer path that kernels without pidfd (< 5.3) take.
  if (qEnvironmentVariableIntValue("SHARDSCOPE_LAUNCH_POLL") == 1) return;
  const int fd = localproc::openPidfd(r.pid);
  if (fd < 0) return;  // no pidfd here: the poll timer checks the rank instead
  const auto st = localproc::readProcStat(r.pid);
  if (st && r.startTicks > 0 && st->startTicks != r.startTicks) {
    ::close(fd);  // the pid now names another process; ours is gone (the probe says so)
    return;
  }
  r.pidfd = fd;
  r.notifier = new QSocketNotifier(fd, QSocketNotifier::Read, this);
  connect(r.notifier, &QSocketNotifier::activated, this, [this, rank] { checkRank(rank); });
}

void LocalRunHandle::unwatch(Rank& r) {
  delete r.notifier;
  r.notifier = nullptr;
  if (r.pidfd >= 0) ::close(r.pidfd);
  r.pidfd = -1;
}

void LocalRunHandle::checkRank(int rank) {
  Rank& r = m_ranks[rank];
  if (r.state.phase == RankState::Phase::exited) return;
  const auto probe = localproc::probe(r.pid, r.startTicks);
  if (probe.running) {
    // A pidfd that fires for a live process would fire forever: fall back to polling.
    if (r.notifier != nullptr && r.notifier->isEnabled()) unwatch(r);
    return;
  }
  r.state.phase = RankState::Phase::exited;
  r.state.exitCode = probe.exit.known ? probe.exit.exitCode : -1;
  r.state.signal = probe.exit.signal;
  unwatch(r);
  onRankExited(rank);
}

void LocalRunHandle::onRankExited(int rank) {
  const RankState& s = m_ranks[rank].state;
  qCInfo(lcLocalRunHandle) << "rank" << rank << "pid" << m_ranks[rank].pid << "exited: code"
                           << s.exitCode << "signal" << s.signal;
  checkGrowth();  // a rank's last words reach readers before its exit does
  emit ranksChanged();
  QString reason;
  if (s.signal != 0) {
    reason = QStringLiteral("rank %1 was killed by signal %2 (%3)")
                 .arg(rank)
                 .arg(s.signal)
                 .arg(signalName(s.signal));
  } else if (s.exitCode > 0) {
    reason = QStringLiteral("rank %1 exited with code %2").arg(rank).arg(s.exitCode);
  } else if (s.exitCode < 0 && !exitedWithDone(rank)) {
    reason = QStringLiteral("rank %1 ended without a done event").arg(rank);
  }
  if (!reason.isEmpty() && !m_failing) {
    m_failing = true;
    qCWarning(lcLocalRunHandle).noquote()
        << reason << "; SIGTERM to the other ranks, SIGKILL after" << m_graceS << "s";
    emit rankFailed(rank, reason);
    for (int i = 0; i < m_ranks.size(); ++i) {
      if (i != rank) doom(i, SIGTERM);
    }
  }
  // Whatever the rank started in its session goes with it.
  doom(rank, SIGTERM);
}

bool LocalRunHandle::exitedWithDone(int rank) const {
  QFile file(eventsPath(rank));
  if (!file.open(QIODevice::ReadOnly)) return false;
  const qint64 size = file.size();
  file.seek(qMax<qint64>(0, size - kTailBytes));
  const QList<QByteArray> lines = file.readAll().split('\n');
  for (auto it = lines.crbegin(); it != lines.crend(); ++it) {
    const QByteArray line = it->trimmed();
    if (line.isEmpty()) continue;
    auto event = spec::parse_event(std::string_view(line.constData(), line.size()),
                                   spec::ParseMode::lenient);
    return event.ok() && std::holds_alternative<spec::DoneEvent>(event->body);
  }
  return false;
}

void LocalRunHandle::doom(int rank, int sig) {
  const Rank& r = m_ranks[rank];
  const int signalled = signalSession(r.pid, r.startTicks, sig);
  if (signalled > 0 && !m_killAt.contains(rank)) {
    m_killAt.insert(rank, QDeadlineTimer(std::chrono::seconds(m_graceS)));
  }
  armGraceTimer();
}

void LocalRunHandle::armGraceTimer() {
  if (m_killAt.isEmpty()) {
    m_graceTimer.stop();
    return;
  }
  qint64 soonest = std::numeric_limits<qint64>::max();
  for (const QDeadlineTimer& at : std::as_const(m_killAt)) {
    soonest = qMin(soonest, at.remainingTime());
  }
  m_graceTimer.start(static_cast<int>(qMax<qint64>(0, soonest)));
}

void LocalRunHandle::onGraceTimer() {
  for (auto it = m_killAt.begin(); it != m_killAt.end();) {
    if (!it->hasExpired()) {
      ++it;
      continue;
    }
    const Rank& r = m_ranks[it.key()];
    // A process may fork while we signal: repeat until the session is empty (or give up).
    for (int round = 0; round < 5; ++round) {
      const int n = signalSession(r.pid, r.startTicks, SIGKILL);
      if (n == 0) break;
      if (round == 0) {
        qCInfo(lcLocalRunHandle) << "rank" << it.key() << ":" << n
                                 << "process(es) still alive after the grace: SIGKILL";
      }
    }
    it = m_killAt.erase(it);
  }
  armGraceTimer();
}

void LocalRunHandle::stop() {
  qCInfo(lcLocalRunHandle) << "stop: SIGTERM to every rank of" << m_location.runDir;
  m_failing = true;  // exits from here on are the stop's doing, not a new failure
  for (int i = 0; i < m_ranks.size(); ++i) doom(i, SIGTERM);
}

void LocalRunHandle::kill() {
  qCInfo(lcLocalRunHandle) << "kill: SIGKILL to every rank of" << m_location.runDir;
  m_failing = true;
  for (int i = 0; i < m_ranks.size(); ++i) m_killAt.insert(i, QDeadlineTimer(0));
  onGraceTimer();
}

bool LocalRunHandle::finished() const {
  for (const Rank& r : m_ranks) {
    if (r.state.phase != RankState::Phase::exited) return false;
    const auto leader = localproc::readProcStat(r.pid);
    const bool reused = leader && r.startTicks > 0 && leader->startTicks != r.startTicks;
    if (!reused && !localproc::sessionMembers(r.pid).isEmpty()) return false;
  }
  return true;
}

void LocalRunHandle::poll() {
  for (int i = 0; i < m_ranks.size(); ++i) {
    if (m_ranks[i].pidfd < 0) checkRank(i);
  }
  const bool grew = checkGrowth();
  if (!grew && m_killAt.isEmpty() && finished()) m_pollTimer.stop();
}

bool LocalRunHandle::checkGrowth() {
  bool grew = false;
  for (int i = 0; i < m_ranks.size(); ++i) {
    Rank& r = m_ranks[i];
    const qint64 events = QFileInfo(eventsPath(i)).size();
    const qint64 log = QFileInfo(logPath(i)).size();
    grew = grew || events != r.eventsSize || log != r.logSize;
    r.eventsSize = events;
    r.logSize = log;
  }
  if (grew) emit filesGrew();
  return grew;
}

QList<RankState> LocalRunHandle::ranks() const {
  QList<RankState> out;
  for (const Rank& r : m_ranks) out.append(r.state);
  return out;
}

QString LocalRunHandle::eventsPath(int rank) const {
  return QDir(m_location.runDir).filePath(rankFileName(rank, RankFile::events));
}

QString LocalRunHandle::logPath(int rank) const {
  return QDir(m_location.runDir).filePath(rankFileName(rank, RankFile::log));
}

Result<QByteArray> LocalRunHandle::readEvents(int rank, qint64 offset, qint64 maxBytes) {
  if (rank < 0 || rank >= m_ranks.size()) {
    return requestError(
        QStringLiteral("rank %1: the run has ranks 0..%2").arg(rank).arg(m_ranks.size() - 1));
  }
  return readFile(eventsPath(rank), offset, maxBytes);
}

Result<QByteArray> LocalRunHandle::readLog(int rank, qint64 offset, qint64 maxBytes) {
  if (rank < 0 || rank >= m_ranks.size()) {
    return requestError(
        QStringLiteral("rank %1: the run has ranks 0..%2").arg(rank).arg(m_ranks.size() - 1));
  }
  return readFile(logPath(rank), offset, maxBytes);
}

Result<RankFileStat> LocalRunHandle::statRankFile(int rank, RankFile file) {
  if (rank < 0 || rank >= m_ranks.size()) {
    return requestError(
        QStringLiteral("rank %1: the run has ranks 0..%2").arg(rank).arg(m_ranks.size() - 1));
  }
  const QFileInfo info(file == RankFile::events ? eventsPath(rank) : logPath(rank));
  return RankFileStat{info.exists(), info.exists() ? info.size() : 0};
}

Result<QByteArray> LocalRunHandle::readFile(const QString& path, qint64 offset,
                                            qint64 maxBytes) const {
  if (offset < 0) {
    return requestError(QStringLiteral("%1: offset %2 is negative").arg(path).arg(offset));
  }
  QFile file(path);
  if (!file.exists()) {
    return requestError(QStringLiteral("%1 does not exist: the run directory was moved or "
                                       "deleted (run_dir in the run location)")
                            .arg(path));
  }
  if (!file.open(QIODevice::ReadOnly)) {
    return requestError(QStringLiteral("%1: %2").arg(path, file.errorString()));
  }
  if (maxBytes <= 0 || offset >= file.size()) return QByteArray();
  if (!file.seek(offset)) {
    return requestError(
        QStringLiteral("%1: cannot seek to %2: %3").arg(path).arg(offset).arg(file.errorString()));
  }
  return file.read(maxBytes);
}

}  // namespace shardscope::backend
