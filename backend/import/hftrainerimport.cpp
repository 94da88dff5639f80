// Hugging Face TrainingArguments: the JSON TrainingArguments.to_json_string() writes (the
// Trainer's training_args as JSON), transformers 4.x and 5.x, or a command line
// (`torchrun ... train.py --fsdp "full_shard auto_wrap" --learning_rate 2e-5 ...`).
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHash>
#include <QJsonArray>
#include <QJsonDocument>

#include <cmath>

#include "backend/import/importcontext.h"

namespace shardscope::backend::importing {
namespace {

enum class Rule { ignore, offOrUnsupported };
struct KeyRule {
  Rule rule;
  const char* text;  // ignore: why; offOrUnsupported: what to do when set
};

// Keys with no field here, and why; or keys whose "off" value is Shardscope's behaviour and
// whose other values it cannot do.
const QHash<QString, KeyRule>& keyRules() {
  static const QHash<QString, KeyRule> rules = [] {
    QHash<QString, KeyRule> r;
    const auto ignore = [&r](std::initializer_list<const char*> keys, const char* why) {
      for (const char* k : keys) r.insert(QLatin1String(k), {Rule::ignore, why});
    };
    const auto unsupported = [&r](std::initializer_list<const char*> keys, const char* what) {
      for (const char* k : keys) r.insert(QLatin1String(k), {Rule::offOrUnsupported, what});
    };
    ignore({"output_dir", "overwrite_output_dir", "logging_dir", "logging_first_step",
            "logging_nan_inf_filter", "log_level", "log_level_replica", "log_on_each_node",
            "disable_tqdm", "report_to", "run_name", "project", "trackio_space_id",
            "trackio_bucket_id", "trackio_static_space_id", "skip_memory_metrics",
            "include_num_input_tokens_seen", "include_tokens_per_second"},
           "logging and output: every run is kept in the run log and its run directory");
    ignore({"push_to_hub", "hub_token", "hub_private_repo", "hub_model_id", "hub_strategy",
            "hub_always_push", "hub_revision", "push_to_hub_model_id", "push_to_hub_organization",
            "push_to_hub_token"},
           "Hub upload: `shardtrain export` writes HF safetensors to push yourself");
    ignore({"dataloader_drop_last", "dataloader_num_workers", "dataloader_pin_memory",
            "dataloader_persistent_workers", "dataloader_prefetch_factor",
            "dataloader_multiprocessing_context", "dataloader_in_order", "remove_unused_columns",
            "label_names", "length_column_name", "accelerator_config", "split_batches",
            "dispatch_batches"},
           "data loading is the trainer's own ([data]): fixed global batch, rank r takes samples "
           "r, r+W, ...");
    ignore({"ddp_find_unused_parameters", "ddp_bucket_cap_mb", "ddp_broadcast_buffers",
            "ddp_static_graph"},
           "DDP tuning: the engine's own reductions");
    ignore({"per_device_eval_batch_size", "prediction_loss_only", "eval_do_concat_batches",
            "eval_use_gather_object", "eval_accumulation_steps", "include_for_metrics",
            "batch_eval_metrics", "include_inputs_for_metrics", "bf16_full_eval", "fp16_full_eval",
            "metric_for_best_model", "greater_is_better"},
           "evaluation runs eval.metrics over eval.batches batches of train.batch_size samples");
    ignore({"save_only_model", "save_on_each_node", "save_safetensors", "enable_jit_checkpoint",
            "restore_callback_states_from_checkpoint", "ignore_data_skip"},
           "checkpoints are sharded and complete (masters, AdamW state, data offset); resume "
           "continues where the run stopped");
    ignore({"do_train", "do_eval", "do_predict", "local_rank", "past_index", "ray_scope",
            "mp_parameters", "use_legacy_prediction_loop"},
           "script or launcher bookkeeping");
    ignore({"gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"},
           "checkpointing is per wrap unit (shard.activation_checkpointing)");
    ignore({"use_cache"}, "the KV cache is for generation only");
    ignore({"torch_empty_cache_steps"}, "the caching allocator is left to itself");
    ignore({"half_precision_backend", "fp16_backend", "fp16_opt_level"},
           "the precision mode is shard.precision");
    unsupported({"label_smoothing_factor"}, "no label smoothing; the loss is plain cross-entropy");
    unsupported({"neftune_noise_alpha"}, "no NEFTune embedding noise");
    unsupported({"torch_compile", "torch_compile_backend", "torch_compile_mode", "torchdynamo"},
                "no torch.compile in the C++ trainer; remove it");
    unsupported({"use_liger_kernel", "liger_kernel_config", "use_ipex", "jit_mode_eval"},
                "no fused kernel libraries; remove it");
    unsupported({"auto_find_batch_size"},
                "set train.micro_batch_size yourself; the memory panel estimates each rank's peak");
    unsupported(
        {"load_best_model_at_end"},
        "checkpoints are kept by train.ckpt_keep; pick the best from the run's eval events");
    unsupported({"resume_from_checkpoint"}, "resume a run with `shardscope-cli run --resume`");
    unsupported({"parallelism_config"}, "data-parallel sharding only (no TP/CP)");
    unsupported({"optim_args", "optim_target_modules"}, "AdamW only, with train.adam_* settings");
    unsupported({"debug"}, "no Trainer debug modes");
    unsupported({"group_by_length"}, "no length-grouped sampling; data.shuffle shuffles samples");
    unsupported({"adafactor"}, "AdamW only");
    unsupported({"sharded_ddp"}, "use fsdp (shard.strategy)");
    unsupported({"tpu_num_cores", "tpu_metrics_debug", "use_mps_device", "xpu_backend"},
                "CUDA or CPU only");
    unsupported({"eval_on_start"}, "the first evaluation is at step eval.every");
    unsupported({"eval_delay"}, "evaluations start at step eval.every");
    return r;
  }();
  return rules;
}

void applyRule(ImportContext& ctx, const QString& key, const QJsonValue& v, const KeyRule& rule) {
  if (rule.rule == Rule::ignore) {
    ctx.ignore(key, v, QLatin1String(rule.text));
  } else if (isOff(v) || asNumber(v) == 0.0) {
    ctx.ignore(key, v, QStringLiteral("off, as in Shardscope"));
  } else {
    ctx.unsupported(key, v, QLatin1String(rule.text));
  }
}

// A training script's own options that often stand beside TrainingArguments on a command line.
const QHash<QString, const char*>& scriptOptions() {
  static const QHash<QString, const char*> s = {
      {"model_name_or_path", "set model.path to the checkpoint folder and model.arch"},
      {"config_name", "set model.path to the checkpoint folder"},
      {"tokenizer_name", "the tokenizer is read from model.path"},
      {"cache_dir", "set model.path to a local folder"},
      {"dataset_name", "set data.train_path to a JSONL file of samples"},
      {"dataset_config_name", "set data.train_path to a JSONL file of samples"},
      {"train_file", "set data.train_path (JSONL)"},
      {"validation_file", "set data.eval_path (JSONL)"},
      {"max_seq_length", "set data.seq_len"},
      {"max_length", "set data.seq_len"},
      {"block_size", "set data.seq_len"},
  };
  return s;
}

bool isAdamW(const QString& optim) {
  return optim.startsWith(QLatin1String("adamw_torch")) || optim == QLatin1String("adamw_hf") ||
         optim == QLatin1String("adamw_apex_fused");
}

struct HfState {
  QJsonObject root;
  qint64 maxSteps = -1;
  QString scheduler;
  bool sharded = false;
};

// Steps from a count or, below 1, a ratio of max_steps (as get_warmup_steps and eval_steps).
std::optional<qint64> stepsOf(const QJsonValue& v, qint64 maxSteps) {
  const auto d = asNumber(v);
  if (!d || *d < 0) return std::nullopt;
  if (*d >= 1 || *d == 0) return asInt(v);  // whole and in range, or nullopt
  if (maxSteps <= 0) return std::nullopt;
  return static_cast<qint64>(std::ceil(static_cast<double>(maxSteps) * *d));
}

void mapFsdp(ImportContext& ctx, const QString& key, const QJsonValue& v, const HfState& s) {
  QStringList items;
  if (v.isArray()) {
    for (const auto& x : v.toArray()) items << x.toString();
  } else if (v.isString() && !asBool(v)) {
    items = v.toString().split(QLatin1Char(' '), Qt::SkipEmptyParts);
  }
  const bool deepspeed = !isOff(s.root.value(QStringLiteral("deepspeed")));
  if (isOff(v) && items.isEmpty()) {
    if (deepspeed) {
      ctx.ignore(key, v, QStringLiteral("off; deepspeed is set instead"));
    } else {
      ctx.map(key, v, {{"shard.strategy", "\"no_shard\""}},
              QStringLiteral("no FSDP: plain data parallel"));
    }
    return;
  }
  std::vector<Assign> set;
  for (const auto& item : items) {
    const auto strategy = fsdpStrategy(item);
    if (strategy && *strategy == QLatin1String("hybrid_shard_zero2")) {
      // Same numerics as hybrid_shard, which frees gathered parameters after forward.
      set.emplace_back(QStringLiteral("shard.strategy"), QStringLiteral("\"hybrid_shard\""));
    } else if (strategy) {
      set.emplace_back(QStringLiteral("shard.strategy"), tomlString(*strategy));
    } else if (item == QLatin1String("offload")) {
      set.emplace_back(QStringLiteral("shard.offload_params"), QStringLiteral("true"));
      set.emplace_back(QStringLiteral("shard.offload_optimizer"), QStringLiteral("true"));
    } else if (item == QLatin1String("auto_wrap")) {
      set.emplace_back(QStringLiteral("shard.wrap_policy"), QStringLiteral("\"block\""));
    } else {
      ctx.badValue(key, v,
                   QStringLiteral("full_shard, shard_grad_op, no_shard, hybrid_shard, offload or "
                                  "auto_wrap (space-separated)"));
      return;
    }
  }
  // fsdp=true alone: the strategy is fsdp_config's reshard_after_forward, default full_shard.
  bool strategyGiven = false;
  for (const auto& a : set) strategyGiven |= a.first == QLatin1String("shard.strategy");
  if (!strategyGiven && !ctx.has(QStringLiteral("shard.strategy"))) {
    set.emplace_back(QStringLiteral("shard.strategy"), QStringLiteral("\"full_shard\""));
  }
  if (set.empty()) {
    ctx.ignore(key, v, QStringLiteral("FSDP on; fsdp_config sets the strategy"));
  } else {
    ctx.map(key, v, set);
  }
}

// fsdp_config: a table, or the path of a JSON file (relative to the imported file's folder).
void mapFsdpConfig(ImportContext& ctx, const QString& key, const QJsonValue& v, bool fsdpOn,
                   int defaultVersion) {
  QJsonObject table;
  if (v.isObject()) {
    table = v.toObject();
  } else if (v.isString() && v.toString().trimmed().startsWith(QLatin1Char('{'))) {
    // A command line's --fsdp_config '{"version": 2, ...}': JSON text, as the Trainer reads it.
    const auto doc = QJsonDocument::fromJson(v.toString().toUtf8());
    if (!doc.isObject()) {
      ctx.badValue(key, v, QStringLiteral("a JSON object"));
      return;
    }
    table = doc.object();
  } else if (v.isString() && !v.toString().isEmpty()) {
    // The path of a JSON file, relative to the imported file's folder; a regular file of a
    // config's size, never a device or a pipe.
    const QString path = QFileInfo(ctx.file()).dir().absoluteFilePath(v.toString());
    const QFileInfo info(path);
    QFile f(path);
    QJsonDocument doc;
    if (info.isFile() && info.size() <= kMaxConfigBytes && f.open(QIODevice::ReadOnly)) {
      doc = QJsonDocument::fromJson(f.readAll());
    }
    if (!doc.isObject()) {
      ctx.error(key, v, QStringLiteral("cannot read %1 as a JSON object").arg(path));
      return;
    }
    table = doc.object();
  } else if (!v.isNull()) {
    ctx.badValue(key, v, QStringLiteral("a table or the path of a JSON file"));
    return;
  }
  if (!fsdpOn) {
    if (table.isEmpty()) {
      ctx.ignore(key, v, QStringLiteral("empty"));
    } else {
      ctx.ignore(key, v, QStringLiteral("read only when fsdp is on, and it is off"));
    }
    return;
  }
  if (table.isEmpty()) {
    ctx.ignore(key, v, QStringLiteral("empty: FSDP's defaults"));
    return;
  }
  importFsdpOptions(ctx, table, key + QLatin1Char('.'), defaultVersion, true);
}

void mapScheduler(ImportContext& ctx, const QString& key, const QJsonValue& v, const HfState& s) {
  const QString t = asString(v).value_or(QString());
  if (t == QLatin1String("linear") || t == QLatin1String("cosine")) {
    ctx.map(key, v, {{"train.lr_schedule", tomlString(t)}},
            QStringLiteral("decays to train.lr_min"));
  } else if (t == QLatin1String("cosine_with_min_lr")) {
    ctx.map(key, v, {{"train.lr_schedule", "\"cosine\""}},
            QStringLiteral("the floor comes from lr_scheduler_kwargs"));
  } else if (t == QLatin1String("constant_with_warmup")) {
    ctx.map(key, v, {{"train.lr_schedule", "\"constant\""}});
  } else if (t == QLatin1String("constant")) {
    ctx.map(key, v, {{"train.lr_schedule", "\"constant\""}, {"train.lr_warmup_steps", "0"}},
            QStringLiteral("the Trainer's constant schedule has no warmup"));
  } else {
    ctx.unsupported(key, v,
                    QStringLiteral("schedules are constant, linear and cosine after a linear "
                                   "warmup; pick one in train.lr_schedule"));
  }
  Q_UNUSED(s);
}

void mapSchedulerKwargs(ImportContext& ctx, const QString& key, const QJsonValue& v,
                        const HfState& s) {
  if (isOff(v)) {
    ctx.ignore(key, v, QStringLiteral("none"));
    return;
  }
  const QJsonObject kw = v.toObject();
  const double lr = asNumber(s.root.value(QStringLiteral("learning_rate"))).value_or(5e-5);
  if (s.scheduler == QLatin1String("cosine_with_min_lr") && kw.size() == 1) {
    if (const auto m = asNumber(kw.value(QStringLiteral("min_lr")))) {
      ctx.map(key, v, {{"train.lr_min", tomlDouble(*m)}});
      return;
    }
    if (const auto r = asNumber(kw.value(QStringLiteral("min_lr_rate")))) {
      ctx.map(key, v, {{"train.lr_min", tomlDouble(*r * lr)}},
              QStringLiteral("min_lr_rate x learning_rate"));
      return;
    }
  }
  ctx.unsupported(key, v,
                  QStringLiteral("only cosine_with_min_lr's min_lr or min_lr_rate maps (to "
                                 "train.lr_min); set the schedule by hand"));
}

void mapWarmup(ImportContext& ctx, const QString& key, const QJsonValue& v, const HfState& s) {
  const auto d = asNumber(v);
  if (!d || *d < 0) {
    ctx.badValue(key, v, QStringLiteral("a number of steps >= 0 (or a ratio below 1)"));
    return;
  }
  if (s.scheduler == QLatin1String("constant")) {
    ctx.ignore(key, v, QStringLiteral("the Trainer's constant schedule has no warmup"));
    return;
  }
  const bool ratioKey = key.endsWith(QLatin1String("warmup_ratio"));
  if (!ratioKey && *d == 0 &&
      asNumber(s.root.value(QStringLiteral("warmup_ratio"))).value_or(0) > 0) {
    ctx.ignore(key, v, QStringLiteral("0: warmup_ratio sets the warmup, as in the Trainer"));
    return;
  }
  if (ratioKey) {
    const double steps = asNumber(s.root.value(QStringLiteral("warmup_steps"))).value_or(0);
    if (steps > 0) {
      ctx.ignore(key, v, QStringLiteral("warmup_steps overrides it, as in the Trainer"));
      return;
    }
    if (*d == 0) {
      ctx.ignore(key, v, QStringLiteral("no warmup"));
      return;
    }
  }
  const auto steps = (ratioKey && *d >= 1) ? std::nullopt : stepsOf(v, s.maxSteps);
  if (!steps) {
    ctx.unsupported(key, v,
                    QStringLiteral("a warmup ratio needs max_steps; set train.lr_warmup_steps to "
                                   "ratio x train.max_steps"));
    return;
  }
  ctx.map(key, v, {{"train.lr_warmup_steps", QString::number(*steps)}},
          *d > 0 && *d < 1 ? QStringLiteral("ratio x max_steps, rounded up") : QString());
}

void mapIntervals(ImportContext& ctx, const QString& key, const QJsonValue& v, const HfState& s) {
  const QJsonObject& r = s.root;
  const auto strategyOf = [&r](const char* k, const char* old) {
    QString t = asString(r.value(QLatin1String(k))).value_or(QString());
    if (t.isEmpty()) t = asString(r.value(QLatin1String(old))).value_or(QString());
    return t;
  };
  const QString name = key.startsWith(QLatin1String("--")) ? key.mid(2) : key;
  if (name == QLatin1String("eval_strategy") || name == QLatin1String("evaluation_strategy") ||
      name == QLatin1String("eval_steps")) {
    const QString strategy = strategyOf("eval_strategy", "evaluation_strategy");
    if (strategy.isEmpty() || strategy == QLatin1String("no")) {
      if (name == QLatin1String("eval_steps")) {
        ctx.ignore(key, v, QStringLiteral("evaluation is off"));
      } else {
        ctx.map(key, v, {{"eval.every", "0"}});
      }
      return;
    }
    if (strategy != QLatin1String("steps")) {
      ctx.unsupported(key, v, QStringLiteral("evaluations are every eval.every steps; set it"));
      return;
    }
    QJsonValue stepsValue = r.value(QStringLiteral("eval_steps"));
    if (isOff(stepsValue)) stepsValue = r.value(QStringLiteral("logging_steps"));
    if (isOff(stepsValue)) stepsValue = 500;  // the Trainer's default logging_steps
    const auto steps = stepsOf(stepsValue, s.maxSteps);
    if (!steps || *steps < 1) {
      ctx.unsupported(key, v, QStringLiteral("set eval.every to the steps between evaluations"));
      return;
    }
    ctx.map(key, v, {{"eval.every", QString::number(*steps)}});
  } else if (name == QLatin1String("save_strategy") || name == QLatin1String("save_steps")) {
    const QString strategy = strategyOf("save_strategy", "save_strategy");
    if (strategy == QLatin1String("no")) {
      if (name == QLatin1String("save_steps")) {
        ctx.ignore(key, v, QStringLiteral("saving is off"));
      } else {
        ctx.map(key, v, {{"train.ckpt_every", "0"}, {"train.ckpt_at_end", "false"}});
      }
      return;
    }
    if (!strategy.isEmpty() && strategy != QLatin1String("steps")) {
      ctx.unsupported(key, v,
                      QStringLiteral("checkpoints are every train.ckpt_every steps; set it"));
      return;
    }
    QJsonValue stepsValue = r.value(QStringLiteral("save_steps"));
    if (isOff(stepsValue)) stepsValue = 500;
    const auto steps = stepsOf(stepsValue, s.maxSteps);
    if (!steps || *steps < 1) {
      ctx.unsupported(key, v,
                      QStringLiteral("set train.ckpt_every to the steps between checkpoints"));
      return;
    }
    ctx.map(key, v, {{"train.ckpt_every", QString::number(*steps)}});
  } else {  // logging_strategy, logging_steps
    const QString strategy = strategyOf("logging_strategy", "logging_strategy");
    if (!strategy.isEmpty() && strategy != QLatin1String("steps")) {
      ctx.ignore(key, v,
                 QStringLiteral("step events are written every train.log_every steps; it keeps "
                                "its default"));
      return;
    }
    QJsonValue stepsValue = r.value(QStringLiteral("logging_steps"));
    if (isOff(stepsValue)) stepsValue = 500;
    const auto steps = stepsOf(stepsValue, s.maxSteps);
    if (!steps || *steps < 1) {
      ctx.unsupported(key, v, QStringLiteral("set train.log_every"));
      return;
    }
    ctx.map(key, v, {{"train.log_every", QString::number(*steps)}});
  }
}

// per_device_train_batch_size and gradient_accumulation_steps: the global batch is
// micro x accumulation x ranks, with the ranks [launch] starts.
void mapBatch(ImportContext& ctx, const QString& key, const QJsonValue& v, const HfState& s) {
  // The Trainer's defaults when a key is absent (a command line): 8 per device, 1 accumulation.
  const qint64 pd =
      asCount(s.root.value(QStringLiteral("per_device_train_batch_size")))
          .value_or(asCount(s.root.value(QStringLiteral("per_gpu_train_batch_size"))).value_or(8));
  const qint64 gas =
      asCount(s.root.value(QStringLiteral("gradient_accumulation_steps"))).value_or(1);
  const auto& launch = ctx.experiment().launch;
  const qint64 world = qint64(launch.nnodes) * launch.nproc_per_node;
  const auto batch = product({pd, gas, world});
  if (!asCount(v) || !batch) {
    ctx.badValue(key, v, QStringLiteral("a whole number from 1 to 10^9"));
    return;
  }
  const QString note = QStringLiteral(
                           "batch = %1 per device x %2 accumulation x %3 ranks "
                           "(launch.nnodes x launch.nproc_per_node); change them together")
                           .arg(pd)
                           .arg(gas)
                           .arg(world);
  if (key.endsWith(QLatin1String("gradient_accumulation_steps"))) {
    ctx.map(key, v, {{"train.batch_size", QString::number(*batch)}}, note);
  } else {
    ctx.map(key, v,
            {{"train.micro_batch_size", QString::number(pd)},
             {"train.batch_size", QString::number(*batch)}},
            note);
  }
}

// torchrun's / accelerate launch's own options before the script.
void importLauncher(ImportContext& ctx, const QJsonObject& launcher) {
  const qint64 machines =
      asCount(launcher.value(QStringLiteral("num_machines")))
          .value_or(asCount(launcher.value(QStringLiteral("nnodes"))).value_or(1));
  for (auto it = launcher.begin(); it != launcher.end(); ++it) {
    const QString key = QStringLiteral("launcher --") + it.key();
    const QJsonValue v = it.value();
    const QString name = it.key();
    const auto n = asInt(v);
    if (name == QLatin1String("nproc_per_node")) {
      if (!n || *n < 1) {
        ctx.unsupported(key, v, QStringLiteral("set launch.nproc_per_node to the ranks per node"));
      } else {
        ctx.map(key, v, {{"launch.nproc_per_node", QString::number(*n)}});
      }
    } else if (name == QLatin1String("nnodes") || name == QLatin1String("num_machines")) {
      if (!n || *n < 1) {
        ctx.unsupported(key, v, QStringLiteral("elastic node counts: set launch.nnodes"));
      } else {
        ctx.map(key, v, {{"launch.nnodes", QString::number(*n)}});
      }
    } else if (name == QLatin1String("num_processes")) {
      if (!n || *n < 1 || *n % machines != 0) {
        ctx.badValue(key, v, QStringLiteral("a multiple of the number of machines"));
      } else {
        ctx.map(key, v, {{"launch.nproc_per_node", QString::number(*n / machines)}});
      }
    } else {
      ctx.ignore(key, v, QStringLiteral("launcher option: ranks start from [launch]"));
    }
  }
}

// FSDP, precision, checkpointing and the device: [shard]. Returns false for a key of another group.
bool mapShardingKey(ImportContext& ctx, const QString& name, const QString& key,
                    const QJsonValue& v, const HfState& s) {
  if (name == QLatin1String("fsdp")) {
    mapFsdp(ctx, key, v, s);
    return true;
  }
  if (name == QLatin1String("fsdp_min_num_params")) {  // transformers 4.x
    if (asInt(v).value_or(0) > 0) {
      ctx.map(key, v, {{"shard.wrap_policy", "\"size\""}, {"shard.wrap_min_params", valueText(v)}});
    } else {
      ctx.ignore(key, v, QStringLiteral("0: not the size policy"));
    }
    return true;
  }
  if (name == QLatin1String("fsdp_transformer_layer_cls_to_wrap")) {
    ctx.ignore(key, v,
               QStringLiteral("the block policy wraps every transformer block of model.arch"));
    return true;
  }
  if (name == QLatin1String("deepspeed")) {
    if (isOff(v)) {
      ctx.ignore(key, v, QStringLiteral("off"));
    } else {
      ctx.unsupported(key, v,
                      QStringLiteral("import the DeepSpeed config itself: `shardscope-cli import "
                                     "deepspeed FILE`"));
    }
    return true;
  }
  if (name == QLatin1String("bf16") || name == QLatin1String("fp16")) {
    ctx.mapSwitch(key, v, precisionFields(name, s.sharded), QStringLiteral("off"));
    return true;
  }
  if (name == QLatin1String("tf32")) {
    if (v.isNull()) {
      ctx.ignore(key, v, QStringLiteral("PyTorch's default"));
    } else {
      ctx.mapBool(key, v, {QStringLiteral("shard.allow_tf32")});
    }
    return true;
  }
  if (name == QLatin1String("gradient_checkpointing") ||
      name == QLatin1String("activation_checkpointing")) {
    ctx.mapSwitch(key, v, {{"shard.activation_checkpointing", "true"}},
                  QStringLiteral("off, as Shardscope's default"));
    return true;
  }
  if (name == QLatin1String("use_cpu") || name == QLatin1String("no_cuda")) {
    ctx.mapSwitch(key, v, {{"shard.device", "\"cpu\""}},
                  QStringLiteral("shard.device \"auto\" uses CUDA when there is a GPU"));
    return true;
  }
  if (name == QLatin1String("ddp_backend")) {
    const QString be = asString(v).value_or(QString());
    if (v.isNull()) {
      ctx.ignore(key, v, QStringLiteral("shard.backend \"auto\": NCCL on CUDA, Gloo on CPU"));
    } else if (be == QLatin1String("nccl") || be == QLatin1String("gloo")) {
      ctx.map(key, v, {{"shard.backend", tomlString(be)}});
    } else {
      ctx.unsupported(key, v, QStringLiteral("collectives are NCCL or Gloo (shard.backend)"));
    }
    return true;
  }
  if (name == QLatin1String("ddp_timeout")) {
    ctx.mapWholeNumber(key, v, QStringLiteral("shard.timeout_s"), 1,
                       QStringLiteral("whole seconds >= 1"));
    return true;
  }
  return false;
}

// The learning rate, its schedule, the batch and the length of the run: [train]. Returns false for
// a key of another group.
bool mapScheduleKey(ImportContext& ctx, const QString& name, const QString& key,
                    const QJsonValue& v, const HfState& s) {
  const auto d = asNumber(v);
  if (name == QLatin1String("learning_rate")) {
    if (!d || *d <= 0) {
      ctx.badValue(key, v, QStringLiteral("a number > 0"));
    } else {
      ctx.map(key, v, {{"train.lr", tomlDouble(*d)}});
    }
    return true;
  }
  if (name == QLatin1String("lr_scheduler_type")) {
    mapScheduler(ctx, key, v, s);
    return true;
  }
  if (name == QLatin1String("lr_scheduler_kwargs")) {
    mapSchedulerKwargs(ctx, key, v, s);
    return true;
  }
  if (name == QLatin1String("warmup_steps") || name == QLatin1String("warmup_ratio")) {
    mapWarmup(ctx, key, v, s);
    return true;
  }
  if (name == QLatin1String("per_device_train_batch_size") ||
      name == QLatin1String("per_gpu_train_batch_size") ||
      name == QLatin1String("gradient_accumulation_steps")) {
    mapBatch(ctx, key, v, s);
    return true;
  }
  if (name == QLatin1String("max_steps")) {
    if (!asInt(v)) {
      ctx.badValue(key, v, QStringLiteral("a whole number"));
    } else if (s.maxSteps > 0) {
      ctx.map(key, v, {{"train.max_steps", QString::number(s.maxSteps)}});
    } else {
      ctx.unsupported(key, v,
                      QStringLiteral("the Trainer runs num_train_epochs epochs; set "
                                     "train.max_steps = epochs x samples / train.batch_size"));
    }
    return true;
  }
  if (name == QLatin1String("num_train_epochs")) {
    if (s.maxSteps > 0) {
      ctx.ignore(key, v, QStringLiteral("max_steps overrides it, as in the Trainer"));
    } else {
      ctx.unsupported(key, v,
                      QStringLiteral("runs are bounded by steps: set train.max_steps = epochs x "
                                     "samples / train.batch_size"));
    }
    return true;
  }
  return false;
}

// AdamW, clipping, seeds and data order. Returns false for a key of another group.
bool mapOptimizerKey(ImportContext& ctx, const QString& name, const QString& key,
                     const QJsonValue& v) {
  const auto d = asNumber(v);
  const auto b = asBool(v);
  if (name == QLatin1String("weight_decay") || name == QLatin1String("adam_beta1") ||
      name == QLatin1String("adam_beta2") || name == QLatin1String("adam_epsilon") ||
      name == QLatin1String("max_grad_norm")) {
    static const QHash<QString, QString> kField = {{"weight_decay", "train.weight_decay"},
                                                   {"adam_beta1", "train.adam_beta1"},
                                                   {"adam_beta2", "train.adam_beta2"},
                                                   {"adam_epsilon", "train.adam_eps"},
                                                   {"max_grad_norm", "train.grad_clip"}};
    if (!d) {
      ctx.badValue(key, v, QStringLiteral("a number"));
    } else {
      ctx.map(key, v, {{kField.value(name), tomlDouble(*d)}});
    }
    return true;
  }
  if (name == QLatin1String("optim")) {
    const QString o = asString(v).value_or(QString());
    if (isAdamW(o)) {
      ctx.ignore(key, v, QStringLiteral("AdamW: the trainer's optimizer (train.adam_*)"));
    } else {
      ctx.unsupported(key, v, QStringLiteral("the optimizer is AdamW (train.adam_*)"));
    }
    return true;
  }
  if (name == QLatin1String("seed")) {
    ctx.mapWholeNumber(key, v, QStringLiteral("train.seed"), 0);
    return true;
  }
  if (name == QLatin1String("data_seed")) {
    if (v.isNull()) {
      ctx.ignore(key, v, QStringLiteral("data order follows the seed"));
    } else {
      ctx.unsupported(
          key, v, QStringLiteral("data order follows train.seed; there is no separate data seed"));
    }
    return true;
  }
  if (name == QLatin1String("full_determinism")) {
    ctx.mapBool(key, v, {QStringLiteral("train.deterministic")});
    return true;
  }
  if (name == QLatin1String("train_sampling_strategy")) {
    const QString t = asString(v).value_or(QString());
    if (t == QLatin1String("random")) {
      ctx.map(key, v, {{"data.shuffle", "true"}});
    } else if (t == QLatin1String("sequential")) {
      ctx.map(key, v, {{"data.shuffle", "false"}});
    } else {
      ctx.unsupported(key, v, QStringLiteral("samples are shuffled or in order (data.shuffle)"));
    }
    return true;
  }
  if (name == QLatin1String("average_tokens_across_devices")) {
    if (b.value_or(false)) {
      ctx.ignore(key, v,
                 QStringLiteral("Shardscope's behaviour: the loss is divided by the tokens of all "
                                "ranks' micro-batches"));
    } else {
      ctx.unsupported(key, v, QStringLiteral("the loss is always averaged over all ranks' tokens"));
    }
    return true;
  }
  return false;
}

// Evaluation, checkpoint and logging intervals, and the keys of those families that have no field.
// Returns false for a key of another group.
bool mapIntervalKey(ImportContext& ctx, const QString& name, const QString& key,
                    const QJsonValue& v, const HfState& s) {
  if (name.startsWith(QLatin1String("eval_")) || name == QLatin1String("evaluation_strategy") ||
      name.startsWith(QLatin1String("save_")) || name.startsWith(QLatin1String("logging_"))) {
    if (const auto rule = keyRules().constFind(name); rule != keyRules().constEnd()) {
      applyRule(ctx, key, v, *rule);
    } else if (name == QLatin1String("save_total_limit")) {
      const auto n = asInt(v);
      ctx.map(key, v, {{"train.ckpt_keep", QString::number(n.value_or(0))}},
              v.isNull() ? QStringLiteral("null keeps all: 0") : QString());
    } else if (name == QLatin1String("eval_strategy") ||
               name == QLatin1String("evaluation_strategy") ||
               name == QLatin1String("eval_steps") || name == QLatin1String("save_strategy") ||
               name == QLatin1String("save_steps") || name == QLatin1String("logging_strategy") ||
               name == QLatin1String("logging_steps")) {
      mapIntervals(ctx, key, v, s);
    } else {
      ctx.unknown(key, v);
    }
    return true;
  }
  return false;
}

}  // namespace

void importHfTrainer(ImportContext& ctx, const QJsonObject& root, const QJsonObject& launcher,
                     bool commandLine) {
  importLauncher(ctx, launcher);
  HfState s;
  s.root = root;
  s.maxSteps = asInt(root.value(QStringLiteral("max_steps"))).value_or(-1);
  s.scheduler = asString(root.value(QStringLiteral("lr_scheduler_type"))).value_or(QString());
  const QJsonValue fsdp = root.value(QStringLiteral("fsdp"));
  const bool fsdpOn = !isOff(fsdp) && !(fsdp.isString() && asBool(fsdp) == false);
  s.sharded = fsdpOn || !isOff(root.value(QStringLiteral("deepspeed")));
  const QString prefix = commandLine ? QStringLiteral("--") : QString();

  // transformers 4.x saved `fsdp` as a list of options and ran FSDP1 unless fsdp_config said
  // otherwise; 5.x saves `fsdp: true` and defaults to FSDP2 (a command line is read as 5.x).
  const int defaultVersion = !commandLine && fsdp.isArray() ? 1 : 2;
  // fsdp_config before fsdp: fsdp=true's default strategy applies only when the table has none.
  if (root.contains(QStringLiteral("fsdp_config"))) {
    mapFsdpConfig(ctx, prefix + QStringLiteral("fsdp_config"),
                  root.value(QStringLiteral("fsdp_config")), fsdpOn, defaultVersion);
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    const QString name = it.key();
    const QString key = prefix + name;
    const QJsonValue v = it.value();
    if (name == QLatin1String("fsdp_config")) continue;
    if (mapShardingKey(ctx, name, key, v, s) || mapScheduleKey(ctx, name, key, v, s) ||
        mapOptimizerKey(ctx, name, key, v) || mapIntervalKey(ctx, name, key, v, s)) {
      continue;
    }
    if (const auto rule = keyRules().constFind(name); rule != keyRules().constEnd()) {
      applyRule(ctx, key, v, *rule);
    } else if (commandLine && scriptOptions().contains(name)) {
      ctx.unsupported(key, v, QLatin1String(scriptOptions().value(name)));
    } else {
      ctx.unknown(key, v);
    }
  }
}

}  // namespace shardscope::backend::importing
