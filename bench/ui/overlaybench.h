// bench_dashboard's overlay figures: the Compare panel's overlay of every trial's train and eval
// curves (compare::drawTrialOverlay) at `trials` x `steps`: the first paint (the overlay built
// from the curves and painted once), then replot p50/p99 of an unchanged view, of a panned view
// (what a drag repaints: the last image moved) and the exact rasterisation a still view gets.
// The peer in the same process: the same curves as one TrialLines (the intermediate values'
// plottable, which reduces each line per pixel column), replotted a few times.
#pragma once

namespace shardscope::bench {

/// Prints the overlay's figures at two plot sizes (its size in a 1600x1000 window, and 1200x800).
void overlayFigures(int trials, int steps);

}  // namespace shardscope::bench
