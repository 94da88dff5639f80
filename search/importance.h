// Parameter importance by PED-ANOVA (Watanabe et al., IJCAI 2023; conditional parameters as in
// condPED-ANOVA): a parameter matters as much as the distribution of its values among the top
// `target_quantile` trials differs (Pearson divergence) from its distribution among the
// `region_quantile` trials. Each distribution is a Parzen estimator with Scott's bandwidth on a
// grid of at most 50 cells (log parameters on a log grid), plus a uniform prior kernel.
//
// Why PED-ANOVA and not fANOVA on a random forest: it is closed-form (no forest to grow, no
// seed, the same answer from the same trials on every machine), linear in the number of trials,
// handles categorical and conditional parameters natively, and measures what a user of a sweep
// asks ("what did the good trials have in common?"). The reference test also compares its
// ranking with Optuna's FanovaImportanceEvaluator.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "search/space.h"
#include "search/trial.h"
#include "spec/result.h"

namespace shardscope::search {

struct ParamImportance {
  std::string name;         // dotted parameter name
  double importance = 0.0;  // share of the total, in [0, 1]; all shares sum to 1
};

struct ImportanceOptions {
  double target_quantile = 0.1;  // the "good" trials: this best fraction (gamma')
  double region_quantile = 1.0;  // compared against this best fraction (gamma; 1 = all trials)
  int grid_steps = 50;           // grid cells of a continuous parameter
  std::size_t objective = 0;     // which objective ranks the trials
};

/// Importance of every parameter of `space` from the complete trials, largest first (ties by
/// space order). An error when fewer than 2 trials are complete or the options are invalid.
Result<std::vector<ParamImportance>> param_importance(const SearchSpace& space,
                                                      const std::vector<Trial>& trials,
                                                      const ImportanceOptions& options = {});

}  // namespace shardscope::search
