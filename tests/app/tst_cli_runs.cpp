// shardscope-cli end to end: real runs of the fake trainer (the real shardtrain's are
// tst_cli_runs_trainer) through the local launcher, into a real run log; then ls, show,
// export and logs on them; exit codes for failed and stopped runs; bad experiment files start
// nothing; --detach leaves a supervisor that records the end of a run stopped with `stop`.
#include <signal.h>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

#include "clitest.h"
#include "tests/support/experiment.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

using clitest::cli;
using clitest::documentedFields;
using clitest::json;
using clitest::kCli;
using clitest::Run;
using clitest::sortedKeys;

using shardscope::testing::alive;

namespace {

const QString kFake = shardscope::testing::binaryDir() + "/tests/bin/faketrainer";

bool isFinal(const QJsonObject& run) {
  static const QSet<QString> final{"complete", "stopped", "pruned", "failed", "oom", "infeasible"};
  return final.contains(run["status"].toString());
}

// Per rank: the step events in its events file, and the `loss` rows `export` has for it, each
// step once (a step stored twice or missing shows as a difference).
struct StepCount {
  QList<int> fileLines;
  QList<int> rows;
  bool duplicates = false;
};

StepCount countSteps(const QString& runDir, const QString& csv, int worldSize) {
  StepCount c;
  QList<QSet<qint64>> seen(worldSize);
  c.rows = QList<int>(worldSize, 0);
  for (int rank = 0; rank < worldSize; ++rank) {
    QFile file(QDir(runDir).filePath(QStringLiteral("events-rank-%1.jsonl").arg(rank)));
    c.fileLines << (file.open(QIODevice::ReadOnly) ? int(file.readAll().count("\"ev\":\"step\""))
                                                   : -1);
  }
  for (const QString& line : csv.split('\n')) {
    const QStringList f = line.split(',');
    if (f.size() != 6 || f[2] != "loss") continue;
    const int rank = f[4].toInt();
    if (rank < 0 || rank >= worldSize) continue;
    ++c.rows[rank];
    if (seen[rank].contains(f[1].toLongLong())) c.duplicates = true;
    seen[rank].insert(f[1].toLongLong());
  }
  return c;
}

// The pid the supervisor wrote into supervisor.log ("... as pid P"); 0 until it is there.
qint64 supervisorPid(const QString& runDir, int nth = 0) {
  QFile log(QDir(runDir).filePath("supervisor.log"));
  if (!log.open(QIODevice::ReadOnly)) return 0;
  static const QRegularExpression pid(QStringLiteral("as pid ([0-9]+)"));
  auto it = pid.globalMatch(QString::fromUtf8(log.readAll()));
  for (int i = 0; it.hasNext(); ++i) {
    const auto m = it.next();
    if (i == nth) return m.captured(1).toLongLong();
  }
  return 0;
}

}  // namespace

