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

}  // namespace shardscope::ui
