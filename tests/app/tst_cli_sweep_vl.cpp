// `shardscope-cli sweep` over a real checkpoint: the tiny Qwen2-VL that `shardtrain
// make-demo-data` writes in the Hugging Face layout (config.json, safetensors, tokenizer,
// preprocessor_config.json), chat samples with one image each, 2 local ranks, LoRA. A grid over
// train.micro_batch_size (1, 2, 8) with launch.device_memory_gib set between the estimates of
// micro-batch 2 and 8: trials 0 and 1 run to the end, trial 2 is recorded infeasible and never
// started (no rank wrote a line), and the sweep exits 0. With a budget below every estimate every
// trial is infeasible: exit 3 and one line that says so, with the estimate and the budget's
// source. Trials that fail for another reason also end the sweep with exit 3 ("no trial
// completed"); Slurm without launch.device_memory_gib is refused (exit 2) naming the field.
// A chat trial at micro-batch 4 that runs out of memory (the counting allocator's host limit,
// between the measured peaks of micro-batch 2 and 4) is replanned at micro-batch 2 with its
// sampled value, because the ladder holds each plan against the rows the chat samples bound (69
// tokens), not data.seq_len's 2048 (where every smaller micro-batch exceeds the budget); it
// completes with the very losses of a run started at micro-batch 2.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <limits>
#include <utility>

#include "tests/app/clitest.h"
#include "tests/support/files.h"
#include "tests/support/paths.h"

using clitest::cli;
using clitest::json;
using clitest::Run;

namespace {

using shardscope::testing::writeText;

const QString kShardtrain = shardscope::testing::binaryDir() + "/bin/shardtrain";
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The trial experiment: the demo checkpoint, LoRA on q/v and the vision qkv, 2 ranks, 2 steps.
QString experiment(const QString& budget, int trials, const QString& choices) {
  return QStringLiteral(R"([experiment]
name = "vl-sweep"

[model]
arch = "qwen2_vl"
path = "data/model"

[data]
train_path = "data/train.jsonl"
format = "chat"
seq_len = 96

[train]
max_steps = 2
batch_size = 16
micro_batch_size = 1
lr = 1e-3
log_every = 1
ckpt_at_end = false
threads = 1

[lora]
enabled = true
r = 4
alpha = 8
target_modules = ["q_proj", "v_proj", "qkv"]

[launch]
kind = "local"
nproc_per_node = 2
device_memory_gib = %1

[search]
sampler = "grid"
n_trials = %2
concurrency = 1
objectives = {objective = "minimize"}

[search.space."train.micro_batch_size"]
type = "categorical"
choices = [%3]
)")
      .arg(budget)
      .arg(trials)
      .arg(choices);
}

// `shardtrain estimate --json` of `exp` with one override: the per-rank device bytes.
qint64 deviceEstimate(const QString& exp, const QString& set) {
  QProcess p;
  p.start(kShardtrain, {"estimate", exp, "--json", "--set", set});
  if (!p.waitForFinished(60000) || p.exitCode() != 0) return -1;
  return json(QString::fromUtf8(p.readAllStandardOutput()))["device"].toInteger();
}

// The replan experiment: the sweep's, with unpacked chat rows (the data bounds them at 69
// tokens, far below data.seq_len), a fixed micro-batch of 4 in a global batch of 8, a `mem`
// event every step, and one sampled value of train.lr. Empty when an edit found nothing to edit.
QString replanExperiment(const QString& budget) {
  QString text = experiment(budget, 1, "1");
  const std::pair<QString, QString> edits[] = {
      {"seq_len = 96\n", "seq_len = 2048\npack = false\n"},
      {"batch_size = 16\nmicro_batch_size = 1\n", "batch_size = 8\nmicro_batch_size = 4\n"},
      {"log_every = 1\n", "log_every = 1\nmem_every = 1\n"},
      {"\"train.micro_batch_size\"]\ntype = \"categorical\"\nchoices = [1]",
       "\"train.lr\"]\ntype = \"categorical\"\nchoices = [1e-3]"}};
  for (const auto& [from, to] : edits) {
    if (!text.contains(from)) return {};
    text.replace(from, to);
  }
  return text;
}

// The values of the field `key` of every `ev` event in a run folder's events-rank-N.jsonl.
QList<double> eventValues(const QString& runDir, int rank, const QString& ev, const QString& key) {
  QFile file(runDir + QStringLiteral("/events-rank-%1.jsonl").arg(rank));
  QList<double> values;
  if (!file.open(QIODevice::ReadOnly)) return values;
  while (!file.atEnd()) {
    const QJsonObject o = QJsonDocument::fromJson(file.readLine()).object();
    if (o["ev"].toString() == ev && o.contains(key)) values << o[key].toDouble();
  }
  return values;
}

QJsonArray trials(const QString& db) {
  const Run r = cli({"--db", db, "study", "show", "sweep", "--json"});  // the file's stem
  return json(r.out)["trials"].toArray();
}

}  // namespace

