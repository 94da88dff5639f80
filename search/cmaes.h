// CMA-ES sampler: (mu/mu_w, lambda)-CMA-ES (Hansen, "The CMA Evolution Strategy: A Tutorial",
// 2016) with the default strategy parameters and its active covariance update (the worst
// lambda - mu points of a generation get negative weights, eqs. 50-53, as Optuna's cmaes
// backend does), over the unconditional float/int parameters in the
// unit box (each parameter's internal range, log applied, mapped to [0, 1]). Candidates outside
// the box are redrawn (up to 100 times) and then clipped, as Optuna's cmaes backend does.
// Categorical and conditional parameters are drawn independently (RandomSampler).
//
// No hidden state: the strategy (mean, step size, paths, covariance) is replayed from the trial
// list on every call, so a study restarted from its stored trials continues where it was. The
// first n_startup_trials trials (by number) are random; after them trial k belongs to generation
// k / lambda. A generation updates the strategy once none of its trials is running; a new trial
// is drawn from the newest strategy. Failed, pruned, infeasible and oom trials rank after every
// complete one (in that order), so they count as the worst members of their generation.
// Warm-started (`start_at_best`, for a stored sampler = "auto" choice of CMA-ES after the GP,
// the benchmark's auto@N:cmaes), as Optuna's warm start (WS-CMA-ES, Nomura et al. 2021, in the
// cmaes package) estimates its start from the top 10% of the source trials: the mean starts at the
// best complete startup trial, and sigma and C from the spread of the best 10% of them
// (Sigma = 0.1^2 I + their covariance; sigma0 = det(Sigma)^(1/2n), C = Sigma / sigma0^2).
#pragma once

#include <string>
#include <vector>

#include "search/sampler.h"

namespace shardscope::search {

/// The evolving state of one CMA-ES run in the unit box; exposed for tests.
struct CmaState {
  int dims = 0;
  int lambda = 0;               // population size
  int mu = 0;                   // parents
  std::vector<double> weights;  // (mu) positive recombination weights, sum 1
  std::vector<double> active;   // (lambda - mu) negative weights of the worst, for C only
  double mu_eff = 0.0;
  double c_sigma = 0.0, d_sigma = 0.0, c_c = 0.0, c_1 = 0.0, c_mu = 0.0, chi_n = 0.0;
  std::vector<double> mean;     // (dims)
  double sigma = 0.0;           // step size
  std::vector<double> p_sigma;  // (dims) conjugate evolution path
  std::vector<double> p_c;      // (dims) evolution path
  std::vector<double> cov;      // (dims, dims) covariance C, row-major
  std::vector<double> basis;    // (dims, dims) eigenvectors B of C, column j = vector j
  std::vector<double> scale;    // (dims) sqrt of C's eigenvalues (D)
  int generation = 0;           // completed updates

  /// Hansen's defaults for `dims` dimensions; lambda 0 = 4 + floor(3 ln dims).
  static CmaState initial(int dims, int lambda, double sigma0);
  /// Sets C (row-major, symmetric positive definite) and its eigen-decomposition B, D.
  void set_covariance(std::vector<double> c);
  /// One draw m + sigma * B * D * z inside [0,1]^dims (redrawn, then clipped).
  std::vector<double> sample(Rng& rng) const;
  /// The update from one generation: `ranked` holds its points, best first (any count >= 1;
  /// the first min(mu, count) are recombined with renormalised weights; points past mu get the
  /// active (negative) weights in the covariance update).
  void update(const std::vector<std::vector<double>>& ranked);
};

class CmaEsSampler : public Sampler {
 public:
  explicit CmaEsSampler(SamplerConfig cfg, Direction direction, bool start_at_best = false)
      : m_cfg(std::move(cfg)), m_direction(direction), m_start_at_best(start_at_best) {}
  Result<TrialParams> sample(const SearchSpace& space, const std::vector<Trial>& finished,
                             const std::vector<Trial>& pending, Rng& rng) override;
  /// Indices into space.params of the parameters CMA-ES drives (unconditional float/int).
  static std::vector<int> driven(const SearchSpace& space);
  /// The strategy after replaying `finished` (what the next draw uses); for tests.
  CmaState replay(const SearchSpace& space, const std::vector<Trial>& finished,
                  const std::vector<Trial>& pending) const;

 private:
  SamplerConfig m_cfg;
  Direction m_direction;
  bool m_start_at_best = false;
  RandomSampler m_random;
  // Memo of the replay, checked against the trials on every call (not state of its own):
  // generation g's key (its members' numbers, states, values and points) and the state after it.
  mutable std::vector<std::pair<std::string, CmaState>> m_memo;
};

}  // namespace shardscope::search
