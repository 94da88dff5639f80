// Range and cross-field rules of an experiment. Every rule names the field, what is wrong and
// the fix; a demanding FSDP user never gets a silent fallback (a field that the chosen mode
// would ignore is an error too, unless it keeps its default).

#include <algorithm>
#include <cmath>
#include <set>

#include <toml++/toml.h>

#include "spec/experiment_schema.h"
#include "spec/field_catalog.h"
#include "spec/model_shape.h"
#include "spec/search_space.h"

namespace shardscope::spec::detail {
namespace {

std::string num(double v) { return format_double(v); }
std::string num(std::int64_t v) { return std::to_string(v); }
// Built by appending: GCC 12's -Wrestrict misfires on "\"" + std::string(s) at -O3.
std::string quoted(std::string_view s) {
  std::string out(1, '"');
  out.append(s);
  out.push_back('"');
  return out;
}

// Adds "WHERE: FIELD: MESSAGE" when a rule fails.
struct Check {
  const Locator& loc;
  Diagnostics& diag;
  void operator()(bool ok, std::string_view field, const std::string& message) const {
    if (!ok) diag.field(loc, field, message);
  }
  // Integer lower bound: "must be >= 1 (got 0); use e.g. 8".
  void at_least(std::int64_t v, std::int64_t min, std::string_view field,
                std::string_view example) const {
    (*this)(v >= min, field,
            "must be >= " + num(min) + " (got " + num(v) + "); use e.g. " + std::string(example));
  }
  void finite(double v, std::string_view field) const {
    (*this)(std::isfinite(v), field, "must be a finite number (got " + num(v) + ")");
  }
};

void check_experiment(const ExperimentSection& e, const Check& check) {
  check(!e.name.empty(), "experiment.name", "must not be empty; use e.g. name = \"qwen2vl-sft\"");
  const bool clean = std::none_of(e.name.begin(), e.name.end(), [](char c) {
    return c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  check(clean, "experiment.name",
        "must not contain '/' or control characters (it names run directories); use letters, "
        "digits, '-', '_' and '.'");
  check(e.name.size() <= 100, "experiment.name",
        "is " + std::to_string(e.name.size()) + " characters long; keep it to 100");
}

void check_tiny(const ModelSection& m, const Check& check) {
  check.at_least(m.tiny_vocab_size, 2, "model.tiny_vocab_size", "256");
  check.at_least(m.tiny_hidden_size, 1, "model.tiny_hidden_size", "64");
  check.at_least(m.tiny_layers, 1, "model.tiny_layers", "2");
  check.at_least(m.tiny_heads, 1, "model.tiny_heads", "4");
  check.at_least(m.tiny_intermediate_size, 0, "model.tiny_intermediate_size",
                 "256 (0 = 4 x width)");
  check.at_least(m.tiny_max_seq_len, 1, "model.tiny_max_seq_len", "512");
  if (m.tiny_heads < 1 || m.tiny_hidden_size < 1) return;
  check(m.tiny_hidden_size % m.tiny_heads == 0, "model.tiny_heads",
        "must divide model.tiny_hidden_size (" + num(m.tiny_hidden_size) +
            " is not a multiple of " + num(m.tiny_heads) +
            "); use e.g. tiny_heads = 4 with tiny_hidden_size = 64");
  // Rotary embeddings rotate pairs of channels, so each head needs an even width.
  check(m.tiny_hidden_size % m.tiny_heads != 0 || (m.tiny_hidden_size / m.tiny_heads) % 2 == 0,
        "model.tiny_heads",
        "with model.tiny_hidden_size gives an odd head width (" +
            num(m.tiny_hidden_size / m.tiny_heads) +
            "); rotary embeddings need an even one: change tiny_heads or tiny_hidden_size");
}

void check_model(const ModelSection& m, const Check& check) {
  static const std::vector<std::string> kArchs = {"tiny", "qwen2", "qwen2_vl"};
  if (std::find(kArchs.begin(), kArchs.end(), m.arch) == kArchs.end()) {
    const std::string near = closest(m.arch, kArchs);
    check(false, "model.arch",
          "unknown value " + quoted(m.arch) + "; use one of tiny, qwen2, qwen2_vl" +
              (near.empty() ? "" : " (did you mean " + quoted(near) + "?)"));
    return;
  }
  if (m.arch == "tiny") {
    check(m.path.empty(), "model.path",
          "is not used by model.arch = \"tiny\" (its weights come from train.seed); remove it, or "
          "set "
          "arch = \"qwen2\" or \"qwen2_vl\" to load a checkpoint");
    check_tiny(m, check);
    return;
  }
  check(!m.path.empty(), "model.path",
        "is required for model.arch = " + quoted(m.arch) +
            "; set it to the Hugging Face checkpoint folder (config.json + *.safetensors)");
  const ModelSection d;
  const std::pair<std::string_view, bool> tiny[] = {
      {"tiny_vocab_size", m.tiny_vocab_size == d.tiny_vocab_size},
      {"tiny_hidden_size", m.tiny_hidden_size == d.tiny_hidden_size},
      {"tiny_layers", m.tiny_layers == d.tiny_layers},
      {"tiny_heads", m.tiny_heads == d.tiny_heads},
      {"tiny_intermediate_size", m.tiny_intermediate_size == d.tiny_intermediate_size},
      {"tiny_max_seq_len", m.tiny_max_seq_len == d.tiny_max_seq_len}};
  for (const auto& [key, is_default] : tiny) {
    check(is_default, "model." + std::string(key),
          "is only used by model.arch = \"tiny\" (" + m.arch +
              " takes its shape from config.json); remove it");
  }
}

void check_data(const DataSection& d, const ModelSection& m, const Check& check) {
  check(!d.train_path.empty(), "data.train_path",
        "is required; set it to a JSONL file of training samples, e.g. train_path = "
        "\"data/train.jsonl\"");
  static const std::vector<std::string> kFormats = {"tokens", "text", "chat"};
  if (std::find(kFormats.begin(), kFormats.end(), d.format) == kFormats.end()) {
    const std::string near = closest(d.format, kFormats);
    check(false, "data.format",
          "unknown value " + quoted(d.format) + "; use one of tokens, text, chat" +
              (near.empty() ? "" : " (did you mean " + quoted(near) + "?)"));
  }
  check.at_least(d.seq_len, 1, "data.seq_len", "128");
  check(!d.blank_images || d.format == "chat", "data.blank_images",
        "blanks images, but data.format is " + quoted(d.format) +
            " (no images); set data.format = \"chat\" or blank_images = false");
  if (m.arch == "tiny" && m.tiny_max_seq_len >= 1) {
    check(d.seq_len <= m.tiny_max_seq_len, "data.seq_len",
          "is " + num(d.seq_len) + " but the tiny model has " + num(m.tiny_max_seq_len) +
              " positions (model.tiny_max_seq_len); lower seq_len or raise tiny_max_seq_len");
  }
}

void check_train_counts(const TrainSection& t, const Check& check) {
  check.at_least(t.max_steps, 1, "train.max_steps", "100");
  check.at_least(t.batch_size, 1, "train.batch_size", "8");
  check.at_least(t.micro_batch_size, 0, "train.micro_batch_size", "0 (batch_size / ranks)");
  check(t.micro_batch_size <= t.batch_size, "train.micro_batch_size",
        "is " + num(t.micro_batch_size) + ", more than train.batch_size (" + num(t.batch_size) +
            "); it counts samples per rank per forward: use a divisor of batch_size / ranks");
  check.at_least(t.lr_warmup_steps, 0, "train.lr_warmup_steps", "100");
  check(t.lr_warmup_steps <= t.max_steps, "train.lr_warmup_steps",
        "is " + num(t.lr_warmup_steps) + ", more than train.max_steps (" + num(t.max_steps) +
            "); the peak lr would never be reached: lower it");
  check(t.seed <= static_cast<std::uint64_t>(INT64_MAX), "train.seed",
        "must fit a TOML integer (<= 9223372036854775807)");
  check.at_least(t.log_every, 1, "train.log_every", "1");
  check.at_least(t.mem_every, 1, "train.mem_every", "10");
  check.at_least(t.ckpt_every, 0, "train.ckpt_every", "500 (0 = only at the end)");
  check.at_least(t.ckpt_keep, 0, "train.ckpt_keep", "2 (0 keeps all)");
  check.at_least(t.threads, 0, "train.threads", "0 (follow OMP_NUM_THREADS)");
  check.at_least(t.loss_chunk_tokens, 0, "train.loss_chunk_tokens", "0 (chosen)");
}

void check_train_optim(const TrainSection& t, const Check& check) {
  check.finite(t.lr, "train.lr");
  check(!(t.lr <= 0), "train.lr", "must be > 0 (got " + num(t.lr) + "); use e.g. 3e-4");
  check.finite(t.lr_min, "train.lr_min");
  check(t.lr_min >= 0, "train.lr_min", "must be >= 0 (got " + num(t.lr_min) + "); use e.g. 0");
  check(t.lr_min <= t.lr || !(t.lr > 0), "train.lr_min",
        "is " + num(t.lr_min) + ", above train.lr (" + num(t.lr) +
            "); the decay floor must be <= the peak: use e.g. lr_min = lr / 10");
  check(t.lr_schedule != LrSchedule::constant || t.lr_min == 0, "train.lr_min",
        "is not used by train.lr_schedule = \"constant\"; remove it, or use \"linear\" or "
        "\"cosine\"");
  check.finite(t.weight_decay, "train.weight_decay");
  check(t.weight_decay >= 0, "train.weight_decay",
        "must be >= 0 (got " + num(t.weight_decay) + "); use e.g. 0.01");
  for (const auto& [field, beta] :
       {std::pair{"train.adam_beta1", t.adam_beta1}, std::pair{"train.adam_beta2", t.adam_beta2}}) {
    check(beta >= 0 && beta < 1, field,
          std::string("must be in [0, 1) (got ") + num(beta) + "); use e.g. 0.9 and 0.999");
  }
  check(t.adam_eps > 0 && std::isfinite(t.adam_eps), "train.adam_eps",
        "must be > 0 (got " + num(t.adam_eps) + "); use e.g. 1e-8");
  check(t.grad_clip >= 0 && std::isfinite(t.grad_clip), "train.grad_clip",
        "must be >= 0 (got " + num(t.grad_clip) + "); use e.g. 1.0, or 0 to disable clipping");
}

// train.freeze: well-formed globs; for the tiny model (whose names are known without a
// checkpoint) each must match a parameter. The trainer checks other models when it loads them.
void check_freeze(const TrainSection& t, const ModelSection& m, const Check& check) {
  std::set<std::string> seen;
  for (const auto& glob : t.freeze) {
    check(!glob.empty(), "train.freeze", "has an empty pattern; remove it");
    check(seen.insert(glob).second, "train.freeze",
          "lists " + quoted(glob) + " twice; remove the duplicate");
  }
  const bool tiny_ok = m.arch == "tiny" && m.tiny_heads >= 1 && m.tiny_hidden_size >= 1 &&
                       m.tiny_hidden_size % m.tiny_heads == 0 && m.tiny_layers >= 1 &&
                       m.tiny_vocab_size >= 2 && m.tiny_intermediate_size >= 0;
  if (!tiny_ok || t.freeze.empty()) return;
  auto layers = qwen2_layers(tiny_dims(m));
  for (const auto& glob : apply_freeze(t, layers)) {
    check(glob.empty(), "train.freeze",
          "pattern " + quoted(glob) +
              " matches no parameter of the model; use Hugging Face names such as "
              "\"model.embed_tokens.*\" or \"model.layers.0.*\"");
  }
}

void check_shard(const ShardSection& s, const Check& check) {
  const ShardSection d;
  check.at_least(s.max_inflight_gathers, 1, "shard.max_inflight_gathers", "2");
  check.at_least(s.timeout_s, 1, "shard.timeout_s", "600");
  check(s.device == "auto" || s.device == "cuda" || s.device == "cpu", "shard.device",
        "must be \"auto\", \"cuda\" or \"cpu\" (got " + quoted(s.device) + ")");
  check(s.backend == "auto" || s.backend == "nccl" || s.backend == "gloo", "shard.backend",
        "must be \"auto\", \"nccl\" or \"gloo\" (got " + quoted(s.backend) + ")");
  check(s.device != "cpu" || s.backend != "nccl", "shard.backend",
        "\"nccl\" needs CUDA tensors but shard.device = \"cpu\"; use backend = \"gloo\" or "
        "\"auto\", or device = \"cuda\"");
  check.at_least(s.wrap_min_params, 1, "shard.wrap_min_params", "100000000");
  check(s.wrap_policy == WrapPolicy::size || s.wrap_min_params == d.wrap_min_params,
        "shard.wrap_min_params",
        "is only used by shard.wrap_policy = \"size\" (got \"" +
            std::string(to_string(s.wrap_policy)) + "\"); remove it or set wrap_policy = \"size\"");
  check(s.wrap_policy != WrapPolicy::none || !s.activation_checkpointing,
        "shard.activation_checkpointing",
        "checkpoints per wrap unit, and shard.wrap_policy = \"none\" makes none; use wrap_policy = "
        "\"block\" or turn activation_checkpointing off");
  if (s.precision != PrecisionMode::custom) {
    const std::pair<std::string_view, DType> dtypes[] = {{"shard.param_dtype", s.param_dtype},
                                                         {"shard.reduce_dtype", s.reduce_dtype},
                                                         {"shard.buffer_dtype", s.buffer_dtype}};
    for (const auto& [field, dtype] : dtypes) {
      check(dtype == DType::fp32, field,
            "is only used by shard.precision = \"custom\" (precision \"" +
                std::string(to_string(s.precision)) +
                "\" fixes the dtypes); remove it or set precision = \"custom\"");
    }
    return;
  }
  // bf16 and fp16 have different exponent ranges: mixing them between compute and reduction
  // loses values silently, and no FSDP recipe does it.
  const bool mixes = (s.param_dtype == DType::bf16 && s.reduce_dtype == DType::fp16) ||
                     (s.param_dtype == DType::fp16 && s.reduce_dtype == DType::bf16);
  check(!mixes, "shard.reduce_dtype",
        "mixes bf16 and fp16 (shard.param_dtype \"" + std::string(to_string(s.param_dtype)) +
            "\", reduce_dtype \"" + std::string(to_string(s.reduce_dtype)) +
            "\"); use the param dtype or fp32 for reduction");
}

void check_lora(const LoraSection& l, const ModelSection& m, const Check& check) {
  if (!l.enabled) return;
  check.at_least(l.r, 1, "lora.r", "8");
  check(l.alpha > 0 && std::isfinite(l.alpha), "lora.alpha",
        "must be > 0 (got " + num(l.alpha) + "); use e.g. 16 (scale = alpha / r)");
  check(l.dropout >= 0 && l.dropout < 1, "lora.dropout",
        "must be in [0, 1) (got " + num(l.dropout) + "); use e.g. 0.05");
  check(!l.target_modules.empty(), "lora.target_modules",
        "is empty, so LoRA would train nothing; use e.g. [\"q_proj\", \"v_proj\"]");
  std::set<std::string> seen;
  bool names_ok = true;
  for (const auto& name : l.target_modules) {
    // PEFT's rule: an entry is a module path suffix ("q_proj", "self_attn.q_proj",
    // "model.layers.0.mlp.down_proj"); its last part must name a Linear LoRA can adapt.
    const auto dot = name.rfind('.');
    const auto last = dot == std::string::npos ? name : name.substr(dot + 1);
    const auto& valid = lora_module_names();
    const bool ok = std::find(valid.begin(), valid.end(), last) != valid.end();
    names_ok = names_ok && ok;
    check(ok, "lora.target_modules",
          "entry " + quoted(name) + " is not a module LoRA can adapt; use one of " +
              lora_module_list() + " (qkv, proj, fc1, fc2 are the vision tower's)");
    check(seen.insert(name).second, "lora.target_modules",
          "lists " + quoted(name) + " twice; remove the duplicate");
  }
  const bool tiny_ok = m.arch == "tiny" && m.tiny_heads >= 1 && m.tiny_hidden_size >= 1 &&
                       m.tiny_hidden_size % m.tiny_heads == 0 && m.tiny_layers >= 1 &&
                       m.tiny_vocab_size >= 2 && m.tiny_intermediate_size >= 0;
  if (!tiny_ok || !names_ok || l.r < 1) return;
  auto layers = qwen2_layers(tiny_dims(m));
  for (const auto& target : apply_lora(l, layers))
    check(target.empty(), "lora.target_modules",
          "entry " + quoted(target) +
              " selects no module of the tiny (text-only) model; use q_proj, k_proj, v_proj, "
              "o_proj, gate_proj, up_proj or down_proj");
}

// [lora] quantize and its nf4 fields. The block rules are bitsandbytes' (a power of two from 32
// to 4096) plus one of ours: a block never spans two rows of a weight, so each quantized
// Linear's in-features (model width for q/k/v/o/gate/up, MLP width for down) must be a multiple
// of it. Only the tiny model's widths are known here; a Hugging Face model's are in its
// config.json, read by the trainer (which refuses lora.quantize = "nf4" until a model holds a
// quantized base).
void check_quantize(const LoraSection& l, const ModelSection& m, const Check& check) {
  const auto& kQuantize = lora_quantize_values();
  const auto& kStorage = lora_quant_storage_values();
  if (std::find(kQuantize.begin(), kQuantize.end(), l.quantize) == kQuantize.end()) {
    const std::string near = closest(l.quantize, kQuantize);
    check(false, "lora.quantize",
          "unknown value " + quoted(l.quantize) + "; use \"none\" or \"nf4\"" +
              (near.empty() ? "" : " (did you mean " + quoted(near) + "?)"));
    return;
  }
  const LoraSection d;
  if (l.quantize == "none") {
    const std::pair<std::string_view, bool> nf4_only[] = {
        {"double_quant", l.double_quant == d.double_quant},
        {"quant_block_size", l.quant_block_size == d.quant_block_size},
        {"quant_storage", l.quant_storage == d.quant_storage}};
    for (const auto& [key, is_default] : nf4_only)
      check(is_default, "lora." + std::string(key),
            "is only used by lora.quantize = \"nf4\"; set quantize = \"nf4\" or remove it");
    return;
  }
  check(l.enabled, "lora.quantize",
        "\"nf4\" quantizes the frozen base of a LoRA run, but lora.enabled is false; set "
        "lora.enabled = true, or quantize = \"none\"");
  if (std::find(kStorage.begin(), kStorage.end(), l.quant_storage) == kStorage.end()) {
    const std::string near = closest(l.quant_storage, kStorage);
    check(false, "lora.quant_storage",
          "unknown value " + quoted(l.quant_storage) +
              "; use \"uint8\", \"bfloat16\", \"float16\" or \"float32\"" +
              (near.empty() ? "" : " (did you mean " + quoted(near) + "?)"));
  }
  const std::int64_t b = l.quant_block_size;
  const bool pow2 = b >= 32 && b <= 4096 && (b & (b - 1)) == 0;
  check(pow2, "lora.quant_block_size",
        "must be a power of two from 32 to 4096, as bitsandbytes allows (got " + num(b) +
            "); use e.g. 64");
  if (!pow2 || m.arch != "tiny" || m.tiny_hidden_size < 1) return;
  const std::int64_t mlp =
      m.tiny_intermediate_size > 0 ? m.tiny_intermediate_size : 4 * m.tiny_hidden_size;
  // The fix: the largest allowed block size that divides `width`, or a width that one divides.
  const auto fix = [](std::int64_t width) {
    const std::int64_t p = std::min<std::int64_t>(width & -width, 4096);
    return p >= 32 ? "use a power of two that divides it, e.g. " + num(p)
                   : std::string("make it a multiple of 32 (no allowed block size divides it)");
  };
  check(m.tiny_hidden_size % b == 0, "lora.quant_block_size",
        num(b) + " does not divide model.tiny_hidden_size (" + num(m.tiny_hidden_size) +
            "), the in-features of q/k/v/o/gate/up_proj, so a block would span two rows; " +
            fix(m.tiny_hidden_size));
  check(mlp % b == 0, "lora.quant_block_size",
        num(b) + " does not divide the MLP width (" + num(mlp) +
            ", model.tiny_intermediate_size), the in-features of down_proj, so a block would "
            "span two rows; " +
            fix(mlp));
}

void check_eval(const EvalSection& e, const DataSection& d, const Check& check) {
  check.at_least(e.every, 0, "eval.every", "100 (0 = never)");
  check.at_least(e.batches, 1, "eval.batches", "4");
  check(e.every == 0 || !d.eval_path.empty(), "eval.every",
        "evaluation every " + num(e.every) +
            " steps needs data.eval_path; set data.eval_path or eval.every = 0");
  check(!e.metrics.empty(), "eval.metrics", "is empty; use e.g. [\"loss\"]");
  std::set<std::string> seen;
  for (const auto& m : e.metrics) {
    check(m == "loss" || m == "accuracy" || m == "exact_match", "eval.metrics",
          "unknown metric " + quoted(m) + "; use \"loss\", \"accuracy\" or \"exact_match\"");
    check(seen.insert(m).second, "eval.metrics", "lists " + quoted(m) + " twice");
    check(m != "exact_match" || d.format == "chat", "eval.metrics",
          "\"exact_match\" generates answers to chat samples but data.format is " +
              quoted(d.format) + "; set data.format = \"chat\" or drop \"exact_match\"");
  }
  check.at_least(e.max_new_tokens, 1, "eval.max_new_tokens", "16");
  check(e.temperature > 0, "eval.temperature",
        "must be > 0 (got " + num(e.temperature) + "); use e.g. 0.7, or eval.do_sample = false");
  check(e.top_p > 0 && e.top_p <= 1, "eval.top_p",
        "must be in (0, 1] (got " + num(e.top_p) + "); use e.g. 0.9, or 1 to turn it off");
  check(e.probes.empty() || d.format == "chat", "eval.probes",
        "probes are chat samples answered by generation but data.format is " + quoted(d.format) +
            "; set data.format = \"chat\" or drop eval.probes");
  check.at_least(e.probe_max_new_tokens, 1, "eval.probe_max_new_tokens", "64");
}

void check_trace(const TraceSection& t, const Check& check) {
  check.at_least(t.every_n_steps, 0, "trace.every_n_steps", "100 (0 = none)");
  check.at_least(t.max_mib, 1, "trace.max_mib", "64");
}

// A search whose trials are another program (`[search] program`): the trainer's data is
// not read, so [data] may be absent. [model] and [launch] have usable defaults either way.
bool program_trials(const SearchSection& search) {
  if (!search.present) return false;
  try {
    const toml::table root = toml::parse(search.toml);
    return root["search"]["program"].is_array();
  } catch (const toml::parse_error&) {
    return false;  // the search layer reports a broken [search]
  }
}

// [search], parsed by the search schema with every message placed at its line in the file. A
// study's trials get their values through `--set`, so each searched name must be a field of the
// experiment (a typo would otherwise fail every trial of the sweep, not the file).
void check_search(const Experiment& exp, const Locator& loc, Diagnostics& diag) {
  if (!exp.search.present) return;
  auto space = parse_search_space(exp.search.toml, exp.source,
                                  [&loc](std::string_view field) { return loc.at(field); });
  if (!space) {
    diag.add(space.message());
    return;
  }
  if (!space->program.empty()) return;  // another program's flags: any names it accepts
  std::vector<std::string> names;
  for (const FieldInfo& f : field_catalog()) names.push_back(f.path);
  for (const Param& p : space->params) {
    if (find_field(p.name) != nullptr) continue;
    // launch.env.NAME sets a variable of the ranks' environment (an NCCL setting, say), as
    // `--set launch.env.NAME=...` does.
    constexpr std::string_view kEnv = "launch.env.";
    if (p.name.rfind(kEnv, 0) == 0 && is_identifier(std::string_view(p.name).substr(kEnv.size())))
      continue;
    const std::string field = "search.space.\"" + p.name + "\"";
    // A name cut short ("train.lr_warmup") means the field it starts; else the nearest spelling.
    auto started = std::find_if(names.begin(), names.end(), [&p](const std::string& n) {
      return n.size() > p.name.size() && n.compare(0, p.name.size(), p.name) == 0;
    });
    const std::string near = started != names.end() ? *started : closest(p.name, names);
    diag.add(loc.at(field) + ": " + field + ": \"" + p.name +
             "\" is not a field of the experiment, so no trial could set it; " +
             (near.empty() ? std::string("name a field as \"section.key\" (e.g. \"train.lr\"); "
                                         "see docs/config.md")
                           : "did you mean \"" + near + "\"?"));
  }
}

}  // namespace

void validate_fields(const Experiment& exp, const Locator& loc, Diagnostics& diag) {
  const Check check{loc, diag};
  check_experiment(exp.experiment, check);
  check_model(exp.model, check);
  if (!program_trials(exp.search)) check_data(exp.data, exp.model, check);
  check_train_counts(exp.train, check);
  check_train_optim(exp.train, check);
  check_freeze(exp.train, exp.model, check);
  check_shard(exp.shard, check);
  check_lora(exp.lora, exp.model, check);
  check_quantize(exp.lora, exp.model, check);
  check_eval(exp.eval, exp.data, check);
  check_trace(exp.trace, check);
  check(exp.notify.stall_after_min >= 0, "notify.stall_after_min",
        "must be >= 0 (got " + num(exp.notify.stall_after_min) + "); use e.g. 30, or 0 for never");
  validate_launch(exp, loc, diag);
  check_search(exp, loc, diag);
}

}  // namespace shardscope::spec::detail

namespace shardscope::spec {

const std::vector<std::string>& lora_quantize_values() {
  static const std::vector<std::string> kValues = {"none", "nf4"};
  return kValues;
}

const std::vector<std::string>& lora_quant_storage_values() {
  static const std::vector<std::string> kValues = {"uint8", "bfloat16", "float16", "float32"};
  return kValues;
}

}  // namespace shardscope::spec
