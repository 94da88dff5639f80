// The experiment schema: one TOML file, every section, its defaults, units and validation.
// The GUI form, the CLI, the backend and the trainer all read experiments through this header,
// so a field means the same thing everywhere. docs/config.md documents every field; a test
// checks that it lists each one.
//
// Sections: [experiment] [model] [data] [train] [shard] [lora] [eval] act on the trainer,
// [launch] and [search] on the backend. Unknown keys are errors (a typo must not silently fall
// back to a default). Every error names the file, line, the dotted field and the fix:
//   "demo.toml:12:1: train.lr: must be > 0 (got -0.1); use e.g. 3e-4"
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spec/result.h"

namespace shardscope::spec {

/// How parameters are sharded across ranks (PyTorch FSDP's ShardingStrategy names).
enum class ShardStrategy { full_shard, shard_grad_op, no_shard, hybrid_shard };
/// Which modules become wrap units (one flat parameter each, per dtype/requires-grad group).
enum class WrapPolicy { block, size, none };
/// When the next unit's all-gather is issued during backward (FSDP's BackwardPrefetch).
enum class BackwardPrefetch { pre, post, none };
/// The five named mixed-precision modes; `custom` takes param/reduce/buffer dtypes from the
/// explicit fields.
enum class PrecisionMode {
  fp32,
  bf16,
  fp16_autocast,
  bf16_autocast,
  bf16_buffers_autocast,
  custom
};
enum class DType { fp32, bf16, fp16 };
/// Learning-rate schedule after the linear warmup.
enum class LrSchedule { constant, linear, cosine };
enum class LaunchKind { local, ssh, slurm };

/// [experiment]: naming only.
struct ExperimentSection {
  std::string name = "experiment";  // shown in run tables; runs are named NAME-<id>
  std::string description;

  bool operator==(const ExperimentSection&) const = default;
};

/// [model]
struct ModelSection {
  /// "tiny" (the decoder-only test transformer kept with the tests), "qwen2", "qwen2_vl".
  std::string arch = "tiny";
  /// Hugging Face checkpoint folder (config.json + *.safetensors); empty for "tiny", whose
  /// dimensions come from the tiny_* fields and whose weights come from train.seed.
  std::string path;
  std::int64_t tiny_vocab_size = 256;       // tokens
  std::int64_t tiny_hidden_size = 64;       // model width
  std::int64_t tiny_layers = 2;             // transformer blocks
  std::int64_t tiny_heads = 4;              // attention heads; divides tiny_hidden_size
  std::int64_t tiny_intermediate_size = 0;  // MLP width; 0 means 4 * tiny_hidden_size
  std::int64_t tiny_max_seq_len = 512;      // positions

  bool operator==(const ModelSection&) const = default;
};

/// [data]
struct DataSection {
  std::string train_path;  // JSONL file of samples; relative to the experiment file
  std::string eval_path;   // optional JSONL file for [eval]; empty: no eval data
  /// "tokens" ({"input_ids":[...], "labels":[...] optional}), "text" ({"text":...}),
  /// "chat" ({"messages":[...], "images":[...] optional}).
  std::string format = "tokens";
  std::int64_t seq_len = 128;  // tokens per sample after packing/padding/truncation
  bool shuffle = true;         // shuffle sample order each epoch with train.seed
  /// Control runs: every image's pixel values replaced by 0 (the normalised mean) in
  /// training and evaluation, so the model sees image tokens but nothing in them.
  bool blank_images = false;
  /// Chat data: several whole samples a row of seq_len (first-fit by length), each with its own
  /// positions and attending only to itself; train.micro_batch_size then counts rows.
  bool pack = true;

