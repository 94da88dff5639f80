// Parzen estimators for TPE (tpe.h): a weighted mixture of truncated-normal kernels (categorical
// kernels for categoricals) over a group of dimensions in internal coordinates, fitted as Optuna
// 4.x/5.x fits them. The math helpers (a branch-free exp, normal tail masses) and the
// log-density loops live in parzen.cpp; the "above" estimator's cache (AboveCache) in tpe.h.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "search/sampler.h"

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
  /// A draw from kernel `kernel` alone with its numeric widths times `scale`, written as sample()
  /// writes; categorical dimensions keep the values already in x.
  void sample_near(Rng& rng, std::size_t kernel, double scale, double* x,
                   std::size_t stride = 1) const;
  /// log densities of c candidates, `xs` (dims, c) with candidate a's value of dimension j at
  /// xs[j * c + a], into out (c). Discrete numerics: log mass of the value's grid cell.
  void log_pdf(const double* xs, std::size_t c, double* out) const;
  /// log_pdf adding every kernel's term in kernel order (slower): log_pdf must equal it to the
  /// last bit, which tests check.
  void log_pdf_every_term(const double* xs, std::size_t c, double* out) const;
  int kernels() const { return m_kernels; }

 private:
  friend class AboveCache;
  void reset(const std::vector<ParzenDim>& dims, std::size_t n);
  void set_weights(const std::vector<double>& weights, double prior_weight, bool cumulative);
  void fit_numeric(std::size_t j, const double* obs, std::size_t n, const SamplerConfig& cfg);
  void fit_categorical(std::size_t j, const double* obs, std::size_t n, const SamplerConfig& cfg);
  void finish();
  void prepare(const double* xs, std::size_t c) const;

  std::vector<ParzenDim> m_dims;
  int m_kernels = 0;
  std::vector<double> m_weights;                // set_weights' last input (observations)
  double m_prior_weight = -1.0;                 // and its prior weight
  bool m_cumulative = false;                    // m_cum_weight was filled for them
  std::vector<double> m_log_weight;             // (kernels)
  std::vector<double> m_cum_weight;             // (kernels) cumulative, last = 1
  std::size_t m_stride = 0;                     // kernel capacity of a dimension's row below
  std::uint64_t m_layout = 0;                   // bumped when the tables below are reallocated
  std::vector<double> m_mu;                     // (dims, stride) numeric centres
  std::vector<double> m_sigma;                  // (dims, stride)
  std::vector<double> m_inv_sigma;              // (dims, stride) 1 / sigma
  std::vector<double> m_mass;                   // (dims, stride) truncation mass
  std::vector<double> m_const;                  // (kernels) log weight - sum of log normalisers
  std::vector<std::vector<double>> m_cat_logp;  // per dim: (kernels, choices) log probabilities
  std::vector<std::pair<double, std::size_t>> m_order;  // fit_numeric's sort buffer
  std::vector<double> m_tails;                          // (2, kernels) truncation scratch
  mutable std::vector<double> m_acc;           // (kernels, candidates) or (candidates) terms
  mutable std::vector<double> m_lane;          // (5, candidates) log_pdf scratch
  mutable std::vector<std::uint32_t> m_rows;   // (up to kernels * candidates) listed terms' rows
  mutable std::vector<std::uint32_t> m_lanes;  // (same) their candidates
  mutable std::vector<double> m_terms;         // (same) their values
  mutable std::vector<unsigned char> m_kind;   // (dims) log_pdf's dimension kinds
  mutable std::vector<const double*> m_catp;   // (dims) categorical tables
  mutable std::vector<int> m_choices;          // (dims)
  mutable std::vector<double> m_cells;         // (dims, candidates, 2) grid cells
};

/// A truncated-normal kernel's 1 / sigma and mass on [low, high], as the fits compute them.
void kernel_mass(double mu, double sigma, double low, double high, double& inv, double& mass);

/// Optuna's default observation weights, oldest first: 1 for the newest 25, a linear ramp from
/// 1/n up to 1 before them.
void ramp_weights(std::size_t n, std::vector<double>& w);

}  // namespace shardscope::search
