// `shardscope-cli sweep` end to end on a real run log with a program trial (#6): every trial
// runs as its own process through the trial runner and scheduler, the median pruner stops some
// through their `eval` events, `study show --json` agrees with the values the program printed;
// and a sweep SIGKILLed mid-study and started again continues with the same trial numbers and
// loses no result (the trials it left running are failed as lost and retried).
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <map>
#include <set>

namespace {

const QString kCli = QStringLiteral(SHARDSCOPE_BINARY_DIR "/bin/shardscope-cli");

// The trial: f(x, y) = (x-1)^2 + (y+2)^2, reported at 10 steps as f + 1/step, then `done`; it
// also appends "NUMBER f" to values.txt in the experiment's folder (what the program computed).
const char* kProgram = R"(import json, os, sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
x, y = float(args["x"]), float(args["y"])
f = (x - 1) ** 2 + (y + 2) ** 2
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "values.txt"), "a") as out:
    out.write("%s %r\n" % (os.environ["SHARDSCOPE_TRIAL"], f))
for step in range(1, 11):
    print(json.dumps({"ev": "eval", "step": step, "metrics": {"objective": f + 1.0 / step}}),
          flush=True)
    time.sleep(float(os.environ.get("TRIAL_SLEEP", "0.05")))
print(json.dumps({"ev": "done", "status": "complete", "objective": f}), flush=True)
)";

QString experiment(int trials, int concurrency) {
  return QStringLiteral(R"([experiment]
name = "quad"

[search]
program = ["python3", "obj.py"]
sampler = "tpe"
seed = 3
n_trials = %1
concurrency = %2
pruner = {type = "median", n_startup_trials = 4, n_warmup_steps = 3}
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
      .arg(concurrency);
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

bool write(const QString& path, const QString& text) {
  QFile f(path);
  return f.open(QIODevice::WriteOnly) && f.write(text.toUtf8()) == text.toUtf8().size();
}

QJsonObject show(const QString& db) {
  const Run r = cli({"--db", db, "study", "show", "exp", "--json"});
  return QJsonDocument::fromJson(r.out.toUtf8()).object();
}

}  // namespace

class TestCliSweep : public QObject {
  Q_OBJECT

 private slots:
  void sweepRunsPrunesAndNamesTheBest() {
    QTemporaryDir dir;
    QVERIFY(write(dir.filePath("obj.py"), kProgram));
    QVERIFY(write(dir.filePath("exp.toml"), experiment(14, 2)));
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
    QFile values(dir.filePath("values.txt"));
    QVERIFY(values.open(QIODevice::ReadOnly));
    std::map<int, double> computed;
    for (const QByteArray& line : values.readAll().split('\n')) {
      const QList<QByteArray> parts = line.split(' ');
      if (parts.size() == 2) computed[parts[0].toInt()] = parts[1].toDouble();
    }
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

  void killedSweepContinuesWithTheSameNumbers() {
    QTemporaryDir dir;
    QVERIFY(write(dir.filePath("obj.py"), kProgram));
    QVERIFY(write(dir.filePath("exp.toml"), experiment(10, 2)));
    const QString db = dir.filePath("runs.db");

    // First sweep: slow trials; SIGKILL once at least 3 trials are told.
    QProcess first;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("TRIAL_SLEEP", "0.3");
    first.setProcessEnvironment(env);
    first.start(kCli, {"--db", db, "sweep", dir.filePath("exp.toml")});
    QVERIFY(first.waitForStarted());
    QString seen;
    QTRY_VERIFY_WITH_TIMEOUT((seen += QString::fromUtf8(first.readAllStandardOutput()),
                              seen.count(" complete ") + seen.count(" pruned") >= 3),
                             120000);
    ::kill(static_cast<pid_t>(first.processId()), SIGKILL);
    QVERIFY(first.waitForFinished(30000));

    // What the killed sweep had recorded as ended, by trial number.
    std::map<int, QJsonObject> before;
    for (const auto& t : show(db)["trials"].toArray()) {
      const QJsonObject o = t.toObject();
      const QString state = o["state"].toString();
      if (state == QLatin1String("complete") || state == QLatin1String("pruned"))
        before[o["number"].toInt()] = o;
    }
    QVERIFY(before.size() >= 3);

    const Run second = cli({"--db", db, "sweep", dir.filePath("exp.toml")});
    QVERIFY2(second.exitCode == 0, qPrintable(second.out + second.err));
    QVERIFY2(second.out.contains("continuing study exp"), qPrintable(second.out));

    const QJsonArray trials = show(db)["trials"].toArray();
    QCOMPARE(trials.size(), 10);  // numbers 0..9, each once: none skipped, none doubled
    std::set<int> numbers;
    for (const auto& t : trials) {
      const QJsonObject o = t.toObject();
      const int n = o["number"].toInt();
      numbers.insert(n);
      const QString state = o["state"].toString();
      QVERIFY2(
          state == QLatin1String("complete") || state == QLatin1String("pruned"),
          qPrintable(
              QStringLiteral("trial %1 ended %2: %3").arg(n).arg(state, o["error"].toString())));
      if (before.count(n) != 0) {  // a result recorded before the kill is kept as it was
        QCOMPARE(o["state"].toString(), before[n]["state"].toString());
        QCOMPARE(o["values"].toArray(), before[n]["values"].toArray());
        QCOMPARE(o["attempt"].toInt(), before[n]["attempt"].toInt());
      }
    }
    QCOMPARE(*numbers.begin(), 0);
    QCOMPARE(*numbers.rbegin(), 9);
    // The trials the kill left running were lost and ran again (a slot is never idle here).
    int retried = 0;
    for (const auto& t : trials) retried += t.toObject()["attempt"].toInt() > 0 ? 1 : 0;
    QVERIFY2(retried >= 1 && second.out.contains("(retry 1)"), qPrintable(second.out));
  }
};

QTEST_GUILESS_MAIN(TestCliSweep)
#include "tst_cli_sweep.moc"
