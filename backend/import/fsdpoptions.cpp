// The FSDP options of accelerate's fsdp_config and the Trainer's fsdp_config. Both name the same
// FullyShardedDataParallelPlugin arguments; accelerate writes them with an "fsdp_" prefix, the
// Trainer strips it, and a few names differ (offload_params / cpu_offload).
#include "backend/import/importcontext.h"

namespace shardscope::backend::importing {
namespace {

const QString kNoEffect = QStringLiteral("no effect on what is trained here: ");

// FSDP1's strategy from fsdp_reshard_after_forward or the legacy fsdp_sharding_strategy.
void mapStrategy(ImportContext& ctx, const QString& key, const QJsonValue& v) {
  const auto s = fsdpStrategy(v);
  if (!s) {
    ctx.badValue(key, v,
                 QStringLiteral("FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or "
                                "HYBRID_SHARD_ZERO2 (or 1-5)"));
  } else if (*s == QLatin1String("hybrid_shard_zero2")) {
    ctx.map(key, v, {{"shard.strategy", "\"hybrid_shard\""}},
            QStringLiteral("nearest: Shardscope's HYBRID_SHARD frees gathered parameters after "
                           "forward, where ZERO2 keeps them until backward; same numerics, less "
                           "memory, one more all-gather per unit"));
  } else {
    ctx.map(key, v, {{"shard.strategy", tomlString(*s)}});
  }
}

void mapReshard(ImportContext& ctx, const QString& key, const QJsonValue& v, int version) {
  if (version == 2) {
    const auto b = asBool(v);
    if (!b) {
      ctx.badValue(key, v,
                   QStringLiteral("true or false (FSDP2 reshards or not; a strategy name "
                                  "is FSDP1's: set fsdp_version to 1)"));
      return;
    }
    ctx.map(key, v, {{"shard.strategy", *b ? "\"full_shard\"" : "\"shard_grad_op\""}});
    return;
  }
  if (v.isBool()) {
    ctx.badValue(key, v,
                 QStringLiteral("a strategy name for FSDP1 (FULL_SHARD, SHARD_GRAD_OP...); "
                                "true/false is FSDP2's: set fsdp_version to 2"));
    return;
  }
  mapStrategy(ctx, key, v);
}

void mapPrefetch(ImportContext& ctx, const QString& key, const QJsonValue& v, int version) {
  if (version == 2) {
    ctx.ignore(key, v,
               QStringLiteral("FSDP2 has no backward prefetch option (accelerate sets it to None); "
                              "shard.backward_prefetch keeps its default"));
    return;
  }
  const QString s = asString(v).value_or(QString()).toUpper();
  if (v.isNull() || s == QLatin1String("NO_PREFETCH") || s == QLatin1String("3")) {
    ctx.map(key, v, {{"shard.backward_prefetch", "\"none\""}});
  } else if (s == QLatin1String("BACKWARD_PRE") || s == QLatin1String("1")) {
    ctx.map(key, v, {{"shard.backward_prefetch", "\"pre\""}});
  } else if (s == QLatin1String("BACKWARD_POST") || s == QLatin1String("2")) {
    ctx.map(key, v, {{"shard.backward_prefetch", "\"post\""}});
  } else {
    ctx.badValue(key, v, QStringLiteral("BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH"));
  }
}

// true asks for something Shardscope does not do; false is its behaviour.
void offOrUnsupported(ImportContext& ctx, const QString& key, const QJsonValue& v,
                      const QString& whatToDo) {
  if (isOff(v)) {
    ctx.ignore(key, v, QStringLiteral("off, as in Shardscope"));
  } else {
    ctx.unsupported(key, v, whatToDo);
  }
}

}  // namespace

void importFsdpOptions(ImportContext& ctx, const QJsonObject& table, const QString& prefix,
                       int defaultVersion, bool trainerNames) {
  // The version decides how reshard_after_forward and backward_prefetch read, so it goes first.
  int version = defaultVersion;
  const auto validVersion = [](const QJsonValue& v) {
    const auto n = asInt(v);
    return n && (*n == 1 || *n == 2) ? static_cast<int>(*n) : 0;
  };
  for (const QString& k : {QStringLiteral("fsdp_version"), QStringLiteral("version")}) {
    if (const int n = validVersion(table.value(k))) version = n;
  }

  QString wrapPolicy;
  for (const QString& k :
       {QStringLiteral("fsdp_auto_wrap_policy"), QStringLiteral("auto_wrap_policy")}) {
    if (table.contains(k)) wrapPolicy = asString(table[k]).value_or(QString()).toUpper();
  }
  for (auto it = table.begin(); it != table.end(); ++it) {
    const QString key = prefix + it.key();
    const QJsonValue v = it.value();
    // accelerate writes fsdp_*; the Trainer strips the prefix and accepts either.
    const QString name = it.key().startsWith(QLatin1String("fsdp_")) ? it.key().mid(5) : it.key();
    if (name == QLatin1String("version")) {
      if (validVersion(v)) {
        ctx.ignore(key, v,
                   QStringLiteral("FSDP%1: decides how the strategy and prefetch keys read; "
                                  "Shardscope has one engine for both")
                       .arg(version));
      } else {
        ctx.badValue(key, v, QStringLiteral("1 or 2"));
      }
    } else if (name == QLatin1String("reshard_after_forward")) {
      mapReshard(ctx, key, v, version);
    } else if (name == QLatin1String("sharding_strategy")) {
      mapStrategy(ctx, key, v);
    } else if (name == QLatin1String("backward_prefetch") ||
               name == QLatin1String("backward_prefetch_policy")) {
      mapPrefetch(ctx, key, v, version);
    } else if (name == QLatin1String("forward_prefetch")) {
      ctx.mapBool(key, v, {QStringLiteral("shard.forward_prefetch")});
    } else if (name == QLatin1String("offload_params") || name == QLatin1String("cpu_offload")) {
      // FSDP's CPUOffload keeps parameters and gradients on the host, so the optimizer steps there.
      ctx.mapBool(
          key, v,
          {QStringLiteral("shard.offload_params"), QStringLiteral("shard.offload_optimizer")});
    } else if (name == QLatin1String("activation_checkpointing")) {
      // Only "on" is set: the Trainer's gradient_checkpointing may turn it on as well.
      ctx.mapSwitch(key, v, {{"shard.activation_checkpointing", "true"}},
                    QStringLiteral("off, as Shardscope's default"));
    } else if (name == QLatin1String("auto_wrap_policy")) {
      const QString p = asString(v).value_or(QString()).toUpper();
      if (p == QLatin1String("TRANSFORMER_BASED_WRAP")) {
        ctx.map(key, v, {{"shard.wrap_policy", "\"block\""}},
                QStringLiteral("one unit per transformer block (decoder and vision)"));
      } else if (p == QLatin1String("SIZE_BASED_WRAP")) {
        ctx.map(key, v, {{"shard.wrap_policy", "\"size\""}});
      } else if (p == QLatin1String("NO_WRAP")) {
        ctx.map(key, v, {{"shard.wrap_policy", "\"none\""}});
      } else {
        ctx.badValue(key, v, QStringLiteral("TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP"));
      }
    } else if (name == QLatin1String("min_num_params")) {
      const auto n = asInt(v);
      if (!n || *n < 0) {
        ctx.badValue(key, v, QStringLiteral("a whole number of parameters"));
      } else if (wrapPolicy == QLatin1String("SIZE_BASED_WRAP") && *n > 0) {
        ctx.map(key, v, {{"shard.wrap_min_params", QString::number(*n)}});
      } else {
        ctx.ignore(key, v, QStringLiteral("read only by SIZE_BASED_WRAP, which is not the policy"));
      }
    } else if (name == QLatin1String("transformer_layer_cls_to_wrap") ||
               name == QLatin1String("transformer_cls_names_to_wrap")) {
      ctx.ignore(key, v,
                 QStringLiteral("the block policy wraps every transformer block of model.arch; "
                                "class names are the Python model's"));
    } else if (name == QLatin1String("cpu_ram_efficient_loading") ||
               name == QLatin1String("sync_module_states")) {
      ctx.ignore(key, v,
                 kNoEffect + QStringLiteral("every rank reads only its own slice of the "
                                            "safetensors, so nothing is broadcast from rank 0"));
    } else if (name == QLatin1String("use_orig_params")) {
      ctx.ignore(key, v,
                 kNoEffect + QStringLiteral("frozen and trainable parameters are always kept in "
                                            "separate flat units (LoRA works either way)"));
    } else if (name == QLatin1String("state_dict_type")) {
      ctx.ignore(key, v,
                 QStringLiteral("checkpoints are always sharded (ckpt/, reshardable); `shardtrain "
                                "export` writes full HF safetensors"));
    } else if (name == QLatin1String("limit_all_gathers")) {
      ctx.ignore(key, v,
                 QStringLiteral("shard.max_inflight_gathers bounds the gathers in flight (default "
                                "2, as FSDP's limit)"));
    } else if (name == QLatin1String("activation_checkpointing_offload")) {
      offOrUnsupported(ctx, key, v,
                       QStringLiteral("checkpointed activations stay on the device; use "
                                      "shard.activation_checkpointing alone"));
    } else if (name == QLatin1String("ignored_modules")) {
      offOrUnsupported(ctx, key, v,
                       QStringLiteral("every module is sharded; freeze parameters with "
                                      "train.freeze instead"));
    } else if (name == QLatin1String("xla") || name == QLatin1String("xla_fsdp_v2") ||
               name == QLatin1String("xla_fsdp_grad_ckpt") ||
               name == QLatin1String("xla_fsdp_settings")) {
      offOrUnsupported(ctx, key, v,
                       QStringLiteral("PyTorch/XLA (TPU) FSDP: Shardscope runs on CUDA or CPU"));
    } else {
      ctx.unknown(key, v);
    }
  }
  Q_UNUSED(trainerNames);
}

}  // namespace shardscope::backend::importing
