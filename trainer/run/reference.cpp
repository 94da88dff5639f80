#include <ATen/ATen.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "trainer/model/nf4.h"
#include "trainer/run/step_runner.h"

namespace shardscope::trainer {
namespace {

class ReferenceRunner final : public StepRunner {
 public:
  ReferenceRunner(const model::Model& model, const spec::Experiment& exp) : m_model(model) {
    const auto& layers = model.layers();
    std::vector<at::Tensor> decay;
    std::vector<at::Tensor> no_decay;
    for (std::size_t l = 0; l < layers.size(); ++l) {
      std::vector<at::Tensor> values;
      for (const auto& p : layers[l].params) values.push_back(at::zeros(p.shape, at::kFloat));
      model.init_layer(static_cast<int>(l), values, exp.train.seed);
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (layers[l].params[i].nf4) {
          // QLoRA: the base computes with its NF4 values, as the engine's dequantized units do.
          values[i] = model::dequantize_nf4(
              model::quantize_nf4(values[i], exp.lora.quant_block_size, exp.lora.double_quant),
              at::kFloat);
        }
        if (!layers[l].params[i].tied_to.empty()) {
          // One tensor for a tied pair: both uses' gradients sum into the owner.
          values[i] = owner_of(layers[l].params[i].tied_to);
          continue;
        }
        const bool trains = layers[l].params[i].trainable;
        values[i].requires_grad_(trains);
        if (trains) {
          (layers[l].params[i].decay ? decay : no_decay).push_back(values[i]);
          m_trainable.push_back(values[i]);
        }
      }
      m_params.push_back(std::move(values));
    }
    auto opts = torch::optim::AdamWOptions(exp.train.lr)
                    .betas({exp.train.adam_beta1, exp.train.adam_beta2})
                    .eps(exp.train.adam_eps)
                    .weight_decay(exp.train.weight_decay);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(opts));
    auto nd = opts;
    nd.weight_decay(0.0);
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(nd));
    m_optimizer = std::make_unique<torch::optim::AdamW>(std::move(groups), opts);
  }

  double micro_step(const model::Batch& batch, double loss_scale, bool /*reduce*/) override {
    auto loss = forward(batch, loss_scale);
    loss.backward();
    return loss.item<double>();
  }
  double eval_step(const model::Batch& batch, double loss_scale) override {
    at::NoGradGuard no_grad;
    return forward(batch, loss_scale).item<double>();
  }
  double grad_norm() override {
    double total = 0;
    for (const auto& p : m_trainable)
      if (p.grad().defined()) total += p.grad().to(at::kDouble).pow(2).sum().item<double>();
    return std::sqrt(total);
  }
  void scale_grads(double factor) override {
    at::NoGradGuard no_grad;
    for (auto& p : m_trainable)
      if (p.grad().defined()) p.mutable_grad().mul_(factor);
  }
  bool grads_nonfinite() override {
    for (const auto& p : m_trainable)
      if (p.grad().defined() && !at::isfinite(p.grad()).all().item<bool>()) return true;
    return false;
  }
  void optimizer_step(double lr) override {
    for (auto& group : m_optimizer->param_groups()) group.options().set_lr(lr);
    m_optimizer->step();
  }
  void zero_grads() override { m_optimizer->zero_grad(true); }
  ckpt::NamedTensors full_grads() override {
    ckpt::NamedTensors out;
    const auto& layers = m_model.layers();
    for (std::size_t l = 0; l < layers.size(); ++l)
      for (std::size_t i = 0; i < layers[l].params.size(); ++i)
        if (m_params[l][i].grad().defined())
          out.emplace_back(layers[l].params[i].name, m_params[l][i].grad().detach().clone());
    return out;
  }
  ckpt::NamedTensors full_state() override {
    ckpt::NamedTensors out;
    const auto& layers = m_model.layers();
    for (std::size_t l = 0; l < layers.size(); ++l)
      for (std::size_t i = 0; i < layers[l].params.size(); ++i)
        out.emplace_back(layers[l].params[i].name, m_params[l][i].detach().clone());
    return out;
  }

 private:
  at::Tensor forward(const model::Batch& batch, double loss_scale) {
    auto ctx = m_model.context(batch, at::kFloat);
    ctx.loss_scale = loss_scale;
    at::Tensor x;
    for (std::size_t l = 0; l < m_params.size(); ++l)
      x = m_model.forward_layer(static_cast<int>(l), m_params[l], x, ctx);
    return x;
  }

  /// The tensor of an earlier layer's parameter named `name` (a tied parameter's owner).
  at::Tensor owner_of(const std::string& name) const {
    const auto& layers = m_model.layers();
    for (std::size_t l = 0; l < m_params.size(); ++l)
      for (std::size_t i = 0; i < m_params[l].size(); ++i)
        if (layers[l].params[i].name == name) return m_params[l][i];
    throw std::runtime_error("reference: tied parameter's owner " + name + " is not defined yet");
  }

  const model::Model& m_model;
  std::vector<std::vector<at::Tensor>> m_params;
  std::vector<at::Tensor> m_trainable;
  std::unique_ptr<torch::optim::AdamW> m_optimizer;
};

}  // namespace

std::unique_ptr<StepRunner> make_reference_runner(const model::Model& model,
                                                  const spec::Experiment& exp) {
  return std::make_unique<ReferenceRunner>(model, exp);
}

}  // namespace shardscope::trainer
