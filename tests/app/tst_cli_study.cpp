// Tests the `study` verbs through the real shardscope-cli binary on a real run log: two
// processes asking at once get distinct trial numbers and parameters, `show --json` names the best
// trial, and report / should-prune / enqueue / tell --state with their exit codes and messages.
// tst_cli_study_pg runs the same against a PostgreSQL server (SHARDSCOPE_TEST_DB, teststore.h):
// the two askers, each in its own working directory, share one study through the server.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <set>

#include "tests/app/clirunlog.h"

namespace {

using clitest::documentedFields;
using clitest::kCli;
using clitest::Run;
using clitest::sortedKeys;

const char* kExperiment = R"([search]
sampler = "tpe"
seed = 5
n_trials = 500
objectives = {objective = "minimize"}
pruner = {type = "median", n_startup_trials = 1}

[search.space.x]
type = "float"
low = -5.0
high = 5.0

[search.space.opt]
type = "categorical"
choices = ["a", "b"]
)";

// The driver one asking process runs: `n` times ask, compute (x-1)^2 (+1 for opt=b), tell; it
// prints "NUMBER VALUE" per trial.
const char* kDriver = R"(i=0
while [ $i -lt "$N" ]; do
  line=$("$CLI" --db "$DB" study ask s) || exit 1
  n=${line%% *}
  v=$(echo "$line" | awk '{for(i=2;i<=NF;i++){split($i,a,"=");p[a[1]]=a[2]}
       printf "%.17g", (p["x"]-1)^2 + (p["opt"]=="b" ? 1 : 0)}')
  "$CLI" --db "$DB" study tell s "$n" "$v" || exit 1
  echo "$n $v"
  i=$((i+1))
done
)";

