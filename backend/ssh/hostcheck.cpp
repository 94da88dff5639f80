#include "backend/ssh/hostcheck.h"

#include <netdb.h>

#include <sys/socket.h>
#include <sys/types.h>
#include <algorithm>

#include <QLoggingCategory>
#include <QObject>
#include <QProcess>

#include <unistd.h>

#include <arpa/inet.h>

#include "backend/ssh/knownhosts.h"
#include "backend/ssh/shellquote.h"
#include "backend/ssh/sshconfig.h"
#include "backend/ssh/sshsession.h"

Q_LOGGING_CATEGORY(lcHostCheck, "shardscope.backend.hostcheck")

namespace shardscope::backend {

namespace {

using State = CheckStep::State;

QString qs(const std::string& text) { return QString::fromStdString(text).trimmed(); }

// The addresses `host` resolves to, or the resolver's error.
Result<QStringList> resolveHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    return fail("cannot resolve \"" + host + "\": " + gai_strerror(rc) +
                "; check HostName in ~/.ssh/config or the network's DNS");
  }
  QStringList addresses;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        a->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (inet_ntop(a->ai_family, raw, text, sizeof text) != nullptr &&
        !addresses.contains(QString::fromLatin1(text)))
      addresses.append(QString::fromLatin1(text));
  }
  freeaddrinfo(found);
  return addresses;
}

// The host key check on a connected session: the key's type, fingerprint and verdict.
struct KeyVerdict {
  ssh_known_hosts_e state = SSH_KNOWN_HOSTS_ERROR;
  QString keyType;
  QString fingerprint;
};

KeyVerdict inspectKey(SshSession& session) {
  KeyVerdict v;
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(session.handle(), &key) == SSH_OK) {
    v.keyType = QString::fromLatin1(ssh_key_type_to_char(ssh_key_type(key)));
    ssh_key_free(key);
  }
  if (auto fp = session.serverFingerprint()) v.fingerprint = qs(*fp);
  v.state = ssh_session_is_known_server(session.handle());
  return v;
}

QStringList parseGpus(const std::string& csv) {
  QStringList gpus;
  for (const QString& line : qs(csv).split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
    const QStringList f = line.split(QLatin1Char(','));
    if (f.size() < 3) continue;
    gpus.append(
        QStringLiteral("%1: %2 (%3 MiB)").arg(f[0].trimmed(), f[1].trimmed(), f[2].trimmed()));
  }
  return gpus;
}

constexpr const char* kGpuQuery =
    "nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits";

qint64 localPhysicalMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? qint64(pages) * qint64(page) : 0;
}

QStringList parsePartitions(const std::string& text) {
  QStringList parts;
  for (const QString& line : qs(text).split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
    const QStringList f = line.simplified().split(QLatin1Char(' '));
    if (f.size() >= 3) parts.append(QStringLiteral("%1 %2, %3 node(s)").arg(f[0], f[1], f[2]));
  }
  return parts;
}

// The last non-empty line of a command's stderr: the one that says what finally went wrong.
QString lastLine(const std::string& text) {
  const QStringList lines = qs(text).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
  return lines.isEmpty() ? QString() : lines.last().trimmed();
}

// A remote command absent from the login shell's PATH (exit 127, or the shell saying so).
bool commandMissing(const ExecResult& r) {
  return r.exitStatus == 127 || r.err.find("not found") != std::string::npos;
}

