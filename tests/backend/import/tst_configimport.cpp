// backend/import against hand-written files of each format: every key of the file gets exactly
// one report entry, mapped keys set the fields the docs promise, and an unknown key, a value of
// the wrong kind or two keys asking for different values of one field leave no experiment.
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QSet>
#include <QTest>

#include "backend/import/configimport.h"
#include "spec/field_catalog.h"
#include "tests/support/paths.h"

using shardscope::backend::importConfig;
using shardscope::backend::importConfigText;
using shardscope::backend::ImportKind;
using shardscope::backend::ImportOutcome;
using shardscope::backend::ImportResult;

namespace {

QString fixture(const QString& name) {
  return shardscope::testing::sourceDir() + "/tests/backend/import/fixtures/" + name;
}

ImportResult importOk(ImportKind kind, const QString& name) {
  auto r = importConfig(kind, fixture(name));
  if (!r) qFatal("%s", r.message().c_str());
  return *r;
}

QString field(const ImportResult& r, const char* path) {
  if (!r.experiment) return QStringLiteral("<no experiment>");
  auto v = shardscope::spec::get_field(*r.experiment, path);
  return v ? QString::fromStdString(*v) : QString::fromStdString(v.message());
}

// The entry of `key`; a key with no entry comes back with an outcome no entry has, so every
// comparison with it fails.
shardscope::backend::ImportEntry entry(const ImportResult& r, const QString& key) {
  for (const auto& e : r.entries) {
    if (e.key == key) return e;
  }
  shardscope::backend::ImportEntry missing;
  missing.key = QStringLiteral("<no entry for ") + key + QLatin1Char('>');
  missing.outcome = static_cast<ImportOutcome>(-1);
  return missing;
}

// Every key's dotted path, nested tables walked (a table is reported by its keys).
void leafKeys(const QJsonObject& o, const QString& prefix, QSet<QString>& out) {
  for (auto it = o.begin(); it != o.end(); ++it) {
    if (it.value().isObject() && !it.value().toObject().isEmpty()) {
      leafKeys(it.value().toObject(), prefix + it.key() + QLatin1Char('.'), out);
    } else {
      out.insert(prefix + it.key());
    }
  }
}

// A "billion laughs" YAML file: `levels` lists of ten aliases of the list before, so the walk
// that expands each alias where it appears visits 10^levels scalars from a file of ~60 bytes a
// level.
QByteArray aliasBomb(int levels) {
  QByteArray text = "distributed_type: NO\nl0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < levels; ++i) {
    const QByteArray prev = "*l" + QByteArray::number(i - 1);
    text += "l" + QByteArray::number(i) + ": &l" + QByteArray::number(i) + " [";
    for (int k = 0; k < 10; ++k) text += (k ? ", " : "") + prev;
    text += "]\n";
  }
  return text;
}

}  // namespace

class TestConfigImport : public QObject {
  Q_OBJECT

 private slots:
  void accelerateVersion1StrategyComesFromReshardAfterForward() {
    const auto r = importOk(ImportKind::accelerate, "accelerate_fsdp1.yaml");
    QVERIFY2(r.ok(), qPrintable(r.reportText()));
    QCOMPARE(field(r, "shard.strategy"), QStringLiteral("HYBRID_SHARD"));
    QCOMPARE(field(r, "shard.backward_prefetch"), QStringLiteral("post"));
    QCOMPARE(field(r, "shard.activation_checkpointing"), QStringLiteral("true"));
    QCOMPARE(field(r, "shard.wrap_policy"), QStringLiteral("block"));
    QCOMPARE(field(r, "shard.offload_params"), QStringLiteral("false"));
    QCOMPARE(field(r, "shard.precision"), QStringLiteral("bf16"));
    QCOMPARE(field(r, "launch.nnodes"), QStringLiteral("2"));
    QCOMPARE(field(r, "launch.nproc_per_node"), QStringLiteral("8"));  // 16 over 2 machines
    QCOMPARE(field(r, "launch.kind"), QStringLiteral("ssh"));
    QCOMPARE(field(r, "launch.hosts"), QStringLiteral("[\"10.0.0.1\"]"));
    // 18 top-level keys besides fsdp_config, and its 12: each exactly once.
    QCOMPARE(r.entries.size(), 30);
    QSet<QString> keys;
    for (const auto& e : r.entries) keys.insert(e.key);
    QCOMPARE(keys.size(), 30);
    QCOMPARE(entry(r, "fsdp_config.fsdp_use_orig_params").outcome, ImportOutcome::ignored);
    QCOMPARE(entry(r, "machine_rank").outcome, ImportOutcome::ignored);
    QCOMPARE(entry(r, "mixed_precision").fields, QStringLiteral("shard.precision = \"bf16\""));
    QCOMPARE(r.count(ImportOutcome::error), 0);
    QVERIFY(r.reportText().contains(
        QStringLiteral("fsdp_config.fsdp_reshard_after_forward = HYBRID_SHARD -> shard.strategy = "
                       "\"HYBRID_SHARD\"")));
  }

