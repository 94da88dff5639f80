#include "backend/lifecycle/runcleanup.h"

#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QJsonArray>
#include <QLoggingCategory>
#include <QRegularExpression>
#include <QSysInfo>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "backend/ssh/knownhosts.h"
#include "backend/ssh/shellquote.h"
#include "backend/ssh/sshconfig.h"
#include "backend/ssh/sshsession.h"

Q_LOGGING_CATEGORY(lcRunCleanup, "shardscope.lifecycle.cleanup")

namespace shardscope::backend {

namespace {

constexpr const char* kCheckpointFolder = "ckpt";

std::string str(const QString& text) { return text.toStdString(); }

// `dir` and the folders of the run's earlier attempts: `dir` without its attempt suffix (one of
// `suffixes`, "-NAME-K"), then that base with each suffix and K = 1..attempt.
QStringList attemptFolders(const QString& dir, int attempt, const QStringList& suffixes) {
  QStringList folders{dir};
  if (attempt <= 0 || dir.isEmpty()) return folders;
  static const QRegularExpression tail(QStringLiteral("-([a-z]+)-[0-9]+$"));
  QString base = dir;
  if (const auto m = tail.match(dir); m.hasMatch() && suffixes.contains(m.captured(1))) {
    base.truncate(m.capturedStart());
  }
  folders << base;
  for (const QString& suffix : suffixes) {
    for (int k = 1; k <= attempt; ++k) folders << base + '-' + suffix + '-' + QString::number(k);
  }
  folders.removeDuplicates();
  return folders;
}

void addFolder(std::vector<RunFolder>& folders, const QString& host, const QString& path) {
  if (path.isEmpty()) return;
  const QString clean = QDir::cleanPath(path);
  for (const auto& f : folders) {
    if (f.host == host && f.path == clean) return;
  }
  folders.push_back({host, clean});
}

// Bytes of the regular files under `root` (symbolic links are not followed), and of those
// under root/ckpt.
RunDisk walkLocal(const QString& root) {
  RunDisk disk;
  const QString checkpoints = QDir(root).filePath(kCheckpointFolder) + '/';
  QDirIterator it(root, QDir::Files | QDir::Hidden | QDir::System | QDir::NoSymLinks,
                  QDirIterator::Subdirectories);
  while (it.hasNext()) {
    it.next();
    const QFileInfo info = it.fileInfo();
    if (info.isSymLink()) continue;
    disk.bytes += info.size();
    if (info.filePath().startsWith(checkpoints)) disk.checkpointBytes += info.size();
  }
  return disk;
}

// The remote command that prints "TOTAL CHECKPOINTS" for `path` ("0 0" when it does not exist):
// GNU find's sizes summed by awk, so nothing is read but the directory entries.
std::string remoteDuCommand(const QString& path) {
  const std::string q = shellQuote(str(path));
  return "if [ -d " + q + " ]; then find " + q +
         " -type f -printf '%s %P\\n' | awk '{t+=$1} index($2,\"" + kCheckpointFolder +
         "/\")==1 {c+=$1} END {printf \"%d %d\\n\", t, c}'; else echo '0 0'; fi";
}

}  // namespace

QString humanBytes(qint64 bytes) {
  if (bytes < 1024) return QString::number(bytes) + QStringLiteral(" B");
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return QString::number(value, 'f', 1) + ' ' + QLatin1String(units[unit]);
}

QString unsafeRunFolder(const QString& path) {
  if (path.trimmed().isEmpty()) return QStringLiteral("the run has no folder");
  const QString clean = QDir::cleanPath(path);
  if (!QDir::isAbsolutePath(clean)) {
    return "'" + path + "' is not an absolute path: refusing to remove it";
  }
  if (clean == "/" || clean == QDir::cleanPath(QDir::homePath()) || clean.count('/') < 2) {
    return "'" + path + "' is not a run folder (the root, a home or a top-level folder): " +
           "refusing to remove it";
  }
  return {};
}

RunCleaner::RunCleaner(CleanupOptions options) : m_options(std::move(options)) {
  if (m_options.thisHost.isEmpty()) m_options.thisHost = QSysInfo::machineHostName();
}

RunCleaner::~RunCleaner() = default;

RunPlace RunCleaner::place(const RunRecord& run) const {
  RunPlace place;
  const bool launchedHere = run.host.isEmpty() || run.host == m_options.thisHost;
  const QStringList local = attemptFolders(run.runDir, run.attempt, {"resume", "retry"});
  const QString kind = run.location.value("kind").toString();
  const QString remoteDir = run.location.value("run_dir").toString();
  if (launchedHere) {
    for (const QString& dir : local) addFolder(place.folders, {}, dir);
  } else if (!run.runDir.isEmpty()) {
    place.unreachable = "its run directory " + run.runDir + " is on " + run.host +
                        ", which this machine cannot reach: remove it there";
  }
  QStringList hosts;
  if (kind == "ssh") {
    for (const auto& h : run.location.value("hosts").toArray()) hosts << h.toString();
    if (hosts.isEmpty()) hosts << run.location.value("host").toString();
  } else if (kind == "slurm") {
    hosts << run.location.value("host").toString();  // "" : submitted on the launching machine
  }
  hosts.removeAll(QString());
  if (!hosts.isEmpty()) {
    for (const QString& host : hosts) {
      for (const QString& dir : attemptFolders(remoteDir, run.attempt, {"attempt"})) {
        addFolder(place.folders, host, dir);
      }
    }
  } else if (!remoteDir.isEmpty() && launchedHere) {
    addFolder(place.folders, {}, remoteDir);  // a local or Slurm run folder of its own
  }
  return place;
}

Result<SshSession*> RunCleaner::session(const QString& alias) {
  const std::string key = str(alias);
  if (auto it = m_sessions.find(key); it != m_sessions.end() && it->second->isConnected()) {
    return it->second.get();
  }
  auto config = SshConfig::load(str(m_options.sshConfigPath));
  if (!config) return config.error();
  const std::string knownHosts = m_options.knownHostsPath.isEmpty() ? KnownHosts::defaultPath()
                                                                    : str(m_options.knownHostsPath);
  SshTarget target = config->target(key, knownHosts);
  target.alias = key;
  auto created = SshSession::create(target);
  if (!created) return created.error();
  auto owned = std::make_unique<SshSession>(std::move(created).value());
  if (auto opened = owned->open(); !opened) return opened.error();
  SshSession* raw = owned.get();
  m_sessions[key] = std::move(owned);
  return raw;
}

Result<RunDisk> RunCleaner::measureFolder(const RunFolder& folder) {
  if (folder.host.isEmpty()) return walkLocal(folder.path);
  auto ssh = session(folder.host);
  if (!ssh) return ssh.error();
  auto result = (*ssh)->exec(remoteDuCommand(folder.path), 120000);
  if (!result) return result.error();
  std::istringstream words(result->out);
  RunDisk disk;
  if (result->exitStatus != 0 || !(words >> disk.bytes >> disk.checkpointBytes)) {
    return fail(str(folder.host) + ": cannot measure " + str(folder.path) + " (exit " +
                std::to_string(result->exitStatus) + "): " + result->err);
  }
  return disk;
}

Result<qint64> RunCleaner::measurePath(const RunFolder& folder) {
  if (folder.host.isEmpty()) {
    const QFileInfo info(folder.path);
    if (!info.exists()) return qint64(-1);
    if (!info.isDir()) return info.size();
    return walkLocal(folder.path).bytes;
  }
  auto ssh = session(folder.host);
  if (!ssh) return ssh.error();
  const std::string q = shellQuote(str(folder.path));
  auto result =
      (*ssh)->exec("if [ -e " + q + " ]; then find " + q +
                       " -type f -printf '%s\\n' | awk '{t+=$1} END {printf \"%d\\n\", t}'; "
                       "else echo -1; fi",
                   120000);
  if (!result) return result.error();
  std::istringstream words(result->out);
  qint64 bytes = 0;
  if (result->exitStatus != 0 || !(words >> bytes)) {
    return fail(str(folder.host) + ": cannot measure " + str(folder.path) + " (exit " +
                std::to_string(result->exitStatus) + "): " + result->err);
  }
  return bytes;
}

Result<void> RunCleaner::removeFolder(const RunFolder& folder, const QString& sub) {
  if (const QString why = unsafeRunFolder(folder.path); !why.isEmpty()) return fail(str(why));
  const QString path = sub.isEmpty() ? folder.path : folder.path + '/' + sub;
  if (folder.host.isEmpty()) {
    QDir dir(path);
    if (!dir.exists()) return ok();
    if (!dir.removeRecursively()) {
      return fail(str(path) + ": could not remove every file (check its permissions)");
    }
    return ok();
  }
  auto ssh = session(folder.host);
  if (!ssh) return ssh.error();
  auto result = (*ssh)->exec("rm -rf -- " + shellQuote(str(path)), 300000);
  if (!result) return result.error();
  if (result->exitStatus != 0) {
    return fail(str(folder.host) + ": could not remove " + str(path) + ": " + result->err);
  }
  return ok();
}

Result<RunDisk> RunCleaner::measure(const RunRecord& run) {
  RunDisk total;
  for (const RunFolder& folder : place(run).folders) {
    auto disk = measureFolder(folder);
    if (!disk) return disk.error();
    total.bytes += disk->bytes;
    total.checkpointBytes += disk->checkpointBytes;
  }
  return total;
}

Result<RunRemoval> RunCleaner::removeRun(RunStore& store, const RunRecord& run, bool forceRows) {
  const std::string label = "run " + str(run.name);
  if (run.status == spec::RunStatus::running) {
    return fail(label + " is running: stop it first (shardscope-cli stop " + str(run.name) +
                "), then delete it");
  }
  RunRemoval removal;
  const RunPlace where = place(run);
  QStringList left;
  if (!where.unreachable.isEmpty()) left << where.unreachable;
  for (const RunFolder& folder : where.folders) {
    if (const QString why = unsafeRunFolder(folder.path); !why.isEmpty()) {
      left << why;
      continue;
    }
    auto disk = measureFolder(folder);
    Result<void> removed = disk ? removeFolder(folder, {}) : Result<void>(disk.error());
    if (!removed) {
      // An unreachable host keeps its files; the rows stay so they can be removed later.
      left << QString::fromStdString(removed.message());
      continue;
    }
    removal.freedBytes += disk->bytes;
    qCInfo(lcRunCleanup).noquote() << "removed" << folder.host << folder.path << disk->bytes;
  }
  removal.left = left.join("; ");
  if (!left.isEmpty() && !forceRows) return removal;
  if (auto r = store.deleteRun(run.id).get(); !r) return fail(label + ": " + r.message());
  removal.rowsDeleted = true;
  return removal;
}

Result<qint64> RunCleaner::removeCheckpoints(const RunRecord& run) {
  if (run.status == spec::RunStatus::running) {
    return fail("run " + str(run.name) + " is running: its checkpoints are kept");
  }
  const RunPlace where = place(run);
  if (!where.unreachable.isEmpty())
    return fail("run " + str(run.name) + ": " + str(where.unreachable));
  qint64 freed = 0;
  for (const RunFolder& folder : where.folders) {
    auto disk = measureFolder(folder);
    if (!disk) return disk.error();
    if (disk->checkpointBytes == 0) continue;
    if (auto r = removeFolder(folder, kCheckpointFolder); !r) return r.error();
    freed += disk->checkpointBytes;
  }
  return freed;
}

std::vector<RunRecord> rankedTrials(const StudyRecord& study, std::vector<RunRecord> trials) {
  const bool maximize = !study.directions.isEmpty() && study.directions.front() == "maximize";
  const auto value = [](const RunRecord& r) -> std::optional<double> {
    if (r.objectiveValues && !r.objectiveValues->empty()) {
      const double v = r.objectiveValues->front();
      if (std::isfinite(v)) return v;
      return std::nullopt;
    }
    if (r.objective && std::isfinite(*r.objective)) return *r.objective;
    return std::nullopt;
  };
  std::erase_if(trials, [&](const RunRecord& r) { return !value(r).has_value(); });
  std::stable_sort(trials.begin(), trials.end(), [&](const RunRecord& a, const RunRecord& b) {
    const double va = *value(a);
    const double vb = *value(b);
    if (va != vb) return maximize ? va > vb : va < vb;
    return a.trialNumber.value_or(a.id) < b.trialNumber.value_or(b.id);
  });
  return trials;
}

Result<CheckpointGc> keepBestCheckpoints(RunCleaner& cleaner, const StudyRecord& study,
                                         const std::vector<RunRecord>& trials, int keep,
                                         bool dryRun) {
  if (keep < 0) return fail("--keep-best: must be 0 or more (got " + std::to_string(keep) + ")");
  CheckpointGc gc;
  const auto ranked = rankedTrials(study, trials);
  for (std::size_t i = 0; i < ranked.size() && static_cast<int>(i) < keep; ++i) {
    gc.kept << ranked[i].id;
  }
  for (const RunRecord& run : trials) {
    if (gc.kept.contains(run.id)) continue;
    if (run.status == spec::RunStatus::running) {
      gc.left << run.name + ": running, its checkpoints are kept";
      continue;
    }
    Result<qint64> freed = 0;
    if (dryRun) {
      auto disk = cleaner.measure(run);
      freed = disk ? Result<qint64>(disk->checkpointBytes) : Result<qint64>(disk.error());
    } else {
      freed = cleaner.removeCheckpoints(run);
    }
    if (!freed) {
      gc.left << run.name + ": " + QString::fromStdString(freed.message());
      continue;
    }
    if (*freed > 0) {
      gc.freed << run.id;
      gc.freedBytes += *freed;
    }
  }
  return gc;
}

}  // namespace shardscope::backend
