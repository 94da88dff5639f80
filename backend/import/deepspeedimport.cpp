// A DeepSpeed JSON config (the keys of DeepSpeed's documented config-json): ZeRO stage and
// offloads, precision, batch sizes, clipping, AdamW and the warmup schedulers. "auto" values
// are the HF Trainer's placeholders: reported, never guessed.
#include <QJsonArray>

#include "backend/import/importcontext.h"

namespace shardscope::backend::importing {
namespace {

bool isAuto(const QJsonValue& v) { return v.isString() && v.toString() == QLatin1String("auto"); }

const QString kAuto = QStringLiteral(
    "\"auto\" is filled by the HF Trainer from TrainingArguments: import those with `import "
    "hf-trainer`, or set %1 yourself");

// A table that is off when absent, null, empty or {"enabled": false}.
bool tableOff(const QJsonValue& v) {
  if (isOff(v)) return true;
  return v.isObject() && v.toObject().contains(QStringLiteral("enabled")) &&
         isOff(v.toObject().value(QStringLiteral("enabled")));
}

void offOrUnsupported(ImportContext& ctx, const QString& key, const QJsonValue& v,
                      const QString& whatToDo) {
  if (tableOff(v) || asNumber(v) == 0.0) {
    ctx.ignore(key, v, QStringLiteral("off"));
  } else {
    ctx.unsupported(key, v, whatToDo);
  }
}

void mapNumber(ImportContext& ctx, const QString& key, const QJsonValue& v, const QString& field,
               bool integer) {
  if (isAuto(v)) {
    ctx.unsupported(key, v, kAuto.arg(field));
    return;
  }
  const auto d = asNumber(v);
  const auto n = asInt(v);
  if (!d || (integer && !n)) {
    ctx.badValue(key, v, integer ? QStringLiteral("a whole number") : QStringLiteral("a number"));
    return;
  }
  ctx.map(key, v, {{field, integer ? QString::number(*n) : tomlDouble(*d)}});
}

// train_batch_size = micro x accumulation x ranks: the three keys together fix the ranks.
void importBatch(ImportContext& ctx, const QJsonObject& root) {
  const QString kTbs = QStringLiteral("train_batch_size");
  const QString kMicro = QStringLiteral("train_micro_batch_size_per_gpu");
  const QString kGas = QStringLiteral("gradient_accumulation_steps");
  const auto tbs = asCount(root.value(kTbs));
  const auto micro = asCount(root.value(kMicro));
  const auto gas = asCount(root.value(kGas));
  const auto& launch = ctx.experiment().launch;
  const qint64 world = qint64(launch.nnodes) * launch.nproc_per_node;
  for (const QString& k : {kTbs, kMicro, kGas}) {
    const QJsonValue v = root.value(k);
    if (!root.contains(k)) continue;
    const QString field = k == kTbs     ? QStringLiteral("train.batch_size")
                          : k == kMicro ? QStringLiteral("train.micro_batch_size")
                                        : QStringLiteral("train.batch_size");
    if (isAuto(v)) {
      ctx.unsupported(k, v, kAuto.arg(field));
      continue;
    }
    const auto n = asCount(v);
    if (!n) {
      ctx.badValue(k, v, QStringLiteral("a whole number from 1 to 10^9, or \"auto\""));
      continue;
    }
    if (tbs && micro && gas) {
      // All three: they decide the number of ranks, which must be whole.
      if (*tbs % (*micro * *gas) != 0) {
        ctx.error(k, v,
                  QStringLiteral("train_batch_size %1 is not train_micro_batch_size_per_gpu %2 x "
                                 "gradient_accumulation_steps %3 x a whole number of ranks")
                      .arg(*tbs)
                      .arg(*micro)
                      .arg(*gas));
        continue;
      }
      const qint64 ranks = *tbs / (*micro * *gas);
      if (k == kTbs) {
        ctx.map(k, v, {{"train.batch_size", QString::number(*tbs)}});
      } else if (k == kMicro) {
        ctx.map(k, v, {{"train.micro_batch_size", QString::number(*micro)}});
      } else {
        ctx.map(k, v, {{"launch.nnodes", "1"}, {"launch.nproc_per_node", QString::number(ranks)}},
                QStringLiteral("%1 ranks = train_batch_size / (micro x accumulation); spread them "
                               "over launch.nnodes nodes if they are not on one")
                    .arg(ranks));
      }
    } else if (k == kTbs) {
      ctx.map(k, v, {{"train.batch_size", QString::number(*n)}});
    } else if (k == kMicro) {
      std::vector<Assign> set{{"train.micro_batch_size", QString::number(*n)}};
      const auto batch = product({*n, gas.value_or(1), world});
      if (!tbs && gas && batch) set.emplace_back("train.batch_size", QString::number(*batch));
      ctx.map(k, v, set,
              !tbs && gas ? QStringLiteral("batch = micro x accumulation x %1 ranks "
                                           "(launch.nnodes x launch.nproc_per_node)")
                                .arg(world)
                          : QString());
    } else if (tbs && micro) {
      ctx.ignore(k, v, QStringLiteral("follows from train.batch_size / (micro x ranks)"));
    } else if (tbs) {
      const auto perMicro = product({*n, world});
      if (perMicro && *tbs % *perMicro == 0) {
        ctx.map(k, v, {{"train.micro_batch_size", QString::number(*tbs / *perMicro)}},
                QStringLiteral("micro = train_batch_size / (accumulation x %1 ranks)").arg(world));
      } else {
        ctx.unsupported(k, v,
                        QStringLiteral("train_batch_size is not a multiple of accumulation x %1 "
                                       "ranks; set launch.nproc_per_node and "
                                       "train.micro_batch_size")
                            .arg(world));
      }
    } else if (micro) {
      ctx.ignore(k, v, QStringLiteral("counted in train.batch_size with the micro-batch"));
    } else {
      ctx.unsupported(
          k, v, QStringLiteral("without a batch size it fixes nothing; set train.batch_size"));
    }
  }
}

// zero_optimization.offload_param / offload_optimizer: the device decides; the rest is tuning.
void importOffload(ImportContext& ctx, const QString& name, const QString& key, const QJsonValue& v,
                   qint64 stage) {
  const bool param = name == QLatin1String("offload_param");
  const QString field =
      param ? QStringLiteral("shard.offload_params") : QStringLiteral("shard.offload_optimizer");
  if (v.isNull()) {
    ctx.ignore(key, v, QStringLiteral("off"));
    return;
  }
  if (!v.isObject()) {
    ctx.badValue(key, v, QStringLiteral("a table with \"device\""));
    return;
  }
  const QJsonObject t = v.toObject();
  if (t.isEmpty()) ctx.ignore(key, v, QStringLiteral("empty: no offload"));
  for (auto sub = t.begin(); sub != t.end(); ++sub) {
    const QString subKey = key + QLatin1Char('.') + sub.key();
    const QString device = asString(sub.value()).value_or(QString()).toLower();
    if (sub.key() == QLatin1String("device")) {
      if (device == QLatin1String("none")) {
        ctx.map(subKey, sub.value(), {{field, "false"}});
      } else if (device == QLatin1String("cpu") && param && stage != 3) {
        ctx.error(subKey, sub.value(),
                  QStringLiteral("offload_param needs ZeRO stage 3 (DeepSpeed refuses it at "
                                 "stage %1); use stage 3 or offload_optimizer")
                      .arg(stage));
      } else if (device == QLatin1String("cpu")) {
        ctx.map(subKey, sub.value(), {{field, "true"}});
      } else if (device == QLatin1String("nvme")) {
        ctx.unsupported(subKey, sub.value(),
                        QStringLiteral("no NVMe offload; use \"cpu\" (%1)").arg(field));
      } else {
        ctx.badValue(subKey, sub.value(), QStringLiteral("cpu, nvme or none"));
      }
    } else if (sub.key() == QLatin1String("ratio") && asNumber(sub.value()).value_or(1) < 1) {
      ctx.unsupported(subKey, sub.value(),
                      QStringLiteral("partial offload: the whole optimizer state moves"));
    } else {
      ctx.ignore(subKey, sub.value(), QStringLiteral("offload tuning (pinning, buffers, paths)"));
    }
  }
}

void importZero(ImportContext& ctx, const QString& prefix, const QJsonObject& zero) {
  const auto stage = asInt(zero.value(QStringLiteral("stage"))).value_or(0);
  for (auto it = zero.begin(); it != zero.end(); ++it) {
    const QString name = it.key();
    const QString key = prefix + name;
    const QJsonValue v = it.value();
    if (name == QLatin1String("stage")) {
      const auto n = asInt(v);
      if (!n || *n < 0 || *n > 3) {
        ctx.badValue(key, v, QStringLiteral("0, 1, 2 or 3"));
      } else if (*n == 0) {
        ctx.map(key, v, {{"shard.strategy", "\"no_shard\""}},
                QStringLiteral("plain data parallel"));
      } else if (*n == 1) {
        ctx.map(
            key, v, {{"shard.strategy", "\"shard_grad_op\""}},
            QStringLiteral("nearest: ZeRO-1 shards optimizer state only; shard_grad_op (ZeRO-2) "
                           "also shards gradients: same numerics, less memory"));
      } else {
        ctx.map(key, v, {{"shard.strategy", *n == 2 ? "\"shard_grad_op\"" : "\"full_shard\""}});
      }
    } else if (name == QLatin1String("offload_param") ||
               name == QLatin1String("offload_optimizer")) {
      importOffload(ctx, name, key, v, stage);
    } else if (name == QLatin1String("cpu_offload")) {  // before DeepSpeed 0.3.16
      ctx.mapBool(key, v, {QStringLiteral("shard.offload_optimizer")});
    } else if (name == QLatin1String("cpu_offload_params")) {
      ctx.mapBool(key, v, {QStringLiteral("shard.offload_params")});
    } else if (name == QLatin1String("zero_hpz_partition_size") ||
               name == QLatin1String("mics_shard_size")) {
      if (asInt(v).value_or(1) <= 1 || asInt(v) == -1) {
        ctx.ignore(key, v, QStringLiteral("off"));
      } else {
        ctx.unsupported(key, v,
                        QStringLiteral("partial sharding groups: the nearest is shard.strategy = "
                                       "\"hybrid_shard\" (shard within a node, replicate across)"));
      }
    } else if (name.startsWith(QLatin1String("zero_quantized"))) {
      offOrUnsupported(ctx, key, v, QStringLiteral("no quantized collectives (ZeRO++)"));
    } else if (name.contains(QLatin1String("gather_16bit_weights")) ||
               name.contains(QLatin1String("gather_fp16_weights"))) {
      ctx.ignore(key, v, QStringLiteral("`shardtrain export` writes the full model"));
    } else if (name == QLatin1String("overlap_comm") ||
               name == QLatin1String("contiguous_gradients") ||
               name.endsWith(QLatin1String("bucket_size")) ||
               name == QLatin1String("reduce_scatter") ||
               name == QLatin1String("allgather_partitions") ||
               name == QLatin1String("round_robin_gradients") ||
               name == QLatin1String("sub_group_size") ||
               name.startsWith(QLatin1String("stage3_")) ||
               name == QLatin1String("elastic_checkpoint") ||
               name == QLatin1String("ignore_unused_parameters") ||
               name == QLatin1String("load_from_fp32_weights") ||
               name == QLatin1String("memory_efficient_linear") ||
               name == QLatin1String("use_multi_rank_bucket_allreduce") ||
               name == QLatin1String("mics_hierarchical_params_gather") ||
               name == QLatin1String("cpu_offload_use_pin_memory") ||
               name == QLatin1String("legacy_stage1") ||
               name == QLatin1String("log_trace_cache_warnings")) {
      ctx.ignore(key, v,
                 QStringLiteral("communication tuning: one all-gather and one reduce-scatter per "
                                "wrap unit, shard.max_inflight_gathers bounds them"));
    } else {
      ctx.unknown(key, v);
    }
  }
}

// A table's keys, or one entry for the table when it is empty or not a table.
bool tableEntries(ImportContext& ctx, const QString& key, const QJsonValue& v) {
  if (!v.isObject() && !v.isNull()) {
    ctx.badValue(key, v, QStringLiteral("a table"));
    return false;
  }
  if (v.toObject().isEmpty()) {
    ctx.ignore(key, v, QStringLiteral("empty: nothing asked for"));
    return false;
  }
  return true;
}

// Walks a {type, params} table (optimizer, scheduler): `onType(key, value)` for its type,
// `onParam(key, name, value)` for each entry of a non-empty params table; any other key is unknown.
template <class OnType, class OnParam>
void walkTypedTable(ImportContext& ctx, const QString& section, const QJsonObject& table,
                    OnType onType, OnParam onParam) {
  const QJsonObject params = table.value(QStringLiteral("params")).toObject();
  for (auto it = table.begin(); it != table.end(); ++it) {
    const QString key = section + QLatin1Char('.') + it.key();
    if (it.key() == QLatin1String("type")) {
      onType(key, it.value());
    } else if (it.key() != QLatin1String("params")) {
      ctx.unknown(key, it.value());
    } else if (tableEntries(ctx, key, it.value())) {
      for (auto p = params.begin(); p != params.end(); ++p) {
        onParam(key + QLatin1Char('.') + p.key(), p.key(), p.value());
      }
    }
  }
}

void importOptimizer(ImportContext& ctx, const QJsonObject& opt) {
  const QString type = asString(opt.value(QStringLiteral("type"))).value_or(QString());
  const QJsonObject params = opt.value(QStringLiteral("params")).toObject();
  const bool adamw = type.compare(QLatin1String("AdamW"), Qt::CaseInsensitive) == 0 ||
                     (type.compare(QLatin1String("Adam"), Qt::CaseInsensitive) == 0 &&
                      asBool(params.value(QStringLiteral("adam_w_mode"))).value_or(true));
  walkTypedTable(
      ctx, QStringLiteral("optimizer"), opt,
      [&](const QString& key, const QJsonValue& value) {
        if (adamw) {
          ctx.ignore(key, value, QStringLiteral("AdamW: the trainer's optimizer"));
        } else {
          ctx.unsupported(key, value, QStringLiteral("the optimizer is AdamW (train.adam_*)"));
        }
      },
      [&](const QString& pk, const QString& name, const QJsonValue& v) {
        if (name == QLatin1String("lr")) {
          mapNumber(ctx, pk, v, QStringLiteral("train.lr"), false);
        } else if (name == QLatin1String("weight_decay")) {
          mapNumber(ctx, pk, v, QStringLiteral("train.weight_decay"), false);
        } else if (name == QLatin1String("eps")) {
          mapNumber(ctx, pk, v, QStringLiteral("train.adam_eps"), false);
        } else if (name == QLatin1String("betas")) {
          const QJsonArray b = v.toArray();
          if (isAuto(v)) {
            ctx.unsupported(pk, v, kAuto.arg(QStringLiteral("train.adam_beta1/2")));
          } else if (b.size() != 2 || !asNumber(b[0]) || !asNumber(b[1])) {
            ctx.badValue(pk, v, QStringLiteral("[beta1, beta2]"));
          } else {
            ctx.map(pk, v,
                    {{"train.adam_beta1", tomlDouble(*asNumber(b[0]))},
                     {"train.adam_beta2", tomlDouble(*asNumber(b[1]))}});
          }
        } else if (name == QLatin1String("adam_w_mode") || name == QLatin1String("torch_adam")) {
          ctx.ignore(pk, v, adamw ? QStringLiteral("AdamW") : QStringLiteral("see optimizer.type"));
        } else if (name == QLatin1String("amsgrad") || name == QLatin1String("bias_correction")) {
          const bool isDefault = (name == QLatin1String("amsgrad")) == isOff(v);
          if (isDefault) {
            ctx.ignore(pk, v, QStringLiteral("as the trainer's AdamW"));
          } else {
            ctx.unsupported(
                pk, v, QStringLiteral("the trainer's AdamW has bias correction and no amsgrad"));
          }
        } else {
          ctx.unsupported(pk, v, QStringLiteral("an option of another optimizer; AdamW only"));
        }
      });
}

void importScheduler(ImportContext& ctx, const QJsonObject& sched, double lr) {
  const QString type = asString(sched.value(QStringLiteral("type"))).value_or(QString());
  const QJsonObject params = sched.value(QStringLiteral("params")).toObject();
  const bool known = type == QLatin1String("WarmupLR") || type == QLatin1String("WarmupDecayLR") ||
                     type == QLatin1String("WarmupCosineLR");
  walkTypedTable(
      ctx, QStringLiteral("scheduler"), sched,
      [&](const QString& key, const QJsonValue& value) {
        const QString schedule = type == QLatin1String("WarmupLR") ? QStringLiteral("\"constant\"")
                                 : type == QLatin1String("WarmupDecayLR")
                                     ? QStringLiteral("\"linear\"")
                                     : QStringLiteral("\"cosine\"");
        if (known) {
          // WarmupLR and WarmupDecayLR warm up logarithmically unless warmup_type says linear:
          // other learning rates during warmup, so the nearest schedule is not the same run.
          const bool logWarmup =
              type != QLatin1String("WarmupCosineLR") &&
              asString(params.value(QStringLiteral("warmup_type")))
                      .value_or(QStringLiteral("log")) != QLatin1String("linear") &&
              asNumber(params.value(QStringLiteral("warmup_num_steps"))).value_or(1000) > 0;
          if (logWarmup) {
            ctx.mapNearest(
                key, value, {{"train.lr_schedule", schedule}},
                QStringLiteral("DeepSpeed warms up logarithmically (warmup_type log, its "
                               "default); Shardscope's warmup is linear: set "
                               "warmup_type linear to accept it"));
          } else {
            ctx.map(key, value, {{"train.lr_schedule", schedule}});
          }
        } else {
          ctx.unsupported(key, value,
                          QStringLiteral("schedules are constant, linear and cosine after a linear "
                                         "warmup (WarmupLR, WarmupDecayLR, WarmupCosineLR)"));
        }
      },
      [&](const QString& pk, const QString& name, const QJsonValue& v) {
        if (!known) {
          ctx.unsupported(pk, v, QStringLiteral("a parameter of an unsupported scheduler"));
        } else if (name == QLatin1String("warmup_num_steps")) {
          mapNumber(ctx, pk, v, QStringLiteral("train.lr_warmup_steps"), true);
        } else if (name == QLatin1String("total_num_steps")) {
          mapNumber(ctx, pk, v, QStringLiteral("train.max_steps"), true);
        } else if (name == QLatin1String("warmup_max_lr")) {
          mapNumber(ctx, pk, v, QStringLiteral("train.lr"), false);
        } else if (name == QLatin1String("warmup_min_lr") ||
                   name == QLatin1String("warmup_min_ratio")) {
          offOrUnsupported(ctx, pk, v, QStringLiteral("the warmup starts from 0"));
        } else if (name == QLatin1String("cos_min_ratio")) {
          const auto r = asNumber(v);
          if (!r || lr <= 0) {
            ctx.unsupported(pk, v, QStringLiteral("set train.lr_min = cos_min_ratio x train.lr"));
          } else {
            ctx.map(pk, v, {{"train.lr_min", tomlDouble(*r * lr)}}, QStringLiteral("ratio x lr"));
          }
        } else if (name == QLatin1String("warmup_type")) {
          if (asString(v) == QStringLiteral("linear")) {
            ctx.ignore(pk, v, QStringLiteral("linear, as Shardscope's warmup"));
          } else {
            ctx.unsupported(pk, v, QStringLiteral("the warmup is linear"));
          }
        } else if (name == QLatin1String("last_batch_iteration")) {
          ctx.ignore(pk, v, QStringLiteral("resume restores the step"));
        } else {
          ctx.unknown(pk, v);
        }
      });
}

// fp16 / bf16 (bfloat16) tables.
void importPrecision(ImportContext& ctx, const QString& name, const QJsonObject& t) {
  const QString dtype =
      name == QLatin1String("fp16") ? QStringLiteral("fp16") : QStringLiteral("bf16");
  for (auto it = t.begin(); it != t.end(); ++it) {
    const QString key = name + QLatin1Char('.') + it.key();
    const QJsonValue v = it.value();
    if (it.key() == QLatin1String("enabled")) {
      if (isAuto(v)) {
        ctx.unsupported(key, v, kAuto.arg(QStringLiteral("shard.precision")));
      } else if (!asBool(v)) {
        ctx.badValue(key, v, QStringLiteral("true, false or \"auto\""));
      } else if (*asBool(v)) {
        ctx.map(key, v, precisionFields(dtype, true));
      } else {
        ctx.ignore(key, v, QStringLiteral("off"));
      }
    } else if (it.key() == QLatin1String("loss_scale") && asNumber(v).value_or(0) != 0) {
      ctx.unsupported(key, v,
                      QStringLiteral("the gradient scaler is dynamic; remove the static scale"));
    } else if (it.key() == QLatin1String("auto_cast") ||
               it.key() == QLatin1String("fp16_master_weights_and_grads")) {
      offOrUnsupported(ctx, key, v, QStringLiteral("masters stay fp32; use shard.precision"));
    } else {
      ctx.ignore(key, v, QStringLiteral("loss-scaler tuning: the trainer's dynamic scaler"));
    }
  }
}

}  // namespace

void importDeepSpeed(ImportContext& ctx, const QJsonObject& root) {
  importBatch(ctx, root);
  const QJsonObject optParams =
      root.value(QStringLiteral("optimizer")).toObject().value(QStringLiteral("params")).toObject();
  double lr = asNumber(optParams.value(QStringLiteral("lr"))).value_or(0);
  if (lr <= 0) lr = ctx.experiment().train.lr;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const QString name = it.key();
    const QJsonValue v = it.value();
    if (name == QLatin1String("train_batch_size") ||
        name == QLatin1String("train_micro_batch_size_per_gpu") ||
        name == QLatin1String("gradient_accumulation_steps")) {
      continue;  // importBatch
    }
    if (name == QLatin1String("zero_optimization")) {
      if (tableEntries(ctx, name, v)) importZero(ctx, name + QLatin1Char('.'), v.toObject());
    } else if (name == QLatin1String("fp16") || name == QLatin1String("bf16") ||
               name == QLatin1String("bfloat16")) {
      if (tableEntries(ctx, name, v)) importPrecision(ctx, name, v.toObject());
    } else if (name == QLatin1String("optimizer")) {
      if (tableEntries(ctx, name, v)) importOptimizer(ctx, v.toObject());
    } else if (name == QLatin1String("scheduler")) {
      if (tableEntries(ctx, name, v)) importScheduler(ctx, v.toObject(), lr);
    } else if (name == QLatin1String("gradient_clipping")) {
      mapNumber(ctx, name, v, QStringLiteral("train.grad_clip"), false);
    } else if (name == QLatin1String("steps_per_print")) {
      mapNumber(ctx, name, v, QStringLiteral("train.log_every"), true);
    } else if (name == QLatin1String("wall_clock_breakdown") ||
               name == QLatin1String("dump_state") || name == QLatin1String("memory_breakdown") ||
               name == QLatin1String("flops_profiler") || name == QLatin1String("tensorboard") ||
               name == QLatin1String("wandb") || name == QLatin1String("csv_monitor") ||
               name == QLatin1String("comet") || name == QLatin1String("comms_logger") ||
               name == QLatin1String("timers") || name == QLatin1String("monitor_config")) {
      ctx.ignore(
          name, v,
          QStringLiteral("logging and profiling: step, mem and eval events go to the run log"));
    } else if (name == QLatin1String("zero_allow_untested_optimizer") ||
               name == QLatin1String("zero_force_ds_cpu_optimizer") ||
               name == QLatin1String("aio") || name == QLatin1String("checkpoint") ||
               name == QLatin1String("dataloader_drop_last")) {
      ctx.ignore(name, v, QStringLiteral("DeepSpeed's own machinery: no meaning for this trainer"));
    } else if (name == QLatin1String("communication_data_type") ||
               name == QLatin1String("seq_parallel_communication_data_type")) {
      if (v.isNull()) {
        ctx.ignore(name, v, QStringLiteral("follows the precision"));
      } else {
        ctx.unsupported(name, v,
                        QStringLiteral("set shard.precision = \"custom\" and shard.reduce_dtype"));
      }
    } else if (name == QLatin1String("prescale_gradients") ||
               name == QLatin1String("sparse_gradients") ||
               name == QLatin1String("disable_allgather") ||
               name == QLatin1String("graph_harvesting")) {
      offOrUnsupported(ctx, name, v, QStringLiteral("gradients are averaged after the reduction"));
    } else if (name == QLatin1String("gradient_predivide_factor")) {
      if (asNumber(v).value_or(1) == 1) {
        ctx.ignore(name, v, QStringLiteral("1: no pre-division"));
      } else {
        ctx.unsupported(name, v, QStringLiteral("no pre-division of gradients"));
      }
    } else if (name == QLatin1String("amp")) {
      offOrUnsupported(ctx, name, v, QStringLiteral("no apex AMP; use shard.precision"));
    } else if (name == QLatin1String("activation_checkpointing")) {
      const QJsonObject t = v.toObject();
      for (auto sub = t.begin(); sub != t.end(); ++sub) {
        offOrUnsupported(ctx, name + QLatin1Char('.') + sub.key(), sub.value(),
                         QStringLiteral("DeepSpeed's checkpointing API for Megatron-style models; "
                                        "set shard.activation_checkpointing (per wrap unit)"));
      }
      if (t.isEmpty()) ctx.ignore(name, v, QStringLiteral("empty"));
    } else if (name == QLatin1String("data_types")) {
      const QString acc =
          asString(v.toObject().value(QStringLiteral("grad_accum_dtype"))).value_or(QString());
      if (acc.isEmpty() || acc == QLatin1String("fp32")) {
        ctx.ignore(name, v, QStringLiteral("gradients accumulate in fp32"));
      } else {
        ctx.unsupported(name, v, QStringLiteral("gradients accumulate in fp32"));
      }
    } else if (name == QLatin1String("torch_autocast")) {
      offOrUnsupported(
          ctx, name, v,
          QStringLiteral("set shard.precision = \"bf16_autocast\" or \"fp16_autocast\""));
    } else if (name == QLatin1String("sparse_attention") || name == QLatin1String("pipeline") ||
               name == QLatin1String("elasticity") ||
               name == QLatin1String("compression_training") ||
               name == QLatin1String("data_efficiency") ||
               name == QLatin1String("curriculum_learning") ||
               name == QLatin1String("autotuning") || name == QLatin1String("hybrid_engine") ||
               name == QLatin1String("weight_quantization") || name == QLatin1String("nebula") ||
               name == QLatin1String("progressive_layer_drop") ||
               name == QLatin1String("eigenvalue") || name == QLatin1String("quantize_training") ||
               name == QLatin1String("use_data_before_expert_parallelism")) {
      offOrUnsupported(ctx, name, v,
                       QStringLiteral("a DeepSpeed feature Shardscope's trainer does not have; "
                                      "remove it"));
    } else {
      ctx.unknown(name, v);
    }
  }
}

}  // namespace shardscope::backend::importing
