// bench_dashboard's Inspect data figure: the builder's Inspect data tab (ui/builder/inspectpanel.h)
// reading the data of an experiment file (--inspect EXP.toml: a 1 GB JSONL in docs/cli.md's
// figure) on its thread, while the GUI thread's timer ticks every 10 ms: the inspection's wall
// time, and the longest gap between two ticks and the 99th percentile (the window's answer time
// while the file streams).
#pragma once

#include <QString>

namespace shardscope::bench {

/// Prints the Inspect data tab's figure for `experiment`; false (after a message) on an error.
bool inspectFigures(const QString& experiment);

}  // namespace shardscope::bench