  void accelerateVersion2ReadsReshardAsABoolean() {
    const auto r = importOk(ImportKind::accelerate, "accelerate_fsdp2.yaml");
    QVERIFY2(r.ok(), qPrintable(r.reportText()));
    QCOMPARE(field(r, "shard.strategy"), QStringLiteral("SHARD_GRAD_OP"));
    QCOMPARE(field(r, "shard.offload_params"), QStringLiteral("true"));
    QCOMPARE(field(r, "shard.offload_optimizer"), QStringLiteral("true"));
    QCOMPARE(field(r, "shard.wrap_policy"), QStringLiteral("size"));
    QCOMPARE(field(r, "shard.wrap_min_params"), QStringLiteral("50000000"));
    QCOMPARE(field(r, "shard.precision"), QStringLiteral("fp32"));
    QCOMPARE(field(r, "launch.gpus"), QStringLiteral("[0, 1, 2, 3]"));
    QCOMPARE(field(r, "launch.nproc_per_node"), QStringLiteral("4"));
    QCOMPARE(r.entries.size(), 5 + 6);
  }

  void accelerateLegacyKeysThatDisagreeAreAnError() {
    const auto r = importOk(ImportKind::accelerate, "accelerate_legacy_conflict.yaml");
    QVERIFY(!r.ok());
    const QString report = r.reportText();
    QVERIFY2(report.contains(QStringLiteral("fsdp_config.fsdp_sharding_strategy")),
             qPrintable(report));
    QVERIFY2(report.contains(QStringLiteral("fsdp_config.fsdp_reshard_after_forward")),
             qPrintable(report));
    QVERIFY(report.contains(QStringLiteral("accelerate_legacy_conflict.yaml: ")));
    QVERIFY(report.contains(QStringLiteral("nothing written")));
    // The two prefetch names agree: no error for them.
    QCOMPARE(entry(r, "fsdp_config.fsdp_backward_prefetch").outcome, ImportOutcome::mapped);
    QCOMPARE(entry(r, "fsdp_config.fsdp_backward_prefetch_policy").outcome, ImportOutcome::mapped);
    QCOMPARE(r.count(ImportOutcome::error), 1);
  }

  void accelerateUnknownKeyAndUnevenProcessesAreErrors() {
    const auto r = importOk(ImportKind::accelerate, "accelerate_unknown.yaml");
    QVERIFY(!r.ok());
    QCOMPARE(entry(r, "mixed_precison").outcome, ImportOutcome::error);
    QVERIFY(entry(r, "mixed_precison").detail.contains(QStringLiteral("unknown key")));
    QCOMPARE(entry(r, "num_processes").outcome, ImportOutcome::error);
    QVERIFY(r.reportJson().value("errors").toInt() == 2);
  }

  void brokenYamlNamesTheFileAndLine() {
    auto r = importConfig(ImportKind::accelerate, fixture("accelerate_broken.yaml"));
    QVERIFY(!r);
    QVERIFY2(QString::fromStdString(r.message()).contains("accelerate_broken.yaml:"),
             r.message().c_str());
  }

