#include "trainer/model/text_layers.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cstdint>

#include "spec/estimate.h"

#include "trainer/base/fatal.h"
#include "trainer/model/dense.h"

namespace shardscope::model {
namespace {

// Block parameter order (spec::append_qwen2_text_layers).
enum BlockParam {
  kInputNorm,
  kQw,
  kQb,
  kKw,
  kKb,
  kVw,
  kVb,
  kOw,
  kPostNorm,
  kGate,
  kUp,
  kDown,
};

at::Tensor inv_freq(std::int64_t D, double theta) {  // (D/2)
  auto opts = at::TensorOptions().dtype(at::kFloat);
  return 1.0 / at::pow(theta, at::arange(0, D, 2, opts) / static_cast<double>(D));
}

// The first half of a rotary table (T, D) or (B, 1, T, D) in `dtype`: every table here is
// cat({f, f}), so its halves are equal and half of it is all the rotation needs.
at::Tensor rope_half(const at::Tensor& table, at::ScalarType dtype) {
  return table.narrow(-1, 0, table.size(-1) / 2).to(dtype);  // (..., D/2)
}

// x * cos + rotate_half(x) * sin with half tables: (x1 c - x2 s, x2 c + x1 s). The same products
// and sums as the full form (a + (-b) s == a - b s exactly), so the values are bit-identical,
// without the negated half, the rotated copy and two full-width products.
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const auto half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);     // (..., D/2)
  auto x2 = x.narrow(-1, half, half);  // (..., D/2)
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

// The head and its loss in one: summed token cross-entropy of dense(h, w) (R, V) against labels
// (R) (every row a label, none -100), times `scale`, computed `chunk` rows at a time, so no
// (R, V) tensor exists in any dtype (the fused linear cross-entropy of Liger-Kernel). Each
// chunk's logits are made in the compute dtype, their log-softmax in fp32; when gradients are
// wanted the log-softmax becomes that chunk's logit gradient in place, scale * (softmax -
// onehot(label)), cast to the compute dtype for the two GEMMs that give the chunk's rows of the
// hidden states' gradient and add its share of lm_head's weight gradient (accumulated in fp32).
// Backward only multiplies the stored gradients by the upstream one. The same values as
// dense + log_softmax + nll_loss and their backward up to the order of the weight gradient's
// sums over rows. Returns {loss, argmax hits}: with `count_hits` (an evaluation's tally) the
// second counts the rows whose argmax logit is the label, from the same logits.
struct LinearCrossEntropyFn : public torch::autograd::Function<LinearCrossEntropyFn> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& h, const at::Tensor& w,
                                                const at::Tensor& labels, double scale,
                                                std::int64_t chunk, bool want_grads,
                                                bool count_hits) {
    const auto R = h.size(0);
    const bool grad_h = want_grads && h.requires_grad();
    const bool grad_w = want_grads && w.requires_grad();
    at::Tensor dh = grad_h ? at::empty_like(h) : at::Tensor();  // (R, C)
    at::Tensor dw = grad_w ? at::zeros(w.sizes(), w.options().dtype(at::kFloat)) : at::Tensor();
    auto loss = at::zeros({}, h.options().dtype(at::kFloat));
    auto hits = at::zeros({}, h.options().dtype(at::kLong));
    const bool autocast = at::autocast::is_autocast_enabled(h.device().type());
    // lm_head's weight in the compute dtype, once (no copy when it already is: fp32, bf16).
    const auto wc = grad_h && w.scalar_type() != h.scalar_type() ? w.to(h.scalar_type()) : w;
    for (std::int64_t r0 = 0; r0 < R; r0 += chunk) {
      const auto n = std::min(chunk, R - r0);
      auto hc = h.narrow(0, r0, n);                                  // (n, C)
      auto lc = labels.narrow(0, r0, n);                             // (n)
      auto logp = at::log_softmax(dense(hc, w).to(at::kFloat), -1);  // (n, V) fp32
      loss.add_(at::nll_loss(logp, lc, {}, at::Reduction::Sum, -100));
      if (count_hits) hits.add_((logp.argmax(-1) == lc).sum());
      if (!grad_h && !grad_w) continue;
      auto g = logp.exp_();  // softmax
      g.scatter_add_(1, lc.unsqueeze(1), at::full({n, 1}, -1.0, g.options()));
      g.mul_(scale);
      const auto gc = g.to(h.scalar_type());  // (n, V) in the compute dtype, as dense's backward
      // Into the gradients' own storage where the dtypes allow (no (n, C) or (V, C) temporary);
      // under autocast through its casts, as dense's backward would run.
      if (grad_h) {
        if (autocast)
          dh.narrow(0, r0, n).copy_(at::mm(gc, wc));
        else {
          auto rows = dh.narrow(0, r0, n);  // contiguous: dh is (R, C) row-major
          at::mm_out(rows, gc, wc);
        }
      }
      if (grad_w) {
        if (!autocast && gc.scalar_type() == at::kFloat)
          dw.addmm_(gc.t(), hc);
        else
          dw.add_(at::mm(gc.t(), hc));
      }
    }
    ctx->save_for_backward({dh, dw});
    ctx->saved_data["dtype"] = static_cast<std::int64_t>(w.scalar_type());
    ctx->saved_data["used"] = false;
    ctx->mark_non_differentiable({hits});
    return {loss * scale, hits};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    TORCH_CHECK(!ctx->saved_data["used"].toBool(),
                "the head's fused cross-entropy backward ran twice: its gradients were scaled "
                "in place in the first run (call backward once per forward)");
    ctx->saved_data["used"] = true;
    const auto saved = ctx->get_saved_variables();
    const auto& dh = saved[0];
    auto dw = saved[1];
    const auto& up = grads[0];  // () the upstream gradient: 1 for the loss itself
    if (dh.defined()) dh.mul_(up.to(dh.scalar_type()));
    if (dw.defined())
      dw = dw.mul_(up.to(dw.scalar_type()))
               .to(static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt()));
    return {dh, dw, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Attention of packed rows: causal inside each segment of `seqlens` (row after row; each row's
// segments sum to T), nothing across. On CUDA in bf16/fp16 one variable-length flash attention
// over the rows read as a single sequence of B * T tokens (FlashAttention's cu_seqlens form),
// else one causal SDPA per segment. q (B, H, T, D), k and v (B, K, T, D) -> (B, H, T, D).
at::Tensor segment_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const std::vector<std::int64_t>& seqlens, bool gqa) {
  const auto B = q.size(0);
  const auto H = q.size(1);
  const auto T = q.size(2);
  const auto D = q.size(3);
  const bool half = q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf;
  if (q.is_cuda() && half && D % 8 == 0 && D <= 256) {
    std::vector<std::int32_t> offsets{0};  // (segments + 1) cumulative token offsets
    std::int64_t longest = 0;
    for (auto n : seqlens) {
      offsets.push_back(offsets.back() + static_cast<std::int32_t>(n));
      longest = std::max(longest, n);
    }
    auto cu = at::tensor(at::ArrayRef<std::int32_t>(offsets), at::kInt).to(q.device());
    auto tokens = [&](const at::Tensor& t) {  // (B, heads, T, D) -> (B * T, heads, D)
      return t.transpose(1, 2).reshape({B * T, t.size(1), D});
    };
    auto out = std::get<0>(at::_flash_attention_forward(tokens(q), tokens(k), tokens(v), cu, cu,
                                                        longest, longest, 0.0,
                                                        /*is_causal=*/true, false));
    return out.view({B, T, H, D}).transpose(1, 2);
  }
  std::vector<at::Tensor> rows;
  rows.reserve(static_cast<std::size_t>(B));
  std::size_t segment = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    std::vector<at::Tensor> parts;
    for (std::int64_t t = 0; t < T;) {
      const auto n = seqlens[segment++];
      auto piece = [&](const at::Tensor& x) { return x.select(0, b).narrow(1, t, n).unsqueeze(0); };
      parts.push_back(at::scaled_dot_product_attention(piece(q), piece(k), piece(v), {}, 0.0,
                                                       /*is_causal=*/true, std::nullopt, gqa));
      t += n;
    }
    rows.push_back(at::cat(parts, 2).squeeze(0));  // (H, T, D)
  }
  return at::stack(rows);
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat) {
    // fp32: LibTorch's fused kernel (forward and backward in one pass each instead of the six
    // ops below and their backward nodes); the same values as the composite form here.
    return at::rms_norm(x, {x.size(-1)}, weight, eps);
  }
  auto h = x.to(at::kFloat);
  auto var = h.pow(2).mean(-1, true);
  h = h * at::rsqrt(var + eps);
  return weight * h.to(x.scalar_type());
}

