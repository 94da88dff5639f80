// `shardscope-cli sweep` end to end on a real run log with a program trial: every trial
// runs as its own process through the trial runner and scheduler, the median pruner stops some
// through their `eval` events, `study show --json` agrees with the values the program printed;
// a sweep SIGKILLed mid-study and started again continues with the same trial numbers and loses
// no result: the trials it left running are reattached and keep their own result (attempt 0),
// and only a trial whose process is really gone is failed as lost and retried; two sweeps on one
// study never take more than n_trials numbers; `sweep --set` overrides the experiment and refuses
// to change an existing study's search space; a sweep steered by people's verdicts
// (probes.good_rate) stores each trial's good rate as marked from outside through the CLI.
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
#include <csignal>
#include <map>
#include <set>

#include "tests/support/experiment.h"
#include "tests/support/files.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

using shardscope::testing::alive;

namespace {

using shardscope::testing::writeText;

using shardscope::testing::quadTrialValues;
using shardscope::testing::writeQuadTrial;

const QString kCli = shardscope::testing::binaryDir() + "/bin/shardscope-cli";

// The trial (tests/support/experiment.h): f(x, y) = (x-1)^2 + (y+2)^2 at 10 eval steps, 0.05 s
// apart unless TRIAL_SLEEP says otherwise; values.txt and pids/ beside it.
constexpr int kTrialSteps = 10;
constexpr double kTrialSleepS = 0.05;

QString experiment(int trials, int concurrency,
                   const QString& pruner =
                       "{type = \"median\", n_startup_trials = 4, "
                       "n_warmup_steps = 3}") {
  return QStringLiteral(R"([experiment]
name = "quad"

[search]
program = ["python3", "obj.py"]
sampler = "tpe"
seed = 3
n_trials = %1
concurrency = %2
pruner = %3
objectives = {objective = "minimize"}

[search.space.x]
type = "float"
low = -5.0
high = 5.0

[search.space.y]
type = "float"
low = -5.0
high = 5.0
)")
      .arg(trials)
      .arg(concurrency)
      .arg(pruner);
}

struct Run {
  int exitCode = -1;
  QString out;
  QString err;
};

Run cli(const QStringList& args, int timeoutMs = 180000) {
  QProcess p;
  p.start(kCli, args);
  Run r;
  if (!p.waitForFinished(timeoutMs)) {
    p.kill();
    p.waitForFinished();
    r.err = "timed out";
    return r;
  }
  r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

QJsonObject show(const QString& db, const QString& study = "exp") {
  const Run r = cli({"--db", db, "study", "show", study, "--json"});
  return QJsonDocument::fromJson(r.out.toUtf8()).object();
}

qint64 trialPid(const QString& dir, int number) {
  QFile f(QDir(dir).filePath(QStringLiteral("pids/%1").arg(number)));
  return f.open(QIODevice::ReadOnly) ? f.readAll().trimmed().toLongLong() : 0;
}

}  // namespace

class TestCliSweep : public QObject {
  Q_OBJECT

