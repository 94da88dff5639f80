// `checkpoints`, `resume --from` and `export-checkpoint` through the real shardscope-cli on a real
// run of the real shardtrain (the tiny model, 1 rank, 6 steps, a sharded checkpoint every 2 steps
// and at the end, an evaluation every 2 steps): the listing names steps 2, 4 and 6, each sharded,
// with the bytes its folder holds (counted here file by file) and the eval loss rank 0 reported
// at that step, and the --json fields docs/cli.md documents; `resume RUN --from 2` starts a new
// run whose first step is 3 and that ends at step 6, its params saying where it started; a step
// with no checkpoint is refused naming the steps there are; `export-checkpoint --to hf` writes a
// model.safetensors and `--to peft` of a run without [lora] is refused saying why. `ls` gives the
// run's CPU-hours (1 rank x its started_at..ended_at) and, with --price local=2.5, its cost.
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QJsonArray>
#include <QTemporaryDir>
#include <QTest>

#include "tests/app/clitest.h"
#include "tests/support/experiment.h"

namespace {

using clitest::cli;
using clitest::json;
using clitest::Run;

const QString kShardtrain = qEnvironmentVariable("SHARDSCOPE_SHARDTRAIN");

qint64 folderBytes(const QString& dir) {
  qint64 total = 0;
  QDirIterator it(dir, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
  while (it.hasNext()) total += it.nextFileInfo().size();
  return total;
}

// Steps of the `step` events of rank 0's events file in `runDir`, in file order.
QList<qint64> fileSteps(const QString& runDir) {
  QList<qint64> steps;
  QFile file(runDir + "/events-rank-0.jsonl");
  if (!file.open(QIODevice::ReadOnly)) return steps;
  for (const QByteArray& line : file.readAll().split('\n')) {
    const QJsonObject o = QJsonDocument::fromJson(line).object();
    if (o["ev"].toString() == "step") steps << o["step"].toInteger();
  }
  return steps;
}

}  // namespace

class TstCliCheckpoints : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  QString m_db;
  QString m_run;  // the source run's name
  QString m_runDir;

  Run run(const QStringList& args) { return cli(QStringList{"--db", m_db} + args); }

  QJsonObject shown(const QString& name) {
    return json(run({"--json", "show", name}).out.trimmed().split('\n').last());
  }