  void yamlScalarsAreTypedAsPyYamlTypesThem() {
    // 'no' quoted is a string, no plain is false, 1e8 without a dot stays a string (PyYAML).
    const QByteArray text =
        "distributed_type: MULTI_GPU\nmixed_precision: 'no'\nuse_cpu: no\n"
        "num_processes: 2\nnum_machines: 1\nmain_process_ip: ~\n";
    auto r = importConfigText(ImportKind::accelerate, text, "inline.yaml");
    QVERIFY(r);
    QVERIFY2(r->ok(), qPrintable(r->reportText()));
    QCOMPARE(field(*r, "shard.strategy"), QStringLiteral("NO_SHARD"));
    QCOMPARE(field(*r, "shard.precision"), QStringLiteral("fp32"));
    QCOMPARE(entry(*r, "use_cpu").outcome, ImportOutcome::ignored);
    QCOMPARE(entry(*r, "main_process_ip").value, QStringLiteral("null"));
    // y is a string to PyYAML, not a boolean; read as accelerate's str_to_bool reads it.
    auto y =
        importConfigText(ImportKind::accelerate, "distributed_type: NO\nuse_cpu: y\n", "y.yaml");
    QVERIFY(y && y->ok());
    QCOMPARE(entry(*y, "use_cpu").value, QStringLiteral("y"));
    QCOMPARE(field(*y, "shard.device"), QStringLiteral("cpu"));
  }

  void acceleratePlainDataParallelBf16Autocasts() {
    auto r = importConfigText(ImportKind::accelerate,
                              "distributed_type: MULTI_GPU\nmixed_precision: bf16\n", "ddp.yaml");
    QVERIFY(r && r->ok());
    QCOMPARE(field(*r, "shard.precision"), QStringLiteral("bf16_autocast"));
  }

