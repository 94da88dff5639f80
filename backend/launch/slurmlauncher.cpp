#include "backend/launch/slurmlauncher.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backend/ssh/knownhosts.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <algorithm>
#include <optional>

#include "backend/ssh/sftp.h"
#include "backend/ssh/shellquote.h"

Q_LOGGING_CATEGORY(lcSlurmLauncher, "shardscope.launch.slurm")

namespace shardscope::backend {

namespace {

std::string str(const QString& text) { return text.toStdString(); }
QString qstr(const std::string& text) { return QString::fromStdString(text); }

class LocalTransport : public SlurmTransport {
 public:
  explicit LocalTransport(QMap<QString, QString> env) : m_env(std::move(env)) {}

  Result<ExecResult> run(const QStringList& argv, const QString& workDir, int timeoutMs) override {
    QProcess process;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (auto it = m_env.begin(); it != m_env.end(); ++it) env.insert(it.key(), it.value());
    process.setProcessEnvironment(env);
    if (!workDir.isEmpty()) process.setWorkingDirectory(workDir);
    process.start(argv.first(), argv.mid(1));
    if (!process.waitForStarted(10000)) {
      return fail(str(argv.first()) + ": cannot run it (" + str(process.errorString()) +
                  "): is Slurm installed here and on PATH?");
    }
    if (!process.waitForFinished(timeoutMs)) {
      process.kill();
      process.waitForFinished(1000);
      return fail(str(argv.join(' ')) + ": no answer within " + std::to_string(timeoutMs / 1000) +
                  " s: is slurmctld reachable?");
    }
    ExecResult result;
    result.exitStatus = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
    result.out = process.readAllStandardOutput().toStdString();
    result.err = process.readAllStandardError().toStdString();
    return result;
  }

