// The names of a rank's files in its run directory, the same under every launcher: the ranks'
// stdout (events, JSON lines) and stderr (log).
#pragma once

#include <QString>

#include "backend/store/runrecords.h"

namespace shardscope::backend {

/// The name of rank `rank`'s events or log file in its run directory (every launcher's layout).
inline QString rankFileName(int rank, RankFile file) {
  return file == RankFile::events ? QStringLiteral("events-rank-%1.jsonl").arg(rank)
                                  : QStringLiteral("rank-%1.log").arg(rank);
}

}  // namespace shardscope::backend