  void hfTrainerJsonMapsTheTrainingLoop() {
    const auto r = importOk(ImportKind::hfTrainer, "hf_args.json");
    QVERIFY2(r.ok(), qPrintable(r.reportText()));
    QCOMPARE(field(r, "train.lr"), QStringLiteral("2e-5"));
    QCOMPARE(field(r, "train.lr_schedule"), QStringLiteral("cosine"));
    QCOMPARE(field(r, "train.lr_warmup_steps"), QStringLiteral("50"));  // 0.05 x 1000
    QCOMPARE(field(r, "train.max_steps"), QStringLiteral("1000"));
    QCOMPARE(field(r, "train.micro_batch_size"), QStringLiteral("4"));
    QCOMPARE(field(r, "train.batch_size"), QStringLiteral("16"));  // 4 x 2 x 2 ranks
    QCOMPARE(field(r, "train.seed"), QStringLiteral("7"));
    QCOMPARE(field(r, "train.weight_decay"), QStringLiteral("0.1"));
    QCOMPARE(field(r, "train.grad_clip"), QStringLiteral("0.5"));
    QCOMPARE(field(r, "train.ckpt_every"), QStringLiteral("200"));
    QCOMPARE(field(r, "train.ckpt_keep"), QStringLiteral("3"));
    QCOMPARE(field(r, "train.log_every"), QStringLiteral("10"));
    QCOMPARE(field(r, "eval.every"), QStringLiteral("50"));
    QCOMPARE(field(r, "shard.strategy"), QStringLiteral("FULL_SHARD"));
    QCOMPARE(field(r, "shard.precision"), QStringLiteral("bf16"));
    QCOMPARE(field(r, "shard.backward_prefetch"), QStringLiteral("pre"));
    QCOMPARE(field(r, "shard.activation_checkpointing"), QStringLiteral("true"));
    QCOMPARE(entry(r, "num_train_epochs").outcome, ImportOutcome::ignored);
    QCOMPARE(entry(r, "report_to").outcome, ImportOutcome::ignored);
    QFile f(fixture("hf_args.json"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QSet<QString> keys;
    leafKeys(QJsonDocument::fromJson(f.readAll()).object(), {}, keys);
    QSet<QString> reported;
    for (const auto& e : r.entries) reported.insert(e.key);
    QCOMPARE(reported, keys);
    QCOMPARE(r.entries.size(), keys.size());
  }

  void hfTrainerBothPrecisionsAndTwoStrategiesAreErrors() {
    const auto r = importOk(ImportKind::hfTrainer, "hf_both_precisions.json");
    QVERIFY(!r.ok());
    QCOMPARE(entry(r, "fp16").outcome == ImportOutcome::error ||
                 entry(r, "bf16").outcome == ImportOutcome::error,
             true);
    // fsdp says shard_grad_op, fsdp_config's reshard_after_forward says full_shard.
    QCOMPARE(entry(r, "fsdp").outcome, ImportOutcome::error);
    QVERIFY(entry(r, "fsdp").detail.contains(QStringLiteral("fsdp_config.reshard_after_forward")));
  }

  void hfTrainerCommandLineTakesTheLauncherToo() {
    const auto r = importOk(ImportKind::hfTrainer, "hf_cmdline.sh");
    QVERIFY2(r.ok(), qPrintable(r.reportText()));
    QCOMPARE(field(r, "launch.nproc_per_node"), QStringLiteral("4"));
    QCOMPARE(field(r, "shard.strategy"), QStringLiteral("FULL_SHARD"));
    QCOMPARE(field(r, "shard.offload_params"), QStringLiteral("true"));
    QCOMPARE(field(r, "train.lr_schedule"), QStringLiteral("constant"));
    QCOMPARE(field(r, "train.lr_warmup_steps"), QStringLiteral("20"));
    QCOMPARE(field(r, "train.micro_batch_size"), QStringLiteral("2"));
    QCOMPARE(field(r, "train.batch_size"), QStringLiteral("32"));  // 2 x 4 x 4 ranks
    QCOMPARE(field(r, "train.max_steps"), QStringLiteral("300"));
    QCOMPARE(field(r, "train.seed"), QStringLiteral("11"));
    QCOMPARE(field(r, "eval.every"), QStringLiteral("0"));
    QCOMPARE(field(r, "train.ckpt_at_end"), QStringLiteral("false"));
    QCOMPARE(entry(r, "--model_name_or_path").outcome, ImportOutcome::unsupported);
    QCOMPARE(entry(r, "--bf16").value, QStringLiteral("true"));
    QCOMPARE(r.entries.size(), 2 + 12);
  }

  void hfTrainerEpochsWithoutMaxStepsAreUnsupportedNotGuessed() {
    auto r = importConfigText(ImportKind::hfTrainer,
                              R"({"num_train_epochs": 3, "max_steps": -1, "warmup_ratio": 0.1})",
                              "epochs.json");
    QVERIFY(r && r->ok());
    QCOMPARE(entry(*r, "num_train_epochs").outcome, ImportOutcome::unsupported);
    QCOMPARE(entry(*r, "max_steps").outcome, ImportOutcome::unsupported);
    QCOMPARE(entry(*r, "warmup_ratio").outcome, ImportOutcome::unsupported);
    QVERIFY(r->reportText().contains(QStringLiteral("the experiment differs from the file")));
  }

  void deepSpeedZero3MapsStageOffloadsAndBatch() {
    const auto r = importOk(ImportKind::deepspeed, "ds_zero3.json");
    QVERIFY2(r.ok(), qPrintable(r.reportText()));
    QCOMPARE(field(r, "shard.strategy"), QStringLiteral("FULL_SHARD"));
    QCOMPARE(field(r, "shard.offload_params"), QStringLiteral("true"));
    QCOMPARE(field(r, "shard.offload_optimizer"), QStringLiteral("true"));
    QCOMPARE(field(r, "shard.precision"), QStringLiteral("bf16"));
    QCOMPARE(field(r, "train.batch_size"), QStringLiteral("64"));
    QCOMPARE(field(r, "train.micro_batch_size"), QStringLiteral("4"));
    QCOMPARE(field(r, "launch.nproc_per_node"), QStringLiteral("8"));  // 64 / (4 x 2)
    QCOMPARE(field(r, "train.grad_clip"), QStringLiteral("1.0"));
    QCOMPARE(field(r, "train.lr"), QStringLiteral("3e-5"));
    QCOMPARE(field(r, "train.adam_beta2"), QStringLiteral("0.95"));
    QCOMPARE(field(r, "train.lr_schedule"), QStringLiteral("linear"));
    QCOMPARE(field(r, "train.lr_warmup_steps"), QStringLiteral("100"));
    QCOMPARE(field(r, "train.max_steps"), QStringLiteral("2000"));
    QCOMPARE(field(r, "train.log_every"), QStringLiteral("10"));
    QFile f(fixture("ds_zero3.json"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QSet<QString> keys;
    leafKeys(QJsonDocument::fromJson(f.readAll()).object(), {}, keys);
    QSet<QString> reported;
    for (const auto& e : r.entries) reported.insert(e.key);
    QCOMPARE(reported, keys);
  }

  void deepSpeedAutoValuesAreReportedNotGuessed() {
    const auto r = importOk(ImportKind::deepspeed, "ds_auto.json");
    QVERIFY2(r.ok(), qPrintable(r.reportText()));
    QCOMPARE(entry(r, "train_batch_size").outcome, ImportOutcome::unsupported);
    QVERIFY(entry(r, "train_batch_size").detail.contains(QStringLiteral("\"auto\"")));
    QCOMPARE(entry(r, "bf16.enabled").outcome, ImportOutcome::unsupported);
    QCOMPARE(field(r, "shard.strategy"), QStringLiteral("SHARD_GRAD_OP"));
    QCOMPARE(field(r, "shard.offload_optimizer"), QStringLiteral("false"));
  }

  void deepSpeedContradictionsAreErrors() {
    const auto r = importOk(ImportKind::deepspeed, "ds_contradict.json");
    QVERIFY(!r.ok());
    // 30 is no whole number of 4 x 2 ranks; bf16 and fp16 both on; offload_param below stage 3;
    // a misspelt table.
    QCOMPARE(entry(r, "gradient_accumulation_steps").outcome, ImportOutcome::error);
    QCOMPARE(entry(r, "zero_optimization.offload_param.device").outcome, ImportOutcome::error);
    QCOMPARE(entry(r, "zero_optimisation").outcome, ImportOutcome::error);
    QVERIFY(entry(r, "fp16.enabled").outcome == ImportOutcome::error ||
            entry(r, "bf16.enabled").outcome == ImportOutcome::error);
  }

  // accelerate itself refuses a file without distributed_type; so does the import.
  void accelerateWithoutDistributedTypeIsAnError() {
    auto r = importConfigText(ImportKind::accelerate, "mixed_precision: bf16\n", "bare.yaml");
    QVERIFY(r && !r->ok());
    QCOMPARE(entry(*r, "distributed_type").outcome, ImportOutcome::error);
  }

  // fsdp_version 0 was reported twice (as a bad value and as ignored); it is one error.
  void badFsdpVersionIsOneError() {
    auto r =
        importConfigText(ImportKind::accelerate,
                         "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 0\n", "v0.yaml");
    QVERIFY(r && !r->ok());
    QCOMPARE(r->entries.size(), 2);
    QCOMPARE(entry(*r, "fsdp_config.fsdp_version").outcome, ImportOutcome::error);
  }

  // Empty tables are reported as such, so every key of the file has its entry.
  void emptyTablesHaveAnEntry() {
    auto r = importConfigText(ImportKind::deepspeed,
                              R"({"zero_optimization": {}, "optimizer": {"type": "AdamW",
                                  "params": {}}, "bf16": {}})",
                              "empty.json");
    QVERIFY(r && r->ok());
    QCOMPARE(entry(*r, "zero_optimization").outcome, ImportOutcome::ignored);
    QCOMPARE(entry(*r, "optimizer.params").outcome, ImportOutcome::ignored);
    QCOMPARE(entry(*r, "bf16").outcome, ImportOutcome::ignored);
  }

  // A command line's --fsdp_config is JSON text (the Trainer parses it so), not a path.
  void commandLineFsdpConfigIsJsonText() {
    auto r = importConfigText(ImportKind::hfTrainer,
                              R"(--fsdp --fsdp_config '{"version": 1, "reshard_after_forward":
                                 "hybrid_shard", "backward_prefetch": "backward_post"}')",
                              "line.sh");
    QVERIFY(r);
    QVERIFY2(r->ok(), qPrintable(r->reportText()));
    QCOMPARE(field(*r, "shard.strategy"), QStringLiteral("HYBRID_SHARD"));
    QCOMPARE(field(*r, "shard.backward_prefetch"), QStringLiteral("post"));
  }

