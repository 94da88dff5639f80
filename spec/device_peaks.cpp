#include "spec/device_peaks.h"

#include <array>

namespace shardscope::spec {
namespace {

// TFLOP/s, dense, per GPU: fp32 (no tensor cores), tf32, bf16, fp16 (fp32 accumulate). The
// first row whose key the device name contains wins, so more specific keys come first.
struct PeakRow {
  std::string_view key;
  double fp32, tf32, bf16, fp16;
};
constexpr std::array<PeakRow, 12> kPeaks{{
    {"H100 PCIe", 51.2, 378.0, 756.0, 756.0},
    {"H100 NVL", 60.0, 417.5, 835.0, 835.0},
    {"H100", 66.9, 494.7, 989.4, 989.4},  // SXM5 (80GB HBM3)
    {"H200", 66.9, 494.7, 989.4, 989.4},  // SXM (141GB HBM3e); GH200 too
    {"H800", 66.9, 494.7, 989.4, 989.4},
    {"B200", 80.0, 1100.0, 2250.0, 2250.0},
    {"A100", 19.5, 156.0, 312.0, 312.0},
    {"A800", 19.5, 156.0, 312.0, 312.0},
    {"L40S", 91.6, 183.0, 362.0, 362.0},
    {"RTX 4090", 82.6, 82.6, 165.2, 165.2},
    {"L4", 30.3, 60.0, 121.0, 121.0},
    {"A10", 31.2, 62.5, 125.0, 125.0},
}};

}  // namespace

std::optional<double> dense_peak_flops(std::string_view device_name, PeakDType dtype) {
  for (const auto& row : kPeaks) {
    if (device_name.find(row.key) == std::string_view::npos) continue;
    switch (dtype) {
      case PeakDType::fp32:
        return row.fp32 * 1e12;
      case PeakDType::tf32:
        return row.tf32 * 1e12;
      case PeakDType::bf16:
        return row.bf16 * 1e12;
      case PeakDType::fp16:
        return row.fp16 * 1e12;
    }
  }
  return std::nullopt;
}

}  // namespace shardscope::spec
