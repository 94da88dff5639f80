// The program-trial launcher and its normalising handle (see programlauncher.h).
//
// Why a normaliser instead of pointing the program's stdout at events-rank-0.jsonl: a trial
// program may omit the envelope (v, rank, seq, t) and mix plain text into stdout, and the run
// log stores a rank's events file line for line (protocol v1, strict). Rewriting into the
// standard files keeps one ingest path (RunMonitor, the store's offsets, the dashboard) for every
// trial. The raw files stay, so nothing is lost when the backend dies: attach() continues from
// the offsets in program-normalise.json. A crash between appending lines and saving the offsets
// repeats those lines on the next drain; their seq repeats and the monitor records the anomaly.
#include "backend/launch/programlauncher.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QProcessEnvironment>
#include <QSaveFile>
#include <QStandardPaths>

#include <algorithm>

#include "backend/launch/localprocess.h"

Q_LOGGING_CATEGORY(lcProgramLauncher, "shardscope.launch.program")
Q_LOGGING_CATEGORY(lcProgramRunHandle, "shardscope.launch.program.run")

namespace shardscope::backend {

namespace {

constexpr int kPollMs = 200;
const char* const kStdout = "program-stdout.log";
const char* const kStderr = "program-stderr.log";
const char* const kState = "program-normalise.json";
const char* const kEvents = "events-rank-0.jsonl";
const char* const kLog = "rank-0.log";

Error programError(const QString& message) { return fail(message.toStdString()); }

Result<QString> resolveExecutable(const QString& name, const QDir& base) {
  QString path;
  // A path, or a file beside the experiment; otherwise a command on PATH.
  if (name.contains(QLatin1Char('/')) || QFileInfo(base, name).isFile()) {
    path = QFileInfo(base, name).absoluteFilePath();
  } else {
    path = QStandardPaths::findExecutable(name);
    if (path.isEmpty()) {
      return programError(QStringLiteral("search.program: \"%1\" is neither beside the experiment "
                                         "(%2) nor on PATH; give its path relative to the "
                                         "experiment file or an absolute path")
                              .arg(name, base.absolutePath()));
    }
  }
  const QFileInfo info(path);
  if (!info.isFile() || !info.isExecutable()) {
    return programError(QStringLiteral("search.program: %1 is not an executable file; make it "
                                       "executable (chmod +x) or start it through its "
                                       "interpreter, e.g. program = [\"python3\", \"obj.py\"]")
                            .arg(path));
  }
  return info.absoluteFilePath();
}

bool ensureFile(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::Append);
}

bool appendTo(const QString& path, const QByteArray& bytes) {
  if (bytes.isEmpty()) return true;
  QFile file(path);
  if (!file.open(QIODevice::Append)) return false;
  return file.write(bytes) == bytes.size();
}

QString absoluteRunDir(const LaunchRequest& request) {
  return QFileInfo(request.localRunDir).absoluteFilePath();
}

}  // namespace

Result<QStringList> resolveProgram(const std::vector<std::string>& program,
                                   const QString& experimentDir) {
  if (program.empty() || program.front().empty()) {
    return programError(QStringLiteral(
        "search.program: empty; give the trial program's argv, e.g. [\"python3\", \"obj.py\"]"));
  }
  const QDir base(experimentDir);
  auto exe = resolveExecutable(QString::fromStdString(program.front()), base);
  if (!exe) return exe.error();
  QStringList argv{*exe};
  for (std::size_t i = 1; i < program.size(); ++i) {
    const QString arg = QString::fromStdString(program[i]);
    // Only regular files: a word that happens to name a folder (or nothing) stays as written.
    const bool relativeFile = !arg.startsWith(QLatin1Char('-')) && QDir::isRelativePath(arg) &&
                              QFileInfo(base.filePath(arg)).isFile();
    argv << (relativeFile ? QFileInfo(base, arg).absoluteFilePath() : arg);
  }
  return argv;
}

QByteArray nonFiniteToNull(const QByteArray& text) {
  static const QByteArrayList kTokens{"-Infinity", "Infinity", "NaN"};
  QByteArray out;
  out.reserve(text.size());
  bool inString = false;
  for (qsizetype i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        inString = false;
      }
      continue;
    }
    if (c == '"') inString = true;
    const auto token = std::find_if(kTokens.begin(), kTokens.end(), [&](const QByteArray& t) {
      return QByteArrayView(text).sliced(i).startsWith(t);
    });
    if (token != kTokens.end()) {
      out += "null";
      i += token->size() - 1;
      continue;
    }
    out += c;
  }
  return out;
}

