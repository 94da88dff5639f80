// NSGA-II (Deb et al. 2002) for one or more objectives, with Optuna's NSGAIISampler defaults:
// population 50, uniform crossover (swapping probability 0.5) with probability 0.9, otherwise a
// copy of one parent, and each value redrawn at random with probability 1 / parameters.
// Constraints follow Deb's constrained domination: infeasible and oom trials (the memory
// estimate or the run said the config does not fit) are dominated by every feasible trial and
// do not dominate each other. Failed and pruned trials take no part.
//
// No hidden state: trial k (by number) belongs to generation k / population_size; generation 0
// is random; the parents of generation g+1 are the elite (non-dominated rank, then crowding
// distance) of generation g's parents and its finished trials. Replayed from the trial list on
// every call, so a restarted study continues. Parents are chosen by a binary tournament on
// (rank, crowding distance).
#pragma once

#include <cstddef>
#include <vector>

#include "search/sampler.h"

namespace shardscope::search {

/// Objective vectors turned into minimisation (maximised objectives negated).
std::vector<double> minimised(const std::vector<double>& values,
                              const std::vector<Objective>& objectives);

/// Non-dominated sorting of minimisation points: rank 0 for the Pareto front, 1 for the front
/// after removing it, ...; `feasible[i]` false puts point i behind every feasible one.
std::vector<int> nondominated_ranks(const std::vector<std::vector<double>>& points,
                                    const std::vector<bool>& feasible);

/// Crowding distance of each point of one front (boundary points: infinity).
std::vector<double> crowding_distance(const std::vector<std::vector<double>>& points);

/// Indices into `trials` of the Pareto-optimal complete trials (values finite, one per
/// objective), in trial-number order. Used by `study show` and the GUI's Pareto plot.
std::vector<std::size_t> pareto_front(const std::vector<Trial>& trials,
                                      const std::vector<Objective>& objectives);

/// Hypervolume dominated by minimisation points in 2-D up to `reference` (points not strictly
/// better than the reference in both objectives add nothing).
double hypervolume_2d(std::vector<std::vector<double>> points,
                      const std::vector<double>& reference);

class Nsga2Sampler : public Sampler {
 public:
  Nsga2Sampler(SamplerConfig cfg, std::vector<Objective> objectives)
      : m_cfg(std::move(cfg)), m_objectives(std::move(objectives)) {}
  Result<TrialParams> sample(const SearchSpace& space, const std::vector<Trial>& finished,
                             const std::vector<Trial>& pending, Rng& rng) override;
  /// The population size in use (population_size, or 50 when 0).
  int population() const { return m_cfg.population_size > 1 ? m_cfg.population_size : 50; }

  /// A parent with its non-dominated rank and crowding distance inside the population.
  struct Member {
    const Trial* trial = nullptr;
    int rank = 0;
    double crowding = 0.0;
  };
  /// The parents of the next generation after replaying the trial list; for tests.
  std::vector<Member> parents(const std::vector<Trial>& finished,
                              const std::vector<Trial>& pending) const;

 private:
  std::vector<Member> elite(std::vector<const Trial*> pool) const;
  const Trial* tournament(const std::vector<Member>& pop, Rng& rng) const;

  SamplerConfig m_cfg;
  std::vector<Objective> m_objectives;
  RandomSampler m_random;
};

}  // namespace shardscope::search
