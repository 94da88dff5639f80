#include "backend/lifecycle/runfollower.h"

#include <algorithm>
#include <cmath>

#include "backend/monitor/runmonitor.h"

namespace shardscope::backend {

RunFollower::RunFollower(RunStore& store, qint64 runId, std::unique_ptr<RunHandle> handle,
                         QObject* parent)
    : QObject(parent),
      m_runId(runId),
      m_handle(std::move(handle)),
      m_monitor(std::make_unique<RunMonitor>(store, runId, *m_handle)) {
  connect(m_monitor.get(), &RunMonitor::finished, this, [this] {
    m_killTimer.stop();
    emit finished();
  });
  connect(m_handle.get(), &RunHandle::filesGrew, this, &RunFollower::filesGrew);
  m_killTimer.setSingleShot(true);
  connect(&m_killTimer, &QTimer::timeout, m_handle.get(), &RunHandle::kill);
}

RunFollower::~RunFollower() = default;

Result<void> RunFollower::start() { return m_monitor->start(); }

spec::RunStatus RunFollower::status() const { return m_monitor->status(); }

QString RunFollower::runDir() const { return m_handle->location().runDir; }

QList<RankState> RunFollower::ranks() const { return m_handle->ranks(); }

Result<QByteArray> RunFollower::readEvents(int rank, qint64 offset, qint64 maxBytes) {
  return m_handle->readEvents(rank, offset, maxBytes);
}

void RunFollower::stop(double graceS) {
  m_handle->stop();
  m_killTimer.start(int(std::lround(std::max(0.0, graceS) * 1000.0)));
}

void RunFollower::kill() {
  m_killTimer.stop();
  m_handle->kill();
}

}  // namespace shardscope::backend
