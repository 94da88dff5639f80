#include "trainer/spec/estimate.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "trainer/spec/model_shape.h"

namespace shardscope::spec {
namespace {

std::int64_t dtype_bytes(DType d) { return d == DType::fp32 ? 4 : 2; }

// Saved-for-backward elements per token of one Qwen2 block, in the compute dtype: C-sized
// tensors (norm inputs and outputs, q/k/v, rotary products, attention output, residuals) and
// I-sized ones (gate, SiLU, up, their product). Calibrated against the counting allocator.
constexpr std::int64_t kBlockActC = 16;
constexpr std::int64_t kBlockActI = 4;
// Logits (fp32), log-softmax output and the logits' gradient in the head's backward.
constexpr std::int64_t kLogitCopies = 3;

struct FlatSizes {
  std::int64_t shard = 0;   // N
  std::int64_t padded = 0;  // P
  bool trainable = true;
};

std::vector<std::vector<FlatSizes>> unit_flats(const std::vector<LayerShape>& layers,
                                               const std::vector<std::vector<int>>& units,
                                               int shard_size) {
  std::vector<std::vector<FlatSizes>> out;
  for (const auto& unit : units) {
    std::int64_t trainable = 0;
    std::int64_t frozen = 0;
    for (int l : unit)
      for (const auto& p : layers[static_cast<std::size_t>(l)].params)
        if (p.tied_to.empty())  // a tied parameter is its owner's storage (counted once)
          (p.trainable ? trainable : frozen) += numel(p.shape);
    std::vector<FlatSizes> flats;
    for (auto [n, t] : {std::pair{trainable, true}, std::pair{frozen, false}}) {
      if (n == 0) continue;
      const auto s = shard_numel(n, shard_size);
      flats.push_back({s, s * shard_size, t});
    }
    out.push_back(std::move(flats));
  }
  return out;
}

int shard_size_of(ShardStrategy s, int world, int local) {
  switch (s) {
    case ShardStrategy::no_shard:
      return 1;
    case ShardStrategy::hybrid_shard:
      return local;
    default:
      return world;
  }
}

}  // namespace

Result<MemoryEstimate> estimate_memory(const Experiment& exp, int world_size,
                                       int local_world_size) {
  if (exp.model.arch != "tiny")
    return fail("estimate: model.arch = \"" + exp.model.arch +
                "\" needs its config.json, which this build cannot read yet; use arch \"tiny\"");
  auto valid = validate_for_world(exp, world_size, local_world_size);
  if (!valid) return valid.error();
  MemoryEstimate e;
  e.world_size = world_size;
  e.local_world_size = local_world_size;
  e.shard_size = shard_size_of(exp.shard.strategy, world_size, local_world_size);
  const auto prec = resolve_precision(exp.shard);
  const auto p_bytes = dtype_bytes(prec.param);
  const auto r_bytes = dtype_bytes(prec.reduce);
  const auto a_bytes = prec.autocast ? dtype_bytes(prec.autocast_dtype) : p_bytes;

  const auto dims = tiny_dims(exp.model);
  auto layers = qwen2_layers(dims);
  (void)apply_lora(exp.lora, layers);  // validation reported targets that select nothing
  apply_freeze(exp.train, layers);     // validation reported unmatched globs
  for (const auto& l : layers)
    for (const auto& p : l.params) {
      if (!p.tied_to.empty()) continue;  // one storage for a tied pair
      e.params_total += numel(p.shape);
      if (p.trainable) e.params_trainable += numel(p.shape);
    }
  const auto units = plan_units(layers, exp.shard.wrap_policy, exp.shard.wrap_min_params);
  const auto flats = unit_flats(layers, units, e.shard_size);

  std::int64_t root_padded = 0;
  std::int64_t max_unit_padded = 0;
  std::int64_t all_padded = 0;
  std::int64_t trainable_padded = 0;
  std::int64_t max_flat_padded = 0;
  for (std::size_t u = 0; u < flats.size(); ++u) {
    std::int64_t unit_padded = 0;
    for (const auto& f : flats[u]) {
      e.params += 4 * f.shard;
      if (f.trainable) {
        e.grads += 4 * f.shard;
        e.optimizer += 8 * f.shard;
        trainable_padded += f.padded;
        max_flat_padded = std::max(max_flat_padded, f.padded);
      }
      unit_padded += f.padded;
    }
    all_padded += unit_padded;
    if (u == 0) {
      root_padded = unit_padded;
    } else {
      max_unit_padded = std::max(max_unit_padded, unit_padded);
    }
  }
  const bool frees = exp.shard.strategy == ShardStrategy::full_shard ||
                     exp.shard.strategy == ShardStrategy::hybrid_shard;
  const bool prefetch =
      exp.shard.backward_prefetch != BackwardPrefetch::none || exp.shard.forward_prefetch;
  const std::int64_t in_flight = prefetch ? std::min(2, exp.shard.max_inflight_gathers + 1) : 1;
  e.gathered = frees ? (root_padded + in_flight * max_unit_padded) * p_bytes : all_padded * p_bytes;

  const auto dp = world_size;
  e.micro_batch = exp.train.micro_batch_size > 0
                      ? exp.train.micro_batch_size
                      : std::max<std::int64_t>(1, exp.train.batch_size / dp);
  const auto micro_steps = std::max<std::int64_t>(1, exp.train.batch_size / dp / e.micro_batch);
  // The largest flat's unsharded gradient (param dtype), its reduce-dtype copy and its reduced
  // shard; micro-steps without reduction keep every unit's unsharded gradient.
  e.grad_buffers = max_flat_padded * (p_bytes + r_bytes) + max_flat_padded / e.shard_size * r_bytes;
  std::int64_t accum = 0;
  if (micro_steps > 1 && !exp.shard.reduce_every_microstep) accum = trainable_padded * r_bytes;
  e.grad_buffers += accum;

  const auto tokens = e.micro_batch * exp.data.seq_len;
  const auto C = dims.hidden_size;
  const auto I = dims.intermediate_size;
  const auto block = tokens * (kBlockActC * C + kBlockActI * I) * a_bytes;
  if (exp.shard.activation_checkpointing) {
    e.activations = dims.num_layers * tokens * C * a_bytes + block;
  } else {
    e.activations = dims.num_layers * block;
  }
  e.activations += 3 * tokens * C * a_bytes;  // embedding output and the final norm
  // Logits' copies plus lm_head's weight gradient, held until the root unit's backward ends.
  e.logits = kLogitCopies * e.micro_batch * (exp.data.seq_len - 1) * dims.vocab_size * 4 +
             dims.vocab_size * C * p_bytes;
  // Gradients are freed after each optimizer step, so the peak is the larger of two moments:
  // the head's backward (every saved activation, the logits, the gathered units) and the end of
  // backward (every sharded gradient, the root still gathered, its gradient being reduced).
  const auto head_backward = e.gathered + e.activations + e.logits + accum;
  const auto backward_end = e.grads + root_padded * p_bytes + e.grad_buffers;
  e.total = e.params + e.optimizer + std::max(head_backward, backward_end);
  // Offloaded state lives in host memory; everything else on the compute device.
  e.host =
      (exp.shard.offload_params ? e.params : 0) + (exp.shard.offload_optimizer ? e.optimizer : 0);
  e.device = e.total - e.host;
  return e;
}

std::string format_estimate(const MemoryEstimate& e) {
  auto mib = [](std::int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "memory per rank (world %d, %d per node, shards of %d, micro-batch %lld):\n"
                "  params        %10.2f MiB  fp32 master shards\n"
                "  grads         %10.2f MiB  fp32 sharded gradients\n"
                "  optimizer     %10.2f MiB  AdamW moments\n"
                "  gathered      %10.2f MiB  full units at the peak\n"
                "  grad buffers  %10.2f MiB  gradients being reduced / accumulated\n"
                "  activations   %10.2f MiB  saved for backward\n"
                "  logits        %10.2f MiB\n"
                "  total         %10.2f MiB  (device %.2f MiB, host %.2f MiB offloaded)\n",
                e.world_size, e.local_world_size, e.shard_size,
                static_cast<long long>(e.micro_batch), mib(e.params), mib(e.grads),
                mib(e.optimizer), mib(e.gathered), mib(e.grad_buffers), mib(e.activations),
                mib(e.logits), mib(e.total), mib(e.device), mib(e.host));
  return buf;
}

std::string estimate_json(const MemoryEstimate& e) {
  return nlohmann::json{{"world_size", e.world_size},
                        {"local_world_size", e.local_world_size},
                        {"shard_size", e.shard_size},
                        {"micro_batch", e.micro_batch},
                        {"params_total", e.params_total},
                        {"params_trainable", e.params_trainable},
                        {"params", e.params},
                        {"grads", e.grads},
                        {"optimizer", e.optimizer},
                        {"gathered", e.gathered},
                        {"grad_buffers", e.grad_buffers},
                        {"activations", e.activations},
                        {"logits", e.logits},
                        {"total", e.total},
                        {"device", e.device},
                        {"host", e.host}}
      .dump();
}

}  // namespace shardscope::spec
