// A 30 s network partition between a running `shardscope-cli sweep` and its PostgreSQL run log
// (issue #29, item 8), and one that meets a trial's launch (launchWaitsOutAPartition). The sweep
// reaches the server through bench/ui/latency_proxy.py --control, which a test tells to pass no
// byte either way, and reach nothing for a new connection, for kPartitionS seconds, cutting the
// connections kTcpTimeoutS seconds in (as the client's TCP timeouts would), then heal. Trials are
// program trials (tests/support/experiment.h); the server is tests/support/with_postgres.py's
// (SHARDSCOPE_TEST_DB). After the heal the sweep finishes (or, as docs/cli.md allows, exits 1
// naming the lost server, and a second sweep finishes the study), every trial result acknowledged
// before the partition is there unchanged, each trial number is there once and complete, each
// program ran once, and every stored value is the one its program computed. On the old sweep a
// trial whose ask lease the partition refused stayed `running` for good: the second sweep ended
// with 9 of 10 complete. lostAskAnswer loses the run log's answer to a trial's claim (or start):
// the COMMIT reaches the server, its answer never reaches the sweep.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <map>
#include <optional>
#include <set>

#include "backend/launch/rankfiles.h"
#include "backend/store/runstore.h"
#include "backend/sweep/study.h"
#include "backend/sweep/trialrunner.h"
#include "search/space.h"
#include "spec/experiment.h"
#include "tests/support/experiment.h"
#include "tests/support/files.h"
#include "tests/support/paths.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

namespace {

using shardscope::testing::writeAll;

using shardscope::testing::quadTrialValues;
using shardscope::testing::writeQuadTrial;

const QString kCli = shardscope::testing::binaryDir() + "/bin/shardscope-cli";
const QString kFake = shardscope::testing::binaryDir() + "/tests/bin/faketrainer";

/// How long the network is cut: the issue's 30 s, longer than the run log's TCP and connect
/// timeouts (10 s each), so connections are lost and new ones fail while it lasts.
constexpr int kPartitionS = 30;
constexpr int kTrials = 10;
/// When the client's TCP gives a connection up in a real partition (the run log's
/// tcp_user_timeout and keepalives, backend/store/pgdb.cpp): the proxy cuts its connections then.
constexpr int kTcpTimeoutS = 10;

const char* kExperiment = R"([experiment]
name = "part"

[search]
program = ["python3", "obj.py"]
sampler = "random"
seed = 11
n_trials = %1
concurrency = 2
pruner = {type = "none"}
objectives = {objective = "minimize"}

[search.space.x]
type = "float"
low = -5.0
high = 5.0

[search.space.y]
type = "float"
low = -5.0
high = 5.0
)";

// `study show exp --json` (the study is named after exp.toml) on `db`, and what the CLI said when
// it failed.
QJsonObject show(const QString& db, QString* error) {
  QProcess p;
  p.start(kCli, {"--db", db, "study", "show", "exp", "--json"});
  if (!p.waitForFinished(60000) || p.exitCode() != 0) {
    *error = QString::fromUtf8(p.readAllStandardError());
    return {};
  }
  return QJsonDocument::fromJson(p.readAllStandardOutput()).object();
}

// Reads `process`'s stdout into `seen` until it holds `text` (true) or the process ends.
bool awaitText(QProcess& process, QByteArray& seen, const QByteArray& text, int timeoutMs) {
  QDeadlineTimer deadline(timeoutMs);
  for (;;) {
    seen += process.readAllStandardOutput();
    if (seen.contains(text)) return true;
    if (process.state() != QProcess::Running || deadline.hasExpired()) return false;
    process.waitForReadyRead(qMax<qint64>(1, qMin<qint64>(deadline.remainingTime(), 1000)));
  }
}

/// bench/ui/latency_proxy.py --control in front of the test's PostgreSQL server.
struct Proxy {
  QProcess process;
  QByteArray said;
  QString direct;        ///< the database, reached directly
  QString throughProxy;  ///< the same database through the proxy

  ~Proxy() {
    process.kill();
    process.waitForFinished();
  }

  /// Starts the proxy in front of `direct`'s server; false (with the reason in `said`) if not.
  bool start(const QString& directSpec) {
    direct = directSpec;
    const QString server = direct.section('/', 0, -2);  // postgresql://user@127.0.0.1:PORT
    const QString port = server.section(':', -1);
    process.start("python3", {shardscope::testing::sourceDir() + "/bench/ui/latency_proxy.py", "0",
                              port, "0", "--control"});
    if (!process.waitForStarted()) {
      said = process.errorString().toUtf8();
      return false;
    }
    if (!awaitText(process, said, "\n", 30000) || !said.startsWith("listening ")) {
      said += process.readAllStandardError();
      return false;
    }
    const QString proxyPort = QString::fromUtf8(said.mid(10, said.indexOf('\n') - 10).trimmed());
    throughProxy = server.section(':', 0, -2) + ":" + proxyPort + "/" + direct.section('/', -1);
    return true;
  }

