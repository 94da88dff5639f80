// The Compare panel shows an autotune as it shows a sweep: `shardscope-cli autotune` (the CLI
// path) on the tiny model, two local ranks of the real shardtrain on CPU, with a device budget
// between the estimates of FULL_SHARD and NO_SHARD (as tst_cli_autotune sets it), so the
// unsharded configurations are refused by the estimate (infeasible, never started) and offload is
// a duplicate on this CPU target. (A budget between micro-batch 1 and 2 no longer separates
// anything: on this model the estimate's peak is rank 0's MFU probe or the end of backward, where
// no activations are held, at either micro-batch.) The panel,
// on that run log, must list every candidate with its status (the refused and the duplicates
// marked), highlight the winner, and draw the candidates that ran as the sweep's trials: the
// tuned settings as parameters, the measured tokens/s as the objective, maximised, the winner
// the best trial.
#include <QComboBox>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <map>

#include "tests/support/experiment.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "ui/compare/comparepanel.h"
#include "ui/data/runlog.h"
#include "ui/widgets/candidatetable.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

const QString kCli =
    shardscope::testing::envPath("SHARDSCOPE_TEST_CLI", "the shardscope-cli executable");
const QString kShardtrain =
    shardscope::testing::envPath("SHARDSCOPE_TEST_SHARDTRAIN", "the shardtrain executable");
constexpr int kWaitMs = 60000;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

using Cli = shardscope::testing::ProgramRun;

Cli cli(const QStringList& args) { return shardscope::testing::runProgram(kCli, args); }

qint64 estimate(const QString& exp, const QString& strategy) {
  const Cli r = cli({"--json", "estimate", exp, "--set", "shard.strategy=" + strategy, "--set",
                     "shard.activation_checkpointing=true", "--set", "train.micro_batch_size=1"});
  return r.exitCode == 0 ? QJsonDocument::fromJson(r.out).object()["mem_per_rank"].toInteger() : -1;
}

}  // namespace

class TestCompareAutotune : public QObject {
  Q_OBJECT

 private slots:
  void candidatesCompareAsTrials() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    shardscope::testing::TinyExperiment e;
    e.name = QStringLiteral("tiny");
    e.trainer = kShardtrain;
    e.ranks = 2;
    e.launch = "kind = \"local\"\nthreads_per_rank = 1\n";
    e.tables = "[shard]\ndevice = \"cpu\"\n";
    QString exp = shardscope::testing::writeExperiment(dir.path(), e);
    QVERIFY(!exp.isEmpty());
    const qint64 one = estimate(exp, "FULL_SHARD");
    const qint64 two = estimate(exp, "NO_SHARD");
    QVERIFY2(one > 0 && two > one, qPrintable(QStringLiteral("%1 %2").arg(one).arg(two)));
    e.launch +=
        "device_memory_gib = " + QByteArray::number(double(one + two) / 2 / kGiB, 'g', 17) + "\n";
    exp = shardscope::testing::writeExperiment(dir.path(), e);

    const QString db = dir.filePath("runs.db");
    const Cli tuned = cli({"--db", db, "--json", "autotune", exp, "--steps", "2", "--warmup", "1",
                           "--name", "tiny-tune"});
    QVERIFY2(tuned.exitCode == 0, tuned.out.constData() + tuned.err);
    const QJsonObject o = QJsonDocument::fromJson(tuned.out).object();
    QCOMPARE(o["study"].toString(), QStringLiteral("tiny-tune"));
    const QJsonArray candidates = o["candidates"].toArray();
    const int winner = o["winner"].toInt(-1);
    QVERIFY(winner >= 0);

