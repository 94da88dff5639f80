#include "trainer/optim/adamw.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <cmath>

namespace shardscope::optim {

ShardedAdamW::ShardedAdamW(std::vector<shard::FlatParam*> params, const spec::TrainSection& train)
    : m_params(std::move(params)),
      m_beta1(train.adam_beta1),
      m_beta2(train.adam_beta2),
      m_eps(train.adam_eps),
      m_weight_decay(train.weight_decay) {
  for (auto* p : m_params) {
    m_exp_avg.push_back(at::zeros_like(p->master, at::MemoryFormat::Contiguous).detach());
    m_exp_avg_sq.push_back(at::zeros_like(p->master, at::MemoryFormat::Contiguous).detach());
  }
}

void ShardedAdamW::step(double lr) {
  at::NoGradGuard no_grad;
  ++m_steps;
  const double bias1 = 1.0 - std::pow(m_beta1, static_cast<double>(m_steps));
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(m_beta2, static_cast<double>(m_steps)));
  for (std::size_t i = 0; i < m_params.size(); ++i) {
    auto* p = m_params[i];
    if (!p->grad.defined()) continue;
    auto param = p->master.detach();  // (N)
    const auto& grad = p->grad;       // (N)
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
}

}  // namespace shardscope::optim
