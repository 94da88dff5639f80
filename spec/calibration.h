// The estimate's calibration: what the measured runs of one kind say about its figure. Each
// completed run's ranks report the estimate (`hello.mem_estimate`) and their measured peak
// (`mem.peak`, `mem.cuda_peak` on CUDA); the backend's run log groups those runs by
// calibration_key and hands the correction in (RunReader::memoryCalibrations). Torch-free and
// store-free: the estimate never reads a run log, it is told.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "spec/estimate.h"
#include "spec/experiment.h"

namespace shardscope::spec {

/// A correction of the estimate's total for one kind of run.
struct Calibration {
  double ratio = 1.0;  // measured peak over estimate, a robust mean over the runs (1: none)
  int runs = 0;        // completed runs behind the ratio (0: no correction)

  bool operator==(const Calibration&) const = default;
};

/// Corrections by calibration_key.
using Calibrations = std::map<std::string, Calibration>;

/// What a correction is kept for: the model's architecture and parameter count, the device kind,
/// the precision mode, the sharding strategy and full / LoRA / QLoRA, e.g.
/// "tiny 49504 cpu fp32 FULL_SHARD full". `params_total` is the estimate's (or, for a run, its
/// `hello.params_total`: the same count); `gpu` is the device the ranks compute on.
std::string calibration_key(const Experiment& exp, std::int64_t params_total, bool gpu);

/// The correction `table` holds for the kind of run `exp` is, estimated as `e`, on a GPU or not
/// (the budget's device: DeviceBudget::gpu); none ({1, 0}) when it holds none.
Calibration find_calibration(const Calibrations& table, const Experiment& exp,
                             const MemoryEstimate& e, bool gpu);

/// The robust mean of per-run ratios: the median of up to 4 runs, the mean of the middle half
/// (the interquartile mean) of more, so one run that swapped or held a stray cache moves nothing.
/// Non-finite and non-positive ratios are ignored; none left: {1, 0}.
Calibration robust_calibration(std::vector<double> ratios);

/// `bytes` corrected: bytes x ratio, rounded (bytes unchanged without runs).
std::int64_t calibrated_bytes(std::int64_t bytes, const Calibration& c);

/// The estimate with `c` applied: total, device and host scaled, the terms left as the formulas
/// give them, and the correction kept in calibration / total_raw.
MemoryEstimate calibrated(const MemoryEstimate& e, const Calibration& c);

/// For people: "calibrated on 7 runs: x1.12", or "uncalibrated: no completed run of this kind".
std::string format_calibration(const Calibration& c);

}  // namespace shardscope::spec
