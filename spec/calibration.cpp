#include "spec/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace shardscope::spec {

std::string calibration_key(const Experiment& exp, std::int64_t params_total, bool gpu) {
  std::string tuning = "full";
  if (exp.lora.enabled) tuning = exp.lora.quantize == "nf4" ? "qlora" : "lora";
  std::string precision(to_string(exp.shard.precision));
  // A custom mode is as many modes as its dtypes make: name them.
  if (exp.shard.precision == PrecisionMode::custom) {
    precision += "(" + std::string(to_string(exp.shard.param_dtype)) + "," +
                 std::string(to_string(exp.shard.reduce_dtype)) + "," +
                 std::string(to_string(exp.shard.buffer_dtype)) + ")";
  }
  return exp.model.arch + " " + std::to_string(params_total) + " " + (gpu ? "cuda" : "cpu") + " " +
         precision + " " + std::string(to_string(exp.shard.strategy)) + " " + tuning;
}

Calibration find_calibration(const Calibrations& table, const Experiment& exp,
                             const MemoryEstimate& e, bool gpu) {
  const auto found = table.find(calibration_key(exp, e.params_total, gpu));
  return found == table.end() ? Calibration{} : found->second;
}

Calibration robust_calibration(std::vector<double> ratios) {
  std::erase_if(ratios, [](double r) { return !std::isfinite(r) || r <= 0; });
  if (ratios.empty()) return {};
  std::sort(ratios.begin(), ratios.end());
  const auto n = ratios.size();
  double mean = 0;
  if (n <= 4) {
    mean = n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  } else {
    // The middle half: drop the lowest and the highest quarter (rounded down) of the runs.
    const auto cut = n / 4;
    double sum = 0;
    for (auto i = cut; i < n - cut; ++i) sum += ratios[i];
    mean = sum / static_cast<double>(n - 2 * cut);
  }
  return {mean, static_cast<int>(n)};
}

std::int64_t calibrated_bytes(std::int64_t bytes, const Calibration& c) {
  if (c.runs <= 0) return bytes;
  return static_cast<std::int64_t>(std::llround(static_cast<double>(bytes) * c.ratio));
}

MemoryEstimate calibrated(const MemoryEstimate& e, const Calibration& c) {
  MemoryEstimate out = e;
  out.total_raw = e.total_raw > 0 ? e.total_raw : e.total;
  if (c.runs <= 0) return out;
  out.total = calibrated_bytes(out.total_raw, c);
  // Offloaded state is counted exactly (it is the engine's own shards): the correction is the
  // device's, and lands there.
  out.device = std::max<std::int64_t>(0, out.total - e.host);
  out.calibration_ratio = c.ratio;
  out.calibration_runs = c.runs;
  return out;
}

std::string format_calibration(const Calibration& c) {
  if (c.runs <= 0) return "uncalibrated: no completed run of this kind in the run log";
  char buf[96];
  std::snprintf(buf, sizeof buf, "calibrated on %d run%s: x%.2f", c.runs, c.runs == 1 ? "" : "s",
                c.ratio);
  return buf;
}

}  // namespace shardscope::spec
