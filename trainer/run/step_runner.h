// What the training loop needs from whatever holds the parameters: the sharding engine, or (for
// parity tests) a plain unsharded autograd model with torch::optim::AdamW.
#pragma once

#include <memory>
#include <string>

#include "spec/experiment.h"
#include "trainer/base/safetensors.h"
#include "trainer/model/model.h"

namespace shardscope::trainer {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  /// One micro-batch; returns this rank's scaled loss contribution.
  virtual double micro_step(const model::Batch& batch, double loss_scale, bool reduce) = 0;
  /// Labels what follows with its optimizer step (from 1) and micro-step (trace records).
  virtual void set_position(std::int64_t /*step*/, int /*micro*/) {}
  virtual double eval_step(const model::Batch& batch, double loss_scale) = 0;
  /// Around generation: keep the parameters gathered between eval_step calls when they fit
  /// (collective for the engine); returns whether they are held and sets `bytes` to their size.
  /// The reference holds its parameters whole anyway.
  virtual bool hold_gathered(bool /*on*/, std::int64_t* /*bytes*/) { return false; }
  virtual double grad_norm() = 0;
  virtual void scale_grads(double factor) = 0;
  virtual bool grads_nonfinite() = 0;
  virtual void optimizer_step(double lr) = 0;
  virtual void zero_grads() = 0;
  /// Full fp32 parameters by HF name (collective for the engine).
  virtual ckpt::NamedTensors full_state() = 0;
  /// Full fp32 gradients of the trainable parameters by HF name, as the optimizer would use
  /// them (collective for the engine).
  virtual ckpt::NamedTensors full_grads() = 0;
};

/// The unsharded reference: every parameter a plain leaf tensor, torch::optim::AdamW with a
/// no-decay group for norms and biases, clip_grad_norm_ for clipping.
std::unique_ptr<StepRunner> make_reference_runner(const model::Model& model,
                                                  const spec::Experiment& exp);

}  // namespace shardscope::trainer
