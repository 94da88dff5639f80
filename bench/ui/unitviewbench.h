// bench_dashboard's per-unit view figure: UnitView (ui/timeline/unitview.h) replotting one step
// recorded in detail of a 28-layer model on 8 ranks (root and 28 layer units: every unit's
// forward and backward all-gather, its reduce-scatter, and its compute stretches, about 1,300
// bars), fitted and zoomed to a tenth of the step, beside the Plots panel's CurvePlot replotting
// 8 series of 10,000 points in the same process, as ratios.
#pragma once

namespace shardscope::bench {

/// Prints the per-unit view's replot medians and their ratios to the curve plot's.
void unitViewFigures();

}  // namespace shardscope::bench