QByteArray normaliseProgramLine(const QByteArray& line, qint64 seq, double t) {
  QByteArray text = line.trimmed();
  if (!text.startsWith('{')) return {};
  QJsonParseError error{};
  QJsonDocument doc = QJsonDocument::fromJson(text, &error);
  if (error.error != QJsonParseError::NoError) {
    // Python's json writes NaN and Infinity, which JSON lacks; the protocol writes null.
    text = nonFiniteToNull(text);
    doc = QJsonDocument::fromJson(text, &error);
  }
  if (error.error != QJsonParseError::NoError || !doc.isObject()) return {};
  const QJsonObject object = doc.object();
  QByteArrayList added;
  if (!object.contains(QLatin1String("v"))) added << R"("v":1)";
  if (!object.contains(QLatin1String("rank"))) added << R"("rank":0)";
  if (!object.contains(QLatin1String("seq"))) added << "\"seq\":" + QByteArray::number(seq);
  if (!object.contains(QLatin1String("t"))) added << "\"t\":" + QByteArray::number(t, 'f', 3);
  if (added.isEmpty()) return text;
  QByteArray out = "{" + added.join(',');
  if (!object.isEmpty()) out += ',';
  out += text.mid(1);
  return out;
}

Result<std::unique_ptr<RunHandle>> ProgramLauncher::start(const LaunchRequest& request) {
  const QString runDir = absoluteRunDir(request);
  if (request.localRunDir.isEmpty() || !QFileInfo(runDir).isDir()) {
    return programError(QStringLiteral("run directory \"%1\" does not exist; the backend creates "
                                       "it before launching a trial program")
                            .arg(request.localRunDir));
  }
  if (m_program.isEmpty()) {
    return programError(QStringLiteral("search.program: empty; give the trial program's argv"));
  }
  const QDir dir(runDir);
  for (const char* name : {kEvents, kLog, kStdout, kStderr}) {
    if (!ensureFile(dir.filePath(QLatin1String(name)))) {
      return programError(QStringLiteral("%1: cannot create it; check the run directory's "
                                         "permissions and free space")
                              .arg(dir.filePath(QLatin1String(name))));
    }
  }
  QMap<QString, QString> env;
  const QProcessEnvironment system = QProcessEnvironment::systemEnvironment();
  for (const QString& key : system.keys()) env.insert(key, system.value(key));
  auto resolved = resolvedLaunchEnv(request.launch);
  if (!resolved) return programError(QString::fromStdString(resolved.message()));
  for (const auto& [key, value] : *resolved) {
    env.insert(QString::fromStdString(key), QString::fromStdString(value));
  }
  for (auto it = request.extraEnv.begin(); it != request.extraEnv.end(); ++it) {
    env.insert(it.key(), it.value());
  }
  env.insert(QStringLiteral("SHARDSCOPE_RUN_DIR"), runDir);

  localproc::SpawnSpec spec;
  spec.program = m_program.front();
  spec.args = m_program.mid(1) + request.trainerArgs;
  for (auto it = env.begin(); it != env.end(); ++it) spec.env << it.key() + '=' + it.value();
  spec.workDir = runDir;
  spec.stdoutPath = dir.filePath(QLatin1String(kStdout));
  spec.stderrPath = dir.filePath(QLatin1String(kStderr));
  auto spawned = localproc::spawnInSession(spec);
  if (!spawned)
    return programError(QStringLiteral("search.program: %1").arg(spawned.message().c_str()));

  RunLocation loc;
  loc.kind = kind();
  loc.runDir = runDir;
  loc.worldSize = 1;
  loc.pids << spawned->pid;
  loc.startTicks << spawned->startTicks;
  qCInfo(lcProgramLauncher) << "run" << request.runId << request.runName << "started"
                            << spec.program << spec.args << "pid" << spawned->pid;
  return std::unique_ptr<RunHandle>(
      std::make_unique<ProgramRunHandle>(loc, request.launch.grace_s));
}

Result<std::unique_ptr<RunHandle>> ProgramLauncher::attach(const RunLocation& location) {
  if (location.kind != kind() || location.pids.size() != 1) {
    return programError(QStringLiteral("run location: kind \"%1\" with %2 pid(s) is not a program "
                                       "trial (kind \"program\", one pid); the run log row is "
                                       "damaged or belongs to another launcher")
                            .arg(location.kind)
                            .arg(location.pids.size()));
  }
  RunLocation loc = location;
  if (loc.startTicks.isEmpty()) loc.startTicks = {0};
  return std::unique_ptr<RunHandle>(std::make_unique<ProgramRunHandle>(loc, m_attachGraceS));
}

// ---------------------------------------------------------------------------------------------

