// The autotune space and its coordinate descent (see autotunespace.h).
//
// Why coordinate descent in the recipe's order. The Hugging Face guide to DeepSpeed tunes by
// hand in two halves: first make it fit (checkpoint activations, shard more, offload the
// optimizer, then the parameters, micro-batch 1), then win speed back step by step while it
// still fits (drop offload, shard less, grow the micro-batch, stop checkpointing). The start is
// the first half's end, the most frugal configuration the estimate lets through, so a measured
// result comes with the first run; the fields are then visited in the second half's order, the
// largest expected gains first, and after them the overlap knobs the recipe does not cover
// (prefetch, in-flight gathers, wrapping). The fields interact little once it fits, so one value
// at a time finds what a grid would in a fraction of its runs; a second pass catches the
// interactions there are (a larger micro-batch that fits only once checkpointing is back on).
#include "backend/sweep/autotunespace.h"

#include <algorithm>
#include <map>
#include <string_view>

namespace shardscope::backend {

namespace {

enum Field {
  kOffloadParams,
  kOffloadOptimizer,
  kStrategy,
  kMicroBatch,
  kCheckpointing,
  kBackwardPrefetch,
  kForwardPrefetch,
  kInflight,
  kWrap,
  kFieldCount
};

// `at` with field `f` set to each value of the domain (`at` itself among them).
std::vector<TuneSettings> alternatives(const TuneSettings& at, int f, const TuneDomain& d) {
  std::vector<TuneSettings> out;
  auto each = [&](const auto& values, auto set) {
    for (const auto& v : values) {
      TuneSettings s = at;
      set(s, v);
      out.push_back(s);
    }
  };
  const std::vector<bool> flags = {true, false};  // the recipe's frugal value first
  switch (f) {
    case kOffloadParams:
      each(flags, [](TuneSettings& s, bool v) { s.offloadParams = v; });
      break;
    case kOffloadOptimizer:
      each(flags, [](TuneSettings& s, bool v) { s.offloadOptimizer = v; });
      break;
    case kStrategy:
      each(d.strategies, [](TuneSettings& s, spec::ShardStrategy v) { s.strategy = v; });
      break;
    case kMicroBatch:
      each(d.microBatches, [](TuneSettings& s, std::int64_t v) { s.microBatchSize = v; });
      break;
    case kCheckpointing:
      each(flags, [](TuneSettings& s, bool v) { s.activationCheckpointing = v; });
      break;
    case kBackwardPrefetch:
      each(d.backwardPrefetch,
           [](TuneSettings& s, spec::BackwardPrefetch v) { s.backwardPrefetch = v; });
      break;
    case kForwardPrefetch:
      each(std::vector<bool>{false, true}, [](TuneSettings& s, bool v) { s.forwardPrefetch = v; });
      break;
    case kInflight:
      each(d.inflightGathers, [](TuneSettings& s, int v) { s.maxInflightGathers = v; });
      break;
    case kWrap:
      each(d.wrapPolicies, [](TuneSettings& s, spec::WrapPolicy v) { s.wrapPolicy = v; });
      break;
    default:
      break;
  }
  return out;
}

}  // namespace

const std::vector<std::string>& tuneFields() {
  static const std::vector<std::string> fields = {
      "shard.offload_params",   "shard.offload_optimizer",        "shard.strategy",
      "train.micro_batch_size", "shard.activation_checkpointing", "shard.backward_prefetch",
      "shard.forward_prefetch", "shard.max_inflight_gathers",     "shard.wrap_policy"};
  return fields;
}

TuneDomain tuneDomain(const spec::Experiment& exp) {
  TuneDomain d;
  const int world = spec::launch_world_size(exp.launch);
  // Least memory per rank first: FULL_SHARD shards everything over the world, HYBRID_SHARD over
  // a node, SHARD_GRAD_OP keeps the gathered parameters, NO_SHARD keeps everything.
  for (const auto strategy : {spec::ShardStrategy::full_shard, spec::ShardStrategy::hybrid_shard,
                              spec::ShardStrategy::shard_grad_op, spec::ShardStrategy::no_shard}) {
    spec::Experiment e = exp;
    e.shard.strategy = strategy;
    if (spec::validate_for_launch(e)) d.strategies.push_back(strategy);
  }
  const std::int64_t perRank = exp.train.batch_size / std::max(1, world);
  for (std::int64_t m = 1; m <= perRank; ++m) {
    if (perRank % m == 0) d.microBatches.push_back(m);
  }
  d.backwardPrefetch = {spec::BackwardPrefetch::pre, spec::BackwardPrefetch::post,
                        spec::BackwardPrefetch::none};
  d.inflightGathers = {1, 2, 4};
  d.wrapPolicies = {spec::WrapPolicy::block, spec::WrapPolicy::size, spec::WrapPolicy::none};
  return d;
}

TuneSettings tuneSettingsOf(const spec::Experiment& exp) {
  TuneSettings s;
  s.strategy = exp.shard.strategy;
  s.offloadParams = exp.shard.offload_params;
  s.offloadOptimizer = exp.shard.offload_optimizer;
  s.activationCheckpointing = exp.shard.activation_checkpointing;
  s.microBatchSize = spec::micro_batch_size_for(exp.train, spec::launch_world_size(exp.launch));
  s.backwardPrefetch = exp.shard.backward_prefetch;
  s.forwardPrefetch = exp.shard.forward_prefetch;
  s.maxInflightGathers = exp.shard.max_inflight_gathers;
  s.wrapPolicy = exp.shard.wrap_policy;
  return s;
}

std::vector<std::pair<std::string, TuneValue>> tuneValues(const TuneSettings& s) {
  const auto& f = tuneFields();
  const auto name = [](std::string_view text) { return TuneValue(std::string(text)); };
  return {{f[kOffloadParams], s.offloadParams},
          {f[kOffloadOptimizer], s.offloadOptimizer},
          {f[kStrategy], name(spec::to_string(s.strategy))},
          {f[kMicroBatch], s.microBatchSize},
          {f[kCheckpointing], s.activationCheckpointing},
          {f[kBackwardPrefetch], name(spec::to_string(s.backwardPrefetch))},
          {f[kForwardPrefetch], s.forwardPrefetch},
          {f[kInflight], std::int64_t{s.maxInflightGathers}},
          {f[kWrap], name(spec::to_string(s.wrapPolicy))}};
}

std::vector<std::string> tuneOverrides(const TuneSettings& s) {
  std::vector<std::string> out;
  // Strings bare (`shard.strategy=NO_SHARD`, which the loader accepts): the run log keeps an
  // override's text as the run's parameter.
  for (const auto& [field, value] : tuneValues(s)) {
    std::string text = field + "=";
    if (const bool* flag = std::get_if<bool>(&value)) {
      text += *flag ? "true" : "false";
    } else if (const std::int64_t* number = std::get_if<std::int64_t>(&value)) {
      text += std::to_string(*number);
    } else {
      text += std::get<std::string>(value);
    }
    out.push_back(std::move(text));
  }
  return out;
}

void applyTune(spec::Experiment& exp, const TuneSettings& s) {
  exp.shard.strategy = s.strategy;
  exp.shard.offload_params = s.offloadParams;
  exp.shard.offload_optimizer = s.offloadOptimizer;
  exp.shard.activation_checkpointing = s.activationCheckpointing;
  exp.train.micro_batch_size = s.microBatchSize;
  exp.shard.backward_prefetch = s.backwardPrefetch;
  exp.shard.forward_prefetch = s.forwardPrefetch;
  exp.shard.max_inflight_gathers = s.maxInflightGathers;
  exp.shard.wrap_policy = s.wrapPolicy;
}

TuneSettings onTarget(TuneSettings s, bool cpuTarget) {
  if (cpuTarget) s.offloadParams = s.offloadOptimizer = false;
  return s;
}

std::vector<TuneSettings> tuneStarts(const TuneSettings& own, const TuneDomain& domain) {
  TuneSettings s = own;
  s.strategy = spec::ShardStrategy::full_shard;
  s.activationCheckpointing = true;
  s.microBatchSize = domain.microBatches.empty() ? own.microBatchSize : domain.microBatches[0];
  s.offloadParams = s.offloadOptimizer = false;
  std::vector<TuneSettings> starts = {s};
  s.offloadOptimizer = true;
  starts.push_back(s);
  s.offloadParams = true;
  starts.push_back(s);
  return starts;
}

std::optional<TuneSettings> coordinateDescent(
    const std::vector<TuneSettings>& starts, const TuneDomain& domain,
    const std::function<TuneMeasure(const TuneSettings&)>& measure, const DescentLimits& limits) {
  // Every configuration measured so far, as a list (TuneSettings has no order; the space is a
  // few dozen points).
  std::vector<std::pair<TuneSettings, TuneMeasure>> seen;
  auto stopped = [&] { return limits.stop && limits.stop(); };
  auto get = [&](const TuneSettings& s) -> std::optional<TuneMeasure> {
    for (const auto& [k, m] : seen)
      if (k == s) return m;
    if (stopped()) return std::nullopt;
    seen.emplace_back(s, measure(s));
    return seen.back().second;
  };
  std::optional<TuneSettings> current;
  double value = 0;
  for (const TuneSettings& start : starts) {
    const auto m = get(start);
    if (!m) return std::nullopt;
    if (m->value) {
      current = start;
      value = *m->value;
      break;
    }
  }
  if (!current) return std::nullopt;
  for (int pass = 0; pass < limits.maxPasses; ++pass) {
    bool moved = false;
    for (int f = 0; f < kFieldCount; ++f) {
      const TuneSettings at = *current;
      std::optional<TuneSettings> best;
      double bestValue = value * (1.0 + limits.minGain);
      // Strategies and micro-batches come in the order of the memory they need: past the
      // current value, one out of memory means the rest are too.
      const bool byMemory = f == kStrategy || f == kMicroBatch;
      bool pastCurrent = false;
      for (const TuneSettings& alt : alternatives(at, f, domain)) {
        if (alt == at) {
          pastCurrent = true;
          continue;
        }
        const auto m = get(alt);
        if (!m) return current;  // stopped: the best so far stands
        if (byMemory && pastCurrent && m->outOfMemory) break;
        if (m->value && *m->value > bestValue) {
          best = alt;
          bestValue = *m->value;
        }
      }
      if (best) {
        current = best;
        value = bestValue;
        moved = true;
      }
    }
    if (!moved) break;
  }
  return current;
}

}  // namespace shardscope::backend
