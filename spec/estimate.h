// Per-rank memory estimate of a training run, torch-free (the GUI's memory panel, `shardtrain
// estimate`, `shardscope-cli estimate` and the `hello` event share it). docs/config.md, "Memory
// estimate", gives the formulas. The params, grads and optimizer terms count exactly what the
// engine allocates (same units, same padding); the others model the peak at the head's
// backward, when every unit's saved activations are still held.
#pragma once

#include <cstdint>
#include <string>

#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::spec {

/// What chat training data holds that the estimate's terms depend on: read from the samples the
/// trainer loads (the trainer's own, or the data inspector's, data/inspect.h). Without it the
/// estimate bounds what data.seq_len admits: every row seq_len tokens, and one image at the
/// image processor's largest size a sample. The trainer pads each micro-batch to its longest row,
/// so the longest sample (packed: a full row) is the peak's.
struct DataBound {
  std::int64_t samples = 0;              // loaded samples
  std::int64_t longest = 0;              // tokens of the longest sample (images expanded)
  std::int64_t most_visual_tokens = 0;   // <|image_pad|> tokens of the sample with the most
  std::int64_t shortest_with_image = 0;  // tokens of the shortest sample with an image; 0: none
  std::string source;                    // where it was read, for people (not in events)

  /// Counts one loaded sample of `tokens` tokens, `visual_tokens` of them image tokens.
  void add(std::int64_t tokens, std::int64_t visual_tokens);

  bool operator==(const DataBound&) const = default;
};

struct MemoryEstimate {
  int world_size = 1;
  int local_world_size = 1;
  int shard_size = 1;             // ranks a flat parameter is split across
  std::int64_t micro_batch = 1;   // samples (packed rows) per rank per forward
  std::int64_t params_total = 0;  // parameter count of the model
  std::int64_t params_trainable = 0;
  // Bytes per rank.
  std::int64_t params = 0;          // fp32 master shards, padded (plus the NF4 base's shards)
  std::int64_t grads = 0;           // fp32 sharded gradients (trainable flats)
  std::int64_t optimizer = 0;       // AdamW exp_avg + exp_avg_sq (fp32, sharded)
  std::int64_t gathered = 0;        // full units in the param dtype at the peak (NF4 dequantized)
  std::int64_t grad_buffers = 0;    // unsharded gradients being reduced, accumulation buffers
  std::int64_t activations = 0;     // tensors saved for backward (text blocks, embedding, norm)
  std::int64_t vision = 0;          // the vision tower's and merger's saved tensors, pixel values
  std::int64_t image_tokens = 0;    // merged image tokens per sample the vision term assumes
  std::int64_t images_per_row = 1;  // image samples a row holds (data.pack: as many as fit)
  std::int64_t row_tokens = 0;      // tokens of a row the text terms assume
  // What the rows and images are bounded by: "data.seq_len", or the data read (DataBound's
  // source: "train.jsonl: 120 samples, the longest 69 tokens").
  std::string rows_from = "data.seq_len";
  std::int64_t logits = 0;           // the head's loss: one chunk of logits, hidden-state rows and
                                     // their gradient, lm_head's fp32 weight gradient
  std::int64_t loss_chunk_rows = 0;  // tokens per chunk of the fused linear cross-entropy
  std::int64_t probe = 0;  // rank 0's MFU GEMM before training (not on CUDA): beside the state only
  std::int64_t total = 0;
  // The moment that makes the peak: "head_forward" (the head's loss, only the root gathered),
  // "backward" (a block's backward: the units gathered for it, the gradients in flight),
  // "backward_end" (every sharded gradient, the root's being reduced), or "probe" (rank 0's MFU
  // GEMM before training, beside the state alone).
  std::string peak_moment = "backward";
  std::int64_t device = 0;  // of the total, on the compute device (GPU)
  std::int64_t host = 0;    // of the total, in host memory: offload_params / offload_optimizer
  // QLoRA (lora.quantize = "nf4"): the base weights held as NF4 records instead of fp32 masters.
  std::int64_t nf4_params = 0;  // weights stored as NF4 (0 without quantize = "nf4")
  std::int64_t nf4_packed = 0;  // their records' bytes over the whole model, unsharded
  std::int64_t nf4 = 0;         // of params: this rank's shards of the units' "<unit>/nf4" flats
  // Calibration (spec/calibration.h): total, device and host corrected by what measured runs of
  // this kind peaked at. Without it (calibration_runs = 0) total_raw equals total.
  std::int64_t total_raw = 0;      // the formulas' total, before any correction
  double calibration_ratio = 1.0;  // measured peak / estimate of the runs behind it
  int calibration_runs = 0;        // completed runs behind the ratio; 0: uncalibrated
};

