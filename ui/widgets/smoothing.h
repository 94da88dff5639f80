// Smoothing of a noisy curve as TensorBoard's scalar dashboard does it: an exponential moving
// average with bias correction (a debiased EMA), so the first points are not dragged towards 0.
// Pure functions on plain values: no Qt, no plot; the caller keeps its own data and draws the
// result beside it.
#pragma once

#include <cstddef>

namespace shardscope::ui {

/// The smoothing weights a user may choose: 0 (none) .. kMaxSmoothing.
inline constexpr double kMaxSmoothing = 0.999;

/// Writes the debiased EMA of values[0..n) with weight `weight` (0: none, clamped to
/// [0, kMaxSmoothing]) into out[0..n) (out may be values):
///   last_k = weight * last_{k-1} + (1 - weight) * v_k,   last_0 = 0
///   out_k  = last_k / (1 - weight^k)
/// where k counts the finite values so far. As TensorBoard: a point's weight does not depend on
/// the spacing of the steps (irregular steps are smoothed per point); a non-finite value (NaN, a
/// diverged inf) is written through unchanged and does not enter the average; a series whose
/// values are all equal is written through unchanged (no rounding wobble on a flat line).
void smoothEma(const double* values, double* out, std::size_t n, double weight);

/// Where smoothEma stands after the points it has seen, so a series that grows at its end (a
/// live run) is smoothed point by point instead of from its start at every new batch.
struct EmaState {
  explicit EmaState(double w = 0.0);
  double weight = 0.0;       ///< clamped as smoothEma clamps it
  std::size_t count = 0;     ///< points seen
  double first = 0.0;        ///< the first point (a flat series is written through)
  bool constant = true;      ///< every point so far equals the first
  double last = 0.0;         ///< the running average (valid once the series is not flat)
  double weightPower = 1.0;  ///< weight^k, held at 0 once negligible
};

/// Smooths values[0..n), the points that follow those `state` has seen, into out[0..n) and
/// advances `state`: the result is exactly what smoothEma writes for those points over the
/// whole series. Returns false, writing nothing, when the new points change the earlier ones'
/// result (a flat series, written through, that stops being flat): the caller smooths the whole
/// series again from a fresh EmaState (which always succeeds).
[[nodiscard]] bool smoothEmaAppend(EmaState& state, const double* values, double* out,
                                   std::size_t n);

}  // namespace shardscope::ui