ProgramRunHandle::ProgramRunHandle(const RunLocation& location, int graceS, QObject* parent)
    : RunHandle(parent), m_runDir(location.runDir) {
  const QDir dir(m_runDir);
  QFile state(dir.filePath(QLatin1String(kState)));
  if (state.open(QIODevice::ReadOnly)) {
    const QJsonObject saved = QJsonDocument::fromJson(state.readAll()).object();
    m_stdoutOffset = saved.value(QLatin1String("stdout")).toInteger();
    m_stderrOffset = saved.value(QLatin1String("stderr")).toInteger();
    m_seq = saved.value(QLatin1String("seq")).toInteger();
  }
  for (const char* name : {kEvents, kLog}) ensureFile(dir.filePath(QLatin1String(name)));
  m_inner = std::make_unique<LocalRunHandle>(location, graceS);
  connect(m_inner.get(), &RunHandle::ranksChanged, this, [this] {
    (void)ranks();  // drains
    emit ranksChanged();
  });
  connect(m_inner.get(), &RunHandle::filesGrew, this, &RunHandle::filesGrew);
  connect(&m_pollTimer, &QTimer::timeout, this, &ProgramRunHandle::onPoll);
  m_pollTimer.start(kPollMs);
}

ProgramRunHandle::~ProgramRunHandle() = default;

void ProgramRunHandle::onPoll() {
  const QList<RankState> states = m_inner->ranks();
  const bool exited = !states.isEmpty() && states.front().phase == RankState::Phase::exited;
  if (drain(exited)) emit filesGrew();
  if (exited && m_drained) m_pollTimer.stop();
}

QList<RankState> ProgramRunHandle::ranks() const {
  QList<RankState> states = m_inner->ranks();
  const bool exited = !states.isEmpty() && states.front().phase == RankState::Phase::exited;
  drain(exited);
  return states;
}

Result<QByteArray> ProgramRunHandle::readEvents(int rank, qint64 offset, qint64 maxBytes) {
  (void)ranks();
  return m_inner->readEvents(rank, offset, maxBytes);
}

Result<RankFileStat> ProgramRunHandle::statRankFile(int rank, RankFile file) {
  return m_inner->statRankFile(rank, file);
}

Result<QByteArray> ProgramRunHandle::readLog(int rank, qint64 offset, qint64 maxBytes) {
  (void)ranks();
  return m_inner->readLog(rank, offset, maxBytes);
}

bool ProgramRunHandle::drain(bool final) const {
  if (m_drained) return false;
  const QDir dir(m_runDir);
  QByteArray events;
  QByteArray logs;
  // Reads the raw file from `offset`; hands each complete line (and, when final, the last
  // partial one) to `take`, and advances `offset` past what it took.
  const auto readLines = [&](const char* name, qint64& offset, auto&& take) {
    QFile file(dir.filePath(QLatin1String(name)));
    if (!file.open(QIODevice::ReadOnly) || !file.seek(offset)) return;
    const QByteArray bytes = file.readAll();
    qint64 at = 0;
    for (qint64 end = bytes.indexOf('\n'); end >= 0; end = bytes.indexOf('\n', at)) {
      take(bytes.mid(at, end - at));
      at = end + 1;
    }
    if (final && at < bytes.size()) {
      take(bytes.mid(at));
      at = bytes.size();
    }
    offset += at;
  };
  const double now = double(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
  readLines(kStdout, m_stdoutOffset, [&](const QByteArray& line) {
    const QByteArray event = normaliseProgramLine(line, m_seq, now);
    if (event.isEmpty()) {
      logs += line + '\n';
    } else {
      events += event + '\n';
      ++m_seq;
    }
  });
  readLines(kStderr, m_stderrOffset, [&](const QByteArray& line) { logs += line + '\n'; });
  if (final) m_drained = true;
  if (events.isEmpty() && logs.isEmpty()) return false;
  if (!appendTo(dir.filePath(QLatin1String(kEvents)), events) ||
      !appendTo(dir.filePath(QLatin1String(kLog)), logs)) {
    qCWarning(lcProgramRunHandle) << "cannot append to the normalised files in" << m_runDir;
  }
  QSaveFile state(dir.filePath(QLatin1String(kState)));
  const QJsonObject saved{{QStringLiteral("stdout"), m_stdoutOffset},
                          {QStringLiteral("stderr"), m_stderrOffset},
                          {QStringLiteral("seq"), m_seq}};
  if (!state.open(QIODevice::WriteOnly) ||
      state.write(QJsonDocument(saved).toJson(QJsonDocument::Compact)) < 0 || !state.commit()) {
    qCWarning(lcProgramRunHandle) << "cannot save" << kState << "in" << m_runDir;
  }
  return true;
}

}  // namespace shardscope::backend
