// `shardscope-cli run` with the real shardtrain (2 CPU ranks of the tiny model): a run that
// completes and exports its steps; an out-of-memory end (SHARDSCOPE_HOST_MEMORY_LIMIT, which the
// launcher passes on) recorded `oom` with exit code 3; and the allocator's view each rank's `error`
// event carries, read back by `show`. Registered only in trees that build shardtrain (the
// asan-ci tree has none); tst_cli_runs covers the same verbs with the fake trainer.
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include "clitest.h"
#include "tests/support/experiment.h"

using clitest::cli;
using clitest::json;
using clitest::Run;

class TestCliRunsTrainer : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  QString db() const { return m_dir.filePath("runs.db"); }

  QString writeExperiment(const QString& name, const QString& trainer) {
    shardscope::testing::TinyExperiment experiment;
    experiment.name = name;
    experiment.trainer = trainer;
    return shardscope::testing::writeExperiment(m_dir.path(), experiment);
  }

 private slots:
  void initTestCase() { QVERIFY(m_dir.isValid()); }

  void realShardtrainOutOfMemoryIsOom() {
    // The trainer side of an OOM end to end: every rank's allocator refuses past
    // SHARDSCOPE_HOST_MEMORY_LIMIT (the launcher passes the environment on), the ranks report
    // `error` kind oom, and the run log records the run `oom` with exit code 3.
    const QString trainer = qEnvironmentVariable("SHARDSCOPE_SHARDTRAIN");
    QVERIFY2(QFile::exists(trainer), "set SHARDSCOPE_SHARDTRAIN to a built shardtrain");
    const QString exp = writeExperiment("real-oom", trainer);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("SHARDSCOPE_HOST_MEMORY_LIMIT", "4096");
    const Run r = cli({"--db", db(), "--json", "run", exp}, env);
    QCOMPARE(r.exitCode, 3);
    const QJsonObject o = json(r.out.trimmed().split('\n').last());
    QCOMPARE(o["status"].toString(), QString("oom"));
    QVERIFY2(o["error"].toString().contains("SHARDSCOPE_HOST_MEMORY_LIMIT"),
             qPrintable(o["error"].toString()));
    const Run shown = cli({"--db", db(), "--json", "show", o["name"].toString()});
    QCOMPARE(json(shown.out)["status"].toString(), QString("oom"));
  }

  void realShardtrainOomCarriesTheAllocatorView() {
    // Item 4 of issue 37 on the CPU: two real ranks under a host-memory limit the model fits in
    // but a step does not; each rank's `error` event carries what the counting allocator saw,
    // which `show` reads back. trace.memory_on_oom is accepted and the log says there is no
    // allocator history on the CPU.
    const QString trainer = qEnvironmentVariable("SHARDSCOPE_SHARDTRAIN");
    QVERIFY2(QFile::exists(trainer), "set SHARDSCOPE_SHARDTRAIN to a built shardtrain");
    const QString exp = writeExperiment("real-oom-view", trainer);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    constexpr qint64 kLimit = 1 << 20;  // the model (73 KiB a rank) fits, step 1 (4 MiB) not
    env.insert("SHARDSCOPE_HOST_MEMORY_LIMIT", QString::number(kLimit));
    const Run r =
        cli({"--db", db(), "--json", "run", exp, "--set", "trace.memory_on_oom=true"}, env);
    QCOMPARE(r.exitCode, 3);
    const QString name = json(r.out.trimmed().split('\n').last())["name"].toString();
    const Run shown = cli({"--db", db(), "--json", "show", name});
    const QJsonObject o = json(shown.out);
    QCOMPARE(o["status"].toString(), QString("oom"));
    QVERIFY2(o["error"].toString().contains("cpu allocator: request "),
             qPrintable(o["error"].toString()));
    const QJsonArray views = o["oom_memory"].toArray();
    QVERIFY2(!views.isEmpty(), qPrintable(shown.out));
    for (const QJsonValue& value : views) {
      const QJsonObject m = value.toObject();
      QCOMPARE(m["device"].toString(), QString("cpu"));
      QCOMPARE(m["limit"].toInteger(), kLimit);
      const qint64 request = m["request"].toInteger();
      const qint64 allocated = m["allocated"].toInteger();
      const qint64 peak = m["peak"].toInteger();
      // The model fit: the rank held tensors when a request took it over the limit.
      QVERIFY2(allocated > 0 && allocated <= kLimit, qPrintable(QString::number(allocated)));
      QVERIFY2(request > kLimit - allocated, qPrintable(QString::number(request)));
      QVERIFY2(peak >= allocated && peak <= kLimit, qPrintable(QString::number(peak)));
      QVERIFY(!m.contains("snapshot") && !m.contains("largest_free"));  // CUDA's only
    }
    const Run text = cli({"--db", db(), "show", name});
    QVERIFY2(text.out.contains(QRegularExpression(
                 "oom: +rank [01]: cpu allocator: request 1.0 MiB, allocated [0-9.]+ KiB, "
                 "limit 1.0 MiB \\([0-9.]+ KiB left under it\\), peak [0-9.]+ KiB")),
             qPrintable(text.out));
    const Run logs = cli({"--db", db(), "logs", name, "--rank", "0"});
    QVERIFY2(logs.out.contains("there is no allocator history on the CPU"), qPrintable(logs.out));
  }

  void realShardtrainRunCompletes() {
    const QString trainer = qEnvironmentVariable("SHARDSCOPE_SHARDTRAIN");
    QVERIFY2(QFile::exists(trainer), "set SHARDSCOPE_SHARDTRAIN to a built shardtrain");
    const QString exp = writeExperiment("real", trainer);
    const Run r = cli({"--db", db(), "--json", "run", exp, "--set", "train.max_steps=5"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    const QJsonObject o = json(r.out.trimmed().split('\n').last());
    QCOMPARE(o["status"].toString(), QString("complete"));
    const Run csv = cli({"--db", db(), "export", o["name"].toString()});
    QVERIFY(csv.out.contains(QRegularExpression(",5,loss,[0-9.e-]+,0,")));
  }
};

QTEST_GUILESS_MAIN(TestCliRunsTrainer)
#include "tst_cli_runs_trainer.moc"
