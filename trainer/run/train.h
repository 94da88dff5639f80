// `shardtrain train CONFIG [--resume auto|PATH]`: one rank of a training run. Reads and validates
// the experiment (before any collective), meets its peers, builds the model and the sharding
// engine, and runs train.max_steps optimizer steps, writing protocol-v1 events on stdout.
#pragma once

#include <string>
#include <vector>

namespace shardscope::trainer {

struct TrainOptions {
  std::string config;  // experiment TOML (the run directory's trial.toml)
  std::string resume;  // "", "auto" or a checkpoint directory
  /// With resume "auto": the checkpoint to start from when the run has none of its own yet (a
  /// requeued Slurm job of a retry that resumed from the failed attempt's checkpoint).
  std::string resume_fallback;
  std::string trace;         // --trace FILE
  std::string dump_params;   // --dump-params FILE: final full state (safetensors)
  std::string dump_grads;    // --dump-grads FILE: first step's reduced gradients (safetensors)
  std::string export_dir;    // --export DIR: the model as a Hugging Face folder
  bool export_only = false;  // `shardtrain export`: resume, no steps, export
  std::vector<std::string> overrides;  // --set key=value
  bool reference = false;              // --reference: plain autograd, no engine (tests)
  std::string run_dir = ".";           // checkpoints go to run_dir/ckpt
  std::string generate_out;            // `shardtrain generate`: answers of data.eval_path to FILE
  bool no_cache = false;               // generate by recomputing every step (tests the cache)
};

int run_train(const TrainOptions& options);

/// `shardtrain export CONFIG --checkpoint DIR|auto --out DIR`: one process loads a sharded
/// checkpoint (resharded to world size 1) and writes the export folder.
int run_export(TrainOptions options);

/// `shardtrain generate CONFIG --out FILE [--checkpoint DIR|auto]`: every rank (same launch as
/// train) generates the answers of its share of data.eval_path with [eval]'s generation fields
/// under the configured sharding and writes one JSON line per sample to FILE (FILE.rank-N on
/// other ranks); the `done` objective is the exact-match rate of all ranks.
int run_generate(const TrainOptions& options);

}  // namespace shardscope::trainer
