// A run's verdict counts as the dashboard writes them, in the runs table's Verdicts column and
// beside each trial in Compare's lists: one wording for both.
#pragma once

#include <QString>

#include "backend/store/verdicts.h"

namespace shardscope::ui {

/// "2 good · 1 bad (67%)"; empty while nothing is marked.
QString verdictsText(const backend::VerdictCounts& counts);

}  // namespace shardscope::ui
