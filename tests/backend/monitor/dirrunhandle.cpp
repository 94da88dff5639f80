#include "tests/backend/monitor/dirrunhandle.h"

#include <QFile>
#include <QFileInfo>
#include <QThread>

#include <csignal>

namespace shardscope::backend {

namespace {

// A process is gone when /proc has no entry for it or it is a zombie waiting to be reaped.
bool processExited(qint64 pid) {
  QFile stat(QString("/proc/%1/stat").arg(pid));
  if (!stat.open(QIODevice::ReadOnly)) return true;
  const QByteArray text = stat.readAll();
  const qsizetype paren = text.lastIndexOf(')');
  return paren < 0 || text.mid(paren + 2, 1) == "Z";
}

}  // namespace

DirRunHandle::DirRunHandle(QString runDir, QList<qint64> pids, QObject* parent)
    : RunHandle(parent), m_runDir(std::move(runDir)), m_pids(std::move(pids)) {
  m_exitCodes.fill(-2, m_pids.size());
}

RunLocation DirRunHandle::location() const {
  RunLocation location;
  location.kind = "local";
  location.runDir = m_runDir;
  location.pids = m_pids;
  location.worldSize = int(m_pids.size());
  return location;
}

QList<RankState> DirRunHandle::ranks() const {
  QList<RankState> states;
  for (int rank = 0; rank < m_pids.size(); ++rank) {
    RankState state;
    state.rank = rank;
    const qint64 pid = m_pids[rank];
    const bool exited = pid > 0 ? processExited(pid) : m_exitCodes[rank] != -2;
    state.phase = exited ? RankState::Phase::exited : RankState::Phase::running;
    if (pid <= 0 && exited) state.exitCode = m_exitCodes[rank];
    states << state;
  }
  return states;
}

Result<QByteArray> DirRunHandle::readFile(const QString& name, qint64 offset,
                                          qint64 maxBytes) const {
  QFile file(m_runDir + "/" + name);
  if (!file.exists()) return QByteArray();  // the rank has not started writing yet
  if (!file.open(QIODevice::ReadOnly)) {
    return fail(file.fileName().toStdString() + ": " + file.errorString().toStdString());
  }
  if (!file.seek(offset)) return fail(file.fileName().toStdString() + ": cannot seek");
  return file.read(maxBytes);
}

Result<QByteArray> DirRunHandle::readEvents(int rank, qint64 offset, qint64 maxBytes) {
  // SHARDSCOPE_TEST_READ_DELAY_MS: every read blocks this long first, as a read over a slow or
  // half-open SSH link does (the monitor's thread is stuck meanwhile).
  const int delayMs = qEnvironmentVariableIntValue("SHARDSCOPE_TEST_READ_DELAY_MS");
  if (delayMs > 0) QThread::msleep(static_cast<unsigned long>(delayMs));
  return readFile(QString("events-rank-%1.jsonl").arg(rank), offset, maxBytes);
}

Result<QByteArray> DirRunHandle::readLog(int rank, qint64 offset, qint64 maxBytes) {
  return readFile(QString("rank-%1.log").arg(rank), offset, maxBytes);
}

Result<RankFileStat> DirRunHandle::statRankFile(int rank, RankFile file) {
  const QFileInfo info(m_runDir + "/" +
                       (file == RankFile::events ? QString("events-rank-%1.jsonl").arg(rank)
                                                 : QString("rank-%1.log").arg(rank)));
  return RankFileStat{info.exists(), info.exists() ? info.size() : 0};
}

void DirRunHandle::stop() {
  ++m_stopCalls;
  for (const qint64 pid : std::as_const(m_pids)) {
    if (pid > 0) ::kill(pid_t(pid), SIGTERM);
  }
}

void DirRunHandle::kill() {
  for (const qint64 pid : std::as_const(m_pids)) {
    if (pid > 0) ::kill(pid_t(pid), SIGKILL);
  }
}

void DirRunHandle::markExited(int rank, int exitCode) {
  m_exitCodes[rank] = exitCode;
  emit ranksChanged();
}

}  // namespace shardscope::backend
