// `shardtrain train CONFIG [--resume auto|PATH]`: one rank of a training run. Reads and validates
// the experiment (before any collective), meets its peers, builds the model and the sharding
// engine, and runs train.max_steps optimizer steps, writing protocol-v1 events on stdout.
#pragma once

#include <string>
#include <vector>

namespace shardscope::trainer {

struct TrainOptions {
  std::string config;                  // experiment TOML (the run directory's trial.toml)
  std::string resume;                  // "", "auto" or a checkpoint directory
  std::string trace;                   // --trace FILE
  std::string dump_params;             // --dump-params FILE: final full state (safetensors)
  std::vector<std::string> overrides;  // --set key=value
  bool reference = false;              // --reference: plain autograd, no engine (tests)
  std::string run_dir = ".";           // checkpoints go to run_dir/ckpt
};

int run_train(const TrainOptions& options);

}  // namespace shardscope::trainer
