// How long a caller waits before it tries the run log again after an error that may pass (a lost
// server, a locked database): the first wait doubled per earlier try, up to a cap, for a number of
// tries. The sweep's asks, a trial's launch, record and monitor start, and `run`'s monitor start
// share it.
#pragma once

#include <algorithm>

namespace shardscope::backend {

struct RetryPolicy {
  int firstMs = 0;   ///< the wait after the first refusal
  int maxMs = 0;     ///< no wait longer than this
  int maxTries = 0;  ///< tries in all before the caller gives up

  /// The wait after `earlierTries` refusals (1 for the first).
  constexpr int delayMs(int earlierTries) const {
    return std::min(firstMs << std::clamp(earlierTries - 1, 0, 10), maxMs);
  }
  /// True when a try after `earlierTries` refusals may still come.
  constexpr bool mayRetry(int earlierTries) const { return earlierTries < maxTries; }
};

/// A launch the run log refused before any rank started, and a monitor that could not start on
/// it: 0.5 s doubling to 10 s, 35 tries (about 5 minutes), longer than a network partition.
inline constexpr RetryPolicy kLaunchRetry{500, 10000, 35};
/// An ask of a sweep and the record of an ended trial: 0.2 s doubling to 5 s, 125 tries (about 10
/// minutes).
inline constexpr RetryPolicy kRecordRetry{200, 5000, 125};

}  // namespace shardscope::backend
