// A model as the sharding engine sees it: an ordered list of layers (the embedding, each
// transformer block, the head), each with named parameters and a functional forward. The engine
// owns every parameter's storage (flat, sharded) and hands a layer views of the gathered values,
// so a model never holds weights itself. Names follow Hugging Face checkpoints.
//
// Shapes: B batch, T sequence, C hidden, V vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "spec/model_shape.h"
#include "trainer/model/nf4.h"

namespace shardscope::model {

/// One parameter of a layer, and a layer (the smallest piece the engine runs and wraps): the
/// torch-free shapes of spec, so the memory estimate counts the same parameters.
using ParamDef = spec::ParamShape;
using LayerDef = spec::LayerShape;

/// Incremental decoding (generation): the text blocks' key/value caches and the positions of
/// this call's tokens; the head writes the last position's logits here instead of a loss.
struct DecodeState {
  std::vector<at::Tensor> keys;    // per model layer: (B, K, S, D) after rotary; undefined = empty
  std::vector<at::Tensor> values;  // per model layer: (B, K, S, D)
  at::Tensor key_mask;   // (B, S) int64 over cached + this call's keys, 1 = real, 0 = padding
  at::Tensor positions;  // (B, T) int64 rotary positions, or (3, B, T) with M-RoPE
  at::Tensor logits;     // out: (B, V) float32 at this call's last position
  /// Keys cached before this call.
  std::int64_t past(std::int64_t T) const { return key_mask.size(1) - T; }
};

/// Token accuracy of evaluation forwards: label tokens, and those whose argmax logit (at
/// the position before) is the label.
struct TokenTally {
  std::int64_t correct = 0;
  std::int64_t total = 0;
};

/// Where training's random masks (LoRA dropout) come from: row b's masks are drawn from a generator
/// seeded by (seed, step, samples[b], module), so they do not depend on the world size, the
/// micro-batch split or activation checkpointing's recompute, and a resume replays them.
struct DropoutKeys {
  std::uint64_t seed = 0;             // train.seed
  std::int64_t step = 0;              // the optimizer step, from 1
  std::vector<std::int64_t> samples;  // (B) each row's global sample index (position in the run)
  /// Input (N, in), or (B, T, in) read as (B * T, in), in consecutive spans of spans[j] rows,
  /// span j keyed by samples[j] (the vision tower: one span per image; packed rows: one per
  /// sample and per row's padding); empty: input (B, T, in), row b keyed by samples[b]. A
  /// sample's span draws the first rows of the mask it draws as a row, so packing keeps its masks.
  std::vector<std::int64_t> spans;
  /// False for evaluation and generation batches: no dropout.
  bool active() const { return !samples.empty(); }
};

/// Inputs of one micro-batch, shared by every layer.
struct Batch {
  at::Tensor input_ids;  // (B, T) int64
  at::Tensor labels;     // (B, T) int64, -100 where no loss; position t is predicted from < t
  // Optional (undefined when absent):
  at::Tensor attention_mask;  // (B, T) int64, 1 = token, 0 = padding
  // Packed rows (data.pack): the lengths of the segments each row is cut into, row after row
  // (its samples, then its padding if any; they sum to T per row): attention stays inside a
  // segment. Empty: one sample a row.
  std::vector<std::int64_t> seqlens;
  at::Tensor position_ids;    // (B, T) int64 rotary positions of packed rows (each sample from 0)
  at::Tensor pixel_values;    // (N, C*tp*p*p) float: every image's patches, in token order
  at::Tensor image_grid_thw;  // (I, 3) int64: each image's t, h, w in patches, in token order
  DecodeState* decode = nullptr;  // generation: caches and logits; null = training/eval loss
  TokenTally* tally = nullptr;    // evaluation: the head adds label tokens and argmax hits here
  DropoutKeys dropout;            // training: the masks' keys; empty: no dropout
};

/// Per-micro-batch state a model computes once (rotary tables...) plus the loss scale.
struct LayerContext {
  const Batch* batch = nullptr;
  at::Tensor rope_cos;      // (T, D) in the buffer dtype; (B, 1, T, D) with M-RoPE
  at::Tensor rope_sin;      // (T, D); (B, 1, T, D) with M-RoPE
  double loss_scale = 1.0;  // the head returns sum(token losses) * loss_scale
  // The head's fused linear cross-entropy: label tokens per chunk (train.loss_chunk_tokens; 0
  // chooses, spec::loss_chunk_rows) and the device's free bytes that choice may use (0: unknown).
  std::int64_t loss_chunk_tokens = 0;
  std::int64_t loss_free_bytes = 0;
  at::Tensor attn_mask;   // generation's (B, 1, T, S) bool, true = attend; else undefined:
                          // causal only (loss batches are right-padded)
  at::Tensor vision_cos;  // (N, Dv) float32: the vision tower's 2-D rotary tables
  at::Tensor vision_sin;  // (N, Dv)
  std::vector<std::int64_t> vision_seqlens;  // patches per image frame (attention stays inside)
  DropoutKeys vision_dropout;  // training: one span per image, keyed by its sample and index
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const std::vector<LayerDef>& layers() const = 0;
  /// Fills the (full, unsharded, fp32) parameters of `layer` with their initial values; the same
  /// seed gives the same values on every rank and world size.
  virtual void init_layer(int layer, std::vector<at::Tensor>& params, std::uint64_t seed) const = 0;
  /// Reads elements [first, first + count) of the row-major parameter `index` of `layer` from
  /// the checkpoint into `dst` (float32, 1-D, `count` elements), touching only those bytes, so
  /// each rank loads its own shard. False when the parameter has no checkpoint value (seeded
  /// initialisation, LoRA adapters): init_layer gives it, and then skips parameters passed
  /// undefined. With `count` 0 it reads nothing and answers whether the parameter has one.
  virtual bool load_param_elements(int /*layer*/, std::size_t /*index*/, std::int64_t /*first*/,
                                   std::int64_t /*count*/, at::Tensor& /*dst*/) const {
    return false;
  }
  /// QLoRA: when the checkpoint stores parameter `index` of `layer` already quantized
  /// (bitsandbytes' 4-bit layout, nf4_bnb.h) as lora_config() describes, its NF4 form: the
  /// engine keeps those codes instead of quantizing again. False when it is stored unquantized
  /// (or there is no checkpoint); a quantization the config does not describe raises a config
  /// error naming the [lora] field.
  virtual bool load_nf4(int /*layer*/, std::size_t /*index*/, Nf4Weight& /*out*/) const {
    return false;
  }
  /// Builds the context of a batch; buffers in `buffer_dtype`.
  virtual LayerContext context(const Batch& batch, at::ScalarType buffer_dtype) const = 0;
  /// Runs `layer`. The first layer reads ctx.batch->input_ids and ignores `x`; middle layers map
  /// hidden (B, T, C) to hidden; the last returns the scaled summed loss, a scalar (float32).
  virtual at::Tensor forward_layer(int layer, const std::vector<at::Tensor>& params,
                                   const at::Tensor& x, const LayerContext& ctx) const = 0;
  /// Training FLOPs per token at sequence length `seq_len` (6N + 12 L H Q T, torchtitan's formula
  /// with N the non-embedding parameter count).
  virtual double flops_per_token(std::int64_t seq_len) const = 0;
  /// Rotary positions of a prompt batch for generation: (B, T) from the attention mask (left
  /// padding skipped, as transformers' generate does), or (3, B, T) M-RoPE positions.
  virtual at::Tensor prompt_positions(const Batch& batch) const;
  /// Freezes the parameters train.freeze matches (before an engine or optimizer is built);
  /// returns the globs that match none.
  std::vector<std::string> freeze(const spec::TrainSection& train) {
    return spec::apply_freeze(train, mutable_layers());
  }
  /// Counted parameters: all, and those that receive gradients.
  std::int64_t params_total() const;
  std::int64_t params_trainable() const;
  /// The [lora] section apply_lora applied (disabled before): QLoRA's quantization of the
  /// ParamShape::nf4 weights (quant_block_size, double_quant, quant_storage) is read here.
  const spec::LoraSection& lora_config() const { return m_lora_config; }
  void set_lora_config(const spec::LoraSection& lora) { m_lora_config = lora; }

 protected:
  virtual std::vector<LayerDef>& mutable_layers() = 0;

 private:
  spec::LoraSection m_lora_config;
};

using spec::numel;

}  // namespace shardscope::model