at::Tensor rotate_half(const at::Tensor& x) {
  const auto half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  return at::cat({-x2, x1}, -1);
}

std::pair<at::Tensor, at::Tensor> rope_tables(std::int64_t T, std::int64_t D, double theta) {
  auto pos = at::arange(T, at::TensorOptions().dtype(at::kFloat));  // (T)
  auto freqs = at::outer(pos, inv_freq(D, theta));                  // (T, D/2)
  auto emb = at::cat({freqs, freqs}, -1);                           // (T, D)
  return {emb.cos(), emb.sin()};
}

std::pair<at::Tensor, at::Tensor> mrope_tables(const at::Tensor& positions, std::int64_t D,
                                               double theta,
                                               const std::vector<std::int64_t>& sections) {
  auto freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq(D, theta);  // (3, B, T, D/2)
  std::vector<at::Tensor> parts;
  std::int64_t start = 0;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    parts.push_back(freqs[static_cast<std::int64_t>(i % 3)].narrow(-1, start, sections[i]));
    start += sections[i];
  }
  auto f = at::cat(parts, -1);                  // (B, T, D/2)
  auto emb = at::cat({f, f}, -1).unsqueeze(1);  // (B, 1, T, D)
  return {emb.cos(), emb.sin()};
}

std::pair<at::Tensor, at::Tensor> rope_tables_at(const at::Tensor& positions, std::int64_t D,
                                                 double theta) {
  auto freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq(D, theta);  // (B, T, D/2)
  auto emb = at::cat({freqs, freqs}, -1).unsqueeze(1);                       // (B, 1, T, D)
  return {emb.cos(), emb.sin()};
}

