// Sharded checkpoints: ckpt/step-NNNNNN/ holds rank-R.safetensors (that rank's master shards and
// AdamW state) and meta.json (flat layouts, step, data offset, world shape). Written under
// ckpt/.step-NNNNNN.tmp and renamed when every rank's file is complete, so a directory named
// step-* is always whole. Loading reshards: a rank reads the slices of the old shards that cover
// its new range, so a run saved on W ranks resumes on any world size and strategy.
#pragma once

#include <cstdint>
#include <string>

#include "trainer/dist/process_group.h"
#include "trainer/optim/adamw.h"
#include "trainer/shard/engine.h"

namespace shardscope::ckpt {

struct TrainPosition {
  std::int64_t step = 0;         // optimizer steps done
  std::int64_t data_offset = 0;  // global sample offset of the next step
  double grad_scale = 1.0;       // fp16 scaler state: the loss scale
  std::int64_t good_steps = 0;   // and its growth tracker (steps since the scale changed)
};

/// Collective: every rank writes its file; rank 0 completes the directory. Returns the
/// directory's path relative to the run directory ("ckpt/step-000010"). Keeps the newest `keep`
/// checkpoints (0 keeps all), pruning only once the new one is complete and synced. When any
/// rank's part fails every rank raises (disk_full on a full disk, naming the file and the bytes;
/// the others name the failing rank), the .tmp folder is removed and older checkpoints stay.
std::string save_checkpoint(const std::string& run_dir, shard::ShardEngine& engine,
                            optim::ShardedAdamW& optimizer, const TrainPosition& position,
                            const std::string& config_hash, dist::ProcessGroup& world,
                            std::int64_t keep);

/// The newest complete checkpoint under run_dir/ckpt, or "" when there is none.
std::string find_latest_checkpoint(const std::string& run_dir);

/// Loads (and reshards) a checkpoint directory into the engine's shards and the optimizer.
TrainPosition load_checkpoint(const std::string& dir, shard::ShardEngine& engine,
                              optim::ShardedAdamW& optimizer);

}  // namespace shardscope::ckpt
