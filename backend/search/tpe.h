// Tree-structured Parzen Estimator (Bergstra et al. 2011; the variant Optuna ships):
// finished trials split into the best gamma(n) = min(ceil(n/10), 25) ("below") and the rest
// ("above"); a Parzen mixture (one truncated-normal kernel per observation plus a wide prior
// kernel, categorical kernels for categoricals) is fitted to each in the internal space; the
// candidate of n_ei_candidates drawn from l(x) with the largest log l(x) - log g(x) wins.
// Pruned trials rank after complete ones (later step first), infeasible/oom after those;
// with constant_liar the pending trials join "above" as if they were the worst results.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/search/sampler.h"

namespace shardscope::search {

/// One parameter of a group, in internal coordinates.
struct ParzenDim {
  const Param* param = nullptr;
  bool categorical = false;
  double low = 0.0;  // internal bounds (numeric)
  double high = 1.0;
  int choices = 0;  // categorical: number of choices
};

/// A weighted mixture of product kernels over a group of dimensions.
class ParzenEstimator {
 public:
  /// `obs` is (dims, n) internal coordinates, one column per dimension; `weights` one per
  /// observation (the prior kernel is added here).
  ParzenEstimator(std::vector<ParzenDim> dims, const std::vector<std::vector<double>>& obs,
                  const std::vector<double>& weights, const SamplerConfig& cfg, bool multivariate);
  /// A draw in internal coordinates (discrete numerics snapped to their grid).
  std::vector<double> sample(Rng& rng) const;
  /// log density at `x` (discrete numerics: log mass of x's grid cell).
  double log_pdf(const std::vector<double>& x) const;
  int kernels() const { return m_kernels; }

 private:
  void fit_numeric(std::size_t j, const std::vector<double>& obs, bool multivariate,
                   const SamplerConfig& cfg);
  void finish();
  void fit_categorical(std::size_t j, const std::vector<double>& obs, const SamplerConfig& cfg);

  std::vector<ParzenDim> m_dims;
  int m_kernels = 0;
  std::vector<double> m_log_weight;             // (kernels)
  std::vector<double> m_cum_weight;             // (kernels) cumulative, last = 1
  std::vector<double> m_mu;                     // (dims, kernels) numeric centres
  std::vector<double> m_sigma;                  // (dims, kernels)
  std::vector<double> m_inv_sigma;              // (dims, kernels) 1 / sigma
  std::vector<double> m_mass;                   // (dims, kernels) truncation mass (fit only)
  std::vector<double> m_const;                  // (kernels) log weight - sum of log normalisers
  mutable std::vector<double> m_scratch;        // (kernels) log_pdf's accumulator
  std::vector<std::vector<double>> m_cat_logp;  // per dim: (kernels, choices) log probabilities
};

class TpeSampler : public Sampler {
 public:
  TpeSampler(SamplerConfig cfg, Direction direction)
      : m_cfg(std::move(cfg)), m_direction(direction) {}
  Result<TrialParams> sample(const SearchSpace& space, const std::vector<Trial>& finished,
                             const std::vector<Trial>& pending, Rng& rng) override;

 private:
  struct Split {
    std::vector<const Trial*> below;                  // by trial number
    std::vector<const Trial*> above;                  // by trial number, pending last
    int finished = 0;                                 // trials that count for n_startup_trials
    std::vector<const std::vector<double>*> below_x;  // internal coordinates of `below`
    std::vector<const std::vector<double>*> above_x;  // of `above`
  };
  void internal_rows(const SearchSpace& space, Split& s);
  Split split(const std::vector<Trial>& finished, const std::vector<Trial>& pending) const;
  std::vector<std::vector<int>> groups(const SearchSpace& space) const;
  void sample_group(const SearchSpace& space, const std::vector<int>& group, const Split& s,
                    Rng& rng, TrialParams& out) const;

  SamplerConfig m_cfg;
  Direction m_direction;
  RandomSampler m_random;
  std::unordered_map<std::int64_t, std::vector<double>> m_cache;  // trial -> internal coordinates
  std::string m_cache_key;                                        // the space they belong to
};

}  // namespace shardscope::search
