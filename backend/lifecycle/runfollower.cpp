#include "backend/lifecycle/runfollower.h"

#include <algorithm>
#include <cmath>

#include "backend/monitor/runmonitor.h"

namespace shardscope::backend {

RunFollower::RunFollower(RunStore& store, qint64 runId, std::unique_ptr<RunHandle> handle,
                         QObject* parent)
    : RunFollower(store, runId, *handle, parent) {
  m_owned = std::move(handle);
}

RunFollower::RunFollower(RunStore& store, qint64 runId, RunHandle& handle, QObject* parent)
    : QObject(parent),
      m_runId(runId),
      m_handle(&handle),
      m_monitor(std::make_unique<RunMonitor>(store, runId, handle)) {
  connect(m_monitor.get(), &RunMonitor::finished, this, [this] {
    m_killTimer.stop();
    emit finished();
  });
  connect(m_monitor.get(), &RunMonitor::stepReached, this, &RunFollower::stepReached);
  connect(m_monitor.get(), &RunMonitor::leaseLost, this, &RunFollower::leaseLost);
  connect(m_monitor.get(), &RunMonitor::stalled, this, &RunFollower::stalled);
  connect(m_handle, &RunHandle::filesGrew, this, &RunFollower::filesGrew);
  m_killTimer.setSingleShot(true);
  connect(&m_killTimer, &QTimer::timeout, m_handle, &RunHandle::kill);
}

RunFollower::~RunFollower() = default;

Result<void> RunFollower::start() { return m_monitor->start(); }

bool RunFollower::refused() const { return m_monitor->refusedBy().has_value(); }

bool RunFollower::isFinished() const { return m_monitor->isFinished(); }

spec::RunStatus RunFollower::status() const { return m_monitor->status(); }

QString RunFollower::runDir() const { return m_handle->location().runDir; }

QList<RankState> RunFollower::ranks() const { return m_handle->ranks(); }

Result<QByteArray> RunFollower::readEvents(int rank, qint64 offset, qint64 maxBytes) {
  return m_handle->readEvents(rank, offset, maxBytes);
}

void RunFollower::setStallAfter(double seconds) { m_monitor->setStallAfter(seconds); }

void RunFollower::stop(double graceS) {
  m_handle->stop();
  m_killTimer.start(int(std::lround(std::max(0.0, graceS) * 1000.0)));
}

void RunFollower::kill() {
  m_killTimer.stop();
  m_handle->kill();
}

}  // namespace shardscope::backend
