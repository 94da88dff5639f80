// What bench_dashboard and bench_live share: the big run log (a finished sweep of `trials` x
// `steps` loss points) they open, and the machine's name for the figures' first line.
#pragma once

#include <QString>

#include "spec/result.h"

namespace shardscope::bench {

/// Makes the run log `db` holding one finished sweep of `trials` runs with `steps` loss points
/// each (written through RunStore on a worker thread), or reuses it when a marker beside it says
/// it was made with the same size. `made` (optional) is set when it was written now.
Result<void> ensureBigSweep(const QString& db, int trials, int steps, bool* made = nullptr);

/// The same run log in a database of the PostgreSQL server `server` (postgresql://user@host:port),
/// written through the same RunStore; `spec` is set to its URL. The database is named after the
/// size and reused when it exists: it is filled under a temporary name and renamed once
/// complete, so an interrupted fill is never taken for a finished one.
Result<void> ensureBigSweepOnServer(const QString& server, int trials, int steps, QString* spec,
                                    bool* made = nullptr);

/// The CPU's model name from /proc/cpuinfo ("unknown" when unreadable).
QString cpuModel();

}  // namespace shardscope::bench
