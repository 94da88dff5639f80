// The experiment schema as data: field tables, enum spellings, and small helpers shared by the
// reader, the validator and the writer.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "spec/experiment_schema.h"

namespace shardscope::spec::detail {
namespace {

using ES = ExperimentSection;
const Field<ES> kExperimentFields[] = {
    {"name", &ES::name, "shown in run tables; runs are named NAME-<id>"},
    {"description", &ES::description, "free text"},
};

using MS = ModelSection;
const Field<MS> kModelFields[] = {
    {"arch", &MS::arch, "\"tiny\", \"qwen2\" or \"qwen2_vl\""},
    {"path", &MS::path, "Hugging Face checkpoint folder; relative to the experiment file"},
    {"tiny_vocab_size", &MS::tiny_vocab_size, "tiny: vocabulary (tokens)"},
    {"tiny_hidden_size", &MS::tiny_hidden_size, "tiny: model width"},
    {"tiny_layers", &MS::tiny_layers, "tiny: transformer blocks"},
    {"tiny_heads", &MS::tiny_heads, "tiny: attention heads; divides tiny_hidden_size"},
    {"tiny_intermediate_size", &MS::tiny_intermediate_size,
     "tiny: MLP width; 0 = 4 x tiny_hidden_size"},
    {"tiny_max_seq_len", &MS::tiny_max_seq_len, "tiny: positions (tokens)"},
};

using DS = DataSection;
const Field<DS> kDataFields[] = {
    {"train_path", &DS::train_path, "JSONL training samples; relative to the experiment file"},
    {"eval_path", &DS::eval_path, "JSONL eval samples; empty = none"},
    {"format", &DS::format, "\"tokens\", \"text\" or \"chat\""},
    {"seq_len", &DS::seq_len, "tokens per sample"},
    {"shuffle", &DS::shuffle, "shuffle each epoch with train.seed"},
    {"blank_images", &DS::blank_images, "pixel values replaced by 0 (control runs)"},
    {"pack", &DS::pack, "chat: whole samples share rows of seq_len, each attending to itself"},
};

using TS = TrainSection;
const Field<TS> kTrainFields[] = {
    {"max_steps", &TS::max_steps, "optimizer steps"},
    {"batch_size", &TS::batch_size, "samples per optimizer step, all ranks"},
    {"micro_batch_size", &TS::micro_batch_size,
     "samples (packed rows) per rank per forward; 0 = batch/ranks"},
    {"lr", &TS::lr, "peak learning rate"},
    {"lr_min", &TS::lr_min, "floor of linear/cosine decay"},
    {"lr_warmup_steps", &TS::lr_warmup_steps, "linear warmup steps from 0 to lr"},
    {"lr_schedule", &TS::lr_schedule, "\"constant\", \"linear\" or \"cosine\""},
    {"weight_decay", &TS::weight_decay, "AdamW decoupled decay; not on norms and biases"},
    {"adam_beta1", &TS::adam_beta1, "AdamW beta1, in [0, 1)"},
    {"adam_beta2", &TS::adam_beta2, "AdamW beta2, in [0, 1)"},
    {"adam_eps", &TS::adam_eps, "AdamW epsilon, > 0"},
    {"grad_clip", &TS::grad_clip, "max global grad norm; 0 = no clipping"},
    {"seed", &TS::seed, "weights (tiny), data order, dropout"},
    {"deterministic", &TS::deterministic, "bitwise-reproducible kernels (slower)"},
    {"log_every", &TS::log_every, "steps between step events"},
    {"mem_every", &TS::mem_every, "steps between mem events"},
    {"ckpt_every", &TS::ckpt_every, "steps between checkpoints; 0 = only at the end"},
    {"ckpt_keep", &TS::ckpt_keep, "newest checkpoints kept; 0 = all"},
    {"ckpt_at_end", &TS::ckpt_at_end, "checkpoint when the run completes"},
    {"threads", &TS::threads, "intra-op threads per rank; 0 = OMP_NUM_THREADS or 1"},
    {"loss_chunk_tokens", &TS::loss_chunk_tokens,
     "tokens per chunk of the head's fused loss; 0 = chosen"},
    {"freeze", &TS::freeze, "HF parameter-name globs to freeze (no grads, no optimizer state)"},
};

using SS = ShardSection;
const Field<SS> kShardFields[] = {
    {"strategy", &SS::strategy, "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD"},
    {"wrap_policy", &SS::wrap_policy, "\"block\", \"size\" or \"none\""},
    {"wrap_min_params", &SS::wrap_min_params, "size policy: parameters per unit (minimum)"},
    {"backward_prefetch", &SS::backward_prefetch, "\"pre\", \"post\" or \"none\""},
    {"forward_prefetch", &SS::forward_prefetch, "gather unit i+1 before unit i's forward"},
    {"max_inflight_gathers", &SS::max_inflight_gathers, "all-gathers in flight, >= 1"},
    {"precision", &SS::precision,
     "fp32, bf16, fp16_autocast, bf16_autocast, bf16_buffers_autocast or custom"},
    {"param_dtype", &SS::param_dtype, "custom: compute dtype of gathered params"},
    {"reduce_dtype", &SS::reduce_dtype, "custom: gradient reduce-scatter dtype"},
    {"buffer_dtype", &SS::buffer_dtype, "custom: buffer dtype"},
    {"offload_params", &SS::offload_params, "parameter shards on the CPU"},
    {"offload_optimizer", &SS::offload_optimizer, "AdamW state on the CPU"},
    {"activation_checkpointing", &SS::activation_checkpointing, "recompute units in backward"},
    {"reduce_every_microstep", &SS::reduce_every_microstep,
     "reduce-scatter every micro-step (else only the last)"},
    {"device", &SS::device, "\"auto\", \"cuda\" or \"cpu\""},
    {"backend", &SS::backend, "collectives: \"auto\", \"nccl\" or \"gloo\""},
    {"allow_tf32", &SS::allow_tf32, "TF32 matmuls on CUDA"},
    {"timeout_s", &SS::timeout_s, "rendezvous and collective timeout, seconds"},
};

using LS = LoraSection;
const Field<LS> kLoraFields[] = {
    {"enabled", &LS::enabled, "train LoRA adapters; base weights frozen"},
    {"r", &LS::r, "rank of the update"},
    {"alpha", &LS::alpha, "scale = alpha / r"},
    {"dropout", &LS::dropout, "dropout on the LoRA input path, in [0, 1)"},
    {"target_modules", &LS::target_modules, "module names that get adapters"},
    {"quantize", &LS::quantize, "frozen base Linears: \"none\" or \"nf4\" (QLoRA)"},
    {"double_quant", &LS::double_quant, "nf4: quantize the absmax values too (8-bit)"},
    {"quant_block_size", &LS::quant_block_size, "nf4: weights per absmax block, a power of 2"},
    {"quant_storage", &LS::quant_storage,
     "nf4: dtype of the packed bytes: uint8, bfloat16, float16 or float32"},
};

using VS = EvalSection;
const Field<VS> kEvalFields[] = {
    {"every", &VS::every, "steps between evaluations; 0 = never"},
    {"batches", &VS::batches, "batches per evaluation (batch_size samples each)"},
    {"metrics", &VS::metrics, "\"loss\", \"accuracy\", \"exact_match\""},
    {"max_new_tokens", &VS::max_new_tokens, "exact_match: tokens generated per sample at most"},
    {"do_sample", &VS::do_sample, "exact_match: sample (from train.seed) instead of greedy"},
    {"temperature", &VS::temperature, "exact_match sampling: logits divided by it, > 0"},
    {"top_p", &VS::top_p, "exact_match sampling: nucleus mass in (0, 1]; 1 = off"},
    {"probes", &VS::probes, "JSONL chat probes answered at each evaluation; empty = none"},
    {"probe_max_new_tokens", &VS::probe_max_new_tokens, "probes: tokens generated at most"},
};

using TR = TraceSection;
const Field<TR> kTraceFields[] = {
    {"every_n_steps", &TR::every_n_steps, "one step in N traced per unit; 0 = none"},
    {"max_mib", &TR::max_mib, "per rank: trace records stop at this file size (MiB)"},
    {"memory_on_oom", &TR::memory_on_oom, "CUDA: allocator history; on oom a snapshot file"},
};

using LN = LaunchSection;
const Field<LN> kLaunchFields[] = {
    {"kind", &LN::kind, "\"local\", \"ssh\" or \"slurm\""},
    {"nnodes", &LN::nnodes, "hosts (ssh) or Slurm nodes"},
    {"nproc_per_node", &LN::nproc_per_node, "ranks per node (LOCAL_WORLD_SIZE)"},
    {"threads_per_rank", &LN::threads_per_rank, "OMP_NUM_THREADS per rank"},
    {"gpus", &LN::gpus, "local: GPU ids (CUDA_VISIBLE_DEVICES pool); [] = none/all"},
    {"hosts", &LN::hosts, "ssh: host aliases, first = MASTER_ADDR"},
    {"remote_dir", &LN::remote_dir, "ssh/slurm: runs root; empty = ~/shardscope-runs"},
    {"trainer", &LN::trainer, "trainer executable on the target"},
    {"env", &LN::env, "extra environment for every rank"},
    {"grace_s", &LN::grace_s, "seconds from SIGTERM to SIGKILL"},
    {"device_memory_gib", &LN::device_memory_gib,
     "GiB of one GPU: the trials' memory budget; 0 = detect (required for slurm)"},
    {"slurm_partition", &LN::slurm_partition, "slurm: partition; empty = default"},
    {"slurm_account", &LN::slurm_account, "slurm: account; empty = default"},
    {"slurm_time", &LN::slurm_time, "slurm: HH:MM:SS or D-HH:MM:SS; empty = default"},
    {"slurm_gpus_per_node", &LN::slurm_gpus_per_node, "slurm: GPUs per node"},
    {"slurm_extra", &LN::slurm_extra, "slurm: extra #SBATCH options, without the prefix"},
    {"slurm_host", &LN::slurm_host, "slurm: submit over SSH to this host; empty = here"},
};

using NT = NotifySection;
const Field<NT> kNotifyFields[] = {
    {"on_end", &NT::on_end, "command run when a run ends; empty = none"},
    {"on_stall", &NT::on_stall, "command run when a run stalls; empty = none"},
    {"on_sweep_end", &NT::on_sweep_end, "command run when a sweep ends; empty = none"},
    {"stall_after_min", &NT::stall_after_min, "minutes without an event = a stall; 0 = never"},
};

constexpr std::array<std::string_view, 11> kSections = {"experiment", "model",  "data",  "train",
                                                        "shard",      "lora",   "eval",  "trace",
                                                        "launch",     "notify", "search"};

constexpr EnumName<ShardStrategy> kStrategies[] = {
    {ShardStrategy::full_shard, "FULL_SHARD"},
    {ShardStrategy::shard_grad_op, "SHARD_GRAD_OP"},
    {ShardStrategy::no_shard, "NO_SHARD"},
    {ShardStrategy::hybrid_shard, "HYBRID_SHARD"},
};
constexpr EnumName<WrapPolicy> kWrapPolicies[] = {
    {WrapPolicy::block, "block"}, {WrapPolicy::size, "size"}, {WrapPolicy::none, "none"}};
constexpr EnumName<BackwardPrefetch> kPrefetches[] = {{BackwardPrefetch::pre, "pre"},
                                                      {BackwardPrefetch::post, "post"},
                                                      {BackwardPrefetch::none, "none"}};
constexpr EnumName<PrecisionMode> kPrecisions[] = {
    {PrecisionMode::fp32, "fp32"},
    {PrecisionMode::bf16, "bf16"},
    {PrecisionMode::fp16_autocast, "fp16_autocast"},
    {PrecisionMode::bf16_autocast, "bf16_autocast"},
    {PrecisionMode::bf16_buffers_autocast, "bf16_buffers_autocast"},
    {PrecisionMode::custom, "custom"},
};
// The first spelling of each value is canonical; the others are PyTorch's dtype names.
constexpr EnumName<DType> kDTypes[] = {
    {DType::fp32, "fp32"},    {DType::bf16, "bf16"},     {DType::fp16, "fp16"},
    {DType::fp32, "float32"}, {DType::bf16, "bfloat16"}, {DType::fp16, "float16"},
};
constexpr EnumName<LrSchedule> kSchedules[] = {{LrSchedule::constant, "constant"},
                                               {LrSchedule::linear, "linear"},
                                               {LrSchedule::cosine, "cosine"}};
constexpr EnumName<LaunchKind> kKinds[] = {
    {LaunchKind::local, "local"}, {LaunchKind::ssh, "ssh"}, {LaunchKind::slurm, "slurm"}};

template <class S>
bool has_key(std::span<const Field<S>> fields, std::string_view key) {
  return std::any_of(fields.begin(), fields.end(), [&](const auto& f) { return f.key == key; });
}

}  // namespace

std::span<const Field<ExperimentSection>> section_fields(const ExperimentSection&) {
  return kExperimentFields;
}
std::span<const Field<ModelSection>> section_fields(const ModelSection&) { return kModelFields; }
std::span<const Field<DataSection>> section_fields(const DataSection&) { return kDataFields; }
std::span<const Field<TrainSection>> section_fields(const TrainSection&) { return kTrainFields; }
std::span<const Field<ShardSection>> section_fields(const ShardSection&) { return kShardFields; }
std::span<const Field<LoraSection>> section_fields(const LoraSection&) { return kLoraFields; }
std::span<const Field<EvalSection>> section_fields(const EvalSection&) { return kEvalFields; }
std::span<const Field<TraceSection>> section_fields(const TraceSection&) { return kTraceFields; }
std::span<const Field<LaunchSection>> section_fields(const LaunchSection&) { return kLaunchFields; }
std::span<const Field<NotifySection>> section_fields(const NotifySection&) { return kNotifyFields; }

std::span<const std::string_view> section_names() { return kSections; }

bool is_field(std::string_view section, std::string_view key) {
  bool found = false;
  const Experiment exp;
  for_each_section(exp, [&](std::string_view name, const auto& s) {
    if (name == section) found = has_key(section_fields(s), key);
  });
  return found;
}

std::vector<std::string> all_field_paths() {
  std::vector<std::string> out;
  const Experiment exp;
  for_each_section(exp, [&](std::string_view name, const auto& s) {
    for (const auto& f : section_fields(s))
      out.push_back(std::string(name) + "." + std::string(f.key));
  });
  return out;
}

std::span<const EnumName<ShardStrategy>> enum_names(ShardStrategy) { return kStrategies; }
std::span<const EnumName<WrapPolicy>> enum_names(WrapPolicy) { return kWrapPolicies; }
std::span<const EnumName<BackwardPrefetch>> enum_names(BackwardPrefetch) { return kPrefetches; }
std::span<const EnumName<PrecisionMode>> enum_names(PrecisionMode) { return kPrecisions; }
std::span<const EnumName<DType>> enum_names(DType) { return kDTypes; }
std::span<const EnumName<LrSchedule>> enum_names(LrSchedule) { return kSchedules; }
std::span<const EnumName<LaunchKind>> enum_names(LaunchKind) { return kKinds; }

std::string Locator::at(std::string_view dotted) const {
  std::string_view key = dotted;
  while (!key.empty()) {
    if (auto it = m_where.find(key); it != m_where.end()) return it->second;
    const auto dot = key.rfind('.');
    if (dot == std::string_view::npos) break;
    key = key.substr(0, dot);
  }
  const std::string file = m_source.empty() ? std::string("experiment") : m_source;
  return m_parsed ? file + ":1:1" : file;
}

namespace {

// True when `text` names `field` as a whole word ("train.lr" in "above train.lr (3e-4)", not in
// "train.lr_min").
bool names_field(std::string_view text, std::string_view field) {
  for (auto pos = text.find(field); pos != std::string_view::npos;
       pos = text.find(field, pos + 1)) {
    const std::size_t end = pos + field.size();
    const char next = end < text.size() ? text[end] : ' ';
    const bool word = (next >= 'a' && next <= 'z') || (next >= '0' && next <= '9') || next == '_';
    if (!word) return true;
  }
  return false;
}

}  // namespace

void Diagnostics::field(const Locator& loc, std::string_view dotted, std::string_view message) {
  // A rule about an unreadable field, or one that compares with it, would judge its default.
  if (m_unread.count(dotted)) return;
  for (const auto& unread : m_unread) {
    if (names_field(message, unread)) return;
  }
  m_reported.emplace(dotted);
  add(loc.at(dotted) + ": " + std::string(dotted) + ": " + std::string(message));
}

std::string Diagnostics::text() const {
  std::string out;
  for (const auto& line : m_lines) {
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::array<char, 64> buf{};
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  std::string out(buf.data(), res.ptr);
  // "3e-04" -> "3e-4": the exponent's leading zeros are valid TOML but noise.
  if (const auto e = out.find('e'); e != std::string::npos) {
    std::size_t digits = e + 1 + ((out[e + 1] == '-' || out[e + 1] == '+') ? 1 : 0);
    while (digits + 1 < out.size() && out[digits] == '0') out.erase(digits, 1);
  }
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  // Close means at most a third of the word's letters changed (and at least 2 allowed), so
  // "lrr" finds "lr" and "stratgy" finds "strategy" but "foo" finds nothing.
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  std::string best;
  std::size_t best_d = limit + 1;
  const std::string w = lower(word);
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(w, lower(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  if (!best.empty() || w.size() < 3) return best;
  // A clipped name ("full" for FULL_SHARD, "accum" for ...): the first candidate containing it.
  for (const auto& c : candidates) {
    if (lower(c).find(w) != std::string::npos) return c;
  }
  return best;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace shardscope::spec::detail

namespace shardscope::spec {

std::string_view to_string(ShardStrategy v) { return name_of(detail::kStrategies, v); }
std::string_view to_string(WrapPolicy v) { return name_of(detail::kWrapPolicies, v); }
std::string_view to_string(BackwardPrefetch v) { return name_of(detail::kPrefetches, v); }
std::string_view to_string(PrecisionMode v) { return name_of(detail::kPrecisions, v); }
std::string_view to_string(DType v) { return name_of(detail::kDTypes, v); }
std::string_view to_string(LrSchedule v) { return name_of(detail::kSchedules, v); }
std::string_view to_string(LaunchKind v) { return name_of(detail::kKinds, v); }

bool Experiment::operator==(const Experiment& other) const {
  return experiment == other.experiment && model == other.model && data == other.data &&
         train == other.train && shard == other.shard && lora == other.lora && eval == other.eval &&
         trace == other.trace && launch == other.launch && notify == other.notify &&
         search == other.search;
}

}  // namespace shardscope::spec
