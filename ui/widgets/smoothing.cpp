#include "ui/widgets/smoothing.h"

#include <algorithm>
#include <cmath>

namespace shardscope::ui {

namespace {

double clampedWeight(double weight) {
  return std::clamp(std::isnan(weight) ? 0.0 : weight, 0.0, kMaxSmoothing);
}

// The recurrence over values[0..n) from `s`, into out. weight^k is kept as a running product:
// std::pow per point cost more than the rest at 1M points. Once 1 - weight^k is 1 in doubles it
// is held at 0: left alone it would sink into the denormals and stay at the smallest one (0.6 x
// that rounds back to it), and every product there is a slow-path multiply: 150 ms at 1M points
// instead of 3.
void runEma(EmaState& s, const double* values, double* out, std::size_t n) {
  constexpr double kNegligible = 1e-17;  // below half an ulp of 1.0
  const double w = s.weight;
  double last = s.last;
  double weightPower = s.weightPower;
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
  s.last = last;
  s.weightPower = weightPower;
}

}  // namespace

EmaState::EmaState(double w) : weight(clampedWeight(w)) {}

void smoothEma(const double* values, double* out, std::size_t n, double weight) {
  EmaState state(weight);
  const bool done = smoothEmaAppend(state, values, out, n);
  (void)done;  // a fresh state always takes the whole series
}

bool smoothEmaAppend(EmaState& state, const double* values, double* out, std::size_t n) {
  if (n == 0) return true;
  const bool fresh = state.count == 0;
  const double first = fresh ? values[0] : state.first;
  bool constant = state.constant;
  for (std::size_t i = fresh ? 1 : 0; i < n && constant; ++i) constant = values[i] == first;
  // A flat series was written through; a point off it changes every earlier point's result.
  if (!fresh && state.constant && !constant && state.weight > 0.0) return false;
  state.first = first;
  state.constant = constant;
  state.count += n;
  if (state.weight == 0.0 || constant) {
    if (out != values) std::copy(values, values + n, out);
    return true;
  }
  runEma(state, values, out, n);
  return true;
}

}  // namespace shardscope::ui