 private slots:
  void initTestCase() {
    QVERIFY2(!kShardtrain.isEmpty() && QFile::exists(kShardtrain),
             "SHARDSCOPE_SHARDTRAIN must name a built shardtrain (CMake sets it)");
    QVERIFY(m_dir.isValid());
    qputenv("XDG_CONFIG_HOME", m_dir.filePath("config").toUtf8());  // no saved prices
    m_db = m_dir.filePath("runs.db");
    shardscope::testing::TinyExperiment e;
    e.name = "ck";
    e.trainer = kShardtrain;
    e.steps = 6;
    e.ranks = 1;
    e.train = "ckpt_every = 2\nckpt_keep = 0\nlog_every = 1\n";
    const QString exp = shardscope::testing::writeExperiment(m_dir.path(), e);
    QVERIFY(!exp.isEmpty());
    const Run r = run({"--json", "run", exp, "--set", "train.ckpt_at_end=true", "--set",
                       "data.eval_path=" + m_dir.filePath("train.jsonl"), "--set", "eval.every=2",
                       "--set", "eval.batches=1"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    const QJsonObject o = json(r.out.trimmed().split('\n').last());
    QCOMPARE(o["status"].toString(), QString("complete"));
    m_run = o["name"].toString();
    m_runDir = o["run_dir"].toString();
    QVERIFY(QFileInfo::exists(m_runDir + "/ckpt/step-000004"));
  }

  void listsStepsKindsSizesAndEvals() {
    const Run r = run({"--json", "checkpoints", m_run});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const QJsonObject o = json(r.out);
    QCOMPARE(o["run"].toString(), m_run);
    const QJsonArray list = o["checkpoints"].toArray();
    QCOMPARE(list.size(), 3);
    qint64 total = 0;
    for (int i = 0; i < 3; ++i) {
      const QJsonObject c = list[i].toObject();
      const qint64 step = 2 * (i + 1);
      const QString folder =
          m_runDir + QStringLiteral("/ckpt/step-%1").arg(step, 6, 10, QChar('0'));
      QCOMPARE(c["step"].toInteger(), step);
      QCOMPARE(c["kind"].toString(), QString("sharded"));
      QCOMPARE(c["path"].toString(), folder);
      QCOMPARE(c["present"].toBool(), true);
      QVERIFY(folderBytes(folder) > 0);
      QCOMPARE(c["bytes"].toInteger(), folderBytes(folder));
      QVERIFY2(c["eval"].toObject()["loss"].isDouble(), qPrintable(r.out));
      total += c["bytes"].toInteger();
      QCOMPARE(clitest::sortedKeys(c), clitest::documentedFields("checkpoints"));
    }
    QCOMPARE(o["bytes"].toInteger(), total);

    const Run text = run({"checkpoints", m_run});
    QVERIFY2(text.out.contains("STEP") && text.out.contains("sharded"), qPrintable(text.out));
    QVERIFY2(text.out.contains(m_runDir + "/ckpt/step-000002"), qPrintable(text.out));
  }

  // A new run from step 2's checkpoint: its first step is 3, its last 6, the source untouched.
  void resumeFromStepStartsANewRunAfterIt() {
    const Run r = run({"--json", "resume", m_run, "--from", "2"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    const QJsonObject started = json(r.out.trimmed().split('\n').last());
    const QString name = started["name"].toString();
    QVERIFY(name != m_run && !name.isEmpty());
    QCOMPARE(started["from"].toString(), m_run);
    QTRY_COMPARE_WITH_TIMEOUT(shown(name)["status"].toString(), QString("complete"), 120000);
    const QJsonObject o = shown(name);
    QCOMPARE(o["params"].toObject()["resumed_from"].toString(), m_run + "@2");
    QCOMPARE(fileSteps(o["run_dir"].toString()), (QList<qint64>{3, 4, 5, 6}));
    QCOMPARE(shown(m_run)["status"].toString(), QString("complete"));

    const Run missing = run({"resume", m_run, "--from", "5"});
    QCOMPARE(missing.exitCode, 1);
    QVERIFY2(
        missing.err.contains("no sharded checkpoint of step 5 on disk (steps on disk: 2, 4, 6)"),
        qPrintable(missing.err));
  }

  void lsPrintsDeviceHoursAndCost() {
    const QJsonObject shownRun = shown(m_run);
    const double hours =
        (shownRun["ended_at"].toDouble() - shownRun["started_at"].toDouble()) / 3600.0;
    QVERIFY(hours > 0);
    QCOMPARE(shownRun["usage"].toObject()["hours"].toDouble(), hours);
    QVERIFY(shownRun["usage"].toObject()["cost"].isNull());  // no price set
    const Run r = run({"--json", "ls", "--price", "local=2.5"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    bool found = false;
    for (const auto& v : json(r.out)["runs"].toArray()) {
      const QJsonObject o = v.toObject();
      if (o["name"].toString() != m_run) continue;
      found = true;
      const QJsonObject usage = o["usage"].toObject();
      QCOMPARE(usage["device"].toString(), QString("cpu"));
      QCOMPARE(usage["host"].toString(), QString("local"));
      QCOMPARE(usage["hours"].toDouble(), hours);
      QCOMPARE(usage["cost"].toDouble(), hours * 2.5);
    }
    QVERIFY(found);
    const Run text = run({"ls"});
    QVERIFY2(text.out.contains("DEVICE-HOURS") && text.out.contains(" CPU"), qPrintable(text.out));
    QCOMPARE(run({"ls", "--price", "local"}).exitCode, 2);
  }

  void exportWritesAHuggingFaceFolder() {
    const QString out = m_dir.filePath("export-hf");
    const Run r = run({"--json", "export-checkpoint", m_run, "--step", "4", "--to", "hf", out});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QCOMPARE(json(r.out)["dir"].toString(), out);
    QVERIFY(QFileInfo(out + "/model.safetensors").size() > 0);

    const Run peft = run(
        {"export-checkpoint", m_run, "--step", "4", "--to", "peft", m_dir.filePath("export-peft")});
    QCOMPARE(peft.exitCode, 1);
    QVERIFY2(peft.err.contains("no [lora]"), qPrintable(peft.err));
    QVERIFY(!QFileInfo::exists(m_dir.filePath("export-peft")));
  }
};

QTEST_GUILESS_MAIN(TstCliCheckpoints)
#include "tst_cli_checkpoints.moc"