class TstCliStudy : public QObject, clitest::OnRunLog {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY(openRunLog());
    QFile exp(m_dir.filePath("exp.toml"));
    QVERIFY(exp.open(QIODevice::WriteOnly));
    exp.write(kExperiment);
    exp.close();
    const Run created = cli({"study", "create", "s", exp.fileName()});
    QCOMPARE(created.exitCode, 0);
    QVERIFY(created.out.contains("created study s"));
    const Run again = cli({"study", "create", "s", exp.fileName()});
    QCOMPARE(again.exitCode, 2);
    QVERIFY2(again.err.contains("study name 's' is taken"), qPrintable(again.err));
  }

  void twoProcessesAskingAtOnceGetDistinctTrials() {
    const int kAsks = 50;
    QProcess drivers[2];
    int which = 0;
    for (QProcess& d : drivers) {
      // Each asker in a folder of its own, as two people's processes on two machines are.
      const QString home = m_dir.filePath(QString("asker-%1").arg(which++));
      QVERIFY(QDir().mkpath(home));
      d.setWorkingDirectory(home);
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      env.insert("CLI", kCli);
      env.insert("DB", m_db);
      env.insert("N", QString::number(kAsks));
      d.setProcessEnvironment(env);
      d.start("sh", {"-c", kDriver});
    }
    std::set<qint64> numbers;
    std::set<double> values;
    double best = INFINITY;
    qint64 bestNumber = -1;
    for (QProcess& d : drivers) {
      QVERIFY(d.waitForFinished(240000));
      QCOMPARE(d.exitCode(), 0);
      const QStringList lines =
          QString::fromUtf8(d.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts);
      QCOMPARE(lines.size(), kAsks);
      for (const QString& line : lines) {
        const qint64 n = line.section(' ', 0, 0).toLongLong();
        QVERIFY2(numbers.insert(n).second, qPrintable("trial handed out twice: " + line));
        const double v = line.section(' ', 1, 1).toDouble();
        // Two askers reading the same history must not both get its draws: the second samples
        // again with the first's trial pending (distinct parameters give distinct values here).
        QVERIFY2(values.insert(v).second,
                 qPrintable("the same parameters handed out twice: " + line));
        // Two processes can sample the same x from the same history; the study names the
        // lowest-numbered of equal trials as best, and so does this.
        if (v < best || (v == best && n < bestNumber)) {
          best = v;
          bestNumber = n;
        }
      }
    }
    QCOMPARE(numbers.size(), std::size_t(2 * kAsks));
    QCOMPARE(*numbers.rbegin(), qint64(2 * kAsks - 1));  // 0..99, none skipped

    const Run show = cli({"study", "show", "--json"});  // the latest study
    QCOMPARE(show.exitCode, 0);
    QJsonParseError error{};
    const QJsonObject o = QJsonDocument::fromJson(show.out.toUtf8(), &error).object();
    QCOMPARE(error.error, QJsonParseError::NoError);
    QCOMPARE(o["name"].toString(), QStringLiteral("s"));
    QCOMPARE(o["best"]["number"].toInteger(), bestNumber);
    QCOMPARE(o["best"]["values"][0].toDouble(), best);
    QVERIFY(o["best"]["params"].toObject().contains("x"));
    QCOMPARE(o["trials"].toArray().size(), 2 * kAsks);
    QCOMPARE(o["counts"]["complete"].toInt(), 2 * kAsks);
    QCOMPARE(o["importance"].toArray().size(), 2);
    QCOMPARE(o["pareto"].toArray().size(), 1);
    // Every field is documented in docs/cli.md, and nothing documented is missing.
    QCOMPARE(sortedKeys(o), documentedFields("study-show"));
    QCOMPARE(sortedKeys(o["best"].toObject()), documentedFields("study-trial"));
  }

  void reportAndShouldPrune() {
    const Run a = cli({"study", "ask", "s", "--json"});
    QCOMPARE(a.exitCode, 0);
    const QString good =
        QString::number(QJsonDocument::fromJson(a.out.toUtf8())["number"].toInteger());
    const Run b = cli({"study", "ask", "s"});
    QCOMPARE(b.exitCode, 0);
    const QString bad = b.out.section(' ', 0, 0);
    // The 100 complete trials reported nothing; one complete curve is the median's reference.
    QCOMPARE(cli({"study", "report", "s", good, "1", "0.5"}).exitCode, 0);
    QCOMPARE(cli({"study", "tell", "s", good, "0.5"}).exitCode, 0);
    QCOMPARE(cli({"study", "report", "s", bad, "1", "30"}).exitCode, 0);
    const Run prune = cli({"study", "should-prune", "s", bad});
    QCOMPARE(prune.exitCode, 4);
    QCOMPARE(prune.out.trimmed(), QStringLiteral("yes"));
    QCOMPARE(cli({"study", "tell", "s", bad, "--state", "pruned"}).exitCode, 0);
    const Run ended = cli({"study", "should-prune", "s", bad});
    QCOMPARE(ended.exitCode, 1);
    QVERIFY2(ended.err.contains("trial " + bad + " already ended (pruned)"), qPrintable(ended.err));
  }

  void enqueueAndErrors() {
    const Run e = cli({"study", "enqueue", "s", "--set", "x=1", "--set", "opt=a"});
    QCOMPARE(e.exitCode, 0);
    const Run a = cli({"study", "ask", "s", "--json"});
    QCOMPARE(a.exitCode, 0);
    const QJsonObject asked = QJsonDocument::fromJson(a.out.toUtf8()).object();
    QCOMPARE(asked["number"].toInteger(), e.out.trimmed().toLongLong());
    QCOMPARE(asked["params"]["x"].toDouble(), 1.0);
    QCOMPARE(asked["params"]["opt"].toString(), QStringLiteral("a"));

    const Run badSet = cli({"study", "enqueue", "s", "--set", "opt=c", "--set", "x=0"});
    QCOMPARE(badSet.exitCode, 2);
    QVERIFY2(badSet.err.contains("search.space.\"opt\"; it accepts a, b"), qPrintable(badSet.err));
    const Run unknown = cli({"study", "ask", "nope"});
    QCOMPARE(unknown.exitCode, 1);
    QVERIFY2(unknown.err.contains("study 'nope' is not in the run log"), qPrintable(unknown.err));
    const Run count = cli({"study", "tell", "s", asked["number"].toVariant().toString(), "1", "2"});
    QCOMPARE(count.exitCode, 1);
    QVERIFY2(count.err.contains("give one value per objective"), qPrintable(count.err));
    const Run ls = cli({"study", "ls", "--json"});
    QCOMPARE(ls.exitCode, 0);
    const QJsonArray studies = QJsonDocument::fromJson(ls.out.toUtf8())["studies"].toArray();
    QCOMPARE(studies.size(), 1);
    QCOMPARE(studies[0]["trials"].toInt(), 103);
  }
};

}  // namespace

QTEST_GUILESS_MAIN(TstCliStudy)
#include "tst_cli_study.moc"
