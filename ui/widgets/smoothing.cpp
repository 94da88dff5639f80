#include "ui/widgets/smoothing.h"

#include <algorithm>
#include <cmath>

namespace shardscope::ui {

void smoothEma(const double* values, double* out, std::size_t n, double weight) {
  const double w = std::clamp(std::isnan(weight) ? 0.0 : weight, 0.0, kMaxSmoothing);
  bool constant = true;
  for (std::size_t i = 1; i < n && constant; ++i) constant = values[i] == values[0];
  if (w == 0.0 || constant) {
    if (out != values) std::copy(values, values + n, out);
    return;
  }
  double last = 0.0;
  // weight^k, kept as a running product: std::pow per point cost more than the rest at 1M points.
  // Once 1 - weight^k is 1 in doubles it is held at 0: left alone it would sink into the
  // denormals and stay at the smallest one (0.6 x that rounds back to it), and every product
  // there is a slow-path multiply: 150 ms at 1M points instead of 3.
  constexpr double kNegligible = 1e-17;  // below half an ulp of 1.0
  double weightPower = 1.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = values[i];
    if (!std::isfinite(v)) {
      out[i] = v;
      continue;
    }
    last = last * w + (1.0 - w) * v;
    weightPower = weightPower > kNegligible ? weightPower * w : 0.0;
    out[i] = weightPower > 0.0 ? last / (1.0 - weightPower) : last;
  }
}

}  // namespace shardscope::ui