  // Owner-only from its creation (job.sbatch holds the run's token and launch.env's values): a
  // file left by an earlier attempt is replaced, never reused with its old mode, and nothing is
  // chmod'ed after the data could be read.
  Result<void> writeFile(const QString& path, const QByteArray& data) override {
    const QByteArray name = QFile::encodeName(path);
    ::unlink(name.constData());
    const int fd = ::open(name.constData(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return fail(str(path) + ": cannot create: " + std::strerror(errno));
    qint64 done = 0;
    while (done < data.size()) {
      const auto n = ::write(fd, data.constData() + done, static_cast<size_t>(data.size() - done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : ENOSPC;
        ::close(fd);
        return fail(str(path) + ": cannot write: " + std::strerror(err));
      }
      done += n;
    }
    if (::close(fd) != 0) return fail(str(path) + ": cannot write: " + std::strerror(errno));
    return ok();
  }

  Result<QByteArray> readFile(const QString& path, qint64 offset, qint64 maxBytes) override {
    QFile file(path);
    if (!file.exists()) return QByteArray();
    if (!file.open(QIODevice::ReadOnly) || !file.seek(offset)) {
      return fail(str(path) + ": cannot read: " + str(file.errorString()));
    }
    return file.read(maxBytes);
  }

  Result<qint64> fileSize(const QString& path) override {
    const QFileInfo info(path);
    return info.exists() ? info.size() : qint64(-1);
  }

  Result<QString> makeDirs(const QString& path) override {
    QString absolute = path;
    if (absolute == "~" || absolute.startsWith("~/")) absolute = QDir::homePath() + absolute.mid(1);
    if (!makeRunDir(absolute)) return fail(str(absolute) + ": cannot create the run directory");
    return QDir(absolute).absolutePath();
  }

 private:
  QMap<QString, QString> m_env;
};

class SshTransport : public SlurmTransport {
 public:
  SshTransport(SshSession session, QMap<QString, QString> env)
      : m_session(std::move(session)), m_env(std::move(env)) {}

  Result<ExecResult> run(const QStringList& argv, const QString& workDir, int timeoutMs) override {
    if (auto up = ensureConnected(); !up) return up.error();
    std::string command;
    if (!workDir.isEmpty()) command = "cd " + shellQuote(str(workDir)) + " && ";
    command += "env";
    for (auto it = m_env.begin(); it != m_env.end(); ++it) {
      command.append(" ").append(shellQuote(str(it.key() + "=" + it.value())));
    }
    for (const QString& arg : argv) command.append(" ").append(shellQuote(str(arg)));
    return m_session.exec(command, timeoutMs);
  }

  Result<void> writeFile(const QString& path, const QByteArray& data) override {
    if (auto up = ensureConnected(); !up) return up;
    return sftpWriteFile(m_session, str(path), data.toStdString(), 0600);
  }

  Result<QByteArray> readFile(const QString& path, qint64 offset, qint64 maxBytes) override {
    if (auto up = ensureConnected(); !up) return up.error();
    auto data = sftpRead(m_session, str(path), offset, maxBytes);
    if (!data) return data.error();
    return QByteArray::fromStdString(*data);
  }

  Result<qint64> fileSize(const QString& path) override {
    if (auto up = ensureConnected(); !up) return up.error();
    auto size = sftpStat(m_session, str(path));
    if (!size) return size.error();
    return qint64(*size);
  }

  Result<QString> makeDirs(const QString& path) override {
    if (auto up = ensureConnected(); !up) return up.error();
    auto absolute = sftpAbsolutePath(m_session, str(path));
    if (!absolute) return absolute.error();
    if (auto made = sftpMakeDirs(m_session, *absolute, 0700); !made) return made.error();
    return qstr(*absolute);
  }

 private:
  // A dropped connection is reopened on the next call (one attempt per call).
  Result<void> ensureConnected() {
    if (m_session.isConnected()) return ok();
    auto fresh = SshSession::create(m_session.target());
    if (!fresh) return fresh.error();
    if (auto opened = fresh->open(); !opened) return opened;
    m_session = std::move(fresh).value();
    return ok();
  }

  SshSession m_session;
  QMap<QString, QString> m_env;
};

QString jobName(const QString& runName) {
  QString name = runName;
  static const QRegularExpression unsafe("[^A-Za-z0-9._-]");
  name.replace(unsafe, "_");
  return name.isEmpty() ? QStringLiteral("shardscope") : name;
}

// #SBATCH values are read by sbatch, not a shell: refuse what could end or split a directive.
Result<void> checkDirective(const std::string& field, const std::string& value) {
  if (value.find_first_of("\n\r") != std::string::npos) {
    return fail(field + ": '" + value + "' contains a line break; give one directive per entry");
  }
  return ok();
}

std::string exportLine(const std::string& name, const std::string& value) {
  return "export " + name + "=" + shellQuote(value) + "\n";
}

}  // namespace

Result<QString> slurmBatchScript(const LaunchRequest& request, const QString& runDir) {
  const spec::LaunchSection& launch = request.launch;
  if (launch.nnodes < 1 || launch.nproc_per_node < 1) {
    return fail("launch.nnodes and launch.nproc_per_node must be >= 1");
  }
  for (const auto& [field, value] :
       {std::pair<std::string, std::string>{"launch.slurm_partition", launch.slurm_partition},
        {"launch.slurm_account", launch.slurm_account},
        {"launch.slurm_time", launch.slurm_time}}) {
    if (auto checked = checkDirective(field, value); !checked) return checked.error();
    if (value.find_first_of(" \t") != std::string::npos) {
      std::string message = field;
      message.append(": '").append(value).append("' must not contain spaces");
      return fail(message);
    }
  }
  std::string s = "#!/bin/bash\n";
  s += "#SBATCH --job-name=" + str(jobName(request.runName)) + "\n";
  s += "#SBATCH --nodes=" + std::to_string(launch.nnodes) + "\n";
  s += "#SBATCH --ntasks-per-node=" + std::to_string(launch.nproc_per_node) + "\n";
  if (launch.slurm_gpus_per_node > 0) {
    s += "#SBATCH --gpus-per-node=" + std::to_string(launch.slurm_gpus_per_node) + "\n";
  }
  if (!launch.slurm_partition.empty()) s += "#SBATCH --partition=" + launch.slurm_partition + "\n";
  if (!launch.slurm_account.empty()) s += "#SBATCH --account=" + launch.slurm_account + "\n";
  if (!launch.slurm_time.empty()) s += "#SBATCH --time=" + launch.slurm_time + "\n";
  s += "#SBATCH --signal=TERM@" + std::to_string(std::max(1, launch.grace_s)) + "\n";
  s += "#SBATCH --output=slurm-%j.out\n";
  for (const std::string& extra : launch.slurm_extra) {
    if (auto checked = checkDirective("launch.slurm_extra", extra); !checked)
      return checked.error();
    s += "#SBATCH " + extra + "\n";
  }
  s += "# Generated by Shardscope for run " + str(jobName(request.runName)) + "; ranks write\n";
  s += "# events-rank-N.jsonl (stdout) and rank-N.log (stderr) in the run directory.\n";
  // umask 077: what the job creates (srun's rank logs and event files among them) is owner-only.
  s += "set -u\numask 077\ncd " + shellQuote(str(runDir)) + " || exit 1\n";
  s += "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n";
  // A port that nothing on this (the first) node uses, read from /proc/net/tcp{,6}.
  s += "port_in_use() { grep -qi \":$(printf %04X \"$1\") \" /proc/net/tcp /proc/net/tcp6 "
       "2>/dev/null; }\n";
  s += "MASTER_PORT=$((20000 + RANDOM % 40000))\n";
  s += "for _ in $(seq 100); do port_in_use \"$MASTER_PORT\" || break; "
       "MASTER_PORT=$((20000 + RANDOM % 40000)); done\n";
  s += "export MASTER_PORT\n";
  std::map<std::string, std::string> env;
  const QProcessEnvironment system = QProcessEnvironment::systemEnvironment();
  for (const QString& name : system.keys()) {
    if (name.startsWith("NCCL_") || name.startsWith("GLOO_"))
      env[str(name)] = str(system.value(name));
  }
  env["OMP_NUM_THREADS"] = std::to_string(std::max(1, launch.threads_per_rank));
  auto resolved = resolvedLaunchEnv(launch);
  if (!resolved) return resolved.error();
  for (const auto& [name, value] : *resolved) env[name] = value;
  for (auto it = request.extraEnv.begin(); it != request.extraEnv.end(); ++it) {
    env[str(it.key())] = str(it.value());
  }
  // The run's rendezvous token: in this 0600 script and the ranks' environment, never argv.
  env["SHARDSCOPE_RDZV_TOKEN"] = str(rendezvousToken());
  for (const auto& [name, value] : env) {
    if (!isShellVariableName(name)) {
      return fail("launch.env: '" + name + "' is not a valid environment variable name");
    }
    s += exportLine(name, value);
  }
  // A requeued job resumes from its newest checkpoint. Positional parameters, not an array:
  // bash before 4.4 (RHEL/CentOS 7 clusters) calls an empty "${array[@]}" unbound under set -u.
  s += "set --\n";
  s += "if [ \"${SLURM_RESTART_COUNT:-0}\" -gt 0 ]; then set -- --resume auto; fi\n";
  s += "srun --kill-on-bad-exit=1 --open-mode=append --output=events-rank-%t.jsonl "
       "--error=rank-%t.log " +
       shellQuote(launch.trainer);
  for (const QString& arg : request.trainerArgs) s.append(" ").append(shellQuote(str(arg)));
  s += " \"$@\"\n";
  return qstr(s);
}

SlurmLauncher::SlurmLauncher(SlurmLauncherOptions options) : m_options(std::move(options)) {}

Result<std::unique_ptr<SlurmTransport>> SlurmLauncher::transportFor(const QString& host) const {
  if (host.isEmpty()) {
    return std::unique_ptr<SlurmTransport>(std::make_unique<LocalTransport>(m_options.commandEnv));
  }
  auto config = SshConfig::load(str(m_options.ssh.sshConfigPath));
  if (!config) return config.error();
  // Empty: the known_hosts of $HOME (libssh alone would take the passwd entry's home).
  const QString knownHosts = m_options.ssh.knownHostsPath.isEmpty()
                                 ? QString::fromStdString(KnownHosts::defaultPath())
                                 : m_options.ssh.knownHostsPath;
  SshTarget target = config->target(str(host), str(knownHosts));
  target.alias = str(host);
  auto session = SshSession::create(target);
  if (!session) return session.error();
  if (auto opened = session->open(); !opened) return opened.error();
  return std::unique_ptr<SlurmTransport>(
      std::make_unique<SshTransport>(std::move(session).value(), m_options.commandEnv));
}

Result<std::unique_ptr<RunHandle>> SlurmLauncher::start(const LaunchRequest& request) {
  const QString host = qstr(request.launch.slurm_host);
  auto transport = transportFor(host);
  if (!transport) return transport.error();
  QString runDir = request.localRunDir;
  if (!host.isEmpty()) {
    const QString root = request.launch.remote_dir.empty() ? QStringLiteral("~/shardscope-runs")
                                                           : qstr(request.launch.remote_dir);
    auto made = (*transport)->makeDirs(root + "/" + remoteRunDirName(request));
    if (!made) return made.error();
    runDir = *made;
    QFile trial(request.localRunDir + "/trial.toml");
    if (!trial.open(QIODevice::ReadOnly)) {
      return fail(str(trial.fileName()) + ": cannot read the trial config to upload");
    }
    if (auto put = (*transport)->writeFile(runDir + "/trial.toml", trial.readAll()); !put) {
      return put.error();
    }
  }
  auto script = slurmBatchScript(request, runDir);
  if (!script) return script.error();
  const QString scriptPath = runDir + "/job.sbatch";
  if (auto written = (*transport)->writeFile(scriptPath, script->toUtf8()); !written) {
    return written.error();
  }
  auto submitted = (*transport)->run({"sbatch", "--parsable", scriptPath}, runDir);
  if (!submitted) return submitted.error();
  const QString jobId = qstr(submitted->out).trimmed().section(';', 0, 0);
  if (submitted->exitStatus != 0 || jobId.isEmpty()) {
    return fail("sbatch refused the job for run " + str(request.runName) + ": " + submitted->err +
                " (check launch.slurm_partition, slurm_account, slurm_time and slurm_extra)");
  }
  qCInfo(lcSlurmLauncher) << "submitted job" << jobId << "for" << request.runName << "in" << runDir;
  RunLocation location;
  location.kind = "slurm";
  location.host = host;
  location.runDir = runDir;
  location.jobId = jobId;
  location.worldSize = request.launch.nnodes * request.launch.nproc_per_node;
  auto handle = std::make_unique<SlurmRunHandle>(std::move(transport).value(), location,
                                                 request.launch.grace_s, m_options.pollIntervalMs);
  handle->pollNow();
  return std::unique_ptr<RunHandle>(std::move(handle));
}

Result<std::unique_ptr<RunHandle>> SlurmLauncher::attach(const RunLocation& location) {
  if (location.kind != "slurm" || location.jobId.isEmpty() || location.worldSize < 1) {
    return fail("attach: not a Slurm run location with a job id and a world size");
  }
  auto transport = transportFor(location.host);
  if (!transport) return transport.error();
  auto handle = std::make_unique<SlurmRunHandle>(std::move(transport).value(), location,
                                                 m_options.ssh.graceS, m_options.pollIntervalMs);
  handle->pollNow();
  return std::unique_ptr<RunHandle>(std::move(handle));
}

// ---- SlurmRunHandle -----------------------------------------------------------------------

SlurmRunHandle::SlurmRunHandle(std::unique_ptr<SlurmTransport> transport, RunLocation location,
                               int graceS, int pollIntervalMs, QObject* parent)
    : RemoteRunHandle(std::move(location), parent),
      m_transport(std::move(transport)),
      m_graceS(graceS) {
  for (int rank = 0; rank < m_location.worldSize; ++rank) {
    RankState state;
    state.rank = rank;
    state.host = m_location.host;
    m_ranks.append(state);
  }
  connect(&m_pollTimer, &QTimer::timeout, this, &SlurmRunHandle::pollNow);
  m_pollTimer.start(pollIntervalMs);
}

void SlurmRunHandle::setAll(RankState::Phase phase, int exitCode, int signal) {
  bool changed = false;
  for (RankState& rank : m_ranks) {
    if (rank.phase == phase && rank.exitCode == exitCode && rank.signal == signal) continue;
    rank.phase = phase;
    rank.exitCode = exitCode;
    rank.signal = signal;
    changed = true;
  }
  if (changed) emit ranksChanged();
}

bool SlurmRunHandle::controllerAnswered(const Result<ExecResult>& result, const char* what) {
  // A query that failed for any reason but "Invalid job id" (slurmctld restarting, a controller
  // timeout, the SSH link down) says nothing about the job: the state stays what it was, and the
  // next poll asks again. Reading it as "finished" failed healthy jobs and scancel'ed them.
  QString why;
  if (!result) {
    why = qstr(result.message());
  } else if (result->exitStatus != 0 && !qstr(result->err).contains("Invalid job id")) {
    why = qstr(result->err).trimmed();
  } else {
    m_queryFailures = 0;
    return true;
  }
  if (m_queryFailures++ % 20 == 0) {
    qCWarning(lcSlurmLauncher) << what << "failed for job" << m_location.jobId << "(" << why
                               << "); its state stays" << m_jobState << "until Slurm answers";
  }
  return false;
}

void SlurmRunHandle::pollNow() {
  const QString& job = m_location.jobId;
  auto queued = m_transport->run({"squeue", "-h", "-j", job, "-o", "%T"}, {}, 30000);
  if (!controllerAnswered(queued, "squeue")) {
    emit filesGrew();  // the ranks may well be running: their files are still read
    return;
  }
  // An unknown job id is squeue's "Invalid job id" (exit 1): the job has left the queue.
  QString state = queued->exitStatus == 0 ? qstr(queued->out).trimmed() : QString();
  static const QStringList active = {"PENDING",     "CONFIGURING", "REQUEUED",      "REQUEUE_HOLD",
                                     "REQUEUE_FED", "SUSPENDED",   "RESV_DEL_HOLD", "RUNNING",
                                     "COMPLETING",  "SIGNALING",   "STAGE_OUT",     "RESIZING"};
  QString exitCode;
  if (state.isEmpty() || !active.contains(state)) {
    // Finished: scontrol remembers the job for MinJobAge, sacct as long as accounting keeps it.
    auto shown = m_transport->run({"scontrol", "-o", "show", "job", job}, {}, 30000);
    if (!controllerAnswered(shown, "scontrol show job")) {
      emit filesGrew();
      return;
    }
    static const QRegularExpression field("JobState=(\\S+).*ExitCode=(\\S+)");
    const auto match = shown ? field.match(qstr(shown->out)) : QRegularExpressionMatch();
    if (match.hasMatch()) {
      state = match.captured(1);
      exitCode = match.captured(2);
    } else if (auto acct = m_transport->run(
                   {"sacct", "-n", "-X", "-P", "-j", job, "-o", "State,ExitCode"}, {}, 30000);
               acct && acct->exitStatus == 0 && !qstr(acct->out).trimmed().isEmpty()) {
      const QStringList parts = qstr(acct->out).trimmed().split('|');
      state = parts.value(0).section(' ', 0, 0);
      exitCode = parts.value(1);
    } else if (state.isEmpty()) {
      state = QStringLiteral("FINISHED");  // forgotten by Slurm; the event files tell the end
    }
  }
  if (state != m_jobState) {
    qCInfo(lcSlurmLauncher) << "job" << job << state << exitCode;
    m_jobState = state;
  }
  if (state == "RUNNING" || state == "COMPLETING" || state == "SIGNALING" || state == "STAGE_OUT" ||
      state == "RESIZING") {
    setAll(RankState::Phase::running, -1, 0);
  } else if (active.contains(state)) {
    setAll(RankState::Phase::pending, -1, 0);
  } else {
    const int code = exitCode.section(':', 0, 0).toInt();
    const int signal = exitCode.section(':', 1, 1).toInt();
    setAll(RankState::Phase::exited, signal ? -1 : code, signal);
    m_pollTimer.stop();
  }
  emit filesGrew();  // Slurm does not tell; readers poll the files anyway
}

Result<QByteArray> SlurmRunHandle::readFile(int rank, const QString& name, qint64 offset,
                                            qint64 maxBytes) {
  if (rank < 0 || rank >= m_location.worldSize) {
    return fail("rank " + std::to_string(rank) + " is not in this run (world size " +
                std::to_string(m_location.worldSize) + ")");
  }
  return m_transport->readFile(m_location.runDir + "/" + name, offset, maxBytes);
}

Result<RankFileStat> SlurmRunHandle::statRankFile(int rank, RankFile file) {
  if (rank < 0 || rank >= m_location.worldSize) {
    return fail("rank " + std::to_string(rank) + " is not in this run (world size " +
                std::to_string(m_location.worldSize) + ")");
  }
  const QString name = rankFileName(rank, file);
  auto size = m_transport->fileSize(m_location.runDir + "/" + name);
  if (!size) return size.error();
  return RankFileStat{*size >= 0, std::max<qint64>(0, *size)};
}

void SlurmRunHandle::stop() {
  // TERM to the job's steps (the ranks checkpoint and exit); the batch script then ends. What
  // is still there after the grace is cancelled outright.
  auto sent = m_transport->run({"scancel", "--signal=TERM", m_location.jobId}, {}, 30000);
  if (!sent || sent->exitStatus != 0) {
    qCWarning(lcSlurmLauncher) << "scancel --signal=TERM" << m_location.jobId
                               << "failed:" << (sent ? sent->err.c_str() : sent.message().c_str());
  }
  QTimer::singleShot(std::max(0, m_graceS) * 1000, this, [this] {
    if (m_ranks.isEmpty() || m_ranks.first().phase != RankState::Phase::exited) {
      (void)m_transport->run({"scancel", m_location.jobId}, {}, 30000);
    }
  });
}

void SlurmRunHandle::kill() {
  // Slurm treats `scancel --signal=KILL` as a plain cancel (checked on 22.05: the steps get
  // SIGCONT and SIGTERM, SIGKILL after KillWait), so this is the cancel itself: it does not wait
  // for a step boundary the way stop() does, and ends the job CANCELLED.
  auto sent = m_transport->run({"scancel", m_location.jobId}, {}, 30000);
  if (!sent || sent->exitStatus != 0) {
    qCWarning(lcSlurmLauncher) << "scancel" << m_location.jobId
                               << "failed:" << (sent ? sent->err.c_str() : sent.message().c_str());
  }
}

}  // namespace shardscope::backend