// Steps after authentication: trainer, GPUs, Slurm.
void remoteSteps(SshSession& session, const HostCheckRequest& request, HostCheckOutcome& outcome,
                 const std::function<void(const CheckStep&)>& report) {
  CheckStep trainer{"trainer", QObject::tr("Trainer found"), State::running, {}};
  report(trainer);
  const std::string program = request.trainer.toStdString();
  auto found = session.exec("command -v " + shellQuote(program));
  if (found && found->exitStatus == 0) {
    trainer.state = State::passed;
    trainer.detail = qs(found->out);
  } else {
    outcome.ok = false;
    trainer.state = State::failed;
    trainer.detail = found ? QObject::tr(
                                 "%1 is not on the remote PATH: install shardtrain there, "
                                 "or give its full path as the trainer")
                                 .arg(request.trainer)
                           : qs(found.message());
  }
  report(trainer);

  CheckStep gpus{"gpus", QObject::tr("GPUs (nvidia-smi)"), State::running, {}};
  report(gpus);
  auto smi = session.exec(kGpuQuery);
  if (smi && smi->exitStatus == 0) {
    outcome.gpus = parseGpus(smi->out);
    outcome.gpuInfo = parseGpuQuery(qs(smi->out));
    gpus.state = State::passed;
    gpus.detail = QObject::tr("%n GPU(s): ", nullptr, int(outcome.gpus.size())) +
                  outcome.gpus.join(QStringLiteral("; "));
  } else if (smi && commandMissing(*smi)) {
    gpus.state = State::notAvailable;
    gpus.detail = QObject::tr("no nvidia-smi: no NVIDIA GPU here, trials run on CPU (Gloo)");
  } else {
    gpus.state = State::failed;
    gpus.detail =
        smi ? QObject::tr("nvidia-smi failed: %1").arg(qs(smi->err + smi->out)) : qs(smi.message());
  }
  report(gpus);
  if (auto mem = session.exec("echo $(( $(getconf _PHYS_PAGES) * $(getconf PAGESIZE) ))");
      mem && mem->exitStatus == 0)
    outcome.hostMemoryBytes = qs(mem->out).toLongLong();

  CheckStep slurm{"slurm", QObject::tr("Slurm partitions"), State::running, {}};
  report(slurm);
  auto sinfo = session.exec("sinfo -h -o '%P %a %D'");
  if (sinfo && sinfo->exitStatus == 0) {
    outcome.partitions = parsePartitions(sinfo->out);
    slurm.state = State::passed;
    slurm.detail = outcome.partitions.join(QStringLiteral("; "));
  } else {
    slurm.state = State::notAvailable;
    slurm.detail = sinfo && commandMissing(*sinfo)
                       ? QObject::tr("no Slurm here (sinfo not found): launch over SSH instead")
                       : QObject::tr("no Slurm controller reachable (%1)")
                             .arg(sinfo ? lastLine(sinfo->err) : qs(sinfo.message()));
  }
  report(slurm);
}

}  // namespace

QString stateName(CheckStep::State state) {
  switch (state) {
    case State::running:
      return QObject::tr("running…");
    case State::passed:
      return QObject::tr("passed");
    case State::failed:
      return QObject::tr("failed");
    case State::notAvailable:
      return QObject::tr("not available");
    case State::skipped:
      return QObject::tr("skipped");
  }
  return {};
}

QList<CheckStep> hostCheckSteps() {
  return {{"resolve", QObject::tr("Resolve host name"), State::skipped, {}},
          {"connect", QObject::tr("Connect (SSH handshake)"), State::skipped, {}},
          {"hostkey", QObject::tr("Host key in known_hosts"), State::skipped, {}},
          {"auth", QObject::tr("Authenticate (agent or key)"), State::skipped, {}},
          {"trainer", QObject::tr("Trainer found"), State::skipped, {}},
          {"gpus", QObject::tr("GPUs (nvidia-smi)"), State::skipped, {}},
          {"slurm", QObject::tr("Slurm partitions"), State::skipped, {}}};
}

HostCheckOutcome runHostCheck(const HostCheckRequest& request,
                              const std::function<void(const CheckStep&)>& report) {
  HostCheckOutcome outcome;
  const auto step = [&](const char* id, const QString& title, State state, const QString& detail) {
    report({QString::fromLatin1(id), title, state, detail});
  };
  // Reports a failed step and ends the check there.
  const auto stop = [&](const char* id, const QString& title, const QString& detail) {
    step(id, title, State::failed, detail);
    return outcome;
  };
  const QString resolveTitle = QObject::tr("Resolve host name");
  auto config = SshConfig::load(request.sshConfigPath.toStdString());
  if (!config) return stop("resolve", resolveTitle, qs(config.message()));
  const KnownHosts known(request.knownHostsPath.toStdString());
  const SshTarget target = config->target(request.alias.toStdString(), known.path());
  step("resolve", resolveTitle, State::running, {});
  if (!target.proxyCommand.empty()) {
    step("resolve", resolveTitle, State::notAvailable,
         QObject::tr("resolved by the jump host (ProxyJump)"));
  } else if (auto addresses = resolveHost(target.host); !addresses) {
    return stop("resolve", resolveTitle, qs(addresses.message()));
  } else {
    step("resolve", resolveTitle, State::passed,
         QStringLiteral("%1 → %2").arg(qs(target.host), addresses->join(QStringLiteral(", "))));
  }

  const QString connectTitle = QObject::tr("Connect (SSH handshake)");
  step("connect", connectTitle, State::running, {});
  auto session = SshSession::create(target);
  if (!session) return stop("connect", connectTitle, qs(session.message()));
  if (auto c = session->connectTransport(); !c)
    return stop("connect", connectTitle, qs(c.message()));
  const QString address = QStringLiteral("%1:%2").arg(qs(target.host)).arg(target.port);
  step("connect", connectTitle, State::passed, address);

  const QString keyTitle = QObject::tr("Host key in known_hosts");
  const KeyVerdict key = inspectKey(*session);
  if (key.state != SSH_KNOWN_HOSTS_OK) {
    const QString message = qs(describeKnownHostsState(key.state, request.alias.toStdString(),
                                                       key.fingerprint.toStdString()));
    outcome.offer = HostKeyOffer{
        request.alias, address,
        key.keyType,   key.fingerprint,
        message,       key.state == SSH_KNOWN_HOSTS_CHANGED || key.state == SSH_KNOWN_HOSTS_OTHER};
    return stop("hostkey", keyTitle, message);
  }
  outcome.hostKey = QStringLiteral("%1 %2").arg(key.keyType, key.fingerprint);
  step("hostkey", keyTitle, State::passed, outcome.hostKey);

  const QString authTitle = QObject::tr("Authenticate (agent or key)");
  step("auth", authTitle, State::running, {});
  if (auto a = session->authenticate(); !a) return stop("auth", authTitle, qs(a.message()));
  const auto user = session->user();
  step("auth", authTitle, State::passed,
       QObject::tr("logged in as %1").arg(user ? qs(*user) : QStringLiteral("?")));
  outcome.ok = true;
  remoteSteps(*session, request, outcome, report);
  session->disconnect();
  return outcome;
}

