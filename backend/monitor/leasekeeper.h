// LeaseKeeper: renews a followed run's lease on its own thread. The monitor's thread can block
// for longer than a lease stays fresh (an SSH poll waits up to 15 s on a half-open link, squeue up
// to 30 s while slurmctld restarts); heartbeats queued from that thread then stopped, the lease
// went stale, and a second supervisor took over a run whose first one was alive: two followers.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "backend/store/runrecords.h"

namespace shardscope::backend {

class RunStore;

class LeaseKeeper {
 public:
  /// Renews `lease` every `heartbeatMs` until destroyed. When another process holds the lease
  /// now it calls `onLost` once, on its own thread, and stops; a renewal the run log could not
  /// store (a full disk) is logged and tried again.
  LeaseKeeper(RunStore& store, LeaseRecord lease, int heartbeatMs,
              std::function<void(const std::string&)> onLost);
  /// Stops renewing and joins the thread (a renewal under way finishes first).
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

 private:
  void run();

  RunStore& m_store;
  LeaseRecord m_lease;
  int m_heartbeatMs;
  std::function<void(const std::string&)> m_onLost;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;
  int m_failures = 0;    // renewals in a row the run log could not store
  std::thread m_thread;  // last: starts after every member above exists
};

}  // namespace shardscope::backend