  /// Arms `lose-commit`: the `nth` transaction that runs SQL containing `pattern` commits on the
  /// server, and its answer never reaches the client (the connection is cut instead).
  bool loseCommit(int nth, const QByteArray& pattern) {
    process.write("lose-commit " + QByteArray::number(nth) + " " + pattern + "\n");
    return awaitText(process, said, "armed", 30000);
  }

  /// Arms `cut-commit`: the `nth` transaction that runs SQL containing `pattern` is cut before
  /// its COMMIT reaches the server (it rolls back; the client hears of a lost connection).
  bool cutCommit(int nth, const QByteArray& pattern) {
    process.write("cut-commit " + QByteArray::number(nth) + " " + pattern + "\n");
    return awaitText(process, said, "armed", 30000);
  }

  /// Cuts the network for `seconds`, dropping its connections `cutS` seconds in; true once the
  /// proxy says it has.
  bool partition(int seconds, int cutS) {
    process.write("partition " + QByteArray::number(seconds) + " " + QByteArray::number(cutS) +
                  "\n");
    return awaitText(process, said, "partitioned", 30000);
  }

  /// The server goes down for `seconds`: open connections cut, new ones closed at once; true
  /// once the proxy says so.
  bool refuse(int seconds) {
    process.write("refuse " + QByteArray::number(seconds) + "\n");
    return awaitText(process, said, "refusing", 30000);
  }
};

/// A one-trial study (kExperiment, 3 steps) whose trial 0 has its run on the proxy's run log, and
/// a trial runner on the proxy, driven directly so that a fault lands on the launch itself.
struct DirectTrial {
  QTemporaryDir dir;
  Proxy proxy;
  std::unique_ptr<shardscope::backend::RunStore> store;
  std::optional<shardscope::backend::TrialRunner> runner;
  qint64 runId = 0;
  const shardscope::search::TrialParams params{{"x", 0.5}, {"y", -1.5}};

  /// Sets it up on database `name`: empty, or why it could not.
  QString make(const QString& name) {
    using namespace shardscope;
    const QString path = dir.filePath("exp.toml");
    if (!dir.isValid() || !writeQuadTrial(dir.path(), 3, 0.05) ||
        !writeAll(path, QByteArray(kExperiment).replace("%1", "1"))) {
      return QStringLiteral("cannot write the experiment in %1").arg(dir.path());
    }
    if (!proxy.start(shardscope::testing::storeSpec(dir.path(), name)))
      return QString::fromUtf8(proxy.said);
    auto opened = backend::RunStore::open(proxy.throughProxy);
    if (!opened) return QString::fromStdString(opened.message());
    store = std::move(*opened);
    auto exp = spec::load_experiment(path.toStdString());
    if (!exp) return QString::fromStdString(exp.message());
    auto space = search::parse_search_space(exp->search.toml, path.toStdString());
    if (!space) return QString::fromStdString(space.message());
    backend::NewStudy study;
    study.name = name;
    study.objectives = {"objective"};
    study.directions = {"minimize"};
    auto studyId = store->createStudy(study).get();
    if (!studyId) return QString::fromStdString(studyId.message());
    backend::NewTrial trial;
    trial.studyId = *studyId;
    trial.trialNumber = 0;
    trial.runDir = dir.filePath("runs/trial-0");
    trial.params = QJsonObject{{"x", 0.5}, {"y", -1.5}};
    trial.worldSize = 1;
    auto created = store->createTrialRun(trial).get();
    if (!created) return QString::fromStdString(created.message());
    runId = created->runId;
    backend::TrialRunner::Options options;
    options.studyId = *studyId;
    options.runsRoot = dir.filePath("runs");
    runner.emplace(*store, path, *space, options);
    return {};
  }

  /// Starts trial 0 and waits for its end and for the proxy to say `fault` (its fault happened):
  /// empty when both came and the trial ended complete once (completeOnce), else what is wrong.
  QString runToEnd(const QByteArray& fault) {
    QSignalSpy finished(&*runner, &shardscope::backend::TrialRunner::trialFinished);
    auto started = runner->start(0, params, runId);
    if (!started) return QString::fromStdString(started.message());
    if (!finished.wait(120000)) return QStringLiteral("the trial did not end within 120 s");
    if (!awaitText(proxy.process, proxy.said, fault, 10000))
      return QStringLiteral("the proxy did not say %1: %2")
          .arg(QString::fromUtf8(fault), QString::fromUtf8(proxy.said));
    return completeOnce(finished.takeFirst().at(0).value<shardscope::backend::TrialOutcome>());
  }

