// What runs cost: each run's device-hours (ranks x wall time of each attempt, on GPUs when rank
// 0's `hello` named a CUDA device, CPU-hours otherwise) and, with a price per device-hour set for
// the host it ran on, its cost. Read from what the run log stores already (runs.world_size,
// started_at and ended_at of the current attempt, the hello/done/error events' times of earlier
// attempts): no schema step. The runs table, Compare's Pareto view and `shardscope-cli ls` all
// read it here. Prices are the user's (QSettings of the dashboard, "cost/price_per_hour/HOST").
#pragma once

#include <QHash>
#include <QString>

#include <optional>
#include <vector>

#include "backend/store/runreader.h"
#include "backend/store/runrecords.h"
#include "spec/result.h"

namespace shardscope::backend {

/// One earlier attempt's wall time, from its rank 0's events (unix seconds).
struct AttemptSpan {
  int attempt = 0;
  double start = 0;
  double end = 0;
};

/// A run's device time.
struct RunUsage {
  double hours = 0;  ///< world_size x wall-clock hours over all its attempts
  bool gpu = false;  ///< rank 0 computed on a CUDA device (else CPU-hours)
};

/// The usage of `run`: world_size x (its current attempt's ended_at, or `now` while it runs,
/// minus started_at, plus each of `earlier`'s end minus start) / 3600. 0 for a run that never
/// started.
RunUsage usageOf(const RunRecord& run, bool gpu, const std::vector<AttemptSpan>& earlier,
                 double now);

/// The usage of each of `runs`, in two statements (the device of each run's current attempt;
/// the spans of earlier attempts of resumed, retried or replanned runs).
[[nodiscard]] Result<QHash<qint64, RunUsage>> runUsage(RunReader& reader,
                                                       const std::vector<RunRecord>& runs,
                                                       double now);

/// Hours as the runs table and `ls` print them: "12.5" from 10 h, "1.250" from 0.01 h, "0.00031"
/// below (two significant digits: a short CPU run is not "0.000").
QString hoursText(double hours);

/// The host a run's price is set for: its launcher's host (an SSH alias, a Slurm login host),
/// "local" for a run of this or another machine's local launcher; "" when it never started.
QString usageHost(const RunRecord& run);

/// Prices per device-hour by host ("local" included), as the user set them.
using HostPrices = QHash<QString, double>;
/// The prices saved in the dashboard's settings (empty when none).
HostPrices loadHostPrices();
/// Saves `prices` (hosts with a price of 0 or less are removed).
void saveHostPrices(const HostPrices& prices);
/// hours x the price of `host`; nullopt when no price is set for it.
std::optional<double> usageCost(const RunUsage& usage, const QString& host,
                                const HostPrices& prices);

}  // namespace shardscope::backend
