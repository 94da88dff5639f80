#include "trainer/optim/adamw.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace shardscope::optim {
namespace {

// The constants of one update, in the float precision torch's CPU kernels use for fp32 tensors
// (each double scalar is rounded to float before the arithmetic, as ATen does).
struct AdamConsts {
  float one_minus_beta1;  // lerp weight
  float beta2;
  float one_minus_beta2;
  float bias2_sqrt;
  float eps;
  float step;   // -lr / bias1
  float decay;  // 1 - lr * weight_decay
};

// torch's lerp for a weight below 0.5: m + w * (g - m).
inline float lerp_small(float m, float g, float w) { return m + w * (g - m); }

// One pass over [begin, end) of a shard: decay (when `decay`), both moments and the parameter,
// the same per-element arithmetic as AdamW's separate ops (mul_, lerp_, mul_ + addcmul_,
// sqrt / bias2_sqrt + eps, addcdiv_), so every element reads and writes its four values once.
// NOLINTBEGIN(cppcoreguidelines-pro-bounds-pointer-arithmetic)
void adamw_range(float* p, const float* g, float* m, float* v, std::int64_t begin, std::int64_t end,
                 bool decay, const AdamConsts& c) {
  std::int64_t i = begin;
#if defined(__SSE2__)
  const __m128 w = _mm_set1_ps(c.one_minus_beta1);
  const __m128 b2 = _mm_set1_ps(c.beta2);
  const __m128 omb2 = _mm_set1_ps(c.one_minus_beta2);
  const __m128 bias2 = _mm_set1_ps(c.bias2_sqrt);
  const __m128 eps = _mm_set1_ps(c.eps);
  const __m128 step = _mm_set1_ps(c.step);
  const __m128 dec = _mm_set1_ps(c.decay);
  for (; i + 4 <= end; i += 4) {
    __m128 pv = _mm_loadu_ps(p + i);
    const __m128 gv = _mm_loadu_ps(g + i);
    __m128 mv = _mm_loadu_ps(m + i);
    __m128 vv = _mm_loadu_ps(v + i);
    if (decay) pv = _mm_mul_ps(pv, dec);
    mv = _mm_add_ps(mv, _mm_mul_ps(w, _mm_sub_ps(gv, mv)));
    vv = _mm_add_ps(_mm_mul_ps(vv, b2), _mm_mul_ps(omb2, _mm_mul_ps(gv, gv)));
    const __m128 denom = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vv), bias2), eps);
    pv = _mm_add_ps(pv, _mm_mul_ps(step, _mm_div_ps(mv, denom)));
    _mm_storeu_ps(p + i, pv);
    _mm_storeu_ps(m + i, mv);
    _mm_storeu_ps(v + i, vv);
  }
#endif
  for (; i < end; ++i) {
    if (decay) p[i] *= c.decay;
    m[i] = lerp_small(m[i], g[i], c.one_minus_beta1);
    v[i] = v[i] * c.beta2 + c.one_minus_beta2 * (g[i] * g[i]);
    const float denom = std::sqrt(v[i]) / c.bias2_sqrt + c.eps;
    p[i] += c.step * (m[i] / denom);
  }
}
// NOLINTEND(cppcoreguidelines-pro-bounds-pointer-arithmetic)

// True when the fused pass applies: contiguous fp32 CPU tensors of one length.
bool fusable(const at::Tensor& p, const at::Tensor& g, const at::Tensor& m, const at::Tensor& v) {
  for (const auto* t : {&p, &g, &m, &v})
    if (!t->device().is_cpu() || t->scalar_type() != at::kFloat || !t->is_contiguous() ||
        t->numel() != p.numel())
      return false;
  return true;
}

// The fused pass over one shard: undecayed gaps and decayed ranges alternate (ranges sorted).
void step_fused(const shard::FlatParam& flat, const at::Tensor& param, const at::Tensor& grad,
                at::Tensor& exp_avg, at::Tensor& exp_avg_sq, bool decays, const AdamConsts& c) {
  auto* p = param.data_ptr<float>();
  const auto* g = grad.data_ptr<float>();
  auto* m = exp_avg.data_ptr<float>();
  auto* v = exp_avg_sq.data_ptr<float>();
  std::int64_t pos = 0;
  if (decays) {
    for (const auto& [begin, end] : flat.decay_ranges) {
      adamw_range(p, g, m, v, pos, begin, false, c);
      adamw_range(p, g, m, v, begin, end, true, c);
      pos = end;
    }
  }
  adamw_range(p, g, m, v, pos, param.numel(), false, c);
}

}  // namespace

ShardedAdamW::ShardedAdamW(std::vector<shard::FlatParam*> params, const spec::TrainSection& train,
                           bool offload)
    : m_params(std::move(params)),
      m_beta1(train.adam_beta1),
      m_beta2(train.adam_beta2),
      m_eps(train.adam_eps),
      m_weight_decay(train.weight_decay) {
  for (auto* p : m_params) {
    // With offload_optimizer the moments live in host memory (and the step runs there).
    auto opts = p->master.options().requires_grad(false);
    if (offload) opts = opts.device(at::kCPU).pinned_memory(p->master.is_cuda());
    m_exp_avg.push_back(at::zeros({p->master.numel()}, opts));
    m_exp_avg_sq.push_back(at::zeros({p->master.numel()}, opts));
  }
}

void ShardedAdamW::step(double lr) {
  at::NoGradGuard no_grad;
  ++m_steps;
  const double bias1 = 1.0 - std::pow(m_beta1, static_cast<double>(m_steps));
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(m_beta2, static_cast<double>(m_steps)));
  const AdamConsts consts{static_cast<float>(1.0 - m_beta1),
                          static_cast<float>(m_beta2),
                          static_cast<float>(1.0 - m_beta2),
                          static_cast<float>(bias2_sqrt),
                          static_cast<float>(m_eps),
                          static_cast<float>(-lr / bias1),
                          static_cast<float>(1.0 - lr * m_weight_decay)};
  for (std::size_t i = 0; i < m_params.size(); ++i) {
    auto* p = m_params[i];
    if (!p->grad.defined()) continue;
    auto master = p->master.detach();  // (N)
    // The step runs where the moments live: offloaded moments take host copies of the master
    // and the gradient, and the updated master goes back to the device.
    const auto where = m_exp_avg[i].device();
    auto param = master.device() == where ? master : master.to(where);
    auto grad = p->grad.device() == where ? p->grad : p->grad.to(where);  // (N)
    if (fusable(param, grad, m_exp_avg[i], m_exp_avg_sq[i])) {
      step_fused(*p, param, grad, m_exp_avg[i], m_exp_avg_sq[i], m_weight_decay != 0.0, consts);
    } else {
      // Other devices and dtypes (CUDA): the same update as separate ops.
      if (m_weight_decay != 0.0) {
        // p *= 1 - lr * wd on the decayed slots; norms, biases and padding unchanged.
        for (const auto& [begin, end] : p->decay_ranges)
          param.narrow(0, begin, end - begin).mul_(1.0 - lr * m_weight_decay);
      }
      m_exp_avg[i].lerp_(grad, 1.0 - m_beta1);
      m_exp_avg_sq[i].mul_(m_beta2).addcmul_(grad, grad, 1.0 - m_beta2);
      auto denom = (m_exp_avg_sq[i].sqrt() / bias2_sqrt).add_(m_eps);
      param.addcdiv_(m_exp_avg[i], denom, -lr / bias1);
    }
    if (!param.is_same(master)) master.copy_(param);
  }
}

}  // namespace shardscope::optim
