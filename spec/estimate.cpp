#include "spec/estimate.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "spec/hf_config.h"
#include "spec/model_shape.h"

namespace shardscope::spec {
namespace {

std::int64_t dtype_bytes(DType d) { return d == DType::fp32 ? 4 : 2; }

// 80 -> "80", 0.5 -> "0.5": the shortest spelling that reads back the same.
std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Saved-for-backward elements per token of one Qwen2 block in the compute dtype, counted on the
// counting allocator (bench/memory/estimate_vs_peak.py): C-sized tensors (norm inputs and
// outputs, q, rotary q, attention output, residuals), KV-sized ones (k and v after rotary, K / H
// of C wide) and I-sized ones (gate, SiLU, up, their product). With LoRA the base is frozen: its
// Linears keep no input for a weight gradient, so a block saves two C-sized tensors fewer (the
// same with adapters on q/k/v/o or on q/v alone).
constexpr std::int64_t kBlockActC = 9;
constexpr std::int64_t kBlockActCFrozen = 7;
constexpr std::int64_t kBlockActKV = 2;
constexpr std::int64_t kBlockActI = 4;
// The first block's backward, usually the step's peak: its MLP's gradients in flight (3 I-sized
// tensors, and 2 C-sized ones when the base trains) while it has released one I-sized and one
// C-sized saved tensor.
constexpr std::int64_t kBackwardI = 3 - 1;
constexpr std::int64_t kBackwardC = 2 - 1;
constexpr std::int64_t kBackwardCFrozen = 0 - 1;
// Bytes per logit of one chunk of the fused linear cross-entropy (trainer/model/text_layers.cpp),
// held together while the log-softmax is computed: the logits in the compute dtype, their fp32
// copy (none when the compute dtype is fp32) and the fp32 log-softmax.
constexpr std::int64_t chunk_logit_bytes(std::int64_t a_bytes) {
  return a_bytes + 4 + (a_bytes == 4 ? 0 : 4);
}
// Saved-for-backward elements per patch of one vision block, LoRA or not (E-sized: LayerNorm
// inputs and outputs, rotary q and k, attention output, residuals, qkv's output as three; M-sized:
// fc1's output, the activation's input and output), and of the patch embedding and the merger
// (E-sized per patch: patch_embed's output, ln_q's output, the GELU's input and output).
constexpr std::int64_t kVisionActE = 11;
constexpr std::int64_t kVisionActM = 3;
constexpr std::int64_t kMergerActE = 4;
// The trainer's MFU probe (trainer/run/train.cpp, gemm_peak_flops): on a CPU run, rank 0 times a
// 512^3 fp32 GEMM before training, holding its three matrices, dense()'s new result and oneDNN's
// packed operand (129 KiB, measured), beside the parameters and optimizer state alone.
constexpr std::int64_t kProbeN = 512;
constexpr std::int64_t kProbeBytes = 4 * kProbeN * kProbeN * 4 + 132096;
// Packed rows (data.pack) hold several image samples: at most a row of seq_len over one image's
// tokens plus the fewest other tokens a chat sample has (the template's <|im_start|>, role,
// newline and <|im_end|> of a user and an assistant turn, the vision start and end, a one-token
// answer): so many images a row is the densest packing, the vision term's bound.
constexpr std::int64_t kChatTokensBesideImage = 12;

// What the estimate needs of the model: its layers (LoRA and freezing not yet applied), the text
// dimensions, and for Qwen2-VL the vision tower's and the image tokens of one sample.
struct ModelFacts {
  std::vector<LayerShape> layers;
  Qwen2Dims text;
  bool has_vision = false;
  VisionDims vision;
  std::int64_t image_tokens = 0;  // merged image tokens per sample
};

Result<ModelFacts> model_facts(const Experiment& exp) {
  ModelFacts f;
  if (exp.model.arch == "tiny") {
    f.text = tiny_dims(exp.model);
    f.layers = qwen2_layers(f.text);
    return f;
  }
  if (exp.model.path.empty())
    return fail("model.path: model.arch = \"" + exp.model.arch +
                "\" needs the checkpoint folder (config.json + *.safetensors); set model.path");
  auto config = read_hf_config(exp.model.path);
  if (!config) return config.error();
  if (config->model_type != exp.model.arch)
    return fail(exp.model.path + "/config.json: field model_type is \"" + config->model_type +
                "\" but model.arch is \"" + exp.model.arch + "\"; set model.arch = \"" +
                config->model_type + "\" or point model.path at another checkpoint");
  if (auto weights = check_hf_weights(exp.model.path, *config); !weights) return weights.error();
  f.text = config->text;
  f.has_vision = config->has_vision;
  f.vision = config->vision;
  f.layers = hf_layers(*config);
  // Images come with chat samples only; one image per sample at the processor's largest size,
  // and never more image tokens than the sequence holds.
  if (f.has_vision && exp.data.format == "chat") {
    auto tokens = max_image_tokens(exp.model.path, f.vision);
    if (!tokens) return tokens.error();
    f.image_tokens = std::min<std::int64_t>(*tokens, exp.data.seq_len);
  }
  return f;
}

enum class FlatKind { trainable, frozen, nf4 };

struct FlatSizes {
  std::int64_t shard = 0;   // N, in the flat's elements
  std::int64_t padded = 0;  // P = N x S
  FlatKind kind = FlatKind::trainable;
};

struct UnitSizes {
  std::vector<FlatSizes> flats;
  std::int64_t nf4_weights = 0;  // elements of the unit's NF4 weights
  std::int64_t nf4_bytes = 0;    // their records, unsharded (the "<unit>/nf4" flat's bytes)
  // Elements held in the param dtype while the unit runs: its full (padded) fp32-master flats
  // and the dequantized copy of its NF4 weights.
  std::int64_t gathered = 0;
  // Of those, the fp32-master flats' (what a prefetched unit holds besides its packed records).
  std::int64_t unquantized = 0;
  // Bytes of the gathered (padded) NF4 records: all a prefetched unit holds of its NF4 weights;
  // they are freed as soon as the unit dequantizes them.
  std::int64_t packed = 0;
};

// Bytes of one element of the NF4 flat: lora.quant_storage reinterprets the packed bytes.
std::int64_t storage_bytes(const std::string& storage) {
  if (storage == "float32") return 4;
  if (storage == "bfloat16" || storage == "float16") return 2;
  return 1;
}

std::vector<UnitSizes> unit_flats(const std::vector<LayerShape>& layers,
                                  const std::vector<std::vector<int>>& units, int shard_size,
                                  const LoraSection& lora) {
  std::vector<UnitSizes> out;
  for (const auto& unit : units) {
    UnitSizes sizes;
    std::int64_t trainable = 0;
    std::int64_t frozen = 0;
    for (int l : unit)
      for (const auto& p : layers[static_cast<std::size_t>(l)].params) {
        if (!p.tied_to.empty()) continue;  // a tied parameter is its owner's storage (once)
        const auto n = numel(p.shape);
        if (p.nf4) {
          sizes.nf4_weights += n;
          sizes.nf4_bytes += nf4_record_bytes(n, lora.quant_block_size, lora.double_quant);
        } else {
          (p.trainable ? trainable : frozen) += n;
        }
      }
    for (auto [n, kind] :
         {std::pair{trainable, FlatKind::trainable}, std::pair{frozen, FlatKind::frozen}}) {
      if (n == 0) continue;
      const auto s = shard_numel(n, shard_size);
      sizes.flats.push_back({s, s * shard_size, kind});
      sizes.gathered += s * shard_size;
      sizes.unquantized += s * shard_size;
    }
    if (sizes.nf4_bytes > 0) {
      // Records are 4-byte multiples, so the flat holds a whole number of storage elements.
      const auto s = shard_numel(sizes.nf4_bytes / storage_bytes(lora.quant_storage), shard_size);
      sizes.flats.push_back({s, s * shard_size, FlatKind::nf4});
      sizes.gathered += sizes.nf4_weights;
      sizes.packed = s * shard_size * storage_bytes(lora.quant_storage);
    }
    out.push_back(std::move(sizes));
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

void DataBound::add(std::int64_t tokens, std::int64_t visual_tokens) {
  ++samples;
  longest = std::max(longest, tokens);
  most_visual_tokens = std::max(most_visual_tokens, visual_tokens);
  if (visual_tokens > 0 && (shortest_with_image == 0 || tokens < shortest_with_image))
    shortest_with_image = tokens;
}

Result<MemoryEstimate> estimate_memory(const Experiment& exp, int world_size, int local_world_size,
                                       const DataBound* data) {
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

  auto facts = model_facts(exp);
  if (!facts) return facts.error();
  const auto& dims = facts->text;
  auto layers = std::move(facts->layers);
  (void)apply_lora(exp.lora, layers);  // validation reported targets that select nothing
  apply_freeze(exp.train, layers);     // validation reported unmatched globs
  bool head_trainable = false;  // lm_head's weight gets a gradient (its own, or the embedding's)
  std::map<std::string, bool> trainable;
  for (const auto& l : layers)
    for (const auto& p : l.params) {
      trainable[p.name] = p.trainable;
      if (p.name == "lm_head.weight")
        head_trainable = p.tied_to.empty() ? p.trainable : trainable[p.tied_to];
      if (!p.tied_to.empty()) continue;  // one storage for a tied pair
      e.params_total += numel(p.shape);
      if (p.trainable) e.params_trainable += numel(p.shape);
    }
  const auto units = plan_units(layers, exp.shard.wrap_policy, exp.shard.wrap_min_params);
  const auto flats = unit_flats(layers, units, e.shard_size, exp.lora);
  const auto nf4_element = storage_bytes(exp.lora.quant_storage);

  std::int64_t root_gathered = 0;
  std::int64_t max_unit_live = 0;     // bytes: a running unit, while it dequantizes
  std::int64_t max_unit_waiting = 0;  // bytes: a prefetched unit, not yet dequantized
  std::int64_t max_packed = 0;
  std::int64_t all_gathered = 0;
  std::int64_t trainable_padded = 0;
  std::int64_t max_flat_padded = 0;
  std::int64_t max_unit_flat_padded = 0;  // of the units besides the root
  for (std::size_t u = 0; u < flats.size(); ++u) {
    const auto& unit = flats[u];
    for (const auto& f : unit.flats) {
      switch (f.kind) {
        case FlatKind::nf4:  // frozen: no gradient, no optimizer state
          e.nf4 += f.shard * nf4_element;
          break;
        case FlatKind::frozen:
          e.params += 4 * f.shard;
          break;
        case FlatKind::trainable:
          e.params += 4 * f.shard;
          e.grads += 4 * f.shard;
          e.optimizer += 8 * f.shard;
          trainable_padded += f.padded;
          max_flat_padded = std::max(max_flat_padded, f.padded);
          if (u > 0) max_unit_flat_padded = std::max(max_unit_flat_padded, f.padded);
          break;
      }
    }
    e.nf4_params += unit.nf4_weights;
    e.nf4_packed += unit.nf4_bytes;
    all_gathered += unit.gathered;
    max_packed = std::max(max_packed, unit.packed);
    if (u == 0) {
      root_gathered = unit.gathered;
    } else {
      max_unit_live = std::max(max_unit_live, unit.gathered * p_bytes + unit.packed);
      max_unit_waiting = std::max(max_unit_waiting, unit.unquantized * p_bytes + unit.packed);
    }
  }
  e.params += e.nf4;
  const bool frees = exp.shard.strategy == ShardStrategy::full_shard ||
                     exp.shard.strategy == ShardStrategy::hybrid_shard;
  const bool prefetch =
      exp.shard.backward_prefetch != BackwardPrefetch::none || exp.shard.forward_prefetch;
  const std::int64_t in_flight = prefetch ? std::min(2, exp.shard.max_inflight_gathers + 1) : 1;
  // FULL_SHARD: the root, the running unit (its NF4 records and their dequantized copy both
  // held while it dequantizes) and the prefetched ones (their records only: the dequantized
  // buffer is allocated when a unit is waited). Without NF4: root + in_flight x the largest unit.
  e.gathered = frees ? root_gathered * p_bytes + max_unit_live + (in_flight - 1) * max_unit_waiting
                     : all_gathered * p_bytes + max_packed;

  const auto dp = world_size;
  e.micro_batch = exp.train.micro_batch_size > 0
                      ? exp.train.micro_batch_size
                      : std::max<std::int64_t>(1, exp.train.batch_size / dp);
  const bool from_data = data != nullptr && data->samples > 0 && exp.data.format == "chat";
  // A rank's samples a step; packed, they take fewer rows: with the data known, at least
  // seq_len / longest samples share a row, so they need at most ceil(share / that) rows.
  const auto share = std::max<std::int64_t>(1, exp.train.batch_size / dp);
  auto rows = share;
  if (from_data && exp.data.pack) {
    const auto per_row =
        std::max<std::int64_t>(1, exp.data.seq_len / std::max<std::int64_t>(1, data->longest));
    rows = (share + per_row - 1) / per_row;
  }
  const auto micro_steps = std::max<std::int64_t>(
      1, rows < share ? (rows + e.micro_batch - 1) / e.micro_batch : share / e.micro_batch);
  // The largest flat's unsharded gradient (param dtype), its reduce-dtype copy and its reduced
  // shard; micro-steps without reduction keep every unit's unsharded gradient.
  e.grad_buffers = max_flat_padded * (p_bytes + r_bytes) + max_flat_padded / e.shard_size * r_bytes;
  std::int64_t accum = 0;
  if (micro_steps > 1 && !exp.shard.reduce_every_microstep) accum = trainable_padded * r_bytes;
  e.grad_buffers += accum;

  // A row: what data.seq_len admits (seq_len tokens; packed, as many images as fit), or what
  // the data holds. The trainer pads a micro-batch to its longest row, so the peak's rows are the
  // longest sample's (packed: a full row, holding as many image samples as the shortest fits).
  e.row_tokens = exp.data.seq_len;
  e.image_tokens = facts->image_tokens;
  e.images_per_row =
      exp.data.pack && e.image_tokens > 0
          ? std::max<std::int64_t>(1, exp.data.seq_len / (e.image_tokens + kChatTokensBesideImage))
          : 1;
  if (from_data) {
    if (!exp.data.pack) e.row_tokens = std::clamp<std::int64_t>(data->longest, 1, exp.data.seq_len);
    e.image_tokens = facts->has_vision ? std::min(data->most_visual_tokens, e.row_tokens) : 0;
    e.images_per_row = exp.data.pack && data->shortest_with_image > 0
                           ? std::max<std::int64_t>(1, exp.data.seq_len / data->shortest_with_image)
                           : 1;
    e.rows_from = data->source.empty() ? std::string("the data") : data->source;
  }
  const auto tokens = e.micro_batch * e.row_tokens;
  const auto C = dims.hidden_size;
  const auto I = dims.intermediate_size;
  const bool ac = exp.shard.activation_checkpointing;
  const bool frozen_base = exp.lora.enabled;
  const auto KV = C * dims.num_kv_heads / std::max<std::int64_t>(1, dims.num_heads);
  const auto block =
      tokens *
      ((frozen_base ? kBlockActCFrozen : kBlockActC) * C + kBlockActKV * KV + kBlockActI * I) *
      a_bytes;
  // Under autocast to a narrower dtype every Linear saves its weight's cast for backward: a
  // block's q/k/v/o and MLP weights in the compute dtype.
  const bool casts = prec.autocast && a_bytes < p_bytes;
  const auto block_casts = casts ? (C * (2 * C + 2 * KV) + 3 * C * I) * a_bytes : 0;
  e.activations = ac ? dims.num_layers * tokens * C * a_bytes + block + block_casts
                     : dims.num_layers * (block + block_casts);
  e.activations += tokens * C * a_bytes;  // the final norm's input
  // The first block's backward: its gradients in flight beside every saved tensor.
  const auto block_backward =
      tokens * (kBackwardI * I + (frozen_base ? kBackwardCFrozen : kBackwardC) * C) * a_bytes;
  if (facts->has_vision && e.image_tokens > 0) {
    const auto& v = facts->vision;
    const auto merge2 = v.spatial_merge_size * v.spatial_merge_size;
    // Vision tokens per forward: every row's images at their largest.
    const auto row_image_tokens = std::min(e.images_per_row * e.image_tokens, e.row_tokens);
    const auto patches = e.micro_batch * row_image_tokens * merge2;
    const auto E = v.embed_dim;
    const auto vblock = patches * (kVisionActE * E + kVisionActM * v.mlp_hidden()) * a_bytes +
                        (casts ? (4 * E * E + 2 * E * v.mlp_hidden()) * a_bytes : 0);
    e.vision = ac ? v.depth * patches * E * a_bytes + vblock : v.depth * vblock;
    // The pixel values (fp32 patches), and the patch embedding's and merger's saved tensors.
    e.vision += patches * v.patch_dim() * 4 + patches * kMergerActE * E * a_bytes;
  }
  // The head's fused linear cross-entropy (trainer/model/text_layers.cpp): one chunk of logits
  // at a time, the label rows' hidden states and their gradient (every row counted: the estimate
  // does not know how many carry a label), and lm_head's weight gradient accumulated in fp32
  // (plus its cast to the parameter dtype) when the head trains. No (tokens x vocab) tensor.
  const auto head_rows = e.micro_batch * (e.row_tokens - 1);
  e.loss_chunk_rows = loss_chunk_rows(head_rows, dims.vocab_size, C, exp.train.loss_chunk_tokens);
  // lm_head's weight gradient, accumulated in fp32 (plus its cast to the parameter dtype) when
  // the head trains: made at the head's forward, held to the end of backward.
  const auto head_grad =
      head_trainable ? dims.vocab_size * C * (4 + (p_bytes == 4 ? 0 : p_bytes)) : 0;
  const auto rows_bytes = head_rows * C * a_bytes;
  // At the head's forward: one chunk's logits, the label rows' hidden states (normed, then
  // selected) and their gradient, and lm_head's weight gradient.
  e.logits =
      e.loss_chunk_rows * dims.vocab_size * chunk_logit_bytes(a_bytes) + 3 * rows_bytes + head_grad;
  // What every micro-step after the first carries: the sharded gradients being summed (reduced
  // every micro-step), or the unsharded accumulation buffers (reduce_every_microstep = false).
  const auto carried = micro_steps > 1 ? (accum > 0 ? accum : e.grads) : 0;
  // Gradients are freed after each optimizer step, so the peak is the largest of these moments:
  // the head's forward (every saved activation and the logits, with only the root gathered: a
  // freeing strategy released every other unit after its forward); the backward of each block,
  // from the last (the units gathered for backward, lm_head's weight gradient, the block's
  // gradients in flight; after j blocks, j blocks' saved tensors released, the engine's two
  // reductions in flight holding their units' unsharded gradients, and j units' sharded
  // gradients, already in `carried` after the first micro-step; the hidden states' gradient
  // until the last block's backward is done); and the end of backward (every sharded gradient,
  // the root still gathered, its gradient being reduced).
  const auto head_gathered = frees ? root_gathered * p_bytes : e.gathered;
  const auto head_forward = head_gathered + e.activations + e.vision + e.logits + carried;
  const auto per_block = ac ? tokens * C * a_bytes : block + block_casts;
  // With one rank a shard (NO_SHARD, a single rank) the reduction's buffer becomes the gradient:
  // counted once, with the units' sharded gradients.
  const auto unit_grad = e.shard_size > 1 ? max_unit_flat_padded * p_bytes : 0;
  const auto unit_shard_grad = carried > 0 ? 0 : max_unit_flat_padded / e.shard_size * 4;
  std::int64_t in_backward = 0;
  for (std::int64_t j = 0; j < std::max<std::int64_t>(1, dims.num_layers); ++j)
    in_backward = std::max(in_backward, e.gathered + e.activations - j * per_block + e.vision +
                                            head_grad + block_backward + carried +
                                            std::min<std::int64_t>(j, 2) * unit_grad +
                                            j * unit_shard_grad + (j == 0 ? rows_bytes : 0));
  const auto backward_end = e.grads + root_gathered * p_bytes + e.grad_buffers;
  e.total = e.params + e.optimizer + std::max({head_forward, in_backward, backward_end});
  e.peak_moment = in_backward >= std::max(head_forward, backward_end) ? "backward"
                  : head_forward >= backward_end                      ? "head_forward"
                                                                      : "backward_end";
  // A CPU run's rank 0 measures its GEMM peak before training, beside the state alone ("auto"
  // included: on a GPU the state and activations are far above it, so the max does not move).
  if (exp.shard.device != "cuda") {
    e.probe = kProbeBytes;
    if (e.params + e.optimizer + e.probe > e.total) {
      e.total = e.params + e.optimizer + e.probe;
      e.peak_moment = "probe";
    }
  }
  // Offloaded state lives in host memory; everything else on the compute device.
  e.host =
      (exp.shard.offload_params ? e.params : 0) + (exp.shard.offload_optimizer ? e.optimizer : 0);
  e.device = e.total - e.host;
  e.total_raw = e.total;
  return e;
}

std::int64_t loss_chunk_rows(std::int64_t rows, std::int64_t vocab, std::int64_t hidden,
                             std::int64_t wanted, std::int64_t free_bytes) {
  rows = std::max<std::int64_t>(rows, 1);
  if (wanted > 0) return std::min(wanted, rows);
  vocab = std::max<std::int64_t>(vocab, 1);
  // At least 2^24 logits a chunk: each chunk adds its (vocab x hidden) share to lm_head's weight
  // gradient, whose traffic a chunk of few rows cannot pay for with its GEMM's arithmetic.
  constexpr std::int64_t kMinLogits = std::int64_t{1} << 24;
  const auto target =
      std::max((rows * hidden + vocab - 1) / vocab, (kMinLogits + vocab - 1) / vocab);
  std::int64_t n = 1;
  while (n < target && n < rows) n *= 2;
  if (free_bytes > 0) n = std::min(n, std::max<std::int64_t>(1, free_bytes / 16 / (vocab * 10)));
  return std::min(n, rows);
}

Result<DeviceBudget> device_budget(const Experiment& exp, const DetectedMemory& detected) {
  const auto& l = exp.launch;
  const bool cpu = exp.shard.device == "cpu";
  DeviceBudget b;
  if (l.device_memory_gib > 0) {
    b.bytes = static_cast<std::int64_t>(l.device_memory_gib * 1024.0 * 1024.0 * 1024.0);
    b.source = "launch.device_memory_gib = " + format_number(l.device_memory_gib);
    b.gpu = !cpu;
    return b;
  }
  if (l.kind == LaunchKind::slurm)
    return fail(
        "launch.device_memory_gib: required for launch.kind = \"slurm\" (the job's nodes are "
        "not known before it starts); set it to the GPU memory of the partition's nodes in GiB, "
        "e.g. 80");
  if (!cpu && detected.gpu_bytes > 0) {
    b.bytes = detected.gpu_bytes;
    b.source = detected.gpu_source;
    return b;
  }
  if (exp.shard.device == "cuda")
    return fail("launch.device_memory_gib: shard.device = \"cuda\" but no GPU was found on " +
                (detected.host_source.empty() ? std::string("the host") : detected.host_source) +
                "; set launch.device_memory_gib to the GPU memory in GiB, or run the host check");
  b.gpu = false;
  if (detected.host_bytes <= 0) return b;  // unknown: nothing to hold the estimate against
  const int ranks = std::max(1, l.nproc_per_node);
  b.bytes = detected.host_bytes / ranks;
  b.source = "memory of " + detected.host_source + " (" +
             format_number(static_cast<double>(detected.host_bytes) / (1024.0 * 1024.0 * 1024.0)) +
             " GiB) / " + std::to_string(ranks) + " rank(s), CPU run";
  return b;
}

std::int64_t budgeted_bytes(const MemoryEstimate& e, const DeviceBudget& budget) {
  return budget.gpu ? e.device : e.total;
}

std::string format_budget(const MemoryEstimate& e, const DeviceBudget& budget) {
  if (budget.bytes <= 0) return "budget: unknown (set launch.device_memory_gib)\n";
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const auto need = budgeted_bytes(e, budget);
  char buf[512];
  std::snprintf(buf, sizeof buf, "budget        %10.2f GiB per rank (%s): %s, %.2f GiB %s\n",
                static_cast<double>(budget.bytes) / gib, budget.source.c_str(),
                need <= budget.bytes ? "fits" : "DOES NOT FIT", static_cast<double>(need) / gib,
                budget.gpu ? "on the device" : "in all");
  return buf;
}

std::string format_estimate(const MemoryEstimate& e) {
  auto mib = [](std::int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  char buf[2048];
  std::snprintf(buf, sizeof buf,
                "memory per rank (world %d, %d per node, shards of %d, micro-batch %lld):\n"
                "  params        %10.2f MiB  %s\n",
                e.world_size, e.local_world_size, e.shard_size,
                static_cast<long long>(e.micro_batch), mib(e.params),
                e.nf4_params > 0 ? "fp32 master shards + NF4 base shards" : "fp32 master shards");
  std::string out = buf;
  if (e.nf4_params > 0) {
    // The base as QLoRA stores it: what the quantized weights cost in all, and per weight.
    std::snprintf(buf, sizeof buf,
                  "    nf4 base    %10.2f MiB  of params: %lld weights as NF4, %.2f MiB packed "
                  "in all (%.3f bits a weight), dequantized per unit when it runs\n",
                  mib(e.nf4), static_cast<long long>(e.nf4_params), mib(e.nf4_packed),
                  8.0 * static_cast<double>(e.nf4_packed) / static_cast<double>(e.nf4_params));
    out += buf;
  }
  std::snprintf(
      buf, sizeof buf,
      "  grads         %10.2f MiB  fp32 sharded gradients\n"
      "  optimizer     %10.2f MiB  AdamW moments\n"
      "  gathered      %10.2f MiB  full units at the peak\n"
      "  grad buffers  %10.2f MiB  gradients being reduced / accumulated\n"
      "  activations   %10.2f MiB  saved for backward (text stack)\n"
      "  vision        %10.2f MiB  vision tower and merger, %lld x %lld image tokens a row\n"
      "  logits        %10.2f MiB  head's fused loss, %lld tokens a chunk\n"
      "  probe         %10.2f MiB  rank 0's MFU GEMM before training, beside the state alone\n"
      "  total         %10.2f MiB  (device %.2f MiB, host %.2f MiB offloaded), at %s\n",
      mib(e.grads), mib(e.optimizer), mib(e.gathered), mib(e.grad_buffers), mib(e.activations),
      mib(e.vision), static_cast<long long>(e.images_per_row),
      static_cast<long long>(e.image_tokens), mib(e.logits),
      static_cast<long long>(e.loss_chunk_rows), mib(e.probe), mib(e.total), mib(e.device),
      mib(e.host), e.peak_moment.c_str());
  out += buf;
  out += "  rows          " + std::to_string(e.row_tokens) + " tokens, bounded by " + e.rows_from +
         "\n";
  if (e.calibration_runs > 0) {
    std::snprintf(buf, sizeof buf,
                  "  (calibrated on %d run%s: x%.2f; the formulas give %.2f MiB)\n",
                  e.calibration_runs, e.calibration_runs == 1 ? "" : "s", e.calibration_ratio,
                  mib(e.total_raw));
    out += buf;
  }
  return out;
}

std::string estimate_json(const MemoryEstimate& e) {
  return nlohmann::json{
      {"world_size", e.world_size},
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
      {"vision", e.vision},
      {"image_tokens", e.image_tokens},
      {"images_per_row", e.images_per_row},
      {"row_tokens", e.row_tokens},
      {"rows_from", e.rows_from},
      {"logits", e.logits},
      {"loss_chunk_rows", e.loss_chunk_rows},
      {"probe", e.probe},
      {"peak_moment", e.peak_moment},
      {"total", e.total},
      {"device", e.device},
      {"host", e.host},
      {"nf4_params", e.nf4_params},
      {"nf4_packed", e.nf4_packed},
      {"nf4", e.nf4},
      {"total_raw", e.total_raw},
      {"calibration", {{"runs", e.calibration_runs}, {"ratio", e.calibration_ratio}}}}
      .dump();
}

}  // namespace shardscope::spec
