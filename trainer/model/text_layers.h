// The Qwen2 text stack's math, shared by Qwen2Model and Qwen2VLModel: RMSNorm, rotary position
// embedding (1-D, or M-RoPE's three sections), a decoder block (GQA attention with q/k/v biases,
// SwiGLU MLP), and the head's logits and loss. Parameters come in the order of
// spec::append_qwen2_text_layers.
//
// Legend: B batch, T sequence, C hidden, H heads, K kv heads, D head dim, V vocabulary.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "spec/model_shape.h"
#include "trainer/model/lora.h"
#include "trainer/model/model.h"

namespace shardscope::model {

/// x * rsqrt(mean(x^2) + eps) * weight, computed in float32 and cast back (as HF does).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
/// (x1, x2) -> (-x2, x1) over the last dimension's halves.
at::Tensor rotate_half(const at::Tensor& x);
/// Rotary tables (T, D) for positions 0..T-1, in float32.
std::pair<at::Tensor, at::Tensor> rope_tables(std::int64_t T, std::int64_t D, double theta);
/// M-RoPE tables (B, 1, T, D) in float32 from positions (3, B, T): frequency i of D/2 takes
/// its angle from the t, h or w position according to `sections` (which sum to D/2).
std::pair<at::Tensor, at::Tensor> mrope_tables(const at::Tensor& positions, std::int64_t D,
                                               double theta,
                                               const std::vector<std::int64_t>& sections);
/// Rotary tables (B, 1, T, D) in float32 for explicit positions (B, T) (generation).
std::pair<at::Tensor, at::Tensor> rope_tables_at(const at::Tensor& positions, std::int64_t D,
                                                 double theta);
/// Generation mask (B, 1, T, S) bool: query i of this call (at key index S - T + i) sees the real
/// keys up to itself, and always itself (a padding row keeps a non-empty softmax).
at::Tensor decode_mask(const at::Tensor& key_mask, std::int64_t T);
/// A text block's key/value cache in a generation batch (both null outside generation).
struct KvSlot {
  at::Tensor* keys = nullptr;    // (B, K, S, D)
  at::Tensor* values = nullptr;  // (B, K, S, D)
};
/// The cache of model layer `layer` when ctx's batch is a generation step.
KvSlot kv_slot(const LayerContext& ctx, int layer);
/// Raises unless `attention_mask` (B, T) (undefined: no padding) is right-padded: each row ones
/// then zeros. The loss paths attend with the causal kernel alone, never a (B, 1, T, T) mask.
void require_right_padding(const at::Tensor& attention_mask);
/// Raises unless a packed batch's seqlens cut each row into segments summing to T exactly and
/// it carries position_ids (B, T); nothing for an unpacked batch.
void check_segments(const Batch& batch);
/// One decoder block (B, T, C) -> (B, T, C); `lora` adds the adapters of its Linears. With a
/// cache, this call's keys and values are appended to it and attention runs over all of them.
at::Tensor qwen2_block(const spec::Qwen2Dims& dims, const std::vector<at::Tensor>& p,
                       const at::Tensor& x, const LayerContext& ctx,
                       const LayerLora* lora = nullptr, KvSlot cache = {});
/// Final norm and lm_head: logits (B, T, V) in float32.
at::Tensor qwen2_logits(const spec::Qwen2Dims& dims, const std::vector<at::Tensor>& p,
                        const at::Tensor& x);
/// sum over label tokens of the cross entropy of position t-1's logits for label t, times
/// ctx.loss_scale. With ctx.batch->tally set, also counts the label tokens and the argmax hits of
/// the same logits there.
at::Tensor qwen2_loss(const spec::Qwen2Dims& dims, const std::vector<at::Tensor>& p,
                      const at::Tensor& x, const LayerContext& ctx);
/// The head layer: qwen2_loss, or in a generation step the last position's logits written to
/// the batch's DecodeState and a zero scalar returned.
at::Tensor qwen2_head(const spec::Qwen2Dims& dims, const std::vector<at::Tensor>& p,
                      const at::Tensor& x, const LayerContext& ctx);

}  // namespace shardscope::model