class TestCliSweepVl : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QProcess make;
    make.start(kShardtrain,
               {"make-demo-data", m_dir.filePath("data"), "--train", "32", "--eval", "0"});
    QVERIFY(make.waitForFinished(120000));
    QVERIFY2(make.exitCode() == 0, make.readAllStandardError().constData());
  }

  void theTrialOverTheBudgetIsInfeasibleAndNeverStarted() {
    // The estimates of the three micro-batches, with a budget far above all of them.
    const QString probe = m_dir.filePath("probe.toml");
    QVERIFY(writeText(probe, experiment("1000", 3, "1, 2, 8")));
    const qint64 two = deviceEstimate(probe, "train.micro_batch_size=2");
    const qint64 eight = deviceEstimate(probe, "train.micro_batch_size=8");
    QVERIFY2(two > 0 && eight > two, qPrintable(QString("estimates %1 %2").arg(two).arg(eight)));
    const double budget = (static_cast<double>(two) + static_cast<double>(eight)) / 2 / kGiB;
    const QString exp = m_dir.filePath("sweep.toml");
    QVERIFY(writeText(exp, experiment(QString::number(budget, 'g', 10), 3, "1, 2, 8")));
    const QString db = m_dir.filePath("runs.db");
    const Run r = cli({"--db", db, "sweep", exp}, QProcessEnvironment::systemEnvironment(), 400000);
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QVERIFY2(r.out.contains("2 complete, 0 pruned, 0 failed, 1 infeasible"), qPrintable(r.out));
    const QJsonArray all = trials(db);
    QCOMPARE(all.size(), 3);
    QString studyDir;  // runs/study-N, from a trial that ran
    for (const QJsonValue& v : all) {
      const QJsonObject t = v.toObject();
      const int mb = t["params"].toObject()["train.micro_batch_size"].toVariant().toInt();
      const QString state = t["state"].toString();
      QVERIFY2(state == (mb == 8 ? "infeasible" : "complete"),
               qPrintable(QString("micro-batch %1: %2").arg(mb).arg(state)));
      if (mb == 8) {
        QVERIFY2(t["error"].toString().contains("exceeds the budget") &&
                     t["error"].toString().contains("launch.device_memory_gib"),
                 qPrintable(t["error"].toString()));
        continue;
      }
      // Both ranks ran the trial and rank 0's hello carried the estimate.
      const Run show =
          cli({"--db", db, "--json", "show", QString::number(t["run_id"].toInteger())});
      const QJsonObject run = json(show.out);
      const QDir runDir(run["run_dir"].toString());
      QVERIFY2(runDir.exists("events-rank-0.jsonl") && runDir.exists("events-rank-1.jsonl"),
               qPrintable(runDir.path()));
      QVERIFY2(run["mem_estimate"].toInteger() > 0, qPrintable(show.out));
      studyDir = QFileInfo(runDir.path()).path();
    }
    // The infeasible trial was never started: nothing was written where its ranks would run.
    const QDir never(studyDir + "/trial-2");
    QVERIFY2(
        !studyDir.isEmpty() && !never.exists("events-rank-0.jsonl") && !never.exists("rank-0.log"),
        qPrintable(never.path()));
  }

  void everyTrialInfeasibleExits3WithOneLine() {
    const QString exp = m_dir.filePath("tiny-budget.toml");
    QVERIFY(writeText(exp, experiment("0.0001", 2, "1, 2")));
    const QString db = m_dir.filePath("tiny.db");
    const Run r = cli({"--db", db, "sweep", exp});
    QCOMPARE(r.exitCode, 3);
    const QStringList lines = r.err.trimmed().split('\n');
    QCOMPARE(lines.size(), 1);
    QVERIFY2(lines[0].contains("no trial completed: every trial (2) was infeasible") &&
                 lines[0].contains("launch.device_memory_gib = 0.0001"),
             qPrintable(lines[0]));
  }

  void failedTrialsExit3() {
    const QString exp = m_dir.filePath("failing.toml");
    QVERIFY(writeText(exp, experiment("1000", 1, "1")));
    const Run r = cli({"--db", m_dir.filePath("failing.db"), "sweep", exp, "--set",
                       "launch.trainer=\"/bin/false\"", "--max-retries", "0"});
    QCOMPARE(r.exitCode, 3);
    QVERIFY2(r.err.contains("no trial completed"), qPrintable(r.err));
  }

  // A model folder the estimate cannot trust: both estimate verbs exit 2 naming file and field.
  void badModelFoldersAreConfigErrors() {
    QVERIFY(QDir(m_dir.path()).mkpath("bad"));
    QFile::remove(m_dir.filePath("bad/config.json"));
    QVERIFY(
        QFile::copy(m_dir.filePath("data/model/config.json"), m_dir.filePath("bad/config.json")));
    QVERIFY(QFile::copy(m_dir.filePath("data/model/model.safetensors"),
                        m_dir.filePath("bad/model.safetensors")));
    QFile config(m_dir.filePath("bad/config.json"));
    QVERIFY(config.open(QIODevice::ReadOnly));
    QByteArray text = config.readAll();
    config.close();
    // The demo's MLP is 256 wide; config.json now says 320.
    QVERIFY(text.contains("\"intermediate_size\": 256"));
    text.replace("\"intermediate_size\": 256", "\"intermediate_size\": 320");
    QVERIFY(config.open(QIODevice::WriteOnly | QIODevice::Truncate));
    config.write(text);
    config.close();
    const QString exp = m_dir.filePath("bad.toml");
    QString body = experiment("1000", 1, "1");
    body.replace("path = \"data/model\"", "path = \"bad\"");
    QVERIFY(writeText(exp, body));
    const Run cliEstimate = cli({"estimate", exp});
    QCOMPARE(cliEstimate.exitCode, 2);
    QProcess trainer;
    trainer.start(kShardtrain, {"estimate", exp});
    QVERIFY(trainer.waitForFinished(60000));
    QCOMPARE(trainer.exitCode(), 2);
    const QString trainerErr = QString::fromUtf8(trainer.readAllStandardError());
    for (const QString& err : {cliEstimate.err, trainerErr})
      QVERIFY2(err.contains(m_dir.filePath("bad/model.safetensors")) &&
                   err.contains("layers.0.mlp.gate_proj.weight has shape [256, 128]") &&
                   err.contains("(field intermediate_size)"),
               qPrintable(err));
    // No config.json at all.
    QFile::remove(m_dir.filePath("bad/config.json"));
    const Run none = cli({"estimate", exp});
    QCOMPARE(none.exitCode, 2);
    QVERIFY2(none.err.contains(m_dir.filePath("bad/config.json")), qPrintable(none.err));
  }

  void aChatTrialOutOfMemoryIsReplannedWithinTheDataBound() {
    // The estimates: micro-batch 4 with the rows the chat samples bound, and micro-batch 1 with
    // data.seq_len's rows (--no-data), the smallest plan the ladder would hold without the bound.
    const QString probe = m_dir.filePath("replan-probe.toml");
    QVERIFY(!replanExperiment("1000").isEmpty());
    QVERIFY(writeText(probe, replanExperiment("1000")));
    const auto estimate = [&](const QStringList& extra) {
      const Run r = cli(QStringList{"estimate", probe, "--json", "--uncalibrated"} + extra);
      return r.exitCode == 0 ? json(r.out)["mem_per_rank"].toInteger() : qint64(-1);
    };
    const qint64 bounded4 = estimate({"--set", "train.micro_batch_size=4"});
    const qint64 unbounded1 = estimate({"--set", "train.micro_batch_size=1", "--no-data"});
    QVERIFY2(bounded4 > 0 && unbounded1 > 2 * bounded4,
             qPrintable(QString("estimates %1 %2").arg(bounded4).arg(unbounded1)));
    const double budget = (static_cast<double>(bounded4) + static_cast<double>(unbounded1)) / 2;

    // The measured peaks of micro-batch 2 (the reference) and 4, each rank's, in a run log of
    // their own (so that the sweep's estimate is the formulas', uncalibrated).
    const QString refDb = m_dir.filePath("replan-reference.db");
    const auto runAt = [&](int micro) -> QString {
      const Run r = cli({"--db", refDb, "run", probe, "--set",
                         QStringLiteral("train.micro_batch_size=%1").arg(micro)},
                        QProcessEnvironment::systemEnvironment(), 300000);
      if (r.exitCode != 0) {
        qWarning("%s", qPrintable(r.out + r.err));
        return {};
      }
      // The reference's run is the log's first (id 1), micro-batch 4's its second.
      const Run show = cli({"--db", refDb, "--json", "show", micro == 2 ? "1" : "2"});
      return json(show.out)["run_dir"].toString();
    };
    const QString two = runAt(2);
    const QString four = runAt(4);
    QVERIFY(!two.isEmpty() && !four.isEmpty());
    double peak2 = 0;
    double peak4 = std::numeric_limits<double>::max();
    for (int rank = 0; rank < 2; ++rank) {
      for (double p : eventValues(two, rank, "mem", "peak")) peak2 = std::max(peak2, p);
      const QList<double> p4 = eventValues(four, rank, "mem", "peak");
      QVERIFY(!p4.isEmpty());
      peak4 = std::min(peak4, *std::max_element(p4.begin(), p4.end()));
    }
    QVERIFY2(peak2 > 0 && peak4 > peak2 * 1.2,
             qPrintable(QString("peaks: micro-batch 2 %1, 4 %2 bytes").arg(peak2).arg(peak4)));
    const QList<double> reference = eventValues(two, 0, "step", "loss");
    QCOMPARE(reference.size(), 2);

    // The sweep under a host limit between the two peaks, with a budget that micro-batch 4 fits
    // by the data's bound and no micro-batch fits by data.seq_len's.
    const QString exp = m_dir.filePath("replan.toml");
    QVERIFY(writeText(exp, replanExperiment(QString::number(budget / kGiB, 'g', 10))));
    const QString db = m_dir.filePath("replan.db");
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("SHARDSCOPE_HOST_MEMORY_LIMIT", QString::number(qint64((peak2 + peak4) / 2)));
    const Run r = cli({"--db", db, "sweep", exp}, env, 400000);
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QVERIFY2(r.out.contains("1 complete, 0 pruned, 0 failed, 0 infeasible"), qPrintable(r.out));
    const Run show = cli({"--db", db, "study", "show", "replan", "--json"});
    const QJsonArray all = json(show.out)["trials"].toArray();
    QCOMPARE(all.size(), 1);
    const QJsonObject trial = all[0].toObject();
    QCOMPARE(trial["state"].toString(), QStringLiteral("complete"));
    QCOMPARE(trial["replan"].toString(),
             QStringLiteral("attempt 0 ran out of memory; attempt 1: train.micro_batch_size 4 -> 2 "
                            "(gradient accumulation 1 -> 2)"));
    const Run run =
        cli({"--db", db, "--json", "show", QString::number(trial["run_id"].toInteger())});
    const QString runDir = json(run.out)["run_dir"].toString();
    QVERIFY2(runDir.endsWith("-retry-1"), qPrintable(run.out));
    // Attempt 0 ran out of memory on some rank (its folder is the trial's first); attempt 1 has
    // the reference's losses, exactly.
    const QString first = runDir.chopped(int(QStringLiteral("-retry-1").size()));
    bool oom = false;
    for (int rank = 0; rank < 2; ++rank) {
      QFile events(first + QStringLiteral("/events-rank-%1.jsonl").arg(rank));
      if (!events.open(QIODevice::ReadOnly)) continue;
      while (!events.atEnd()) {
        const QJsonObject o = QJsonDocument::fromJson(events.readLine()).object();
        if (o["ev"].toString() == "error" && o["kind"].toString() == "oom") oom = true;
      }
    }
    QVERIFY2(oom, qPrintable(first + ": no oom error event"));
    QCOMPARE(eventValues(runDir, 0, "step", "loss"), reference);
  }

  void slurmWithoutTheFieldIsRefused() {
    const QString exp = m_dir.filePath("slurm.toml");
    QString text = experiment("0", 1, "1");
    text.replace("kind = \"local\"", "kind = \"slurm\"");
    QVERIFY(writeText(exp, text));
    const Run r = cli({"--db", m_dir.filePath("slurm.db"), "sweep", exp});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains("launch.device_memory_gib: required for launch.kind = \"slurm\""),
             qPrintable(r.err));
    const Run est = cli({"estimate", exp});
    QCOMPARE(est.exitCode, 2);
    QVERIFY2(est.err.contains("launch.device_memory_gib"), qPrintable(est.err));
  }

 private:
  QTemporaryDir m_dir;
};

QTEST_GUILESS_MAIN(TestCliSweepVl)
#include "tst_cli_sweep_vl.moc"