    RunLog runLog(50);
    ComparePanel panel(runLog);
    panel.resize(1600, 1000);
    panel.show();
    runLog.open(db);
    panel.showSweep(-1);  // the one experiment: the autotune's
    QTRY_VERIFY_WITH_TIMEOUT(panel.isLoaded(), kWaitMs);
    const SweepData& sweep = panel.sweep();
    QVERIFY(sweep.autotune.has_value());
    QCOMPARE(sweep.study.name, QStringLiteral("tiny-tune"));
    QCOMPARE(panel.sweepPicker()->currentText(), QStringLiteral("tiny-tune"));
    QVERIFY(!panel.minimize());  // the study maximises tokens/s
    QCOMPARE(sweep.objectiveKey, QStringLiteral("tokens_per_s"));

    // Every candidate, in a table: the refused and the duplicates marked, the winner highlighted.
    CandidateTable* table = panel.candidateTable();
    QVERIFY(table->isVisibleTo(&panel));
    QCOMPARE(table->rowCount(), int(candidates.size()));
    int infeasible = 0;
    int duplicates = 0;
    std::map<qint64, QJsonObject> ran;  // run id -> candidate
    for (const QJsonValue& v : candidates) {
      const QJsonObject c = v.toObject();
      const int row = table->rowOf(c["number"].toInt());
      QVERIFY(row >= 0);
      const QString status = c["status"].toString();
      const QString shown = table->statusText(row);
      QVERIFY2(shown.startsWith(status), qPrintable(shown + " / " + status));
      QCOMPARE(table->isWinnerRow(row), c["number"].toInt() == winner);
      QCOMPARE(table->settingText(row, "shard.strategy"),
               c["settings"].toObject()["shard.strategy"].toString());
      const QColor text = table->item(row, CandidateTable::StatusCol)->foreground().color();
      if (status == "infeasible") {
        ++infeasible;
        QCOMPARE(text, QColor(0x80, 0x80, 0x80));
      } else if (status == "duplicate") {
        ++duplicates;
        QCOMPARE(shown, QStringLiteral("duplicate of #%1").arg(c["duplicate_of"].toInt()));
        QCOMPARE(text, QColor(0x80, 0x80, 0x80));
      }
      if (!c["run_id"].isNull()) ran[c["run_id"].toInteger()] = c;
    }
    QVERIFY(infeasible >= 1);
    QVERIFY(duplicates >= 1);
    const int winnerRow = table->rowOf(winner);
    QVERIFY(table->statusText(winnerRow).contains("winner"));
    QVERIFY(table->item(winnerRow, CandidateTable::StatusCol)->font().bold());

    // The candidates that ran are the sweep's trials, numbered, with their settings as params
    // and their measured value as the objective; the winner is the best trial.
    QCOMPARE(sweep.trials.size(), qsizetype(ran.size()));
    for (const SweepTrial& trial : sweep.trials) {
      QVERIFY(ran.count(trial.runId) == 1);
      const QJsonObject c = ran[trial.runId];
      QCOMPARE(trial.trialNumber.value_or(-1), c["number"].toInteger());
      QCOMPARE(trial.params["shard.strategy"].toString(),
               c["settings"].toObject()["shard.strategy"].toString());
      QCOMPARE(trial.params["train.micro_batch_size"].toInteger(),
               c["settings"].toObject()["train.micro_batch_size"].toInteger());
      QVERIFY(!trial.params.contains("train.max_steps"));  // the measurement's, not tuned
      if (c["status"].toString() == "measured") {
        QVERIFY(trial.objective.has_value());
        QVERIFY(std::abs(*trial.objective - c["tokens_per_s"].toDouble()) <=
                1e-9 * c["tokens_per_s"].toDouble());
      }
    }
    QVERIFY(panel.bestTrial() >= 0);
    QCOMPARE(sweep.trials[panel.bestTrial()].runId,
             candidates[winner].toObject()["run_id"].toInteger());
    QCOMPARE(panel.bestSoFar().last(), candidates[winner].toObject()["tokens_per_s"].toDouble());
    QVERIFY(panel.parallelLines() >= 2);
  }
};

QTEST_MAIN(TestCompareAutotune)
#include "tst_compareautotune.moc"
