#include "backend/monitor/leasekeeper.h"

#include <chrono>
#include <utility>

#include "backend/store/runstore.h"

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
      if (!m_stop) m_onLost(renewed.message());
      return;
    }
  }
}

}  // namespace shardscope::backend