  bool operator==(const DataSection&) const = default;
};

/// [train]. The global batch is fixed: rank r of W takes samples r, r+W, ...; the loss is the
/// sum of token losses divided by the all-reduced count of loss tokens, so every world size and
/// accumulation computes the same quantity.
struct TrainSection {
  std::int64_t max_steps = 100;       // optimizer steps; bounds a run
  std::int64_t batch_size = 8;        // samples per optimizer step, across all ranks
  std::int64_t micro_batch_size = 0;  // samples (packed rows) per rank per forward; 0 = batch/dp
  double lr = 3e-4;                   // peak learning rate
  double lr_min = 0.0;                // floor of linear/cosine decay
  std::int64_t lr_warmup_steps = 0;   // linear warmup from 0 to lr
  LrSchedule lr_schedule = LrSchedule::cosine;
  double weight_decay = 0.0;  // AdamW decoupled decay; never on norms and biases
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double grad_clip = 1.0;       // max global grad norm; 0 disables clipping
  std::uint64_t seed = 1234;    // weights (tiny), data order, dropout
  bool deterministic = false;   // bitwise-reproducible kernels (slower)
  std::int64_t log_every = 1;   // steps between `step` events
  std::int64_t mem_every = 10;  // steps between `mem` events
  std::int64_t ckpt_every = 0;  // steps between sharded checkpoints; 0 = only at the end
  std::int64_t ckpt_keep = 2;   // newest checkpoints kept; 0 keeps all
  bool ckpt_at_end = true;      // write a sharded checkpoint when the run completes
  int threads = 0;              // intra-op threads per rank; 0 = OMP_NUM_THREADS or 1
  /// Tokens per chunk of the head's fused linear cross-entropy (spec::loss_chunk_rows); 0 chooses
  /// from the vocabulary, the hidden size and the device's free memory.
  std::int64_t loss_chunk_tokens = 0;
  /// Hugging Face parameter-name globs (`*`, `?`, `[...]`, as fnmatch) whose parameters are
  /// frozen: no gradient, no optimizer state; each must match at least one parameter.
  std::vector<std::string> freeze;

  bool operator==(const TrainSection&) const = default;
};

/// [shard]
struct ShardSection {
  ShardStrategy strategy = ShardStrategy::full_shard;
  WrapPolicy wrap_policy = WrapPolicy::block;
  std::int64_t wrap_min_params = 100'000'000;  // size policy: minimum parameters per unit
  BackwardPrefetch backward_prefetch = BackwardPrefetch::pre;
  bool forward_prefetch = false;  // issue unit i+1's all-gather before unit i's forward
  int max_inflight_gathers = 2;   // all-gathers issued and not yet consumed (>= 1)
  PrecisionMode precision = PrecisionMode::fp32;
  DType param_dtype = DType::fp32;        // compute dtype of gathered params (custom mode)
  DType reduce_dtype = DType::fp32;       // gradient reduce-scatter dtype (custom mode)
  DType buffer_dtype = DType::fp32;       // buffers (rotary tables, norms' eps-free state) (custom)
  bool offload_params = false;            // keep parameter shards (fp32 masters) on the CPU
  bool offload_optimizer = false;         // keep AdamW state on the CPU
  bool activation_checkpointing = false;  // recompute each unit's activations in backward
  bool reduce_every_microstep = false;    // reduce-scatter on every micro-step (else only last)
  /// "auto" (CUDA when this LibTorch has it and a device is visible, else CPU), "cuda", "cpu".
  std::string device = "auto";
  /// Collectives: "auto" (NCCL on CUDA, Gloo on CPU), "nccl", "gloo" (CUDA tensors staged
  /// through pinned host buffers, so several ranks can share one GPU).
  std::string backend = "auto";
  bool allow_tf32 = false;  // TF32 matmuls and convolutions on CUDA (fp32 precision mode)
  /// Seconds a rank waits for the rendezvous and for any collective before it fails with
  /// peer_lost: saving a large model's checkpoint can keep a peer away for minutes.
  int timeout_s = 600;

  bool operator==(const ShardSection&) const = default;
};

/// [lora]
struct LoraSection {
  bool enabled = false;
  std::int64_t r = 8;    // rank of the update
  double alpha = 16.0;   // scale = alpha / r
  double dropout = 0.0;  // on the LoRA input path
  std::vector<std::string> target_modules = {"q_proj", "k_proj", "v_proj", "o_proj"};
  // QLoRA: the frozen base Linears stored as 4-bit NF4 codes (bitsandbytes' layout).
  std::string quantize = "none";        // "none" or "nf4"; default "none"
  bool double_quant = true;             // nf4: absmax quantized again (8-bit, blocks of 256)
  std::int64_t quant_block_size = 64;   // nf4: weights per absmax block; default 64
  std::string quant_storage = "uint8";  // nf4: dtype the packed bytes are stored (and sharded) as

  bool operator==(const LoraSection&) const = default;
};

/// [eval]
struct EvalSection {
  std::int64_t every = 0;    // steps between evaluations; 0 disables
  std::int64_t batches = 4;  // eval batches per evaluation (each batch_size samples)
  std::vector<std::string> metrics = {"loss"};  // "loss", "accuracy", "exact_match"
  // Generation for "exact_match" (the answer generated from the prompt before the first label):
  std::int64_t max_new_tokens = 16;  // tokens generated per sample at most; default 16
  bool do_sample = false;            // false: greedy; true: sampled from train.seed
  double temperature = 1.0;          // sampling temperature (> 0); default 1.0
  double top_p = 1.0;                // nucleus sampling mass in (0, 1]; default 1.0 (off)
  /// JSONL chat samples (`messages`, optional `images`, `reference`, `id`) answered at every
  /// evaluation and at the end, one `sample` event each; relative to the experiment file.
  std::string probes;
  std::int64_t probe_max_new_tokens = 64;  // tokens generated per probe at most; default 64