  /// Checks the trial's end: `outcome` complete with the value its program computed, the program
  /// run once, and the run log's record (read directly) its first attempt (no retry used),
  /// complete. Empty, or what is wrong.
  QString completeOnce(const shardscope::backend::TrialOutcome& outcome) const {
    using namespace shardscope;
    if (outcome.state != search::TrialState::Complete)
      return QStringLiteral("the trial ended %1: %2")
          .arg(QString::fromUtf8(search::trialStateName(outcome.state)), outcome.error);
    const std::map<int, double> computed = quadTrialValues(dir.path());
    const int ran = int(shardscope::testing::readAll(dir.filePath("values.txt")).count('\n'));
    if (ran != 1 || computed.count(0) != 1)
      return QStringLiteral("its program ran %1 times").arg(ran);
    if (outcome.values.empty() || outcome.values.front() != computed.at(0))
      return QStringLiteral("its value is not the one its program computed");
    auto direct = backend::RunStore::open(proxy.direct);
    if (!direct) return QString::fromStdString(direct.message());
    auto reader = (*direct)->reader();
    if (!reader) return QString::fromStdString(reader.message());
    auto run = reader->run(runId);
    if (!run) return QString::fromStdString(run.message());
    if (!*run) return QStringLiteral("run %1 is not in the run log").arg(runId);
    if ((*run)->attempt != 0) return QStringLiteral("attempt %1, not 0").arg((*run)->attempt);
    if ((*run)->status != spec::RunStatus::complete) {
      return QStringLiteral("run %1 is %2: %3")
          .arg(runId)
          .arg(QString::fromUtf8(spec::to_string((*run)->status).data()), (*run)->error);
    }
    return {};
  }
};

/// `shardscope-cli run` of the fake trainer (2 ranks, TinyExperiment) on a run log behind the
/// proxy, followed in the foreground.
struct ProxiedRun {
  QTemporaryDir dir;
  Proxy proxy;
  QProcess run;
  QByteArray out;  ///< what it printed, once finish() returned
  QByteArray err;
  std::unique_ptr<shardscope::backend::RunStore> direct;  ///< the run log, not through the proxy

  /// Writes experiment `name` and starts the proxy on database `name`: empty, or why not.
  QString make(const QString& name) {
    using namespace shardscope;
    testing::TinyExperiment experiment;
    experiment.name = name;
    experiment.trainer = kFake;
    const QString exp =
        dir.isValid() ? testing::writeExperiment(dir.path(), experiment) : QString();
    if (exp.isEmpty()) return QStringLiteral("cannot write the experiment in %1").arg(dir.path());
    if (!proxy.start(testing::storeSpec(dir.path(), name))) return QString::fromUtf8(proxy.said);
    auto opened = backend::RunStore::open(proxy.direct);
    if (!opened) return QString::fromStdString(opened.message());
    direct = std::move(*opened);
    m_experiment = exp;
    return {};
  }

  /// Starts `run` (with `extra` after the experiment); the fake trainer runs `fakeMode`
  /// (SHARDSCOPE_FAKE_MODE).
  void start(const QString& fakeMode, const QStringList& extra = {}) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("SHARDSCOPE_FAKE_MODE", fakeMode);
    run.setProcessEnvironment(env);
    run.start(kCli, QStringList{"--db", proxy.throughProxy, "--json", "run", m_experiment} + extra);
  }

  /// Waits for the command's end and for the proxy to say `fault` (its fault happened): empty
  /// when both came and the command exited 0, else what went wrong.
  QString finish(const QByteArray& fault) {
    if (!run.waitForFinished(120000)) return QStringLiteral("the run did not finish within 120 s");
    out = run.readAllStandardOutput();
    err = run.readAllStandardError();
    if (!awaitText(proxy.process, proxy.said, fault, 30000))
      return QStringLiteral("the proxy did not say %1: %2")
          .arg(QString::fromUtf8(fault), QString::fromUtf8(proxy.said));
    if (run.exitStatus() != QProcess::NormalExit || run.exitCode() != 0) {
      // QTest cuts a long message: the exit and the end of stderr (where the CLI's error is).
      return QStringLiteral("the command exited %1 (%2); stdout: %3; the end of stderr: %4")
          .arg(run.exitCode())
          .arg(run.exitStatus() == QProcess::NormalExit ? QStringLiteral("normally")
                                                        : QStringLiteral("crashed"))
          .arg(QString::fromUtf8(out.left(200)), QString::fromUtf8(err.right(600)));
    }
    return {};
  }

 private:
  QString m_experiment;
};

}  // namespace

