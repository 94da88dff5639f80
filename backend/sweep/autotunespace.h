// What `autotune` searches and how: the sharding and batching fields it sets (TuneSettings), the
// values each may take on one experiment's world shape (TuneDomain), and the search itself,
// coordinate descent in the order of the Hugging Face DeepSpeed guide's tuning recipe
// (coordinateDescent). Pure logic: the caller measures a configuration (autotune.h runs it);
// nothing here starts a process.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "spec/experiment.h"

namespace shardscope::backend {

/// One value of each field autotune searches.
struct TuneSettings {
  spec::ShardStrategy strategy = spec::ShardStrategy::full_shard;  // shard.strategy
  bool offloadParams = false;                                      // shard.offload_params
  bool offloadOptimizer = false;                                   // shard.offload_optimizer
  bool activationCheckpointing = true;                             // shard.activation_checkpointing
  std::int64_t microBatchSize = 1;  // train.micro_batch_size (train.batch_size stays)
  spec::BackwardPrefetch backwardPrefetch = spec::BackwardPrefetch::pre;  // shard.*
  bool forwardPrefetch = false;                                           // shard.*
  int maxInflightGathers = 2;                                             // shard.*
  spec::WrapPolicy wrapPolicy = spec::WrapPolicy::block;                  // shard.*

  bool operator==(const TuneSettings&) const = default;
};

/// The values autotune tries per field on one experiment's world shape.
struct TuneDomain {
  std::vector<spec::ShardStrategy> strategies;  // least memory first; only those valid here
  std::vector<std::int64_t> microBatches;       // ascending: divide batch_size / world size
  std::vector<spec::BackwardPrefetch> backwardPrefetch;
  std::vector<int> inflightGathers;
  std::vector<spec::WrapPolicy> wrapPolicies;
};

/// The searched fields ("shard.strategy", ...) in the order coordinate descent visits them.
const std::vector<std::string>& tuneFields();
/// The domain of `exp` (validated) at the world shape of its [launch].
TuneDomain tuneDomain(const spec::Experiment& exp);
/// `exp`'s own values of the searched fields (micro-batch resolved for its world size).
TuneSettings tuneSettingsOf(const spec::Experiment& exp);
/// One searched field's value: a flag, a number, or an enumeration's name ("FULL_SHARD").
using TuneValue = std::variant<bool, std::int64_t, std::string>;
/// (field, value) for every searched field, in tuneFields() order.
std::vector<std::pair<std::string, TuneValue>> tuneValues(const TuneSettings& s);
/// "field=value" overrides (`run --set`, strings bare) that give an experiment the settings `s`.
std::vector<std::string> tuneOverrides(const TuneSettings& s);
/// Sets the searched fields of `exp` to `s`.
void applyTune(spec::Experiment& exp, const TuneSettings& s);
/// `s` as the target runs it: on a CPU run offload is a no-op (the shards and the optimizer
/// state are in host memory anyway), so both offload fields read false there.
TuneSettings onTarget(TuneSettings s, bool cpuTarget);

/// The first configurations to try, in order, until one fits and runs: FULL_SHARD with
/// activation checkpointing and the smallest micro-batch (the recipe's fitting end), then with
/// the optimizer offloaded, then the parameters too; the other fields as in `own`.
std::vector<TuneSettings> tuneStarts(const TuneSettings& own, const TuneDomain& domain);

/// What measuring one configuration gave.
struct TuneMeasure {
  std::optional<double> value;  ///< the objective (higher is better); none: it did not run
  bool outOfMemory = false;     ///< over the budget by the estimate, or an oom while running
};

/// How the search is bounded.
struct DescentLimits {
  double minGain = 0.03;       ///< a move needs a value this fraction above the current one
  int maxPasses = 3;           ///< passes over every field
  std::function<bool()> stop;  ///< polled before each measure: true ends the search now
};

/// Coordinate descent from the first start that measures: per field (tuneFields() order), every
/// other value with the rest fixed; the best replaces the current configuration when it beats it
/// by minGain. Passes repeat until one moves nothing. A strategy or micro-batch above the current
/// one that is out of memory ends that field's ascent (the ones after it need more; the domain
/// lists them in that order). `measure` is called at most once per
/// distinct configuration. Returns the best configuration measured (none: nothing ran).
std::optional<TuneSettings> coordinateDescent(
    const std::vector<TuneSettings>& starts, const TuneDomain& domain,
    const std::function<TuneMeasure(const TuneSettings&)>& measure, const DescentLimits& limits);

}  // namespace shardscope::backend