  bool operator==(const EvalSection&) const = default;
};

/// [trace]: detailed per-unit records (all-gathers, compute, reduce-scatters) of some steps.
struct TraceSection {
  std::int64_t every_n_steps = 0;  // one step in N recorded in detail; 0 = none (--trace: all)
  std::int64_t max_mib = 64;       // per rank: records stop once the file reaches this size
  bool memory_on_oom = false;      // CUDA: record the caching allocator's history, and on an oom
                               // write its snapshot to memory/rank-N.pickle in the run directory

  bool operator==(const TraceSection&) const = default;
};

/// [launch] (backend): where and how the ranks start. torchrun's names.
struct LaunchSection {
  LaunchKind kind = LaunchKind::local;
  int nnodes = 1;                  // hosts (ssh) or Slurm nodes
  int nproc_per_node = 2;          // ranks per node (LOCAL_WORLD_SIZE)
  int threads_per_rank = 1;        // OMP_NUM_THREADS per rank
  std::vector<int> gpus;           // local: CUDA_VISIBLE_DEVICES pool; empty = none/all
  std::vector<std::string> hosts;  // ssh: host aliases from ~/.ssh/config, first = MASTER_ADDR
  std::string remote_dir;          // ssh/slurm: runs root on the remote side ("~/shardscope-runs")
  std::string trainer = "shardtrain";      // trainer executable on the target machine
  std::map<std::string, std::string> env;  // extra environment for every rank
  int grace_s = 5;                         // seconds from SIGTERM to SIGKILL when stopping
  /// GiB of memory of one GPU of the target hosts: the budget a trial's per-rank estimate is
  /// held against. 0 = detect it (nvidia-smi on the host, or the host's memory for CPU runs);
  /// required for Slurm, whose nodes are not known before the job starts.
  double device_memory_gib = 0;
  // Slurm
  std::string slurm_partition;
  std::string slurm_account;
  std::string slurm_time;  // "HH:MM:SS" or "D-HH:MM:SS"; empty = partition default
  int slurm_gpus_per_node = 0;
  std::vector<std::string> slurm_extra;  // extra "#SBATCH" directives, without the prefix
  std::string slurm_host;                // submit over SSH to this host; empty = locally

  bool operator==(const LaunchSection&) const = default;
};

/// [notify] (backend): commands the following process (a sweep, `shardscope-cli run`) runs when a
/// run ends, stalls, or a sweep ends. Each is run by /bin/sh -c as written, with the run's facts
/// in SHARDSCOPE_* environment variables (never pasted into the line); empty = none.
struct NotifySection {
  std::string on_end;           // a run ended: complete, failed, oom or stopped
  std::string on_stall;         // a run wrote no event for stall_after_min while its ranks live
  std::string on_sweep_end;     // a sweep ended (with its best trial)
  double stall_after_min = 30;  // minutes without an event that make a stall; 0 = never

  bool operator==(const NotifySection&) const = default;
};

/// [search]: kept as raw TOML text; parse_search_space (search_space.h) validates and types it.
struct SearchSection {
  bool present = false;
  std::string toml;  // the [search] table re-serialized

  bool operator==(const SearchSection&) const = default;
};

/// A whole experiment, after defaults, overrides and validation.
struct Experiment {
  std::string source;  // the file it came from ("" when built in memory)
  ExperimentSection experiment;
  ModelSection model;
  DataSection data;
  TrainSection train;
  ShardSection shard;
  LoraSection lora;
  EvalSection eval;
  TraceSection trace;
  LaunchSection launch;
  NotifySection notify;
  SearchSection search;

  /// Equal settings: every section; `source` (where it was read from) is not compared, so
  /// load(write(x)) == x holds.
  bool operator==(const Experiment& other) const;
};

/// The dtypes a precision mode resolves to.
struct PrecisionDTypes {
  DType param = DType::fp32;   // gathered/compute parameters
  DType reduce = DType::fp32;  // gradient reduction
  DType buffer = DType::fp32;  // buffers
  bool autocast = false;       // run forward under autocast to `autocast_dtype`
  DType autocast_dtype = DType::fp32;
  bool grad_scaler = false;  // fp16 needs a (sharded) gradient scaler

