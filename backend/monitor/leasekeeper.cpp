#include "backend/monitor/leasekeeper.h"

#include <QLoggingCategory>

#include <chrono>
#include <utility>

#include "backend/store/runstore.h"

Q_LOGGING_CATEGORY(lcLeaseKeeper, "shardscope.monitor.lease")

namespace shardscope::backend {

LeaseKeeper::LeaseKeeper(RunStore& store, LeaseRecord lease, int heartbeatMs,
                         std::function<void(const std::string&)> onLost)
    : m_store(store),
      m_lease(std::move(lease)),
      m_heartbeatMs(heartbeatMs),
      m_onLost(std::move(onLost)),
      m_thread([this] { run(); }) {}

LeaseKeeper::~LeaseKeeper() {
  {
    const std::lock_guard<std::mutex> lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  m_thread.join();
}

void LeaseKeeper::run() {
  std::unique_lock<std::mutex> lock(m_mutex);
  for (;;) {
    if (m_wake.wait_for(lock, std::chrono::milliseconds(m_heartbeatMs), [this] { return m_stop; }))
      return;
    lock.unlock();
    auto renewed = m_store.renewLease(m_lease).get();
    lock.lock();
    if (!renewed) {
      // The run log cannot be written (a full disk): the lease is still ours, and the monitor's
      // own writes fail and say why; renewing goes on, and succeeds once there is room again.
      if (m_failures++ % 30 == 0) {
        qCWarning(lcLeaseKeeper, "run %lld: lease heartbeat not stored: %s",
                  static_cast<long long>(m_lease.runId), renewed.message().c_str());
      }
      continue;
    }
    m_failures = 0;
    if (!*renewed) {
      if (!m_stop) {
        m_onLost("run " + std::to_string(m_lease.runId) +
                 ": another monitor took over this run's lease: stop following it here");
      }
      return;
    }
  }
}

}  // namespace shardscope::backend