class TestCliRuns : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  QString db() const { return m_dir.filePath("runs.db"); }

  // A small experiment for the fake trainer: 2 local ranks.
  QString writeExperiment(const QString& name, const QString& trainer, const QString& extra = {}) {
    shardscope::testing::TinyExperiment experiment;
    experiment.name = name;
    experiment.trainer = trainer;
    experiment.steps = 10;
    experiment.train = extra.toUtf8();
    return shardscope::testing::writeExperiment(m_dir.path(), experiment);
  }

  QProcessEnvironment fakeMode(const QString& mode) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("SHARDSCOPE_FAKE_MODE", mode);
    return env;
  }

 private slots:
  void initTestCase() { QVERIFY(m_dir.isValid()); }

  void runCompletesAndIsListedShownExportedLogged() {
    const QString exp = writeExperiment("ok", kFake);
    const Run r = cli({"run", exp, "--db", db(), "--set", "train.lr=1e-3"}, fakeMode("--steps 12"));
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QVERIFY2(r.out.contains("complete"), qPrintable(r.out));
    QVERIFY2(r.err.contains(QRegularExpression("step 12/10  loss [0-9.]+  ETA")) ||
                 r.err.contains(QRegularExpression("step [0-9]+/10  loss [0-9.]+  ETA")),
             qPrintable(r.err));

    const Run ls = cli({"--json", "ls", "--db", db()});
    QCOMPARE(ls.exitCode, 0);
    const QJsonArray runs = json(ls.out)["runs"].toArray();
    QVERIFY(!runs.isEmpty());
    const QString name = runs.first().toObject()["name"].toString();
    QVERIFY2(name.startsWith("ok-"), qPrintable(name));

    const Run show = cli({"show", name, "--json", "--db", db()});  // --json after the verb
    QCOMPARE(show.exitCode, 0);
    const QJsonObject o = json(show.out);
    QCOMPARE(o["status"].toString(), QString("complete"));
    QCOMPARE(o["params"].toObject()["train.lr"].toDouble(), 1e-3);
    QVERIFY(o["objective"].isDouble());
    QVERIFY(o["error"].isNull());
    QVERIFY(QFile::exists(QDir(o["run_dir"].toString()).filePath("trial.toml")));
    QVERIFY(o["metrics"].toObject().contains("loss"));

    const Run csv = cli({"--db", db(), "export", name, "--format", "csv"});
    QCOMPARE(csv.exitCode, 0);
    const QStringList lines = csv.out.trimmed().split('\n');
    QCOMPARE(lines.first(), QString("run,step,key,value,rank,time"));
    const QString id = QString::number(o["id"].toInteger());
    QVERIFY(lines.filter(QRegularExpression("^" + id + ",12,loss,[0-9.e-]+,0,[0-9.]+$")).size() ==
            1);
    const Run js = cli({"--db", db(), "export", id, "--format", "json"});
    QCOMPARE(js.exitCode, 0);
    QCOMPARE(json(js.out)["metrics"].toArray().size(), lines.size() - 1);

    const Run logs = cli({"--db", db(), "logs", name, "--rank", "1"});
    QCOMPARE(logs.exitCode, 0);
    QVERIFY2(logs.out.contains("rank 1/2"), qPrintable(logs.out));
    QCOMPARE(cli({"--db", db(), "logs", name, "--rank", "2"}).exitCode, 2);
  }

  void showJsonHasEveryDocumentedFieldAndNoOther() {
    const Run show = cli({"--json", "--db", db(), "show", "1"});
    QCOMPARE(show.exitCode, 0);
    const QStringList documented = documentedFields("show");
    QVERIFY(documented.contains("objective") && documented.contains("run_dir"));
    QCOMPARE(sortedKeys(json(show.out)), documented);
    const Run exported = cli({"--db", db(), "export", "1", "--format", "json"});
    QCOMPARE(sortedKeys(json(exported.out)), documentedFields("export"));
    const Run logs = cli({"--json", "--db", db(), "logs", "1"});
    QCOMPARE(sortedKeys(json(logs.out.section('\n', 0, 0))), documentedFields("logs"));
    const Run est = cli({"--json", "estimate", writeExperiment("est", kFake)});
    QCOMPARE(est.exitCode, 0);
    QCOMPARE(sortedKeys(json(est.out)), documentedFields("estimate"));
  }

  void crashedRankMakesTheRunFailedWithExitCode3() {
    const QString exp = writeExperiment("crash", kFake);
    const Run r = cli({"--db", db(), "--json", "run", exp},
                      fakeMode("crash --fail-step 3 --rank-only 1 --steps 50"));
    QCOMPARE(r.exitCode, 3);
    const QJsonObject o = json(r.out.trimmed().split('\n').last());
    QCOMPARE(o["status"].toString(), QString("failed"));
    QVERIFY2(o["error"].toString().contains("rank 1"), qPrintable(o["error"].toString()));
  }

  void oomIsItsOwnStatusWithExitCode3() {
    const QString exp = writeExperiment("oom", kFake);
    const Run r = cli({"--db", db(), "--json", "run", exp}, fakeMode("oom --fail-step 2"));
    QCOMPARE(r.exitCode, 3);
    QCOMPARE(json(r.out.trimmed().split('\n').last())["status"].toString(), QString("oom"));
  }

  void badExperimentNamesFileLineFieldAndStartsNothing() {
    QTemporaryDir dir;
    const QString store = dir.filePath("runs.db");
    const QString exp = writeExperiment("bad", kFake, "lr = -0.1\n");
    const Run r = cli({"--db", store, "run", exp});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains(QRegularExpression("bad\\.toml:[0-9]+:[0-9]+: train\\.lr: ")),
             qPrintable(r.err));
    QVERIFY(!QFile::exists(store));                 // no run log, so no run row
    QVERIFY(!QDir(dir.filePath("runs")).exists());  // no run directory, so no process
    // Also with an existing run log: no row appears.
    const Run ok = cli({"--db", db(), "--json", "ls"});
    const qsizetype before = json(ok.out)["runs"].toArray().size();
    QCOMPARE(cli({"--db", db(), "run", exp, "--set", "train.max_steps=0"}).exitCode, 2);
    QCOMPARE(json(cli({"--db", db(), "--json", "ls"}).out)["runs"].toArray().size(), before);
    const Run unknownKey = cli({"--db", db(), "run", writeExperiment("typo", kFake, "lrr = 1\n")});
    QCOMPARE(unknownKey.exitCode, 2);
    QVERIFY2(unknownKey.err.contains("train.lrr"), qPrintable(unknownKey.err));
  }

  // [notify] on_end of a single run: `run` runs it before it exits (a failed run: its status and
  // name in the environment), and so does the supervisor of a detached run at the run's end,
  // from the experiment the run log recorded. A failing command changes no exit code.
  void notifyOnEndRunsForAttachedAndDetachedRuns() {
    const auto write = [&](const QString& name, const QByteArray& command) {
      shardscope::testing::TinyExperiment e;
      e.name = name;
      e.trainer = kFake;
      e.tables = "[notify]\non_end = \"" + command + "\"\n";
      return shardscope::testing::writeExperiment(m_dir.path(), e);
    };
    const QByteArray record = "env | grep ^SHARDSCOPE_ | sort > $SHARDSCOPE_RUN_NAME.env";
    const auto envOf = [&](const QString& name) {
      QMap<QString, QString> out;
      QFile file(m_dir.filePath(name + ".env"));
      if (!file.open(QIODevice::ReadOnly)) return out;
      for (const QByteArray& line : file.readAll().split('\n')) {
        const auto eq = line.indexOf('=');
        if (eq > 0)
          out.insert(QString::fromUtf8(line.left(eq)), QString::fromUtf8(line.mid(eq + 1)));
      }
      return out;
    };
    const Run attached = cli({"--db", db(), "--json", "run", write("hooked", record)},
                             fakeMode("crash --fail-step 3 --rank-only 1 --steps 50"));
    QCOMPARE(attached.exitCode, 3);
    const QJsonObject failed = json(attached.out.trimmed().split('\n').last());
    const auto env = envOf(failed["name"].toString());
    QCOMPARE(env.value("SHARDSCOPE_EVENT"), QString("end"));
    QCOMPARE(env.value("SHARDSCOPE_RUN_STATUS"), QString("failed"));
    QCOMPARE(env.value("SHARDSCOPE_RUN_ID"), QString::number(failed["id"].toInteger()));
    QVERIFY(env.value("SHARDSCOPE_RUN_ERROR").contains("rank 1"));

    const Run started = cli({"--db", db(), "--json", "run", write("hookdet", record), "--detach"},
                            fakeMode("--steps 20"));
    QVERIFY2(started.exitCode == 0, qPrintable(started.out + started.err));
    const QString name = json(started.out)["name"].toString();
    QTRY_COMPARE_WITH_TIMEOUT(envOf(name).value("SHARDSCOPE_RUN_STATUS"), QString("complete"),
                              60000);
    QCOMPARE(envOf(name).value("SHARDSCOPE_RUN_NAME"), name);

    const Run broken =
        cli({"--db", db(), "run", write("hookfail", "exit 9")}, fakeMode("--steps 5"));
    QCOMPARE(broken.exitCode, 0);
    QVERIFY2(broken.err.contains("notify.on_end `exit 9` exited with status 9"),
             qPrintable(broken.err));
  }

  void detachedRunIsStoppedAndRecordedBySupervisor() {
    const QString exp = writeExperiment("det", kFake);
    const Run started = cli({"--db", db(), "run", exp, "--detach"}, fakeMode("--steps 100000"));
    QCOMPARE(started.exitCode, 0);
    const QString id = started.out.trimmed();
    QVERIFY2(QRegularExpression("^[0-9]+$").match(id).hasMatch(), qPrintable(started.out));
    const QJsonObject running = json(cli({"--db", db(), "--json", "show", id}).out);
    QCOMPARE(running["status"].toString(), QString("running"));
    QList<qint64> pids;
    for (const auto& p : running["location"].toObject()["pids"].toArray()) pids << p.toInteger();
    QCOMPARE(pids.size(), 2);
    // The ranks make progress with nobody attached: the supervisor stores their rows.
    QTRY_VERIFY_WITH_TIMEOUT(
        json(cli({"--db", db(), "--json", "show", id}).out)["metrics"].toObject().contains("loss"),
        60000);
    const Run stop = cli({"--db", db(), "stop", id});
    QVERIFY2(stop.exitCode == 0, qPrintable(stop.out + stop.err));
    QCOMPARE(json(cli({"--db", db(), "--json", "show", id}).out)["status"].toString(),
             QString("stopped"));
    for (qint64 pid : pids) QTRY_VERIFY_WITH_TIMEOUT(!alive(pid), 30000);
    QCOMPARE(cli({"--db", db(), "stop", id}).exitCode, 1);  // nothing left to stop
  }

  void detachedRunIsFollowedToItsEndBySupervisor() {
    const QString exp = writeExperiment("solo", kFake);
    const Run started =
        cli({"--db", db(), "--json", "run", exp, "--detach"}, fakeMode("--steps 40 --step-ms 50"));
    QVERIFY2(started.exitCode == 0, qPrintable(started.out + started.err));
    const QJsonObject o = json(started.out);
    QCOMPARE(sortedKeys(o), documentedFields("run-detach"));
    const QString id = QString::number(o["id"].toInteger());
    // Nobody is attached and nothing is killed: the supervisor records the end.
    QJsonObject shown;
    QTRY_VERIFY_WITH_TIMEOUT(isFinal(shown = json(cli({"--db", db(), "--json", "show", id}).out)),
                             60000);
    QCOMPARE(shown["status"].toString(), QString("complete"));
    QVERIFY(shown["objective"].isDouble());
    const qint64 pid = supervisorPid(o["run_dir"].toString());
    QVERIFY(pid > 0);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(pid), 30000);  // it ends with the run
    const StepCount steps =
        countSteps(o["run_dir"].toString(), cli({"--db", db(), "export", id}).out, 2);
    QCOMPARE(steps.rows, steps.fileLines);
    QCOMPARE(steps.fileLines.first(), 40);
    QVERIFY(!steps.duplicates);
  }

  void killedSupervisorIsReplacedAndLosesNoRow() {
    const QString exp = writeExperiment("orphan", kFake);
    const Run started =
        cli({"--db", db(), "--json", "run", exp, "--detach"}, fakeMode("--steps 150 --step-ms 60"));
    QVERIFY2(started.exitCode == 0, qPrintable(started.out + started.err));
    const QJsonObject o = json(started.out);
    const QString id = QString::number(o["id"].toInteger());
    const QString runDir = o["run_dir"].toString();
    const qint64 first = supervisorPid(runDir);
    QVERIFY(first > 0);
    QTRY_VERIFY_WITH_TIMEOUT(json(cli({"--db", db(), "--json", "show", id}).out)["metrics"]
                                     .toObject()["loss"]
                                     .toObject()["step"]
                                     .toInteger() >= 5,
                             60000);
    QCOMPARE(::kill(pid_t(first), SIGKILL), 0);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(first), 10000);
    // The ranks keep running; the next `show` finds the run without a live follower and leaves
    // a new supervisor that takes the lease and catches up from the stored offsets.
    const Run show = cli({"--db", db(), "--json", "show", id});
    QCOMPARE(json(show.out)["status"].toString(), QString("running"));
    QVERIFY2(show.err.contains("took it over"), qPrintable(show.err));
    QTRY_VERIFY_WITH_TIMEOUT(supervisorPid(runDir, 1) > 0, 30000);
    QVERIFY(supervisorPid(runDir, 1) != first);
    QJsonObject shown;
    QTRY_VERIFY_WITH_TIMEOUT(isFinal(shown = json(cli({"--db", db(), "--json", "show", id}).out)),
                             60000);
    QCOMPARE(shown["status"].toString(), QString("complete"));
    const StepCount steps = countSteps(runDir, cli({"--db", db(), "export", id}).out, 2);
    QCOMPARE(steps.rows, steps.fileLines);
    QCOMPARE(steps.fileLines.first(), 150);
    QVERIFY(!steps.duplicates);
  }

  void interruptedAttachedRunIsStoppedWithExitCode4() {
    const QString exp = writeExperiment("int", kFake);
    QProcess process;
    process.setProcessEnvironment(fakeMode("--steps 100000"));
    process.start(kCli, {"--db", db(), "run", exp});
    QVERIFY(process.waitForStarted());
    QByteArray err;
    QTRY_VERIFY_WITH_TIMEOUT((err += process.readAllStandardError()).contains("step 2/"), 60000);
    ::kill(static_cast<pid_t>(process.processId()), SIGINT);
    QVERIFY(process.waitForFinished(60000));
    QCOMPARE(process.exitCode(), 4);
    QVERIFY(process.readAllStandardOutput().contains("stopped"));
  }
};

QTEST_GUILESS_MAIN(TestCliRuns)
#include "tst_cli_runs.moc"
