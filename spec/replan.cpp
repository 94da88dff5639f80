// The replan ladder (see replan.h).
#include "spec/replan.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>

namespace shardscope::spec {

namespace {

std::string mib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  return text;
}

bool isSearched(const std::vector<std::string>& searched, const std::string& field) {
  return std::find(searched.begin(), searched.end(), field) != searched.end();
}

// One rung applied to `exp` (in place): the field it sets, the value as TOML, what changed for
// people; false when the rung has nothing left to do on `exp`.
struct Step {
  std::string field;
  std::string value;
  std::string change;
};

bool halveMicroBatch(Experiment& exp, Step& step) {
  const int world = launch_world_size(exp.launch);
  const std::int64_t mbs = micro_batch_size_for(exp.train, world);
  if (mbs <= 1 || world <= 0) return false;
  const std::int64_t accumulation = grad_accumulation_steps(exp.train, world);
  // Half or less, dividing the global batch (1 always does: the batch divides by the world).
  std::int64_t next = mbs / 2;
  while (next > 1 && exp.train.batch_size % (next * world) != 0) --next;
  exp.train.micro_batch_size = next;
  step.field = "train.micro_batch_size";
  step.value = std::to_string(next);
  step.change = "train.micro_batch_size " + std::to_string(mbs) + " -> " + std::to_string(next) +
                " (gradient accumulation " + std::to_string(accumulation) + " -> " +
                std::to_string(grad_accumulation_steps(exp.train, world)) + ")";
  return true;
}

bool enable(Experiment& exp, bool ShardSection::*flag, const char* field, Step& step) {
  if (exp.shard.*flag) return false;
  exp.shard.*flag = true;
  step.field = field;
  step.value = "true";
  step.change = std::string(field) + " = true";
  return true;
}

}  // namespace

Result<Replan> next_plan(const Experiment& ran, const std::vector<std::string>& searched,
                         const DeviceBudget& budget, const DataBound* data) {
  using Rung = std::function<bool(Experiment&, Step&)>;
  struct Named {
    const char* field;
    Rung apply;
  };
  const std::vector<Named> rungs = {
      {"train.micro_batch_size", halveMicroBatch},
      {"shard.activation_checkpointing",
       [](Experiment& e, Step& s) {
         return enable(e, &ShardSection::activation_checkpointing, "shard.activation_checkpointing",
                       s);
       }},
      {"shard.offload_optimizer",
       [](Experiment& e, Step& s) {
         return enable(e, &ShardSection::offload_optimizer, "shard.offload_optimizer", s);
       }},
      {"shard.offload_params",
       [](Experiment& e, Step& s) {
         return enable(e, &ShardSection::offload_params, "shard.offload_params", s);
       }},
  };
  Replan plan;
  plan.experiment = ran;
  std::vector<std::string> changes;
  std::vector<std::pair<std::string, std::string>> set;  // field -> value, the last one wins
  for (const Named& rung : rungs) {
    if (isSearched(searched, rung.field)) {
      plan.skipped.push_back(std::string(rung.field) + " is searched: a plan never changes it");
      continue;
    }
    // A rung may be taken several times (micro-batch 8 -> 4 -> 2 -> 1).
    for (;;) {
      Experiment candidate = plan.experiment;
      Step step;
      if (!rung.apply(candidate, step)) break;
      plan.experiment = candidate;
      changes.push_back(step.change);
      auto same = std::find_if(set.begin(), set.end(),
                               [&](const auto& kv) { return kv.first == step.field; });
      if (same != set.end()) {
        same->second = step.value;
      } else {
        set.emplace_back(step.field, step.value);
      }
      std::string joined;
      for (const std::string& c : changes) joined += (joined.empty() ? "" : "; ") + c;
      if (auto valid = validate_for_launch(candidate); !valid) {
        plan.skipped.push_back(joined + ": " + valid.message());
        continue;
      }
      const int world = launch_world_size(candidate.launch);
      auto estimate = estimate_memory(candidate, world, candidate.launch.nproc_per_node, data);
      if (!estimate) {
        plan.skipped.push_back(joined + ": memory estimate: " + estimate.message());
        continue;
      }
      const std::int64_t need = budgeted_bytes(*estimate, budget);
      if (budget.bytes > 0 && need > budget.bytes) {
        plan.skipped.push_back(joined + ": the estimate " + mib(need) + " per rank exceeds the " +
                               mib(budget.bytes) + " budget");
        continue;
      }
      plan.change = joined;
      for (const auto& [field, value] : set) {
        std::string o = field;
        o += '=';
        o += value;
        plan.overrides.push_back(std::move(o));
      }
      return plan;
    }
  }
  std::string why = "no plan of the replan ladder is left to try";
  for (const std::string& s : plan.skipped) why += "; " + s;
  if (plan.skipped.empty()) {
    why +=
        " (train.micro_batch_size is 1, activation checkpointing and both offloads are on): "
        "lower data.seq_len, use LoRA, or add ranks";
  }
  return fail(why);
}

}  // namespace shardscope::spec
