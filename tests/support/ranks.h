// Rank helpers the launcher tests share: have all of a run's ranks ended.
#pragma once

#include <QList>

#include <algorithm>

#include "backend/launch/launcher.h"

namespace shardscope::testing {

/// True when the handle knows its ranks and every one of them has exited. its ranks and every one
/// of them has exited.
inline bool allExited(const backend::RunHandle& handle) {
  const QList<backend::RankState> ranks = handle.ranks();
  return !ranks.isEmpty() &&
         std::all_of(ranks.begin(), ranks.end(), [](const backend::RankState& r) {
           return r.phase == backend::RankState::Phase::exited;
         });
}

}  // namespace shardscope::testing