QList<GpuInfo> parseGpuQuery(const QString& csv) {
  QList<GpuInfo> out;
  for (const QString& line : csv.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
    const QStringList f = line.split(QLatin1Char(','));
    if (f.size() < 3) continue;
    bool indexOk = false;
    bool memOk = false;
    GpuInfo g;
    g.index = f[0].trimmed().toInt(&indexOk);
    g.name = f.mid(1, f.size() - 2).join(QLatin1Char(',')).trimmed();
    g.memoryBytes = f.last().trimmed().toLongLong(&memOk) * 1024 * 1024;  // MiB (nounits)
    if (indexOk && memOk && g.memoryBytes > 0) out.append(g);
  }
  return out;
}

HostCheckOutcome checkLocalMemory() {
  HostCheckOutcome outcome;
  outcome.ok = true;
  outcome.hostMemoryBytes = localPhysicalMemory();
  QProcess smi;
  smi.startCommand(QString::fromLatin1(kGpuQuery));
  if (!smi.waitForStarted(5000)) return outcome;  // no nvidia-smi: no NVIDIA GPU here
  if (!smi.waitForFinished(20000)) {
    smi.kill();
    smi.waitForFinished(1000);
    qCWarning(lcHostCheck) << "nvidia-smi did not answer within 20 s; no GPU assumed";
    return outcome;
  }
  if (smi.exitStatus() == QProcess::NormalExit && smi.exitCode() == 0) {
    const QString out = QString::fromLocal8Bit(smi.readAllStandardOutput());
    outcome.gpuInfo = parseGpuQuery(out);
    outcome.gpus = parseGpus(out.toStdString());
  }
  return outcome;
}

Result<spec::DetectedMemory> detectMemory(const spec::LaunchSection& launch,
                                          const HostCheckRequest& sshFiles) {
  spec::DetectedMemory d;
  if (launch.kind == spec::LaunchKind::slurm) return d;
  HostCheckOutcome outcome;
  QString where = QStringLiteral("this machine");
  if (launch.kind == spec::LaunchKind::ssh && !launch.hosts.empty()) {
    HostCheckRequest request = sshFiles;
    request.alias = QString::fromStdString(launch.hosts.front());
    request.trainer = QString::fromStdString(launch.trainer);
    QString failure;
    outcome = runHostCheck(request, [&](const CheckStep& s) {
      if (s.state == CheckStep::State::failed && failure.isEmpty())
        failure = s.title + QStringLiteral(": ") + s.detail;
    });
    if (!outcome.ok)
      return fail("host check of " + launch.hosts.front() + " failed (" + failure.toStdString() +
                  "); fix the host or set launch.device_memory_gib");
    where = request.alias;
  } else {
    outcome = checkLocalMemory();
  }
  d.host_bytes = outcome.hostMemoryBytes;
  d.host_source = where.toStdString();
  const GpuInfo* smallest = nullptr;
  for (const auto& g : outcome.gpuInfo) {
    const bool used =
        launch.kind != spec::LaunchKind::local || launch.gpus.empty() ||
        std::find(launch.gpus.begin(), launch.gpus.end(), g.index) != launch.gpus.end();
    if (used && (smallest == nullptr || g.memoryBytes < smallest->memoryBytes)) smallest = &g;
  }
  if (smallest != nullptr) {
    d.gpu_bytes = smallest->memoryBytes;
    d.gpu_source = QStringLiteral("nvidia-smi on %1: GPU %2, %3")
                       .arg(where)
                       .arg(smallest->index)
                       .arg(smallest->name)
                       .toStdString();
  }
  return d;
}

}  // namespace shardscope::backend
