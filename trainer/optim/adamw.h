// Sharded AdamW: each rank updates only its fp32 master shards with its sharded gradients, so
// optimizer state is sharded like the parameters (ZeRO). Decoupled weight decay applies per
// contiguous decayed range of the shard (never on norms, biases or padding). The update is
// torch.optim.AdamW's arithmetic, element for element in fp32; on CPU fp32 shards it runs as one
// fused pass per shard (each element's parameter, gradient and moments read and written once)
// instead of one pass per op.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "spec/experiment.h"
#include "trainer/shard/flat_param.h"

namespace shardscope::optim {

class ShardedAdamW {
 public:
  /// `offload` (shard.offload_optimizer): the moments live in host memory and each step runs
  /// there on host copies of the gradient and, when the master is on the GPU, of the master.
  ShardedAdamW(std::vector<shard::FlatParam*> params, const spec::TrainSection& train,
               bool offload = false);

  /// One update with learning rate `lr` from every parameter's `grad` (skipped when undefined).
  void step(double lr);
  std::int64_t steps() const { return m_steps; }
  void set_steps(std::int64_t steps) { m_steps = steps; }
  std::vector<shard::FlatParam*>& params() { return m_params; }
  std::vector<at::Tensor>& exp_avg() { return m_exp_avg; }        // (N) fp32 per parameter
  std::vector<at::Tensor>& exp_avg_sq() { return m_exp_avg_sq; }  // (N) fp32 per parameter

 private:
  std::vector<shard::FlatParam*> m_params;
  std::vector<at::Tensor> m_exp_avg;
  std::vector<at::Tensor> m_exp_avg_sq;
  double m_beta1, m_beta2, m_eps, m_weight_decay;
  std::int64_t m_steps = 0;
};

}  // namespace shardscope::optim
