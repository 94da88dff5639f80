// `shardtrain bench-step CONFIG [--set k=v]... [--iters N] [--warmup W] [--plain]`: times forward
// + backward of the experiment's model on one process, without an optimizer (the
// benchmark of bench/trainer/bench_forward.py). The batch is the first train.batch_size samples
// of data.train_path (data.format = "tokens"), data.seq_len long. By default the model runs
// under the sharding engine as a 1-process `train` runs it (flat parameters, gradients into the
// sharded fp32 buffer); --plain runs it as plain autograd leaves (the kernels alone). Gradients
// are dropped after each pass, outside the timed span. One `step` event per timed pass (lr and
// grad_norm 0: no optimizer; tokens_per_s = B * T / seconds of that pass; mfu when
// SHARDSCOPE_PEAK_FLOPS is set, else 0), then `done` whose objective is the median tokens/s.
#pragma once

#include <string>
#include <vector>

namespace shardscope::trainer {

struct BenchStepOptions {
  std::string config;                  // experiment TOML
  std::vector<std::string> overrides;  // --set dotted.key=value
  int iters = 5;                       // timed forward+backward passes
  int warmup = 1;                      // untimed passes first (allocator, caches)
  bool plain = false;                  // plain autograd leaves instead of the sharding engine
};

/// Runs the benchmark; returns the process exit code.
int run_bench_step(const BenchStepOptions& options);

}  // namespace shardscope::trainer
