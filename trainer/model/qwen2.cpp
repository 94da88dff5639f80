#include "trainer/model/qwen2.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <utility>

namespace shardscope::model {
namespace {

// Block parameter order (forward_layer relies on it).
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

constexpr double kInitStd = 0.02;  // HF initializer_range

at::Tensor rotate_half(const at::Tensor& x) {  // (B, H, T, D)
  const auto half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  return at::cat({-x2, x1}, -1);
}

}  // namespace

std::int64_t Model::params_total() const {
  std::int64_t n = 0;
  for (const auto& layer : layers())
    for (const auto& p : layer.params) n += numel(p.shape);
  return n;
}

std::int64_t Model::params_trainable() const {
  std::int64_t n = 0;
  for (const auto& layer : layers())
    for (const auto& p : layer.params)
      if (p.trainable) n += numel(p.shape);
  return n;
}

Qwen2Model::Qwen2Model(Qwen2Config config)
    : m_config(config), m_layers(spec::qwen2_layers(m_config)) {}

void Qwen2Model::init_layer(int layer, std::vector<at::Tensor>& params, std::uint64_t seed) const {
  // One generator per layer: a layer's values do not depend on how layers are grouped or sharded.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed * 1000003ULL +
                                                      static_cast<std::uint64_t>(layer));
  const auto& defs = m_layers[static_cast<std::size_t>(layer)].params;
  for (std::size_t i = 0; i < defs.size(); ++i) {
    const auto& name = defs[i].name;
    auto& t = params[i];
    const bool norm = name.find("norm") != std::string::npos;
    if (norm) {
      t.fill_(1.0);
    } else if (defs[i].shape.size() == 1) {
      t.zero_();  // biases
    } else {
      t.normal_(0.0, kInitStd, gen);
    }
  }
}

LayerContext Qwen2Model::context(const Batch& batch, at::ScalarType buffer_dtype) const {
  const auto T = batch.input_ids.size(1);
  const auto D = m_config.hidden_size / m_config.num_heads;
  auto opts = at::TensorOptions().dtype(at::kFloat);
  auto inv_freq = 1.0 / at::pow(m_config.rope_theta,
                                at::arange(0, D, 2, opts) / static_cast<double>(D));  // (D/2)
  auto pos = at::arange(T, opts);                                                     // (T)
  auto freqs = at::outer(pos, inv_freq);                                              // (T, D/2)
  auto emb = at::cat({freqs, freqs}, -1);                                             // (T, D)
  LayerContext ctx;
  ctx.batch = &batch;
  ctx.rope_cos = emb.cos().to(buffer_dtype);
  ctx.rope_sin = emb.sin().to(buffer_dtype);
  return ctx;
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  auto h = x.to(at::kFloat);
  auto var = h.pow(2).mean(-1, true);
  h = h * at::rsqrt(var + eps);
  return weight * h.to(x.scalar_type());
}

at::Tensor Qwen2Model::block(const std::vector<at::Tensor>& p, const at::Tensor& x,
                             const LayerContext& ctx) const {
  const auto B = x.size(0);
  const auto T = x.size(1);
  const auto H = m_config.num_heads;
  const auto K = m_config.num_kv_heads;
  const auto D = m_config.hidden_size / H;
  auto h = rms_norm(x, p[kInputNorm], m_config.rms_eps);                      // (B, T, C)
  auto q = at::linear(h, p[kQw], p[kQb]).view({B, T, H, D}).transpose(1, 2);  // (B, H, T, D)
  auto k = at::linear(h, p[kKw], p[kKb]).view({B, T, K, D}).transpose(1, 2);  // (B, K, T, D)
  auto v = at::linear(h, p[kVw], p[kVb]).view({B, T, K, D}).transpose(1, 2);  // (B, K, T, D)
  auto cos = ctx.rope_cos.to(q.scalar_type());                                // (T, D)
  auto sin = ctx.rope_sin.to(q.scalar_type());
  q = q * cos + rotate_half(q) * sin;
  k = k * cos + rotate_half(k) * sin;
  if (K != H) {
    k = k.repeat_interleave(H / K, 1);  // (B, H, T, D)
    v = v.repeat_interleave(H / K, 1);
  }
  auto a = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);  // (B, H, T, D)
  a = a.transpose(1, 2).reshape({B, T, H * D});
  auto x1 = x + at::linear(a, p[kOw]);  // (B, T, C)
  auto h2 = rms_norm(x1, p[kPostNorm], m_config.rms_eps);
  auto mlp = at::linear(at::silu(at::linear(h2, p[kGate])) * at::linear(h2, p[kUp]), p[kDown]);
  return x1 + mlp;
}

at::Tensor Qwen2Model::head(const std::vector<at::Tensor>& p, const at::Tensor& x,
                            const LayerContext& ctx) const {
  auto h = rms_norm(x, p[0], m_config.rms_eps);                                  // (B, T, C)
  auto logits = at::linear(h.narrow(1, 0, h.size(1) - 1), p[1]).to(at::kFloat);  // (B, T-1, V)
  auto labels = ctx.batch->labels.narrow(1, 1, h.size(1) - 1);                   // (B, T-1)
  auto loss = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}),
                                     {}, at::Reduction::Sum, -100);
  return loss * ctx.loss_scale;
}

at::Tensor Qwen2Model::forward_layer(int layer, const std::vector<at::Tensor>& params,
                                     const at::Tensor& x, const LayerContext& ctx) const {
  const auto& def = m_layers[static_cast<std::size_t>(layer)];
  if (layer == 0) return at::embedding(params[0], ctx.batch->input_ids);  // (B, T, C)
  if (def.is_block) return block(params, x, ctx);
  return head(params, x, ctx);
}

double Qwen2Model::flops_per_token(std::int64_t seq_len) const {
  // N excludes the embedding table (a lookup, not a matmul); the head's matmul stays in.
  const double n = static_cast<double>(params_total() - m_config.vocab_size * m_config.hidden_size);
  const double L = static_cast<double>(m_config.num_layers);
  const double H = static_cast<double>(m_config.num_heads);
  const double Q =
      static_cast<double>(m_config.hidden_size) / static_cast<double>(m_config.num_heads);
  return 6.0 * n + 12.0 * L * H * Q * static_cast<double>(seq_len);
}

}  // namespace shardscope::model