/// Rows (label tokens) per chunk of the head's fused linear cross-entropy. `wanted` > 0
/// (train.loss_chunk_tokens) is taken as it is; 0 chooses: about as many logits per chunk as the
/// hidden states have elements (rows x hidden / vocab) but at least 2^24 (each chunk reads and
/// writes lm_head's whole weight gradient once, which a chunk of few rows does not amortise), to a
/// power of two, and, when `free_bytes` > 0 (a CUDA device's free memory), one chunk's logits,
/// log-softmax and gradient (10 bytes per logit) within a sixteenth of it. Always within [1, rows]
/// (1 when rows is 0).
std::int64_t loss_chunk_rows(std::int64_t rows, std::int64_t vocab, std::int64_t hidden,
                             std::int64_t wanted, std::int64_t free_bytes = 0);

/// The estimate for a world shape (validated with validate_for_world first). `data`, for chat
/// data (ignored for other formats), bounds the rows and images by what the data holds instead
/// of what data.seq_len admits.
Result<MemoryEstimate> estimate_memory(const Experiment& exp, int world_size, int local_world_size,
                                       const DataBound* data = nullptr);

/// What the memory of the target hosts is known to be (each caller detects what it can reach).
struct DetectedMemory {
  std::int64_t gpu_bytes = 0;   // memory of the smallest GPU a rank would use; 0 = no GPU found
  std::string gpu_source;       // "nvidia-smi on gpu1 (NVIDIA H100 80GB HBM3)"
  std::int64_t host_bytes = 0;  // physical memory of the host the ranks run on; 0 = unknown
  std::string host_source;      // "this machine", "gpu1"
};

/// The memory one rank may use, and where that number came from.
struct DeviceBudget {
  std::int64_t bytes = 0;  // per rank; 0 = unknown (nothing to hold the estimate against)
  std::string source;      // for people: "launch.device_memory_gib = 80", "nvidia-smi on ..."
  bool gpu = true;         // compared with the estimate's device bytes; false: with its total
};

/// The budget a trial of `exp` is held against: launch.device_memory_gib when set (always
/// wins); else a detected GPU's memory (unless shard.device = "cpu"); else the host's memory
/// divided by its ranks (CPU runs). Slurm without launch.device_memory_gib, and
/// shard.device = "cuda" with no GPU detected, are config errors naming the field.
Result<DeviceBudget> device_budget(const Experiment& exp, const DetectedMemory& detected);
/// The part of `e` a budget holds: device bytes on a GPU, the total on CPU.
std::int64_t budgeted_bytes(const MemoryEstimate& e, const DeviceBudget& budget);
/// One line for people: "budget 80.00 GiB per rank (launch.device_memory_gib = 80): fits".
std::string format_budget(const MemoryEstimate& e, const DeviceBudget& budget);

/// One line per term with its formula's inputs, for people.
std::string format_estimate(const MemoryEstimate& e);
/// JSON object with every field (bytes), for the CLI's --json and the GUI.
std::string estimate_json(const MemoryEstimate& e);

}  // namespace shardscope::spec
