// Per-rank memory estimate of a training run, torch-free (the GUI's memory panel, `shardtrain
// estimate`, `shardscope-cli estimate` and the `hello` event share it). docs/config.md, "Memory
// estimate", gives the formulas. The params, grads and optimizer terms count exactly what the
// engine allocates (same units, same padding); the others model the peak at the head's
// backward, when every unit's saved activations are still held.
#pragma once

#include <cstdint>
#include <string>

#include "trainer/spec/experiment.h"
#include "trainer/spec/result.h"

namespace shardscope::spec {

struct MemoryEstimate {
  int world_size = 1;
  int local_world_size = 1;
  int shard_size = 1;             // ranks a flat parameter is split across
  std::int64_t micro_batch = 1;   // samples per rank per forward
  std::int64_t params_total = 0;  // parameter count of the model
  std::int64_t params_trainable = 0;
  // Bytes per rank.
  std::int64_t params = 0;        // fp32 master shards, padded
  std::int64_t grads = 0;         // fp32 sharded gradients (trainable flats)
  std::int64_t optimizer = 0;     // AdamW exp_avg + exp_avg_sq (fp32, sharded)
  std::int64_t gathered = 0;      // full units in the param dtype at the peak
  std::int64_t grad_buffers = 0;  // unsharded gradients being reduced, accumulation buffers
  std::int64_t activations = 0;   // tensors saved for backward (all blocks)
  std::int64_t logits = 0;        // logits, their log-softmax and gradient (fp32)
  std::int64_t total = 0;
  std::int64_t device = 0;  // of the total, on the compute device (GPU)
  std::int64_t host = 0;    // of the total, in host memory: offload_params / offload_optimizer
};

/// The estimate for a world shape (validated with validate_for_world first).
Result<MemoryEstimate> estimate_memory(const Experiment& exp, int world_size, int local_world_size);

/// One line per term with its formula's inputs, for people.
std::string format_estimate(const MemoryEstimate& e);
/// JSON object with every field (bytes), for the CLI's --json and the GUI.
std::string estimate_json(const MemoryEstimate& e);

}  // namespace shardscope::spec
