// shardscope-cli end to end on the real remote engines with the real trainer: `run` of a tiny
// 2-rank experiment with launch.kind = "ssh" (through the sshd fixture) and "slurm" (the Slurm
// fixture, submitted locally and over SSH), each to `complete`, its rows in the run log; and
// `autotune` measuring its candidates over both.
#include <QJsonArray>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include "clitest.h"
#include "tests/support/experiment.h"
#include "tests/support/paths.h"

using namespace clitest;

namespace {

const QString kShardtrain = shardscope::testing::binaryDir() + "/bin/shardtrain";

}  // namespace

class TestCliRemote : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  QProcessEnvironment m_env;
  QString m_lastName;    // the name of the run runToComplete started
  QString m_lastRunDir;  // and its run directory (remote for ssh and Slurm over SSH)
  QString db() const { return m_dir.filePath("runs.db"); }

  // The tiny model, 2 ranks, 4 steps; `launch` is the [launch] table's body.
  QString writeExperiment(const QString& name, const QByteArray& launch) {
    shardscope::testing::TinyExperiment experiment;
    experiment.name = name;
    experiment.trainer = kShardtrain;
    experiment.steps = 4;
    experiment.launch = launch;
    experiment.absoluteData = true;
    return shardscope::testing::writeExperiment(m_dir.path(), experiment);
  }

  // The last run's folder under `root`: its name, run id and the run log's token, so another run
  // log's run of the same name never writes there.
  void checkRemoteFolder(const QString& root) {
    const QRegularExpression name(
        "^" + QRegularExpression::escape(m_dir.filePath(root) + "/" + m_lastName) +
        "-r[0-9]+-[0-9a-f]{12}$");
    QVERIFY2(name.match(m_lastRunDir).hasMatch(), qPrintable(m_lastRunDir));
  }

  // Runs `exp` attached to its end and checks the run in the run log.
  void runToComplete(const QString& exp, const QString& kind) {
    const Run r = cli({"--db", db(), "--json", "run", exp}, m_env, 90000);
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QVERIFY2(r.err.contains(QRegularExpression("step [0-9]+/4  loss [0-9.]+  ETA")),
             qPrintable(r.err));
    const QJsonObject o = json(r.out.trimmed().split('\n').last());
    QCOMPARE(o["status"].toString(), QString("complete"));
    QVERIFY(o["objective"].isDouble());
    QCOMPARE(o["location"].toObject()["kind"].toString(), kind);
    const QString name = o["name"].toString();
    m_lastName = name;
    m_lastRunDir = o["location"].toObject()["run_dir"].toString();
    const QJsonObject shown = json(cli({"--db", db(), "--json", "show", name}, m_env).out);
    QCOMPARE(shown["status"].toString(), QString("complete"));
    QCOMPARE(shown["metrics"].toObject()["loss"].toObject()["step"].toInt(), 4);
    const QString csv = cli({"--db", db(), "export", name}, m_env).out;
    // shardtrain reports steps on rank 0; `complete` needed both ranks' done events.
    QVERIFY2(csv.contains(QRegularExpression(",4,loss,[0-9.e-]+,0,")), qPrintable(csv));
    const QString rank1 = cli({"--db", db(), "--json", "logs", name, "--rank", "1"}, m_env).out;
    QVERIFY2(shown["error"].isNull(), qPrintable(shown["error"].toString()));
    QVERIFY(!rank1.contains("\"file\":\"events\""));  // rank 1's events lines all parsed
  }

 private slots:
  // Trials that run out of memory (shardtrain's allocator refuses past
  // SHARDSCOPE_HOST_MEMORY_LIMIT, passed through launch.env) are recorded `oom` over every
  // launcher, and the study goes on to the next trial: a grid over the tiny model's width where
  // hidden 256 (about 20 MiB per rank) is over an 8 MiB limit and hidden 16 (about 4 MiB) is not.
  void oomTrialsAreRecordedAndTheStudyGoesOn_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QByteArray>("launch");
    const QByteArray remote = m_dir.filePath("oom-remote").toUtf8();
    QTest::newRow("local") << "local" << QByteArray("kind = \"local\"\n");
    QTest::newRow("ssh") << "ssh"
                         << "kind = \"ssh\"\nhosts = [\"node1\"]\nremote_dir = \"" + remote +
                                "\"\n";
    QTest::newRow("slurm") << "slurm" << QByteArray("kind = \"slurm\"\ndevice_memory_gib = 80\n");
  }
  void oomTrialsAreRecordedAndTheStudyGoesOn() {
    QFETCH(QString, kind);
    QFETCH(QByteArray, launch);
    shardscope::testing::TinyExperiment experiment;
    experiment.name = "oom-" + kind;
    experiment.trainer = kShardtrain;
    experiment.steps = 3;
    experiment.launch = launch + "env = { SHARDSCOPE_HOST_MEMORY_LIMIT = \"8388608\" }\n";
    experiment.absoluteData = true;
    experiment.tables =
        "[search]\nsampler = \"grid\"\nn_trials = 2\nobjectives = {objective = \"minimize\"}\n"
        "[search.space.\"model.tiny_hidden_size\"]\ntype = \"categorical\"\n"
        "choices = [256, 16]\n";
    const QString exp = shardscope::testing::writeExperiment(m_dir.path(), experiment);
    QVERIFY(!exp.isEmpty());
    const Run r = cli({"--db", db(), "sweep", exp}, m_env, 240000);
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));  // one trial completed
    const Run shown = cli({"--db", db(), "study", "show", experiment.name, "--json"}, m_env);
    const QJsonArray trials = json(shown.out)["trials"].toArray();
    QCOMPARE(trials.size(), 2);
    QMap<QString, QString> stateByWidth;
    for (const auto& t : trials) {
      const QJsonObject o = t.toObject();
      const QJsonValue width = o["params"].toObject()["model.tiny_hidden_size"];
      stateByWidth[QString::number(width.toVariant().toInt())] = o["state"].toString();
    }
    QCOMPARE(stateByWidth.value("256"), QString("oom"));
    QCOMPARE(stateByWidth.value("16"), QString("complete"));
  }

  // autotune measures its candidates on the experiment's own launcher: over SSH and on Slurm
  // too. A time budget of a few milliseconds lets exactly the first candidate start (the budget
  // is checked before each start), so the test stays short while every piece runs for real: the
  // candidate is a run of the run log on that launcher, measured from its `step` events, and it
  // is written out as the winner.
  void autotuneMeasuresOnTheTargetLauncher_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QByteArray>("launch");
    const QByteArray remote = m_dir.filePath("tune-remote").toUtf8();
    QTest::newRow("ssh") << "ssh"
                         << "kind = \"ssh\"\nhosts = [\"node1\"]\nremote_dir = \"" + remote +
                                "\"\n";
    // Slurm's nodes are unknown until the job starts: the budget is the experiment's to give.
    QTest::newRow("slurm") << "slurm" << QByteArray("kind = \"slurm\"\ndevice_memory_gib = 80\n");
  }
  void autotuneMeasuresOnTheTargetLauncher() {
    QFETCH(QString, kind);
    QFETCH(QByteArray, launch);
    const QString exp = writeExperiment("tune-" + kind, launch);
    QVERIFY(!exp.isEmpty());
    const QString winner = m_dir.filePath("tune-" + kind + ".winner.toml");
    const Run r = cli({"--db", db(), "--json", "autotune", exp, "--steps", "2", "--warmup", "1",
                       "--budget-minutes", "0.0001", "--out", winner},
                      m_env, 180000);
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    const QJsonObject o = json(r.out.trimmed().split('\n').last());
    QVERIFY(o["out_of_time"].toBool());
    QCOMPARE(o["winner"].toInt(-1), 0);
    QCOMPARE(o["winner_file"].toString(), winner);
    QVERIFY(QFile::exists(winner));
    const QJsonObject first = o["candidates"].toArray().first().toObject();
    QCOMPARE(first["status"].toString(), QString("measured"));
    QVERIFY2(first["tokens_per_s"].toDouble() > 0, qPrintable(r.out));
    const QJsonObject shown =
        json(cli({"--db", db(), "--json", "show", first["run"].toString()}, m_env).out);
    QCOMPARE(shown["status"].toString(), QString("complete"));
    QCOMPARE(shown["location"].toObject()["kind"].toString(), kind);
    // Nothing started after the budget ran out: one run of this experiment in the run log.
    int started = 0;
    for (const auto& c : o["candidates"].toArray())
      if (!c.toObject()["run_id"].isNull()) ++started;
    QCOMPARE(started, 1);
  }

  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY2(QFile::exists(kShardtrain), "build the shardtrain target first");
    const QString home = m_dir.filePath("home");
    QVERIFY2(writeSshConfig(home, "node1"), "the sshd fixture is not running (fixture sshd)");
    QVERIFY(QFile::copy(fixtureEnv("sshd").value("SSHD_KNOWN_HOSTS"), home + "/.ssh/known_hosts"));
    const QMap<QString, QString> slurm = fixtureEnv("slurm");
    QVERIFY2(slurm.contains("SLURM_CONF"), "the Slurm fixture is not running (fixture slurm)");
    m_env = QProcessEnvironment::systemEnvironment();
    m_env.insert("HOME", home);
    m_env.insert("SLURM_CONF", slurm.value("SLURM_CONF"));
    m_env.remove("SSH_AUTH_SOCK");
  }

  void sshRunCompletes() {
    const QByteArray remote = m_dir.filePath("ssh-remote").toUtf8();
    runToComplete(writeExperiment("viassh", "kind = \"ssh\"\nhosts = [\"node1\"]\nremote_dir = \"" +
                                                remote + "\"\n"),
                  "ssh");
    checkRemoteFolder("ssh-remote");
    QVERIFY(QFile::exists(m_lastRunDir + "/events-rank-1.jsonl"));
  }

  void slurmRunCompletes() {
    runToComplete(writeExperiment("viaslurm", "kind = \"slurm\"\n"), "slurm");
  }

  void slurmRunOverSshCompletes() {
    const QByteArray remote = m_dir.filePath("slurm-remote").toUtf8();
    runToComplete(writeExperiment("slurmssh",
                                  "kind = \"slurm\"\nslurm_host = \"node1\"\n"
                                  "remote_dir = \"" +
                                      remote + "\"\n"),
                  "slurm");
    checkRemoteFolder("slurm-remote");
    QVERIFY(QFile::exists(m_lastRunDir + "/job.sbatch"));
  }
};

QTEST_GUILESS_MAIN(TestCliRemote)
#include "tst_cli_remote.moc"
