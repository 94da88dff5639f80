// Population-based training's decisions, with no processes and no run log: the first values of
// each member, and after a segment which members exploit (go on from another member's
// checkpoint) and with what explored values (Jaderberg et al. 2017, "truncation selection" and
// "perturb"; Ray Tune's PopulationBasedTraining does the same). The backend's PbtLoop
// (backend/sweep/pbtloop.h) runs the segments and keeps the lineage; these functions only decide.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "search/space.h"
#include "search/trial.h"

namespace shardscope::search {

/// What one member does in the next segment.
struct PbtNext {
  int source = 0;      ///< the member whose checkpoint it goes on from (itself: no exploit)
  TrialParams params;  ///< its values in the next segment
  bool exploited = false;
};

/// Member `member`'s values for the first segment: every active parameter drawn uniformly in
/// the internal space (log applied), from `seed` and the member alone.
TrialParams pbt_initial(const SearchSpace& space, std::uint64_t seed, int member);

/// The number of members in the bottom (and in the top) quantile of a population of `n`:
/// floor(quantile * n), at least 1.
int pbt_quantile_count(const PbtConfig& config, int n);

/// The decisions after segment `segment`. `values[m]`: member m's objective at the segment's
/// end (nullopt: it failed and has no checkpoint; it always exploits and is never a source),
/// `params[m]`: its values in that segment. The bottom quantile by value (ties by member) go on
/// from a member drawn uniformly in the top quantile with explored values; the others keep
/// theirs. Explore: each mutable parameter is redrawn from its range with
/// config.resample_probability, else multiplied by one of config.factors (drawn uniformly) and
/// clamped and rounded to the parameter's grid. Same inputs and seed: the same decisions.
/// Needs at least one member with a value.
std::vector<PbtNext> pbt_decide(const SearchSpace& space, const std::vector<TrialParams>& params,
                                const std::vector<std::optional<double>>& values, bool minimize,
                                std::uint64_t seed, int segment);

/// `value` of parameter `p` explored once (see pbt_decide), from `rng`.
ParamValue pbt_explore(const Param& p, const ParamValue& value, const PbtConfig& config, Rng& rng);

}  // namespace shardscope::search
