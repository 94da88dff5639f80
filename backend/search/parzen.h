// Parzen estimators for TPE (tpe.h): a weighted mixture of truncated-normal kernels (categorical
// kernels for categoricals) over a group of dimensions in internal coordinates, fitted as Optuna
// 4.x/5.x fits them, and the "above" estimator's cache that refits only the neighbours of an
// added or removed observation. The math helpers (a branch-free exp, normal tail masses) and the
// log-density loops live in parzen.cpp.
#pragma once

#include <cstdint>
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

/// A weighted mixture of product kernels over a group of dimensions, kernels in a fixed order
/// (observations, then the prior kernel last).
class ParzenEstimator {
 public:
  /// Fits from scratch: `obs` is (dims, n), dimension j's observations at obs[j * n + i];
  /// `weights` one per observation (the prior kernel is added here).
  void fit(const std::vector<ParzenDim>& dims, const std::vector<double>& obs, std::size_t n,
           const std::vector<double>& weights, const SamplerConfig& cfg);
  /// A draw in internal coordinates (discrete numerics snapped to their grid): dimension j's
  /// value goes to x[j * stride].
  void sample(Rng& rng, double* x, std::size_t stride = 1) const;
  /// log densities of c candidates, `xs` (dims, c) with candidate a's value of dimension j at
  /// xs[j * c + a], into out (c). Discrete numerics: log mass of the value's grid cell.
  void log_pdf(const double* xs, std::size_t c, double* out) const;
  int kernels() const { return m_kernels; }

 private:
  friend class AboveCache;
  void reset(const std::vector<ParzenDim>& dims, std::size_t n);
  void set_weights(const std::vector<double>& weights, double prior_weight, bool cumulative);
  void fit_numeric(std::size_t j, const double* obs, std::size_t n, const SamplerConfig& cfg);
  void fit_categorical(std::size_t j, const double* obs, std::size_t n, const SamplerConfig& cfg);
  void finish();

  std::vector<ParzenDim> m_dims;
  int m_kernels = 0;
  std::vector<double> m_log_weight;             // (kernels)
  std::vector<double> m_cum_weight;             // (kernels) cumulative, last = 1
  std::vector<double> m_mu;                     // (dims, kernels) numeric centres
  std::vector<double> m_sigma;                  // (dims, kernels)
  std::vector<double> m_inv_sigma;              // (dims, kernels) 1 / sigma
  std::vector<double> m_mass;                   // (dims, kernels) truncation mass
  std::vector<double> m_const;                  // (kernels) log weight - sum of log normalisers
  std::vector<std::vector<double>> m_cat_logp;  // per dim: (kernels, choices) log probabilities
  std::vector<std::pair<double, std::size_t>> m_order;  // fit_numeric's sort buffer
  std::vector<double> m_tails;                          // (2, kernels) truncation scratch
  mutable std::vector<double> m_acc;                    // (kernels, candidates) log_pdf terms
  mutable std::vector<double> m_lane;                   // (3, candidates) log_pdf scratch
  mutable std::vector<unsigned char> m_kind;            // (dims) log_pdf's dimension kinds
  mutable std::vector<const double*> m_catp;            // (dims) categorical tables
  mutable std::vector<int> m_choices;                   // (dims)
  mutable std::vector<double> m_cells;                  // (dims, candidates, 2) grid cells
};

/// The "above" estimator of one group, kept between calls: observations live in slots (a
/// finished trial's position, or a pending trial's), with their centres sorted per continuous
/// dimension, so adding or removing one observation refits only its neighbours.
class AboveCache {
 public:
  /// Starts empty for a group of `dims`.
  void reset(const std::vector<ParzenDim>& dims);
  /// Makes the cached set exactly `items` (slot, a trial's internal row; the group's values at
  /// row[group[j]]) and writes into `est`, kernels in `items` order, the estimator that
  /// ParzenEstimator::fit would build from them with `weights`.
  void build(const std::vector<ParzenDim>& dims, const std::vector<int>& group,
             const std::vector<std::pair<std::size_t, const double*>>& items,
             const std::vector<double>& weights, const SamplerConfig& cfg, ParzenEstimator& est);

 private:
  void grow(std::size_t slots);
  void update(const std::vector<std::pair<std::size_t, const double*>>& items,
              const std::vector<int>& group);
  void insert(std::size_t slot, const double* row, const std::vector<int>& group);
  void remove(std::size_t slot);
  void rebuild_sorted();
  std::size_t position(std::size_t j, std::size_t slot) const;
  void refit_at(std::size_t j, std::size_t r, double min_sigma);
  void gather(const std::vector<ParzenDim>& dims,
              const std::vector<std::pair<std::size_t, const double*>>& items,
              const std::vector<double>& weights, const SamplerConfig& cfg, bool cached_norm,
              ParzenEstimator& est);

  std::vector<ParzenDim> m_dims;
  std::vector<char> m_incremental;  // (dims) continuous numeric dimension kept sorted
  std::size_t m_count = 0;          // live observations
  std::uint32_t m_generation = 0;
  double m_clip = -1.0;               // min(100, 1 + kernels) the widths were clipped with
  std::vector<char> m_live;           // (slots)
  std::vector<std::uint32_t> m_seen;  // (slots) generation that last asked for it
  std::vector<double> m_centre;       // (slots, dims)
  std::vector<double> m_raw;          // (slots, dims) width before the clip
  std::vector<double> m_sigma;        // (slots, dims)
  std::vector<double> m_inv;          // (slots, dims)
  std::vector<double> m_mass;         // (slots, dims)
  std::vector<double> m_lognorm;      // (slots) log of the product normaliser
  std::vector<char> m_lognorm_ok;     // (slots)
  std::vector<std::vector<std::pair<double, std::size_t>>> m_sorted;  // per dim (centre, slot)
  std::vector<std::size_t> m_ties;                                    // per dim: equal pairs
  std::vector<char> m_stale;                                          // per dim
  std::vector<std::vector<std::size_t>> m_dirty;                      // per dim: slots to refit
  std::vector<std::size_t> m_insert;                                  // update()'s scratch
  std::vector<double> m_obs;                                          // gather()'s scratch
};

/// Optuna's default observation weights, oldest first: 1 for the newest 25, a linear ramp from
/// 1/n up to 1 before them.
void ramp_weights(std::size_t n, std::vector<double>& w);

}  // namespace shardscope::search
