// `shardscope-cli autotune` end to end: the real shardtrain on the tiny model, 2 local ranks on
// CPU, the run log of a temporary folder. launch.device_memory_gib is set halfway between the
// estimate of the start (FULL_SHARD, activation checkpointing, micro-batch 1) and that of
// NO_SHARD at the same point, so every NO_SHARD configuration, and with it the fastest one (no
// sharding, no recomputation, the largest micro-batch), is over the budget. The search must then
// still find a winner that fits, start no candidate the estimate refused (no run of it in the run
// log), measure offload on this CPU target once (its candidates are duplicates), write a winner
// file that loads and validates, and list every candidate in its table and its JSON.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <map>
#include <set>

#include "tests/app/clitest.h"
#include "tests/support/files.h"

using clitest::cli;
using clitest::documentedFields;
using clitest::json;
using clitest::Run;
using clitest::sortedKeys;

namespace {

using shardscope::testing::writeText;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The demo's tiny model and data (generated on first use), 2 ranks on CPU, budget `gib`.
QString experiment(const QString& gib) {
  return QStringLiteral(R"([experiment]
name = "demo"

[model]
arch = "tiny"
tiny_vocab_size = 256
tiny_hidden_size = 32
tiny_layers = 2
tiny_heads = 4

[data]
train_path = "demo-data/train.jsonl"
format = "tokens"
seq_len = 32

[train]
max_steps = 50
batch_size = 8
lr = 1e-2
lr_warmup_steps = 10
ckpt_at_end = false

[shard]
strategy = "FULL_SHARD"
device = "cpu"

[launch]
kind = "local"
nproc_per_node = 2
threads_per_rank = 1
device_memory_gib = %1
)")
      .arg(gib);
}

// The per-rank estimate `estimate --json` gives for `exp` with `overrides` (a CPU run's budget
// holds the total).
qint64 estimateOf(const QString& exp, const QStringList& overrides) {
  QStringList args = {"--json", "estimate", exp};
  for (const QString& o : overrides) args << "--set" << o;
  const Run r = cli(args);
  return r.exitCode == 0 ? json(r.out)["mem_per_rank"].toInteger() : -1;
}

const QStringList kStart = {"shard.strategy=FULL_SHARD", "shard.activation_checkpointing=true",
                            "train.micro_batch_size=1"};

}  // namespace

class TestCliAutotune : public QObject {
  Q_OBJECT

