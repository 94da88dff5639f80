#include "trainer/model/text_layers.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

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

// Summed token cross-entropy of logits (R, V) against labels (R) (-100: ignored), times
// `scale`. Forward keeps only the log-softmax (R, V); backward turns that buffer into the logits'
// gradient in place: s * (exp(logp) - onehot(label)) per row, s = scale * upstream gradient, 0 on
// ignored rows. The same values as nll_loss + log_softmax backward (exp(out) * s, minus s at the
// label), without their zero-filled (R, V) gradient and second (R, V) buffer: at 10M parameters
// and vocab 8192 those allocations, fills and passes were ~3% of a training step.
struct CrossEntropyFn : public torch::autograd::Function<CrossEntropyFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& labels, double scale) {
    auto logp = at::log_softmax(logits, -1);  // (R, V)
    auto loss = at::nll_loss(logp, labels, {}, at::Reduction::Sum, -100);
    ctx->save_for_backward({logp, labels});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["used"] = false;
    return loss * scale;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    TORCH_CHECK(!ctx->saved_data["used"].toBool(),
                "the head's cross-entropy backward ran twice: its buffer became the gradient in "
                "the first run (call backward once per forward)");
    ctx->saved_data["used"] = true;
    const auto saved = ctx->get_saved_variables();
    const auto& grad = saved[0];    // (R, V) log-softmax, becomes the gradient (in place)
    const auto& labels = saved[1];  // (R)
    // The upstream gradient times scale in the loss dtype, as MulBackward computes it.
    const auto s = grads[0].to(grad.scalar_type()) * ctx->saved_data["scale"].toDouble();  // ()
    const auto valid = labels.ne(-100).unsqueeze(1);                                       // (R, 1)
    const auto row = at::where(valid, s, at::zeros_like(s));                               // (R, 1)
    grad.exp_().mul_(row);
    grad.scatter_add_(1, labels.clamp_min(0).unsqueeze(1), row.neg());
    return {grad, at::Tensor(), at::Tensor()};
  }
};

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

at::Tensor padding_causal_mask(const at::Tensor& attention_mask) {
  if (!attention_mask.defined()) return {};
  const auto T = attention_mask.size(1);
  auto causal = at::ones({T, T}, at::TensorOptions().dtype(at::kBool)).tril();  // (T, T)
  auto keys = attention_mask.to(at::kBool).view({-1, 1, 1, T});                 // (B, 1, 1, T)
  auto eye = at::eye(T, at::TensorOptions().dtype(at::kBool));
  return (causal & keys) | eye;  // (B, 1, T, T)
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
  // Without a padding or cache mask the kernel applies causality itself (no (T, T) mask).
  const bool gqa = K != H;
  at::Tensor a;  // (B, H, T, D)
  if (ctx.attn_mask.defined()) {
    a = at::scaled_dot_product_attention(q, k, v, ctx.attn_mask, 0.0, /*is_causal=*/false,
                                         std::nullopt, gqa);
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
  auto h = rms_norm(x.narrow(1, 0, T - 1), p[0], d.rms_eps);  // (B, T-1, C)
  auto logits = dense(h, p[1]).to(at::kFloat);                // (B, T-1, V)
  auto labels = ctx.batch->labels.narrow(1, 1, T - 1);        // (B, T-1)
  if (auto* tally = ctx.batch->tally) {  // evaluation: argmax hits from the same logits
    auto counted = labels != -100;
    tally->total += counted.sum().item<std::int64_t>();
    tally->correct += (counted & (logits.argmax(-1) == labels)).sum().item<std::int64_t>();
  }
  return CrossEntropyFn::apply(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}),
                               ctx.loss_scale);
}

at::Tensor qwen2_head(const spec::Qwen2Dims& d, const std::vector<at::Tensor>& p,
                      const at::Tensor& x, const LayerContext& ctx) {
  auto* decode = ctx.batch ? ctx.batch->decode : nullptr;
  if (!decode) return qwen2_loss(d, p, x, ctx);
  decode->logits = qwen2_logits(d, p, x.select(1, x.size(1) - 1).unsqueeze(1)).squeeze(1);
  return at::zeros({}, at::kFloat);  // (B, V) logits above; no loss
}

}  // namespace shardscope::model