at::Tensor decode_mask(const at::Tensor& key_mask, std::int64_t T) {
  const auto S = key_mask.size(1);
  auto opts = at::TensorOptions().dtype(at::kLong);
  auto query = at::arange(S - T, S, opts).view({T, 1});    // (T, 1) key index
  auto key = at::arange(S, opts).view({1, S});             // (1, S)
  auto keys = key_mask.to(at::kBool).view({-1, 1, 1, S});  // (B, 1, 1, S)
  return ((key <= query) & keys) | (key == query);         // (B, 1, T, S)
}

KvSlot kv_slot(const LayerContext& ctx, int layer) {
  if (!ctx.batch || !ctx.batch->decode) return {};
  auto* d = ctx.batch->decode;
  const auto n = static_cast<std::size_t>(layer) + 1;
  if (d->keys.size() < n) d->keys.resize(n);
  if (d->values.size() < n) d->values.resize(n);
  return {&d->keys[n - 1], &d->values[n - 1]};
}

void check_segments(const Batch& batch) {
  if (batch.seqlens.empty()) return;
  const auto B = batch.input_ids.size(0);
  const auto T = batch.input_ids.size(1);
  std::size_t s = 0;
  bool whole =
      batch.position_ids.defined() && batch.position_ids.sizes() == batch.input_ids.sizes();
  for (std::int64_t b = 0; b < B && whole; ++b) {
    std::int64_t t = 0;
    while (t < T && s < batch.seqlens.size() && batch.seqlens[s] > 0) t += batch.seqlens[s++];
    whole = t == T;
  }
  SHARD_CHECK(whole && s == batch.seqlens.size(), spec::ErrorKind::internal,
              "a packed batch's segment lengths do not cut each of its " + std::to_string(B) +
                  " rows of " + std::to_string(T) + " tokens exactly (or it has no positions)",
              "build packed batches with trainer/run/sft_batch.h");
}

void require_right_padding(const at::Tensor& attention_mask) {
  if (!attention_mask.defined()) return;
  // Right padding: every row is ones then zeros, so no 1 follows a 0 (a step up along a row).
  const auto mask = attention_mask.to(at::kCPU, at::kLong);  // (B, T)
  const auto T = mask.size(1);
  const bool ones_then_zeros =
      T < 2 || !(mask.narrow(1, 1, T - 1) > mask.narrow(1, 0, T - 1)).any().item<bool>();
  SHARD_CHECK(ones_then_zeros && ((mask == 0) | (mask == 1)).all().item<bool>(),
              spec::ErrorKind::internal,
              "a training or evaluation batch is not right-padded (its attention mask has a "
              "token after padding): the attention kernel applies causality alone and masks "
              "no keys",
              "batches for the loss put each sample's tokens first and the padding after them "
              "(trainer/run/sft_batch.cpp); only generation pads on the left");
}