class TestCliSweepPartition : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY2(shardscope::testing::onPostgres(),
             "tst_cli_sweep_partition needs a PostgreSQL server: run it as ctest -R "
             "tst_cli_sweep_partition_pg (tests/support/with_postgres.py)");
  }

  void sweepOutlivesAPartition() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QVERIFY(writeQuadTrial(dir.path(), 10, 0.1));  // about 1 s a trial
    QVERIFY(writeAll(dir.filePath("exp.toml"),
                     QByteArray(kExperiment).replace("%1", QByteArray::number(kTrials))));
    Proxy proxy;
    QVERIFY2(proxy.start(shardscope::testing::storeSpec(dir.path(), "partition")),
             proxy.said.constData());
    const QString& direct = proxy.direct;
    const QString& throughProxy = proxy.throughProxy;

    QProcess sweep;
    // A failed check leaves no sweep running (the proxy's destructor kills the proxy).
    struct Reap {
      QProcess& p;
      ~Reap() {
        p.kill();
        p.waitForFinished();
      }
    } reap{sweep};
    sweep.setWorkingDirectory(dir.path());
    sweep.start(kCli, {"--db", throughProxy, "sweep", dir.filePath("exp.toml")});
    QVERIFY2(sweep.waitForStarted(), qPrintable(sweep.errorString()));
    QByteArray out;
    // Mid-sweep: 3 trials told, others still to come.
    const auto toldThree = [&] { return out.count(" complete ") >= 3; };
    QDeadlineTimer deadline(120000);
    while (!toldThree() && sweep.state() == QProcess::Running && !deadline.hasExpired()) {
      sweep.waitForReadyRead(1000);
      out += sweep.readAllStandardOutput();
    }
    QVERIFY2(toldThree(), (out + sweep.readAllStandardError()).constData());

    // What the run log acknowledged before the partition, read on the direct connection.
    QString error;
    const QJsonObject before = show(direct, &error);
    QVERIFY2(!before.isEmpty(), qPrintable(error));
    std::map<int, QJsonObject> told;
    for (const auto& t : before["trials"].toArray()) {
      const QJsonObject o = t.toObject();
      if (o["state"].toString() == QLatin1String("complete")) told[o["number"].toInt()] = o;
    }
    QVERIFY(told.size() >= 3);
    QVERIFY2(int(told.size()) < kTrials, "the sweep ended before the partition");

    QVERIFY2(proxy.partition(kPartitionS, kTcpTimeoutS),
             proxy.process.readAllStandardError().constData());
    QVERIFY2(awaitText(proxy.process, proxy.said, "healed", (kPartitionS + 30) * 1000),
             proxy.process.readAllStandardError().constData());

    QVERIFY2(sweep.waitForFinished(120000) || sweep.state() == QProcess::NotRunning,
             "the sweep did not finish within 120 s of the heal");
    out += sweep.readAllStandardOutput();
    const QByteArray err = sweep.readAllStandardError();
    qInfo("the sweep said:\n%s%s", out.constData(), err.constData());
    QCOMPARE(sweep.exitStatus(), QProcess::NormalExit);
    // No intermediate value was refused as coming after its trial's end (the old sweep reported
    // the evals it read between the monitor storing the end and the runner judging it).
    QVERIFY2(!err.contains("already ended"), err.constData());
    // docs/cli.md: exit 1 on an error, and a later sweep of the study continues it. A sweep that
    // gave up says why (the lost server), and the next one finishes the study.
    if (sweep.exitCode() != 0) {
      QVERIFY2(sweep.exitCode() == 1 && err.contains("error: ") &&
                   err.contains("is lost: is the server running and reachable?"),
               (out + err).constData());
      QProcess again;
      again.setWorkingDirectory(dir.path());
      again.start(kCli, {"--db", throughProxy, "sweep", dir.filePath("exp.toml")});
      QVERIFY2(again.waitForFinished(120000), "the second sweep did not finish within 120 s");
      const QByteArray againOut = again.readAllStandardOutput();
      const QByteArray againErr = again.readAllStandardError();
      qInfo("the second sweep said:\n%s%s", againOut.constData(), againErr.constData());
      QVERIFY2(again.exitStatus() == QProcess::NormalExit && again.exitCode() == 0,
               (againOut + againErr).constData());
      QVERIFY2(againOut.contains("continuing study exp"), againOut.constData());
      out += againOut;
    }
    QVERIFY2(out.contains("study exp finished: " + QByteArray::number(kTrials) + " complete"),
             out.constData());

    const QJsonObject after = show(direct, &error);
    QVERIFY2(!after.isEmpty(), qPrintable(error));
    const std::map<int, double> computed = quadTrialValues(dir.path());
    std::set<int> numbers;
    for (const auto& t : after["trials"].toArray()) {
      const QJsonObject o = t.toObject();
      const int n = o["number"].toInt();
      QVERIFY2(numbers.insert(n).second, qPrintable(QString("trial %1 is there twice").arg(n)));
      QVERIFY2(o["state"].toString() == QLatin1String("complete"),
               qPrintable(QString("trial %1 ended %2: %3")
                              .arg(n)
                              .arg(o["state"].toString(), o["error"].toString())));
      QVERIFY2(computed.count(n) == 1, qPrintable(QString("trial %1 never ran").arg(n)));
      QCOMPARE(o["values"].toArray()[0].toDouble(), computed.at(n));
      if (auto was = told.find(n); was != told.end()) {  // acknowledged before: kept as it was
        QCOMPARE(o["values"].toArray(), was->second["values"].toArray());
        QCOMPARE(o["attempt"].toInt(), was->second["attempt"].toInt());
      }
    }
    QCOMPARE(int(numbers.size()), kTrials);
    // Every result a sweep printed ("trial N complete V") is the one stored.
    static const QRegularExpression printed(R"(^trial (\d+) complete (\S+)$)",
                                            QRegularExpression::MultilineOption);
    for (auto m = printed.globalMatch(QString::fromUtf8(out)); m.hasNext();) {
      const auto match = m.next();
      const int n = match.captured(1).toInt();
      QVERIFY2(qAbs(computed.at(n) - match.captured(2).toDouble()) <=
                   1e-5 * qMax(1.0, qAbs(computed.at(n))),
               qPrintable(match.captured(0)));
    }
    // Each trial's program ran once: a result lost and run again would show twice here.
    const QList<QByteArray> ran =
        shardscope::testing::readAll(dir.filePath("values.txt")).split('\n');
    QCOMPARE(int(ran.size()) - 1, kTrials);
    QCOMPARE(*numbers.begin(), 0);
    QCOMPARE(*numbers.rbegin(), kTrials - 1);
    QCOMPARE(after["counts"]["complete"].toInt(), kTrials);
  }

  // The run log commits a sweep's claim of an enqueued trial (or the start of a sampled one), and
  // the answer is lost: the proxy passes the COMMIT to the server and cuts the connection instead
  // of passing the server's answer back. The sweep asks again (the error is not permanent) and
  // gets the trial its first try took: every trial ends complete once, each program ran once,
  // and no trial is left running without a lease. On the old sweep the claimed trial had no
  // lease yet (its lease was a second transaction), the next try claimed another trial, and the
  // first stayed running for good: the sweep ended with 9 of 10 complete.
  void lostAskAnswer_data() {
    QTest::addColumn<bool>("enqueued");
    QTest::addColumn<QByteArray>("pattern");  // SQL of the transaction whose answer is lost
    QTest::newRow("claim") << true << QByteArray("ORDER BY status = 'failed', trial_number");
    QTest::newRow("start") << false << QByteArray("SELECT count(*) FROM runs WHERE study_id");
  }

  void lostAskAnswer() {
    using namespace shardscope;
    QFETCH(bool, enqueued);
    QFETCH(QByteArray, pattern);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QVERIFY(writeQuadTrial(dir.path(), 2, 0.05));
    const QString path = dir.filePath("exp.toml");
    QVERIFY(writeAll(path, QByteArray(kExperiment).replace("%1", QByteArray::number(kTrials))));
    Proxy proxy;
    QVERIFY2(proxy.start(shardscope::testing::storeSpec(dir.path(), "lostanswer")),
             proxy.said.constData());
    if (enqueued) {  // every trial enqueued: the sweep claims each one (RunStore::claimTrial)
      auto store = backend::RunStore::open(proxy.direct);
      VERIFY_OK(store);
      search::Study::CreateOptions options;
      options.name = QStringLiteral("exp");
      auto study = search::Study::create(**store, path, options);
      VERIFY_OK(study);
      for (int i = 0; i < kTrials; ++i) {
        VERIFY_OK(study->enqueue({{"x", -4.5 + i}, {"y", 4.5 - i}}));
      }
    }
    // The third ask's transaction: two trials run, the sweep is under way.
    QVERIFY2(proxy.loseCommit(3, pattern), proxy.said.constData());

    QProcess sweep;
    sweep.setWorkingDirectory(dir.path());
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_LOGGING_RULES", "shardscope.backend.runstore.study.info=true");
    sweep.setProcessEnvironment(env);
    sweep.start(kCli, {"--db", proxy.throughProxy, "sweep", path});
    QVERIFY2(sweep.waitForFinished(120000), "the sweep did not finish within 120 s");
    const QByteArray out = sweep.readAllStandardOutput();
    const QByteArray err = sweep.readAllStandardError();
    qInfo("the sweep said:\n%s%s", out.constData(), err.constData());
    QVERIFY2(awaitText(proxy.process, proxy.said, "lost-commit", 10000),  // the cut happened
             proxy.said.constData());
    QVERIFY2(err.contains("cannot ask for a trial"), err.constData());  // and met the ask
    // The next try got the trial the lost one had taken (RunStore::claimTrial's ask lease).
    QVERIFY2(err.contains("trial 2: taken by an earlier call of this ask"), err.constData());
    QVERIFY2(sweep.exitStatus() == QProcess::NormalExit && sweep.exitCode() == 0,
             (out + err).constData());
    QVERIFY2(out.contains("study exp finished: " + QByteArray::number(kTrials) + " complete"),
             out.constData());

    QString error;
    const QJsonObject after = show(proxy.direct, &error);
    QVERIFY2(!after.isEmpty(), qPrintable(error));
    const std::map<int, double> computed = quadTrialValues(dir.path());
    std::set<int> numbers;
    for (const auto& t : after["trials"].toArray()) {
      const QJsonObject o = t.toObject();
      const int n = o["number"].toInt();
      QVERIFY2(numbers.insert(n).second, qPrintable(QString("trial %1 is there twice").arg(n)));
      QVERIFY2(o["state"].toString() == QLatin1String("complete"),
               qPrintable(QString("trial %1 ended %2: %3")
                              .arg(n)
                              .arg(o["state"].toString(), o["error"].toString())));
      QCOMPARE(o["attempt"].toInt(), 0);  // no retry was needed
      QVERIFY2(computed.count(n) == 1, qPrintable(QString("trial %1 never ran").arg(n)));
      QCOMPARE(o["values"].toArray()[0].toDouble(), computed.at(n));
    }
    QCOMPARE(int(numbers.size()), kTrials);
    // Each trial's program ran once.
    QCOMPARE(int(shardscope::testing::readAll(dir.filePath("values.txt")).split('\n').size()) - 1,
             kTrials);
    // No run of the study is left running, with or without a lease.
    auto direct = backend::RunStore::open(proxy.direct);
    VERIFY_OK(direct);
    auto reader = (*direct)->reader();
    VERIFY_OK(reader);
    auto studyRecord = reader->studyByName("exp");
    VERIFY_OK(studyRecord);
    QVERIFY(*studyRecord);
    auto runs = reader->trials((*studyRecord)->id);
    VERIFY_OK(runs);
    for (const backend::RunRecord& run : *runs) {
      QCOMPARE(run.status, spec::RunStatus::complete);
    }
  }

  // A trial whose launch meets the partition (the run log answers nothing between the ask and
  // the start of its ranks) waits for the heal and then runs as its first attempt: it is neither
  // failed nor given one of the study's retries. The trial runner is driven directly, so that
  // the cut lands on the launch itself. On the old runner the trial ended failed ("not
  // launched"), and a sweep retried it as attempt 1 or gave it up.
  void launchWaitsOutAPartition() {
    using namespace shardscope;
    DirectTrial t;
    const QString made = t.make(QStringLiteral("launch"));
    QVERIFY2(made.isEmpty(), qPrintable(made));
    QSignalSpy started(&*t.runner, &backend::TrialRunner::trialStarted);
    QSignalSpy finished(&*t.runner, &backend::TrialRunner::trialFinished);

    QVERIFY2(t.proxy.partition(12, 1), t.proxy.process.readAllStandardError().constData());
    auto runId = t.runner->start(0, t.params, t.runId);
    VERIFY_OK(runId);
    QTest::qWait(500);
    QVERIFY2(finished.isEmpty(), "the launch failed instead of waiting for the run log");
    QCOMPARE(t.runner->running(), 1);  // it holds its slot while it waits

    QVERIFY2(finished.wait(120000), "the trial did not end within 120 s");
    QVERIFY2(awaitText(t.proxy.process, t.proxy.said, "healed", 30000), t.proxy.said.constData());
    QCOMPARE(started.count(), 1);
    const QString end = t.completeOnce(finished.takeFirst().at(0).value<backend::TrialOutcome>());
    QVERIFY2(end.isEmpty(), qPrintable(end));
  }

  // The run log loses its answer to the lease a started trial's monitor takes (the COMMIT
  // reached the server; the connection died before the answer came back), as CI's partition
  // once did by chance. The trial's program has started: it runs on, the monitor takes the
  // lease again as the same holder once the run log answers, and the trial ends complete as its
  // first attempt, its program run once. On the old runner the ranks were killed and the trial
  // failed; a sweep then ran its program a second time as attempt 1 (and a fresh lease token
  // would have been refused by the lease the lost answer had stored).
  void monitorLeaseAnswerLost() {
    using namespace shardscope;
    DirectTrial t;
    const QString made = t.make(QStringLiteral("leaseanswer"));
    QVERIFY2(made.isEmpty(), qPrintable(made));
    // The run was made without an ask, so its first lease is the monitor's.
    QVERIFY2(t.proxy.loseCommit(1, "INSERT INTO leases"), t.proxy.said.constData());
    // The monitor's next try holds the lease the lost answer stored: refused by its own lease,
    // it would wait out the lease's staleness first.
    QTest::failOnWarning(QRegularExpression("is already followed by process"));
    const QString end = t.runToEnd("lost-commit");
    QVERIFY2(end.isEmpty(), qPrintable(end));
  }

  // The connection is lost as the runner stores a launched trial's location (the write rolls
  // back): it is stored on a later try, and the trial ends complete as its first attempt. The old
  // runner only warned: a sweep that died later found no location and could not reattach it.
  void trialLocationOutlivesALostWrite() {
    using namespace shardscope;
    DirectTrial t;
    const QString made = t.make(QStringLiteral("triallocation"));
    QVERIFY2(made.isEmpty(), qPrintable(made));
    QVERIFY2(t.proxy.cutCommit(1, "SET location ="), t.proxy.said.constData());
    const QString end = t.runToEnd("cut-commit");
    QVERIFY2(end.isEmpty(), qPrintable(end));
    auto direct = backend::RunStore::open(t.proxy.direct);
    VERIFY_OK(direct);
    auto reader = (*direct)->reader();
    VERIFY_OK(reader);
    // The retry may come after the trial's end (it waits 0.5 s; the trial takes about as long).
    QString kind;
    QTRY_VERIFY_WITH_TIMEOUT(
        [&] {
          auto run = reader->run(t.runId);
          if (run && *run) kind = (*run)->location.value("kind").toString();
          return !kind.isEmpty();
        }(),
        30000);
    QCOMPARE(kind, QStringLiteral("program"));
  }

  // The same lost answer meets `shardscope-cli run` (2 ranks of the fake trainer, followed in the
  // foreground): the run is followed once the run log answers and completes; the old command
  // exited 1 with the run log's error and left its ranks unfollowed.
  void runOutlivesALostLeaseAnswer() {
    ProxiedRun r;
    const QString made = r.make(QStringLiteral("leaserun"));
    QVERIFY2(made.isEmpty(), qPrintable(made));
    QVERIFY2(r.proxy.loseCommit(1, "INSERT INTO leases"), r.proxy.said.constData());
    r.start(QStringLiteral("--steps 10"));
    const QString ended = r.finish("lost-commit");
    QVERIFY2(ended.isEmpty(), qPrintable(ended));
    QVERIFY2(r.err.contains("its monitor waits for the run log"), r.err.constData());  // it met it
    const QJsonObject o = QJsonDocument::fromJson(r.out.trimmed().split('\n').last()).object();
    QCOMPARE(o["status"].toString(), QStringLiteral("complete"));
  }

  // The run log's server goes down while `shardscope-cli run` (2 ranks of the fake trainer)
  // follows its ranks, and stays down past their end: the rows of every poll meanwhile are
  // refused, and so is the monitor's read-back of what the run log has. After the heal every event
  // line of both ranks is in the run log, done included, and the run is complete. On the old
  // monitor, streams whose read-back failed stayed ahead of the run log: the next poll found
  // nothing new, judged the run from the done event it had read, and the lines read in the
  // partition (the done among them) were never stored; a trial so ended "without a done event" (CI,
  // stop 49).
  void runKeepsWhatADownServerMissed() {
    using namespace shardscope;
    ProxiedRun r;
    const QString made = r.make(QStringLiteral("partrun"));
    QVERIFY2(made.isEmpty(), qPrintable(made));
    r.start(QStringLiteral("--steps 30 --step-ms 150"));  // about 4.5 s of steps
    auto reader = r.direct->reader();
    VERIFY_OK(reader);
    // The server goes down once the monitor has stored rank 0's first lines, for longer than
    // the ranks run on: their last lines, done among them, are read while it is down.
    qint64 runId = 0;
    QTRY_VERIFY_WITH_TIMEOUT(
        [&] {
          auto runs = reader->listRuns();
          if (!runs || runs->empty()) return false;
          runId = runs->front().id;
          auto stored = reader->eventCount(runId, 0);
          return stored && *stored > 0;
        }(),
        60000);
    QVERIFY2(r.proxy.refuse(8), r.proxy.said.constData());
    const QString ended = r.finish("healed");
    QVERIFY2(ended.isEmpty(), qPrintable(ended));
    QVERIFY2(r.err.contains("the run log refused its rows"), r.err.constData());  // it met it
    auto record = reader->run(runId);
    VERIFY_OK(record);
    QVERIFY(record->has_value());
    QCOMPARE(spec::to_string((*record)->status), std::string_view("complete"));
    for (int rank = 0; rank < 2; ++rank) {
      const QByteArray file = testing::readAll(
          QDir((*record)->runDir).filePath(backend::rankFileName(rank, backend::RankFile::events)));
      auto stored = reader->eventCount(runId, rank);
      VERIFY_OK(stored);
      QCOMPARE(*stored, qint64(file.count('\n')));
      auto done = reader->lastEvent(runId, rank, "done");
      VERIFY_OK(done);
      QVERIFY2(done->has_value(), qPrintable(QStringLiteral("rank %1's done is lost").arg(rank)));
    }
  }

  // The connection is lost as the command records the run's location (the write rolls back):
  // attached, just after its monitor took the lease, the location is written again while the run
  // is followed; detached, it is asked again before the supervisor, which attaches by it, starts.
  // The old command exited 1 on it, leaving its ranks unfollowed (CI, stop 53: the server went
  // down between the monitor's first rows and the location).
  void locationOutlivesALostWrite_data() {
    QTest::addColumn<QStringList>("extra");
    QTest::newRow("attached") << QStringList{};
    QTest::newRow("detached") << QStringList{"--detach"};
  }

  void locationOutlivesALostWrite() {
    using namespace shardscope;
    QFETCH(QStringList, extra);
    ProxiedRun r;
    const QString made = r.make(QStringLiteral("location_") + QTest::currentDataTag());
    QVERIFY2(made.isEmpty(), qPrintable(made));
    QVERIFY2(r.proxy.cutCommit(1, "SET location ="), r.proxy.said.constData());
    r.start(QStringLiteral("--steps 5"), extra);
    const QString ended = r.finish("cut-commit");
    QVERIFY2(ended.isEmpty(), qPrintable(ended));
    QVERIFY2(r.err.contains("the run log did not take its location"), r.err.constData());
    auto reader = r.direct->reader();
    VERIFY_OK(reader);
    const qint64 id = QJsonDocument::fromJson(r.out).object().value("id").toInteger();
    QVERIFY2(id > 0, r.out.constData());
    std::optional<backend::RunRecord> last;  // detached: its supervisor follows it to its end
    QTRY_VERIFY_WITH_TIMEOUT(
        [&] {
          auto run = reader->run(id);
          if (run) last = *run;
          return last && spec::is_final(last->status);
        }(),
        60000);
    QCOMPARE(spec::to_string(last->status), std::string_view("complete"));
    QCOMPARE(last->location.value("kind").toString(), QStringLiteral("local"));
  }

  // The connection is lost as the monitor stores a run's final status (the write rolls back):
  // the status is written again once the run log answers, and the run is complete in the run
  // log. The old monitor only warned and stopped following: the run stayed `running` for good.
  void finalStatusOutlivesALostWrite() {
    using namespace shardscope;
    ProxiedRun r;
    const QString made = r.make(QStringLiteral("laststatus"));
    QVERIFY2(made.isEmpty(), qPrintable(made));
    // setRunStatus's statement: the first is `running`, the second the final one.
    QVERIFY2(r.proxy.cutCommit(2, "objective = coalesce("), r.proxy.said.constData());
    r.start(QStringLiteral("--steps 5"));
    const QString ended = r.finish("cut-commit");
    QVERIFY2(ended.isEmpty(), qPrintable(ended));
    auto reader = r.direct->reader();
    VERIFY_OK(reader);
    auto runs = reader->listRuns();
    VERIFY_OK(runs);
    QCOMPARE(runs->size(), std::size_t(1));
    QCOMPARE(spec::to_string(runs->front().status), std::string_view("complete"));
  }
};

QTEST_GUILESS_MAIN(TestCliSweepPartition)
#include "tst_cli_sweep_partition.moc"