  bool operator==(const PrecisionDTypes&) const = default;
};
PrecisionDTypes resolve_precision(const ShardSection& shard);

/// How load_experiment treats the files an experiment names.
struct LoadOptions {
  /// Check that data.train_path, data.eval_path and model.path exist on this machine. The
  /// backend passes false when the ranks run elsewhere (ssh, slurm over ssh): those paths are
  /// checked by the trainer on the target machine.
  bool check_paths = true;
};

/// Reads and validates an experiment file. `overrides` are "dotted.key=value" strings (the CLI's
/// --set, a search trial's sampled values) applied before validation; a value is parsed as TOML
/// (so `train.lr=1e-3`, `shard.strategy="no_shard"` or `shard.strategy=no_shard` both work).
Result<Experiment> load_experiment(const std::string& path,
                                   const std::vector<std::string>& overrides = {});
/// Same, from TOML text; `source_name` is used in messages.
Result<Experiment> parse_experiment(std::string_view toml_text, const std::string& source_name,
                                    const std::vector<std::string>& overrides = {});
/// Same as above with explicit options.
Result<Experiment> load_experiment(const std::string& path,
                                   const std::vector<std::string>& overrides,
                                   const LoadOptions& options);
/// Same as above with explicit options.
Result<Experiment> parse_experiment(std::string_view toml_text, const std::string& source_name,
                                    const std::vector<std::string>& overrides,
                                    const LoadOptions& options);
/// Validation for a world size: everything load_experiment checks plus what depends on the
/// number of ranks (batch divisibility, HYBRID_SHARD node shape).
/// It does not touch the file system (load_experiment checked the paths). Checked here:
/// world_size >= 1, 1 <= local_world_size <= world_size; train.batch_size divisible by
/// micro_batch_size x world_size (every rank is a data-parallel rank); HYBRID_SHARD needs
/// world_size a multiple of local_world_size, more than one rank per node and more than one node.
Result<void> validate_for_world(const Experiment& exp, int world_size, int local_world_size);
/// validate_for_world with the shape [launch] asks for: world size launch.nnodes x
/// launch.nproc_per_node, local world size launch.nproc_per_node (what the backend starts).
Result<void> validate_for_launch(const Experiment& exp);
/// launch.nnodes x launch.nproc_per_node.
int launch_world_size(const LaunchSection& launch);
/// The names a launch.env value refers to with "${NAME}" (in order, repeats kept); an error for
/// a "${" without a closing "}" or a NAME that is no variable name. "$" alone is literal.
Result<std::vector<std::string>> env_references(const std::string& value);
/// True for names that usually hold credentials (HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY,
/// *PASSWORD*, any name ending in _KEY): their launch.env values must be "${NAME}" references,
/// never literals.
bool env_name_looks_secret(const std::string& name);
/// True for a launch.env value holding a URL whose userinfo (user[:password]@) is literal text
/// ("https://user:pw@host", "postgresql://alice:pw@db/x"): the password or token would be stored
/// like a literal secret. Userinfo made only of "${NAME}" references is not literal.
bool env_value_looks_secret(const std::string& value);
/// launch.env with every "${NAME}" replaced by `lookup(NAME)`, the environment of the process
/// that starts the run, at launch time: secrets never reach the experiment file, the run log or
/// a file on the remote host other than the 0600 environment file. An unset NAME is an error
/// naming the field.
Result<std::map<std::string, std::string>> resolve_launch_env(
    const LaunchSection& launch,
    const std::function<std::optional<std::string>(const std::string&)>& lookup);
/// Samples per rank per forward at this world size: train.micro_batch_size, or when it is 0
/// batch_size / world_size. Meaningful after validate_for_world succeeded.
std::int64_t micro_batch_size_for(const TrainSection& train, int world_size);
/// Micro-steps per optimizer step: batch_size / (micro_batch_size_for(...) x world_size).
std::int64_t grad_accumulation_steps(const TrainSection& train, int world_size);
/// The resolved experiment as TOML (every field, defaults included): the run directory's
/// trial.toml. load(write(x)) == x.
std::string write_experiment_toml(const Experiment& exp);
/// sha256 of write_experiment_toml(exp), hex: the `hello` event's config_hash.
std::string config_hash(const Experiment& exp);

std::string_view to_string(ShardStrategy v);
std::string_view to_string(WrapPolicy v);
std::string_view to_string(BackwardPrefetch v);
std::string_view to_string(PrecisionMode v);
std::string_view to_string(DType v);
std::string_view to_string(LrSchedule v);
std::string_view to_string(LaunchKind v);

}  // namespace shardscope::spec