at::Tensor qwen2_block(const spec::Qwen2Dims& d, const std::vector<at::Tensor>& p,
                       const at::Tensor& x, const LayerContext& ctx, const LayerLora* lora,
                       KvSlot cache) {
  const auto B = x.size(0);
  const auto T = x.size(1);
  const auto H = d.num_heads;
  const auto K = d.num_kv_heads;
  const auto D = d.hidden_size / H;
  const DropoutKeys* drop = ctx.batch != nullptr ? &ctx.batch->dropout : nullptr;  // LoRA's masks
  auto h = rms_norm(x, p[kInputNorm], d.rms_eps);                                  // (B, T, C)
  auto q =
      lora_linear(h, p, kQw, kQb, lora, drop).view({B, T, H, D}).transpose(1, 2);  // (B, H, T, D)
  auto k =
      lora_linear(h, p, kKw, kKb, lora, drop).view({B, T, K, D}).transpose(1, 2);  // (B, K, T, D)
  auto v =
      lora_linear(h, p, kVw, kVb, lora, drop).view({B, T, K, D}).transpose(1, 2);  // (B, K, T, D)
  const auto cos = rope_half(ctx.rope_cos, q.scalar_type());  // (T, D/2) or (B, 1, T, D/2)
  const auto sin = rope_half(ctx.rope_sin, q.scalar_type());
  q = apply_rope(q, cos, sin);
  k = apply_rope(k, cos, sin);
  if (cache.keys) {  // generation: attend over the cached keys and this call's
    if (cache.keys->defined()) {
      k = at::cat({*cache.keys, k}, 2);  // (B, K, S, D)
      v = at::cat({*cache.values, v}, 2);
    }
    *cache.keys = k;
    *cache.values = v;
  }
  // Grouped KV heads go to the kernel as they are (enable_gqa): no (B, H, S, D) copies of k, v.
  // Outside generation there is no mask: batches are right-padded (require_right_padding), so
  // causality alone keeps every real token's keys real, and a padding position's output carries
  // no loss and feeds no real token. The kernel then takes its fused causal path (flash on CUDA).
  const bool gqa = K != H;
  at::Tensor a;  // (B, H, T, D)
  if (ctx.attn_mask.defined()) {
    a = at::scaled_dot_product_attention(q, k, v, ctx.attn_mask, 0.0, /*is_causal=*/false,
                                         std::nullopt, gqa);
  } else if (ctx.batch != nullptr && !ctx.batch->seqlens.empty()) {  // packed rows
    a = segment_attention(q, k, v, ctx.batch->seqlens, gqa);
  } else {
    a = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt, gqa);
  }
  a = a.transpose(1, 2).reshape({B, T, H * D});
  auto x1 = x + lora_linear(a, p, kOw, -1, lora, drop);  // (B, T, C)
  auto h2 = rms_norm(x1, p[kPostNorm], d.rms_eps);
  auto act =
      at::silu(lora_linear(h2, p, kGate, -1, lora, drop)) * lora_linear(h2, p, kUp, -1, lora, drop);
  auto mlp = lora_linear(act, p, kDown, -1, lora, drop);
  return x1 + mlp;
}

at::Tensor qwen2_logits(const spec::Qwen2Dims& d, const std::vector<at::Tensor>& p,
                        const at::Tensor& x) {
  return dense(rms_norm(x, p[0], d.rms_eps), p[1]).to(at::kFloat);  // (B, T, V)
}

at::Tensor qwen2_loss(const spec::Qwen2Dims& d, const std::vector<at::Tensor>& p,
                      const at::Tensor& x, const LayerContext& ctx) {
  const auto T = x.size(1);
  auto h = rms_norm(x.narrow(1, 0, T - 1), p[0], d.rms_eps).reshape({-1, x.size(2)});  // (R, C)
  auto labels = ctx.batch->labels.narrow(1, 1, T - 1).reshape({-1});                   // (R)
  // Only rows with a label reach the head (a chat sample's prompt and the padding do not). The
  // row count is read on the host (one synchronisation per micro-batch on CUDA).
  const auto rows = labels.ne(-100).nonzero().squeeze(1);  // (L)
  auto hl = h.index_select(0, rows);                       // (L, C)
  auto ll = labels.index_select(0, rows);                  // (L)
  const auto chunk = spec::loss_chunk_rows(rows.size(0), d.vocab_size, d.hidden_size,
                                           ctx.loss_chunk_tokens, ctx.loss_free_bytes);
  auto* tally = ctx.batch->tally;
  auto out = LinearCrossEntropyFn::apply(hl, p[1], ll, ctx.loss_scale, chunk,
                                         at::GradMode::is_enabled(), tally != nullptr);
  if (tally) {  // evaluation: argmax hits from the same logits
    tally->total += rows.size(0);
    tally->correct += out[1].item<std::int64_t>();
  }
  return out[0];
}

at::Tensor qwen2_head(const spec::Qwen2Dims& d, const std::vector<at::Tensor>& p,
                      const at::Tensor& x, const LayerContext& ctx) {
  auto* decode = ctx.batch ? ctx.batch->decode : nullptr;
  if (!decode) return qwen2_loss(d, p, x, ctx);
  decode->logits = qwen2_logits(d, p, x.select(1, x.size(1) - 1).unsqueeze(1)).squeeze(1);
  return at::zeros({}, at::kFloat);  // (B, V) logits above; no loss
}

}  // namespace shardscope::model
