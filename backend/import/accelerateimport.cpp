// accelerate's config file (`accelerate config` 1.x, ClusterConfig.to_yaml_file or
// to_json_file): the process layout, mixed precision and the FSDP plugin's options.
#include <QJsonArray>

#include "backend/import/importcontext.h"

namespace shardscope::backend::importing {
namespace {

const QString kTpu = QStringLiteral("TPU pods only");

// The distributed types that run plain data parallel (DDP) on some device.
bool isDataParallel(const QString& t) { return t.startsWith(QLatin1String("MULTI_")); }

void mapGpuIds(ImportContext& ctx, const QString& key, const QJsonValue& v) {
  const QString s = asString(v).value_or(QString()).trimmed();
  if (v.isNull() || s.isEmpty() || s.toLower() == QLatin1String("all")) {
    ctx.ignore(key, v, QStringLiteral("every visible GPU: launch.gpus empty"));
    return;
  }
  QStringList ids;
  for (const auto& part : s.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    bool ok = false;
    const int id = part.trimmed().toInt(&ok);
    if (!ok || id < 0) {
      ctx.badValue(key, v, QStringLiteral("\"all\" or GPU indices separated by commas"));
      return;
    }
    ids << QString::number(id);
  }
  ctx.map(key, v,
          {{"launch.gpus", QLatin1Char('[') + ids.join(QStringLiteral(", ")) + QLatin1Char(']')}});
}

// A table accelerate writes for a feature Shardscope does not have: empty is nothing asked for,
// each key of a non-empty one is reported unsupported.
void unsupportedTable(ImportContext& ctx, const QString& key, const QJsonValue& v,
                      const QString& whatToDo) {
  if (isOff(v)) {
    ctx.ignore(key, v, QStringLiteral("empty: nothing asked for"));
    return;
  }
  if (!v.isObject()) {
    ctx.unsupported(key, v, whatToDo);
    return;
  }
  const QJsonObject t = v.toObject();
  for (auto it = t.begin(); it != t.end(); ++it) {
    if (isOff(it.value())) {
      ctx.ignore(key + QLatin1Char('.') + it.key(), it.value(), QStringLiteral("off"));
    } else {
      ctx.unsupported(key + QLatin1Char('.') + it.key(), it.value(), whatToDo);
    }
  }
}

// accelerate's deepspeed_config table: the ZeRO stage and offloads map like a DeepSpeed file's.
void importDeepSpeedTable(ImportContext& ctx, const QString& prefix, const QJsonObject& t) {
  for (auto it = t.begin(); it != t.end(); ++it) {
    const QString key = prefix + it.key();
    const QJsonValue v = it.value();
    const QString name = it.key();
    if (name == QLatin1String("zero_stage")) {
      const auto n = asInt(v);
      static const char* const kStage[] = {"\"no_shard\"", "\"shard_grad_op\"", "\"shard_grad_op\"",
                                           "\"full_shard\""};
      if (!n || *n < 0 || *n > 3) {
        ctx.badValue(key, v, QStringLiteral("0, 1, 2 or 3"));
      } else {
        ctx.map(key, v, {{"shard.strategy", QLatin1String(kStage[*n])}});
      }
    } else if (name == QLatin1String("offload_optimizer_device") ||
               name == QLatin1String("offload_param_device")) {
      const QString d = asString(v).value_or(QString()).toLower();
      const QString field = name == QLatin1String("offload_optimizer_device")
                                ? QStringLiteral("shard.offload_optimizer")
                                : QStringLiteral("shard.offload_params");
      if (d == QLatin1String("none") || v.isNull()) {
        ctx.map(key, v, {{field, "false"}});
      } else if (d == QLatin1String("cpu")) {
        ctx.map(key, v, {{field, "true"}});
      } else {
        ctx.unsupported(key, v, QStringLiteral("NVMe offload: use \"cpu\" (%1)").arg(field));
      }
    } else if (name == QLatin1String("gradient_clipping")) {
      const auto d = asNumber(v);
      if (d) {
        ctx.map(key, v, {{"train.grad_clip", tomlDouble(*d)}});
      } else {
        ctx.badValue(key, v, QStringLiteral("a number"));
      }
    } else if (name == QLatin1String("zero3_init_flag") ||
               name == QLatin1String("zero3_save_16bit_model")) {
      ctx.ignore(
          key, v,
          QStringLiteral("ranks load their own slices and checkpoints are sharded; `shardtrain "
                         "export` writes the full model"));
    } else if (name == QLatin1String("deepspeed_config_file")) {
      ctx.unsupported(key, v,
                      QStringLiteral("import that file with `shardscope-cli import deepspeed %1`")
                          .arg(valueText(v)));
    } else {
      ctx.unsupported(key, v,
                      QStringLiteral("a DeepSpeed launcher option; Shardscope starts ranks from "
                                     "[launch]"));
    }
  }
}

// What the whole file decides, read before its keys.
struct AccelerateRun {
  QString type;  // distributed_type, upper case
  bool fsdp = false;
  bool deepspeed = false;
  bool sharded = false;  // FSDP or DeepSpeed: precision keeps parameters in the low dtype
  qint64 machines = 1;   // num_machines
};

// The kind of run: distributed_type, where it runs, mixed precision, the device. Returns false for
// a key of another group.
bool mapTypeKey(ImportContext& ctx, const QString& key, const QJsonValue& v,
                const AccelerateRun& st) {
  const QString& type = st.type;
  const auto fsdp = st.fsdp;
  const auto deepspeed = st.deepspeed;
  const auto sharded = st.sharded;
  if (key == QLatin1String("distributed_type")) {
    if (fsdp) {
      if (!ctx.has(QStringLiteral("shard.strategy"))) {
        ctx.map(key, v, {{"shard.strategy", "\"full_shard\""}},
                QStringLiteral("accelerate's default strategy"));
      } else {
        ctx.ignore(key, v, QStringLiteral("sharded; the strategy comes from fsdp_config"));
      }
    } else if (deepspeed) {
      if (!ctx.has(QStringLiteral("shard.strategy"))) {
        ctx.unsupported(key, v,
                        QStringLiteral("the ZeRO stage is in the DeepSpeed config: import it "
                                       "with `shardscope-cli import deepspeed FILE`"));
      } else {
        ctx.ignore(key, v, QStringLiteral("sharded; the stage comes from deepspeed_config"));
      }
    } else if (type == QLatin1String("NO")) {
      ctx.map(key, v, {{"shard.strategy", "\"no_shard\""}}, QStringLiteral("one process"));
    } else if (type == QLatin1String("MULTI_CPU")) {
      ctx.map(key, v, {{"shard.strategy", "\"no_shard\""}, {"shard.device", "\"cpu\""}},
              QStringLiteral("plain data parallel on CPUs"));
    } else if (isDataParallel(type)) {
      ctx.map(key, v, {{"shard.strategy", "\"no_shard\""}},
              QStringLiteral("plain data parallel (DDP)"));
    } else {
      ctx.unsupported(key, v,
                      QStringLiteral("Shardscope runs FSDP-style sharding or data parallel on "
                                     "CUDA or CPU; use FSDP, MULTI_GPU or NO"));
    }
    return true;
  }
  if (key == QLatin1String("compute_environment")) {
    if (asString(v).value_or(QString()) == QLatin1String("LOCAL_MACHINE")) {
      ctx.ignore(key, v, QStringLiteral("where ranks start is launch.kind (local, ssh, slurm)"));
    } else {
      ctx.unsupported(key, v, QStringLiteral("SageMaker: run on your own hosts or Slurm"));
    }
    return true;
  }
  if (key == QLatin1String("mixed_precision") || key == QLatin1String("fp16")) {
    QString p = asString(v).value_or(QString()).toLower();
    if (key == QLatin1String("fp16")) {  // accelerate < 0.6's flag
      const auto b = asBool(v);
      if (!b) {
        ctx.badValue(key, v, QStringLiteral("true or false"));
        return true;
      }
      p = *b ? QStringLiteral("fp16") : QStringLiteral("no");
      if (!*b) {
        ctx.ignore(key, v, QStringLiteral("accelerate < 0.6's flag, off"));
        return true;
      }
    }
    if (v.isNull() || p == QLatin1String("no") || p == QLatin1String("bf16") ||
        p == QLatin1String("fp16")) {
      ctx.map(key, v, precisionFields(p, sharded));
    } else if (p == QLatin1String("fp8")) {
      ctx.unsupported(key, v, QStringLiteral("no FP8 training; use bf16"));
    } else {
      ctx.badValue(key, v, QStringLiteral("no, fp16, bf16 or fp8"));
    }
    return true;
  }
  if (key == QLatin1String("use_cpu")) {
    ctx.mapSwitch(key, v, {{"shard.device", "\"cpu\""}},
                  QStringLiteral("shard.device \"auto\" uses CUDA when there is a GPU"));
    return true;
  }
  return false;
}

// The process layout and the rendezvous: [launch]. Returns false for a key of another group.
bool mapProcessKey(ImportContext& ctx, const QString& key, const QJsonValue& v,
                   const AccelerateRun& st) {
  const auto machines = st.machines;
  if (key == QLatin1String("num_processes")) {
    const auto n = asInt(v);
    if (!n) {
      ctx.badValue(key, v, QStringLiteral("a whole number"));
    } else if (*n <= 0) {
      ctx.ignore(key, v,
                 QStringLiteral(
                     "not set (the scheduler decides); launch.nproc_per_node keeps its default"));
    } else if (machines < 1 || *n % machines != 0) {
      ctx.error(key, v,
                QStringLiteral("%1 processes do not split evenly over num_machines = %2; every "
                               "node runs the same number of ranks")
                    .arg(*n)
                    .arg(machines));
    } else {
      ctx.map(key, v, {{"launch.nproc_per_node", QString::number(*n / machines)}},
              QStringLiteral("num_processes counts all machines' processes"));
    }
    return true;
  }
  if (key == QLatin1String("num_machines")) {
    ctx.mapWholeNumber(key, v, QStringLiteral("launch.nnodes"), 1);
    return true;
  }
  if (key == QLatin1String("main_process_ip")) {
    if (v.isNull() || machines <= 1) {
      ctx.ignore(key, v, QStringLiteral("one machine: the ranks meet on this host"));
    } else {
      ctx.map(key, v,
              {{"launch.kind", "\"ssh\""},
               {"launch.hosts", QLatin1Char('[') + tomlString(valueText(v)) + QLatin1Char(']')}},
              QStringLiteral("the first host is MASTER_ADDR; add the other %1 nodes' SSH names "
                             "to launch.hosts (or use launch.kind \"slurm\")")
                  .arg(machines - 1));
    }
    return true;
  }
  if (key == QLatin1String("machine_rank")) {
    ctx.ignore(key, v, QStringLiteral("Shardscope starts every node itself and numbers them"));
    return true;
  }
  if (key == QLatin1String("main_process_port")) {
    ctx.ignore(key, v, QStringLiteral("the rendezvous port is picked free at launch"));
    return true;
  }
  if (key == QLatin1String("rdzv_backend") || key == QLatin1String("same_network")) {
    ctx.ignore(key, v, QStringLiteral("rendezvous is the trainer's own TCP store"));
    return true;
  }
  if (key == QLatin1String("main_training_function")) {
    ctx.ignore(key, v, QStringLiteral("the training program is shardtrain"));
    return true;
  }
  if (key == QLatin1String("debug")) {
    ctx.ignore(key, v, QStringLiteral("accelerate's collective shape checks"));
    return true;
  }
  if (key == QLatin1String("gpu_ids")) {
    mapGpuIds(ctx, key, v);
    return true;
  }
  if (key == QLatin1String("enable_cpu_affinity")) {
    if (isOff(v)) {
      ctx.ignore(key, v, QStringLiteral("off, as in Shardscope"));
    } else {
      ctx.unsupported(key, v,
                      QStringLiteral("ranks are not pinned to cores; set launch.threads_per_rank"));
    }
    return true;
  }
  return false;
}

// TPU keys and the tables of features other than FSDP. Returns false for a key of another group.
bool mapFeatureKey(ImportContext& ctx, const QString& key, const QJsonValue& v,
                   const AccelerateRun& st) {
  const auto deepspeed = st.deepspeed;
  if (key == QLatin1String("downcast_bf16") || key.startsWith(QLatin1String("tpu_")) ||
      key == QLatin1String("commands") || key == QLatin1String("command_file")) {
    ctx.ignore(key, v, kTpu);
    return true;
  }
  if (key == QLatin1String("deepspeed_config")) {
    if (!deepspeed || isOff(v) || !v.isObject()) {
      unsupportedTable(ctx, key, v,
                       QStringLiteral("accelerate reads deepspeed_config only when "
                                      "distributed_type is DEEPSPEED"));
    } else {
      importDeepSpeedTable(ctx, key + QLatin1Char('.'), v.toObject());
    }
    return true;
  }
  if (key == QLatin1String("dynamo_config") || key == QLatin1String("dynamo_backend")) {
    if (isOff(v) || asString(v).value_or(QString()).toUpper() == QLatin1String("NO")) {
      ctx.ignore(key, v, QStringLiteral("no torch.compile asked for"));
    } else {
      unsupportedTable(ctx, key, v,
                       QStringLiteral("no torch.compile in the C++ trainer; remove it"));
    }
    return true;
  }
  if (key == QLatin1String("megatron_lm_config")) {
    unsupportedTable(ctx, key, v, QStringLiteral("no tensor or pipeline parallelism; use FSDP"));
    return true;
  }
  if (key == QLatin1String("parallelism_config")) {
    unsupportedTable(ctx, key, v,
                     QStringLiteral("no tensor/context parallelism; data-parallel sharding only"));
    return true;
  }
  if (key == QLatin1String("fp8_config")) {
    unsupportedTable(ctx, key, v, QStringLiteral("no FP8 training; use bf16"));
    return true;
  }
  if (key == QLatin1String("mpirun_config")) {
    unsupportedTable(ctx, key, v, QStringLiteral("ranks start through [launch], not mpirun"));
    return true;
  }
  return false;
}

}  // namespace

void importAccelerate(ImportContext& ctx, const QJsonObject& root) {
  AccelerateRun st;
  st.type = asString(root.value(QStringLiteral("distributed_type")))
                .value_or(QStringLiteral("NO"))
                .toUpper();
  st.fsdp = st.type == QLatin1String("FSDP");
  st.deepspeed = st.type == QLatin1String("DEEPSPEED");
  st.sharded = st.fsdp || st.deepspeed;
  st.machines = asInt(root.value(QStringLiteral("num_machines"))).value_or(1);
  const bool fsdp = st.fsdp;

  if (!root.contains(QStringLiteral("distributed_type"))) {
    ctx.error(QStringLiteral("distributed_type"), QJsonValue::Null,
              QStringLiteral("missing; accelerate requires it (FSDP, MULTI_GPU, NO, ...)"));
  }
  // fsdp_config first: distributed_type's default strategy applies only when it names none.
  if (root.contains(QStringLiteral("fsdp_config"))) {
    const QJsonValue v = root.value(QStringLiteral("fsdp_config"));
    if (!v.isObject() && !v.isNull()) {
      ctx.badValue(QStringLiteral("fsdp_config"), v, QStringLiteral("a table of fsdp_* keys"));
    } else if (fsdp && isOff(v)) {
      ctx.ignore(QStringLiteral("fsdp_config"), v, QStringLiteral("empty: accelerate's defaults"));
    } else if (fsdp) {
      importFsdpOptions(ctx, v.toObject(), QStringLiteral("fsdp_config."), 1, false);
    } else {
      unsupportedTable(ctx, QStringLiteral("fsdp_config"), v,
                       QStringLiteral("accelerate reads fsdp_config only when distributed_type is "
                                      "FSDP; remove it or set distributed_type: FSDP"));
    }
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    const QString key = it.key();
    const QJsonValue v = it.value();
    if (key == QLatin1String("fsdp_config")) continue;
    if (!mapTypeKey(ctx, key, v, st) && !mapProcessKey(ctx, key, v, st) &&
        !mapFeatureKey(ctx, key, v, st)) {
      ctx.unknown(key, v);
    }
  }
}

}  // namespace shardscope::backend::importing
