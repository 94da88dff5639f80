// bench_dashboard's Samples view figure: the filmstrip (ui/samples/) filled with --probes x
// --columns answers of about 30 words each (a few words changed per column, half the probes with
// a reference), in the real panel at 1400x800: the time from the worker's delivery to the first
// painted frame, and a page scrolled down (cold: its text laid out for the first time) and back up
// (warm: from the cached layouts), down and across.
#pragma once

namespace shardscope::bench {

/// Prints the Samples view's fill and scroll medians.
void samplesFigures(int probes, int columns);

}  // namespace shardscope::bench
