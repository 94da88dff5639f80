// Samplers: propose the next trial's parameters from the finished and pending trials.
// random, grid (every point once), qmc (scrambled Sobol), tpe, cmaes (continuous spaces), gp
// (Gaussian process), nsga2 (several objectives) and auto (gp, then tpe: autosampler.h)
// live behind one interface; make_sampler picks one from SearchSpace::sampler.
#pragma once

#include <memory>
#include <vector>

#include "search/space.h"
#include "search/trial.h"
#include "spec/result.h"

namespace shardscope::search {

class Sampler {
 public:
  virtual ~Sampler() = default;
  /// Values for the next trial: exactly the active parameters, each inside the space.
  /// `finished` holds trials in any non-running state, `pending` the running ones.
  virtual Result<TrialParams> sample(const SearchSpace& space, const std::vector<Trial>& finished,
                                     const std::vector<Trial>& pending, Rng& rng) = 0;
};

/// Independent uniform draws in the internal space (log-uniform for log parameters).
class RandomSampler : public Sampler {
 public:
  Result<TrialParams> sample(const SearchSpace& space, const std::vector<Trial>& finished,
                             const std::vector<Trial>& pending, Rng& rng) override;
};

/// Every distinct point of a discrete space once (conditionals expand only when active), in a
/// random order; an error once all are taken.
class GridSampler : public Sampler {
 public:
  Result<TrialParams> sample(const SearchSpace& space, const std::vector<Trial>& finished,
                             const std::vector<Trial>& pending, Rng& rng) override;
  /// All points of the space's grid, or an error naming a continuous parameter.
  static Result<std::vector<TrialParams>> points(const SearchSpace& space);

 private:
  std::vector<TrialParams> m_points;
};

/// Scrambled Sobol points (random linear matrix scramble + digital shift, fixed by the seed);
/// trial k takes point k. Up to kMaxDims parameters.
class QmcSampler : public Sampler {
 public:
  static constexpr int kMaxDims = 21;
  explicit QmcSampler(std::uint64_t seed) : m_seed(seed) {}
  Result<TrialParams> sample(const SearchSpace& space, const std::vector<Trial>& finished,
                             const std::vector<Trial>& pending, Rng& rng) override;
  /// The unscrambled (scramble = false) or scrambled point `index` in [0,1)^dims.
  std::vector<double> point(std::uint64_t index, int dims, bool scramble);

 private:
  void prepare(int dims);
  std::uint64_t m_seed;
  int m_dims = 0;
  std::vector<std::uint32_t> m_direction;  // (dims, 32) plain direction numbers
  std::vector<std::uint32_t> m_scrambled;  // (dims, 32) after the linear matrix scramble
  std::vector<std::uint32_t> m_shift;      // (dims) digital shift
};

/// The sampler SearchSpace::sampler names (auto: with auto_choice()'s rule), or an error (grid on a
/// continuous space, tpe, cmaes or gp with several objectives, cmaes without a float/int parameter,
/// qmc over more than QmcSampler::kMaxDims parameters).
Result<std::unique_ptr<Sampler>> make_sampler(const SearchSpace& space);

}  // namespace shardscope::search
