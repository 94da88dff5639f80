// One trial as the search layer sees it: its values, state, objective values and curve.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "search/space.h"

namespace shardscope::search {

/// Running trials are pending; infeasible (memory estimate over budget, never launched) and oom
/// are constraint violations that samplers rank below every feasible result.
enum class TrialState { Running, Complete, Pruned, Failed, Infeasible, Oom };

struct Trial {
  std::int64_t number = 0;
  TrialState state = TrialState::Running;
  TrialParams params;                           // active parameters only
  std::vector<double> values;                   // one per objective (Complete only)
  std::map<std::int64_t, double> intermediate;  // step -> reported value (pruners)
  std::map<int, double> rungs;                  // ASHA rung -> value recorded when reached
};

/// The random source handed to samplers: a standard engine with portable conversions, so a
/// seed gives the same sequence on every platform.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : m_engine(seed) {}
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(m_engine() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller; the second value is discarded for simplicity).
  double normal();
  /// Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : m_engine() % n; }
  std::uint64_t bits() { return m_engine(); }

 private:
  std::mt19937_64 m_engine;
};

}  // namespace shardscope::search
