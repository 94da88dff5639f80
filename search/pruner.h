// Pruners: decide from a running trial's curve and every trial's curves whether to stop it.
// percentile (median = 50th) and asynchronous successive halving follow Optuna's MedianPruner /
// PercentilePruner and SuccessiveHalvingPruner decision for decision (a reference test checks
// it); Hyperband runs several ASHA brackets and assigns each trial to one by a hash of its number.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "search/space.h"
#include "search/trial.h"

namespace shardscope::search {

/// The verdict plus the ASHA rungs the trial reached in this call; the caller stores those in
/// Trial::rungs (they are what later trials compete against, and must survive a restart).
struct PruneDecision {
  bool prune = false;
  std::vector<std::pair<int, double>> rungs;
};

class Pruner {
 public:
  virtual ~Pruner() = default;
  /// Called after `trial` reported its latest value (the last entry of trial.intermediate).
  /// `trials` is the whole study (it may include `trial`; its own entry is ignored).
  virtual PruneDecision should_prune(const Trial& trial, const std::vector<Trial>& trials,
                                     Direction direction) = 0;
};

/// Never prunes.
class NopPruner : public Pruner {
 public:
  PruneDecision should_prune(const Trial&, const std::vector<Trial>&, Direction) override {
    return {};
  }
};

/// Prunes when the trial's best value so far is worse than the given percentile of the complete
/// trials' values at the same step (after warm-up, once per interval, after n_startup_trials).
class PercentilePruner : public Pruner {
 public:
  explicit PercentilePruner(const PrunerConfig& cfg) : m_cfg(cfg) {}
  PruneDecision should_prune(const Trial& trial, const std::vector<Trial>& trials,
                             Direction direction) override;

 private:
  PrunerConfig m_cfg;
};

/// Asynchronous successive halving: at rung r (step >= min_resource * eta^(rate + r)) the trial
/// records its value and continues only if it is in the best 1/eta of the values recorded at
/// that rung so far (the best one while fewer than eta are recorded).
class SuccessiveHalvingPruner : public Pruner {
 public:
  explicit SuccessiveHalvingPruner(const PrunerConfig& cfg) : m_cfg(cfg) {}
  PruneDecision should_prune(const Trial& trial, const std::vector<Trial>& trials,
                             Direction direction) override;
  /// Same, competing only against `peers` (Hyperband's bracket).
  PruneDecision decide(const Trial& trial, const std::vector<const Trial*>& peers,
                       Direction direction);

 private:
  PrunerConfig m_cfg;
};

/// Hyperband: floor(log_eta(max/min)) + 1 ASHA brackets with early-stopping rates 0, 1, ...;
/// a trial joins a bracket with probability proportional to the bracket's budget.
class HyperbandPruner : public Pruner {
 public:
  explicit HyperbandPruner(const PrunerConfig& cfg) : m_cfg(cfg) {}
  PruneDecision should_prune(const Trial& trial, const std::vector<Trial>& trials,
                             Direction direction) override;
  /// The bracket of a trial number, or -1 while max_resource is still unknown.
  int bracket_of(std::int64_t number) const;

 private:
  bool init(const std::vector<Trial>& trials);
  PrunerConfig m_cfg;
  std::vector<std::unique_ptr<SuccessiveHalvingPruner>> m_brackets;
  std::vector<std::int64_t> m_budget;  // cumulative bracket budgets
};

/// The pruner PrunerConfig::type names.
std::unique_ptr<Pruner> make_pruner(const PrunerConfig& cfg);

}  // namespace shardscope::search