  // Batch arithmetic on values from the file never overflows or divides by zero.
  void batchArithmeticRefusesAbsurdValues() {
    auto r = importConfigText(ImportKind::deepspeed,
                              R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 0,
                                  "gradient_accumulation_steps": 9000000000000000})",
                              "absurd.json");
    QVERIFY(r && !r->ok());
    QCOMPARE(entry(*r, "train_micro_batch_size_per_gpu").outcome, ImportOutcome::error);
    QCOMPARE(entry(*r, "gradient_accumulation_steps").outcome, ImportOutcome::error);
  }

  // WarmupDecayLR warms up logarithmically by default: the nearest (linear) schedule is set, and
  // the key is unsupported, never mapped, because the learning rates differ during warmup.
  void deepSpeedLogWarmupIsTheNearestScheduleNotTheSame() {
    auto r = importConfigText(ImportKind::deepspeed,
                              R"({"scheduler": {"type": "WarmupDecayLR", "params":
                                  {"warmup_num_steps": 10, "total_num_steps": 100}}})",
                              "log.json");
    QVERIFY(r && r->ok());
    QCOMPARE(entry(*r, "scheduler.type").outcome, ImportOutcome::unsupported);
    QCOMPARE(entry(*r, "scheduler.type").fields, QStringLiteral("train.lr_schedule = \"linear\""));
    QCOMPARE(field(*r, "train.lr_schedule"), QStringLiteral("linear"));
    QVERIFY(r->reportText().contains(QStringLiteral("-> nearest: train.lr_schedule")));
  }

  // Aliases repeat what they name: six levels of ten (under 400 bytes) would be a million
  // nodes, and nine a billion (the GUI froze for minutes). The walk counts the nodes it makes
  // and refuses past the bound, naming the file, the limit and the fix.
  void aliasBombIsRefusedNamingTheFileAndTheLimit() {
    const QByteArray bomb = aliasBomb(6);
    QVERIFY(bomb.size() < 400);
    QElapsedTimer timer;
    timer.start();
    auto r = importConfigText(ImportKind::accelerate, bomb, "bomb.yaml");
    QVERIFY2(!r, r ? qPrintable(r->reportText()) : "");
    const QString message = QString::fromStdString(r.message());
    QVERIFY2(message.startsWith("bomb.yaml") && message.contains("100000 nodes") &&
                 message.contains("alias"),
             qPrintable(message));
    // Nine levels: refused as fast (the bound stops the walk, not the clock).
    auto nine = importConfigText(ImportKind::accelerate, aliasBomb(9), "nine.yaml");
    QVERIFY(!nine);
    QVERIFY2(timer.elapsed() < 5000, qPrintable(QString::number(timer.elapsed())));
  }

  // Few nodes, many bytes: one 64 KiB scalar named 300 times is 19 MiB of output, more than any
  // config file may hold; refused by the output bound.
  void aliasedLongScalarIsRefusedByTheOutputBound() {
    QByteArray text = "distributed_type: NO\nbig: &big " + QByteArray(64 * 1024, 'a') + "\nmany: [";
    for (int k = 0; k < 300; ++k) text += (k ? ", *big" : "*big");
    text += "]\n";
    auto r = importConfigText(ImportKind::accelerate, text, "long.yaml");
    QVERIFY2(!r, r ? qPrintable(r->reportText()) : "");
    const QString message = QString::fromStdString(r.message());
    QVERIFY2(message.startsWith("long.yaml") && message.contains("16 MiB"), qPrintable(message));
  }

  // An alias used as YAML means it (a value named once, used twice) still imports.
  void aFewAliasesStillImport() {
    const QByteArray text =
        "distributed_type: MULTI_GPU\nnum_processes: &n 2\nnum_machines: 1\n"
        "fsdp_config: {}\ngpu_ids: all\nmain_process_port: *n\n";
    auto r = importConfigText(ImportKind::accelerate, text, "alias.yaml");
    QVERIFY2(r, r ? "" : r.message().c_str());
    QCOMPARE(entry(*r, "main_process_port").value, QStringLiteral("2"));
  }

  void kindsHaveTheirCommandLineNames() {
    QVERIFY(shardscope::backend::importKindFromName("hf-trainer").ok());
    QVERIFY(!shardscope::backend::importKindFromName("megatron").ok());
  }
};

QTEST_GUILESS_MAIN(TestConfigImport)
#include "tst_configimport.moc"