 private slots:
  void sweepRunsPrunesAndNamesTheBest() {
    QTemporaryDir dir;
    QVERIFY(writeQuadTrial(dir.path(), kTrialSteps, kTrialSleepS));
    QVERIFY(writeText(dir.filePath("exp.toml"), experiment(14, 2)));
    const QString db = dir.filePath("runs.db");
    const Run r = cli({"--db", db, "sweep", dir.filePath("exp.toml")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QVERIFY2(r.out.contains("study exp: 14 trials, 2 at once"), qPrintable(r.out));

    const QJsonObject s = show(db);
    const QJsonArray trials = s["trials"].toArray();
    QCOMPARE(trials.size(), 14);
    std::set<int> numbers;
    int pruned = 0;
    int complete = 0;
    double best = 1e300;
    for (const auto& t : trials) {
      const QJsonObject o = t.toObject();
      numbers.insert(o["number"].toInt());
      const QString state = o["state"].toString();
      if (state == QLatin1String("pruned")) ++pruned;
      if (state == QLatin1String("complete")) {
        ++complete;
        best = std::min(best, o["values"].toArray()[0].toDouble());
      }
    }
    QCOMPARE(int(numbers.size()), 14);
    QCOMPARE(*numbers.rbegin(), 13);
    QCOMPARE(complete + pruned, 14);  // no failures: every trial ran and ended cleanly
    QVERIFY2(pruned >= 1, "the median pruner stopped no trial");
    QVERIFY(complete >= 4);  // n_startup_trials are never pruned

    // The stored values are what the program computed, and show names the smallest.
    std::map<int, double> computed = quadTrialValues(dir.path());
    QCOMPARE(int(computed.size()), 14);
    for (const auto& t : trials) {
      const QJsonObject o = t.toObject();
      if (o["state"].toString() != QLatin1String("complete")) continue;
      QCOMPARE(o["values"].toArray()[0].toDouble(), computed[o["number"].toInt()]);
    }
    QCOMPARE(s["best"].toObject()["values"].toArray()[0].toDouble(), best);
    QVERIFY2(r.out.contains(
                 QStringLiteral("best trial %1:").arg(s["best"].toObject()["number"].toInt())),
             qPrintable(r.out));
  }

  // search.objectives = {"probes.good_rate" = "maximize"}: the trials complete with no value (no
  // answer is marked yet); marks made afterwards through `shardscope-cli verdict` become each
  // trial's value (good / marked) in the study, a cleared mark takes it back, and the best trial
  // is the one people liked most. A `probes.` objective other than good_rate, or good_rate
  // minimized, is refused naming the field.
  void sweepSteeredByVerdicts() {
    QTemporaryDir dir;
    QVERIFY(writeQuadTrial(dir.path(), 2, 0.01));
    const QString db = dir.filePath("runs.db");
    const auto withObjective = [](const QString& objectives) {
      QString text = experiment(2, 1, "\"none\"");
      return text.replace("objectives = {objective = \"minimize\"}", objectives);
    };
    QVERIFY(writeText(dir.filePath("bad.toml"),
                      withObjective("objectives = {\"probes.good_rate\" = \"minimize\"}")));
    Run refused = cli({"--db", db, "sweep", dir.filePath("bad.toml")});
    QVERIFY2(refused.exitCode != 0 &&
                 refused.err.contains("search.objectives.\"probes.good_rate\"") &&
                 refused.err.contains("maximize"),
             qPrintable(refused.out + refused.err));
    QVERIFY(writeText(dir.filePath("other.toml"),
                      withObjective("objectives = {\"probes.bleu\" = \"maximize\"}")));
    refused = cli({"--db", db, "sweep", dir.filePath("other.toml")});
    QVERIFY2(refused.exitCode != 0 && refused.err.contains("probes.good_rate"),
             qPrintable(refused.out + refused.err));

    QVERIFY(writeText(dir.filePath("exp.toml"),
                      withObjective("objectives = {\"probes.good_rate\" = \"maximize\"}")));
    const Run r = cli({"--db", db, "sweep", dir.filePath("exp.toml")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    // The value is unknown until a person marks the answers: the sweep says so, never "nan".
    for (const char* line : {"trial 0 complete (probes.good_rate: waiting for verdicts)\n",
                             "trial 1 complete (probes.good_rate: waiting for verdicts)\n"})
      QVERIFY2(r.out.contains(QLatin1String(line)), qPrintable(r.out));
    QVERIFY2(!r.out.contains("nan", Qt::CaseInsensitive), qPrintable(r.out));
    const Run text = cli({"--db", db, "study", "show", "exp"});
    QVERIFY2(text.exitCode == 0 &&
                 text.out.contains("waiting:    2 complete trial(s) (0 1): probes.good_rate "
                                   "waits for verdicts") &&
                 !text.out.contains("nan", Qt::CaseInsensitive),
             qPrintable(text.out + text.err));
    QJsonArray trials = show(db)["trials"].toArray();
    QCOMPARE(trials.size(), 2);
    QString runs[2];
    for (const auto& t : trials) {
      const QJsonObject o = t.toObject();
      QCOMPARE(o["status"].toString(), "complete");
      QVERIFY2(o["values"].toArray()[0].isNull(), "a trial with no verdict has no value yet");
      runs[o["number"].toInt()] = QString::number(o["run_id"].toInteger());
    }

    // From outside: trial 0 gets one good and one bad mark, trial 1 one good.
    const auto mark = [&db](const QString& run, const QString& probe, const QString& step,
                            const QString& verdict) {
      return cli({"--db", db, "verdict", run, probe, step, verdict});
    };
    QCOMPARE(mark(runs[0], "p1", "1", "good").exitCode, 0);
    const Run second = mark(runs[0], "p2", "1", "bad");
    QCOMPARE(second.exitCode, 0);
    QVERIFY2(second.out.contains("good 1, bad 1, good_rate 0.50"), qPrintable(second.out));
    QCOMPARE(mark(runs[1], "p1", "2", "good").exitCode, 0);
    const Run wrong = mark(runs[1], "p1", "2", "fine");
    QCOMPARE(wrong.exitCode, 2);
    QVERIFY2(wrong.err.contains("'fine' is not one of good, bad, clear"), qPrintable(wrong.err));

    QJsonObject study = show(db);
    std::map<int, double> told;
    for (const auto& t : study["trials"].toArray())
      told[t.toObject()["number"].toInt()] = t.toObject()["values"].toArray()[0].toDouble(-1);
    QCOMPARE(told[0], 0.5);
    QCOMPARE(told[1], 1.0);
    QCOMPARE(study["best"].toObject()["number"].toInt(), 1);
    const Run marked = cli({"--db", db, "study", "show", "exp"});
    QVERIFY2(
        marked.out.contains("best:       trial 1 values 1  ") && !marked.out.contains("waiting:"),
        qPrintable(marked.out));

    QCOMPARE(mark(runs[1], "p1", "2", "clear").exitCode, 0);
    for (const auto& t : show(db)["trials"].toArray()) {
      const QJsonObject o = t.toObject();
      if (o["number"].toInt() == 1) QVERIFY(o["values"].toArray()[0].isNull());
    }
  }

  // A kill -9 of the sweep leaves its running trials' processes alive (their own sessions).
  // One of them is then killed too (really gone); the restarted sweep reattaches the others and
  // records their own objective at attempt 0, and fails only the gone one as lost and retries it.
  void killedSweepReattachesLiveTrials() {
    QTemporaryDir dir;
    QVERIFY(writeQuadTrial(dir.path(), kTrialSteps, kTrialSleepS));
    QVERIFY(writeText(dir.filePath("exp.toml"), experiment(8, 2, "{type = \"none\"}")));
    const QString db = dir.filePath("runs.db");

    // First sweep: slow trials (about 4 s each); SIGKILL once 2 trials are told and 2 more
    // have started.
    QProcess first;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("TRIAL_SLEEP", "0.4");
    first.setProcessEnvironment(env);
    first.start(kCli, {"--db", db, "sweep", dir.filePath("exp.toml")});
    QVERIFY(first.waitForStarted());
    QString seen;
    // Two trials told and two more whose processes run (their pid files are written).
    const auto twoMoreRun = [&] {
      seen += QString::fromUtf8(first.readAllStandardOutput());
      int running = 0;
      for (int n = 0; n < 8; ++n) {
        if (!seen.contains(QStringLiteral("trial %1 complete").arg(n)) &&
            alive(trialPid(dir.path(), n)))
          ++running;
      }
      return seen.count(" complete ") >= 2 && running >= 2;
    };
    QTRY_VERIFY_WITH_TIMEOUT(twoMoreRun(), 120000);
    ::kill(static_cast<pid_t>(first.processId()), SIGKILL);
    QVERIFY(first.waitForFinished(30000));

    std::map<int, QJsonObject> before;  // results recorded before the kill
    std::vector<int> live;              // trials whose process outlived the sweep
    const auto look = [&] {
      before.clear();
      live.clear();
      for (const auto& t : show(db)["trials"].toArray()) {
        const QJsonObject o = t.toObject();
        const int n = o["number"].toInt();
        if (o["state"].toString() == QLatin1String("complete")) before[n] = o;
        if (o["state"].toString() == QLatin1String("running") && alive(trialPid(dir.path(), n)))
          live.push_back(n);
      }
      return live.size() >= 2;
    };
    QTRY_VERIFY2_WITH_TIMEOUT(look(), "the kill left fewer than 2 live trials to reattach", 10000);
    const int gone = live.front();  // really gone: its process dies too
    ::kill(static_cast<pid_t>(trialPid(dir.path(), gone)), SIGKILL);
    QTRY_VERIFY_WITH_TIMEOUT(!alive(trialPid(dir.path(), gone)), 30000);

    const Run second = cli({"--db", db, "sweep", dir.filePath("exp.toml")});
    QVERIFY2(second.exitCode == 0, qPrintable(second.out + second.err));
    QVERIFY2(second.out.contains("continuing study exp"), qPrintable(second.out));

    const std::map<int, double> computed = quadTrialValues(dir.path());
    const QJsonArray trials = show(db)["trials"].toArray();
    QCOMPARE(trials.size(), 8);  // numbers 0..7, each once: none skipped, none doubled
    std::set<int> numbers;
    for (const auto& t : trials) {
      const QJsonObject o = t.toObject();
      const int n = o["number"].toInt();
      numbers.insert(n);
      QVERIFY2(o["state"].toString() == QLatin1String("complete"),
               qPrintable(QStringLiteral("trial %1 ended %2: %3")
                              .arg(n)
                              .arg(o["state"].toString(), o["error"].toString())));
      QCOMPARE(o["values"].toArray()[0].toDouble(), computed.at(n));  // its own objective
      if (before.count(n) != 0) {  // a result recorded before the kill is kept as it was
        QCOMPARE(o["values"].toArray(), before[n]["values"].toArray());
        QCOMPARE(o["attempt"].toInt(), before[n]["attempt"].toInt());
      }
      if (n == gone) {
        QCOMPARE(o["attempt"].toInt(), 1);  // failed as lost, then retried
      } else if (std::find(live.begin(), live.end(), n) != live.end()) {
        QCOMPARE(o["attempt"].toInt(), 0);  // reattached: no retry
        QVERIFY2(second.out.contains(QStringLiteral("trial %1 reattached").arg(n)),
                 qPrintable(second.out));
      }
    }
    QCOMPARE(*numbers.begin(), 0);
    QCOMPARE(*numbers.rbegin(), 7);
    QVERIFY2(second.out.contains(QStringLiteral("trial %1 start (retry 1)").arg(gone)),
             qPrintable(second.out));
    QCOMPARE(second.out.count("(retry"), 1);
  }

  // A running sweep is steered from another process through the run log: pause starts
  // no new trial while the running ones go on, prune-trial and stop-trial end one trial each
  // (pruned; stopped and never retried), resume starts trials again, stop ends the sweep (exit 4).
  void steeredFromAnotherProcess() {
    QTemporaryDir dir;
    QVERIFY(writeQuadTrial(dir.path(), kTrialSteps, kTrialSleepS));
    QVERIFY(writeText(dir.filePath("exp.toml"), experiment(8, 2, "{type = \"none\"}")));
    const QString db = dir.filePath("runs.db");
    QProcess sweep;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("TRIAL_SLEEP", "1.0");  // about 10 s a trial: long enough to be steered
    sweep.setProcessEnvironment(env);
    sweep.start(kCli, {"--db", db, "sweep", dir.filePath("exp.toml")});
    QVERIFY(sweep.waitForStarted());
    QString seen;
    const auto saw = [&](const QString& text) {
      seen += QString::fromUtf8(sweep.readAllStandardOutput());
      return seen.contains(text);
    };
    QTRY_VERIFY_WITH_TIMEOUT(alive(trialPid(dir.path(), 0)) && alive(trialPid(dir.path(), 1)),
                             60000);
    Run r = cli({"--db", db, "study", "pause", "exp"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QTRY_VERIFY2_WITH_TIMEOUT(saw("study exp paused"), qPrintable(seen), 30000);
    r = cli({"--db", db, "study", "prune-trial", "exp", "0"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    r = cli({"--db", db, "study", "stop-trial", "exp", "1"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QTRY_VERIFY2_WITH_TIMEOUT(saw("trial 0 pruned") && saw("trial 1 stopped"), qPrintable(seen),
                              30000);
    // Paused: both slots are free and no trial started. The sweep has read the run log since
    // (it printed what it carried out), so a start would already show.
    QVERIFY2(!seen.contains("trial 2 start"), qPrintable(seen));
    QJsonArray trials = show(db)["trials"].toArray();
    QCOMPARE(trials.size(), 2);
    QCOMPARE(trials[0].toObject()["status"].toString(), QString("pruned"));
    QCOMPARE(trials[1].toObject()["status"].toString(), QString("stopped"));
    QCOMPARE(trials[1].toObject()["error"].toString(), QString("stopped by the user"));

    r = cli({"--db", db, "study", "resume", "exp"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QTRY_VERIFY2_WITH_TIMEOUT(saw("trial 2 start") && saw("trial 3 start"), qPrintable(seen),
                              30000);
    QTRY_VERIFY_WITH_TIMEOUT(alive(trialPid(dir.path(), 2)) && alive(trialPid(dir.path(), 3)),
                             60000);
    r = cli({"--db", db, "study", "stop", "exp"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QVERIFY(sweep.waitForFinished(60000));
    seen += QString::fromUtf8(sweep.readAllStandardOutput());
    QCOMPARE(sweep.exitCode(), 4);
    QVERIFY2(seen.contains("study exp stopped by the user"), qPrintable(seen));
    trials = show(db)["trials"].toArray();
    QCOMPARE(trials.size(), 4);  // the stopped trial 1 was not retried, nothing new was asked
    for (int n : {2, 3}) {
      QCOMPARE(trials[n].toObject()["status"].toString(), QString("stopped"));
      QVERIFY(!alive(trialPid(dir.path(), n)));
    }

    // The sweep is gone: a request now names what is wrong; a new sweep starts resumed.
    r = cli({"--db", db, "study", "prune-trial", "exp", "2"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("not a running trial"), qPrintable(r.err));
    r = cli({"--db", db, "study", "stop-trial", "exp", "99"});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains("has no trial 99"), qPrintable(r.err));
  }

  // Two sweeps started at once on one study share its n_trials: together they record
  // exactly n_trials trials with distinct numbers, and every trial is told once.
  void twoSweepsKeepTheTrialBudget() {
    QTemporaryDir dir;
    QVERIFY(writeQuadTrial(dir.path(), kTrialSteps, kTrialSleepS));
    QVERIFY(writeText(dir.filePath("exp.toml"), experiment(9, 2, "{type = \"none\"}")));
    const QString db = dir.filePath("runs.db");
    QVERIFY(cli({"--db", db, "study", "create", "exp", dir.filePath("exp.toml")}).exitCode == 0);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("TRIAL_SLEEP", "0.01");
    QProcess a;
    QProcess b;
    for (QProcess* p : {&a, &b}) {
      p->setProcessEnvironment(env);
      p->start(kCli, {"--db", db, "sweep", dir.filePath("exp.toml")});
    }
    for (QProcess* p : {&a, &b}) {
      QVERIFY(p->waitForFinished(180000));
      QVERIFY2(p->exitCode() == 0, p->readAllStandardError().constData());
    }
    const QJsonArray trials = show(db)["trials"].toArray();
    QCOMPARE(trials.size(), 9);
    std::set<int> numbers;
    for (const auto& t : trials) {
      const QJsonObject o = t.toObject();
      numbers.insert(o["number"].toInt());
      QCOMPARE(o["state"].toString(), QStringLiteral("complete"));
    }
    QCOMPARE(int(numbers.size()), 9);
    QCOMPARE(*numbers.rbegin(), 8);
    QFile values(dir.filePath("values.txt"));  // one line per trial process
    QVERIFY(values.open(QIODevice::ReadOnly));
    QCOMPARE(values.readAll().count('\n'), 9);  // 9 processes ran, not more
  }

  // `sweep --set` applies overrides before the study is created (here: n_trials and the
  // range of x, stored with the study); continuing it with an override that changes its search
  // space is refused naming the study and the field; search.concurrency may change.
  // Two run logs in one folder each keep their trials' run directories apart (both studies are
  // study 1 with trials 0 and 1: they shared runs/study-1/trial-N before).
  void runLogsInOneFolderKeepTheirRunsApart() {
    QTemporaryDir dir;
    QVERIFY(writeQuadTrial(dir.path(), kTrialSteps, kTrialSleepS));
    QVERIFY(writeText(dir.filePath("exp.toml"), experiment(2, 1, "{type = \"none\"}")));
    QStringList all;
    for (const char* log : {"a.db", "b.db", "runs.db"}) {
      const QString db = dir.filePath(log);
      const Run r = cli({"--db", db, "sweep", dir.filePath("exp.toml")});
      QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
      const Run listed = cli({"--db", db, "--json", "ls"});
      const QJsonArray runs = QJsonDocument::fromJson(listed.out.toUtf8())["runs"].toArray();
      QCOMPARE(runs.size(), 2);
      for (const auto& run : runs) {
        const QString runDir = run.toObject()["run_dir"].toString();
        QVERIFY2(QFileInfo(runDir + "/events.jsonl").exists() ||
                     !QDir(runDir).entryList(QDir::Files).isEmpty(),
                 qPrintable(runDir));
        QVERIFY2(!all.contains(runDir), qPrintable(runDir + " is used by two run logs"));
        all << runDir;
      }
    }
    QVERIFY2(all[4].startsWith(dir.filePath("runs/")), qPrintable(all[4]));  // as before
  }

  void setOverridesTheExperiment() {
    QTemporaryDir dir;
    QVERIFY(writeQuadTrial(dir.path(), kTrialSteps, kTrialSleepS));
    QVERIFY(writeText(dir.filePath("exp.toml"), experiment(20, 1, "{type = \"none\"}")));
    const QString db = dir.filePath("runs.db");
    const Run r = cli({"--db", db, "sweep", dir.filePath("exp.toml"), "--set", "search.n_trials=3",
                       "--set", "search.space.x.high=-4.0"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QVERIFY2(r.out.contains("study exp: 3 trials"), qPrintable(r.out));
    const QJsonArray trials = show(db)["trials"].toArray();
    QCOMPARE(trials.size(), 3);
    for (const auto& t : trials) {
      const double x = t.toObject()["params"].toObject()["x"].toDouble();
      QVERIFY2(x >= -5.0 && x <= -4.0, qPrintable(QString::number(x)));
    }

    const Run refused =
        cli({"--db", db, "sweep", dir.filePath("exp.toml"), "--set", "search.space.x.high=2.0"});
    QCOMPARE(refused.exitCode, 2);
    QVERIFY2(refused.err.contains("study 'exp'") && refused.err.contains("search.space.x.high"),
             qPrintable(refused.err));
    const Run bad = cli({"--db", db, "sweep", dir.filePath("exp.toml"), "--set", "nosuchfield"});
    QCOMPARE(bad.exitCode, 2);
    QVERIFY2(bad.err.contains("nosuchfield"), qPrintable(bad.err));

    // Same values, and a sweep setting: accepted; the study is complete, nothing more runs.
    const Run again = cli({"--db", db, "sweep", dir.filePath("exp.toml"), "--set",
                           "search.n_trials=3", "--set", "search.concurrency=2"});
    QVERIFY2(again.exitCode == 0, qPrintable(again.out + again.err));
    QVERIFY2(again.out.contains("continuing study exp"), qPrintable(again.out));
    QCOMPARE(show(db)["trials"].toArray().size(), 3);
  }
};

QTEST_GUILESS_MAIN(TestCliSweep)
#include "tst_cli_sweep.moc"