 private slots:
  void winnerFitsAndNothingOverTheBudgetRan() {
    QTemporaryDir dir;
    const QString exp = dir.filePath("exp.toml");
    QVERIFY(writeText(exp, experiment("0")));
    const qint64 start = estimateOf(exp, kStart);
    QStringList noShard = kStart;
    noShard[0] = "shard.strategy=NO_SHARD";
    const qint64 unsharded = estimateOf(exp, noShard);
    QVERIFY2(start > 0 && unsharded > start,
             qPrintable(QString("%1 %2").arg(start).arg(unsharded)));
    const qint64 budget = (start + unsharded) / 2;
    QVERIFY(writeText(exp, experiment(QString::number(double(budget) / kGiB, 'g', 17))));

    const QString db = dir.filePath("runs.db");
    const QString winnerPath = dir.filePath("winner.toml");
    const Run r = cli({"--db", db, "--json", "autotune", exp, "--steps", "4", "--warmup", "2",
                       "--out", winnerPath},
                      QProcessEnvironment::systemEnvironment(), 240000);
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    const QJsonObject o = json(r.out);
    QCOMPARE(sortedKeys(o), documentedFields("autotune"));
    QCOMPARE(o["target"].toString(), QStringLiteral("cpu"));
    QCOMPARE(o["budget"].toObject()["bytes"].toInteger(), budget);
    const QJsonArray candidates = o["candidates"].toArray();
    QVERIFY(candidates.size() >= 3);

    // Every candidate, numbered in order; the estimate's refusals and the duplicates never ran.
    std::map<qint64, QJsonObject> withRun;  // run id -> candidate
    int infeasible = 0;
    int duplicates = 0;
    bool noShardRefused = false;
    for (int i = 0; i < candidates.size(); ++i) {
      const QJsonObject c = candidates[i].toObject();
      QCOMPARE(sortedKeys(c), documentedFields("autotune-candidate"));
      QCOMPARE(c["number"].toInt(), i);
      const QString status = c["status"].toString();
      if (status == "infeasible" || status == "duplicate") {
        QVERIFY2(c["run_id"].isNull(), qPrintable(QString("candidate %1 ran").arg(i)));
      } else {
        QVERIFY2(!c["run_id"].isNull(), qPrintable(QString("candidate %1: no run").arg(i)));
        if (status == "measured") QVERIFY(c["peak_bytes"].toInteger() > 0);
        withRun[c["run_id"].toInteger()] = c;
      }
      if (status == "infeasible") {
        ++infeasible;
        QVERIFY(c["estimate_bytes"].toInteger() > budget);
        if (c["settings"].toObject()["shard.strategy"].toString() == "NO_SHARD")
          noShardRefused = true;
      }
      if (status == "duplicate") {
        ++duplicates;
        const QJsonObject s = c["settings"].toObject();
        QVERIFY(s["shard.offload_params"].toBool() || s["shard.offload_optimizer"].toBool());
        QVERIFY(c["duplicate_of"].toInt() < i);
      }
    }
    QVERIFY(noShardRefused);
    QVERIFY(infeasible >= 1);
    QVERIFY(duplicates >= 2);  // offload of the parameters and of the optimizer state, on CPU

    // The run log holds exactly the candidates that ran, each with its own settings.
    const Run ls = cli({"--db", db, "--json", "ls"});
    QCOMPARE(ls.exitCode, 0);
    const QJsonArray runs = json(ls.out)["runs"].toArray();
    QCOMPARE(runs.size(), int(withRun.size()));
    for (const auto& run : runs) {
      const QJsonObject row = run.toObject();
      QVERIFY(withRun.count(row["id"].toInteger()) == 1);
      const QJsonObject c = withRun[row["id"].toInteger()];
      const QJsonObject settings = c["settings"].toObject();
      const QJsonObject params = row["params"].toObject();
      QCOMPARE(params["shard.strategy"].toString(), settings["shard.strategy"].toString());
      QCOMPARE(params["train.micro_batch_size"].toInteger(),
               settings["train.micro_batch_size"].toInteger());
      QCOMPARE(row["name"].toString(), c["run"].toString());
    }

    // The winner was measured, fits, and its file loads and validates with the winner's values.
    QVERIFY(o["winner"].isDouble());
    const QJsonObject winner = candidates[o["winner"].toInt()].toObject();
    QCOMPARE(winner["status"].toString(), QStringLiteral("measured"));
    QVERIFY(winner["estimate_bytes"].toInteger() <= budget);
    QVERIFY(winner["tokens_per_s"].toDouble() > 0);
    QCOMPARE(o["winner_file"].toString(), winnerPath);
    const Run est = cli({"--json", "estimate", winnerPath});
    QVERIFY2(est.exitCode == 0, qPrintable(est.err));
    const QJsonObject e = json(est.out);
    QVERIFY(e["budget"].toObject()["fits"].toBool());
    QCOMPARE(e["micro_batch_size"].toInteger(),
             winner["settings"].toObject()["train.micro_batch_size"].toInteger());
    QFile file(winnerPath);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(file.readAll());
    QVERIFY(text.contains(QStringLiteral("strategy = \"%1\"")
                              .arg(winner["settings"].toObject()["shard.strategy"].toString())));
    QVERIFY(text.contains("max_steps = 50"));  // the experiment's own, not the measurement's
  }

  // Without --json: one progress line per candidate on stderr and one table row per candidate
  // on stdout, with the same status.
  void tableListsEveryCandidate() {
    QTemporaryDir dir;
    const QString exp = dir.filePath("exp.toml");
    QVERIFY(writeText(exp, experiment("0")));
    const Run r = cli({"--db", dir.filePath("runs.db"), "autotune", exp, "--steps", "3", "--warmup",
                       "1", "--objective", "mfu"},
                      QProcessEnvironment::systemEnvironment(), 240000);
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    static const QRegularExpression progress(QStringLiteral("^candidate (\\d+) ([a-z]+)"));
    std::map<int, QString> reported;
    for (const QString& line : r.err.split('\n')) {
      const auto m = progress.match(line);
      if (m.hasMatch()) reported[m.captured(1).toInt()] = m.captured(2);
    }
    QVERIFY(reported.size() >= 3);
    static const QRegularExpression row(
        QStringLiteral("^ *(\\d+) [A-Z_]+ .* (measured|"
                       "infeasible\\(estimate\\)|oom|failed|"
                       "duplicate of #\\d+|stopped)"));
    std::map<int, QString> listed;
    for (const QString& line : r.out.split('\n')) {
      const auto m = row.match(line);
      if (m.hasMatch())
        listed[m.captured(1).toInt()] = m.captured(2).section(QRegularExpression("[^a-z]"), 0, 0);
    }
    QCOMPARE(listed, reported);
    QVERIFY(r.out.contains(QStringLiteral("winner: #")));
    QVERIFY(QFile::exists(dir.filePath("exp.autotuned.toml")));  // the default --out
  }
};

QTEST_GUILESS_MAIN(TestCliAutotune)
#include "tst_cli_autotune.moc"
