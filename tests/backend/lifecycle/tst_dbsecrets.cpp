// A PostgreSQL password never leaves the URL's owner. The processes RunLifecycle starts for the
// dashboard (a sweep, an autotune, a run's supervisor: the real shardscope-cli) get the run log in
// their environment (SHARDSCOPE_DB, readable by their user only), never on their command line,
// which any local user reads in /proc/PID/cmdline; and what they print about the server (here:
// that it does not answer) names it without the password, in each form libpq takes one. The
// server is a listening socket that never answers, so each child waits in libpq's connect for
// the URL's connect_timeout: long enough to read its /proc entries, then it fails and says so.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QHash>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "backend/lifecycle/runlifecycle.h"
#include "tests/support/experiment.h"
#include "tests/support/files.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

using namespace shardscope;
using backend::RunLifecycle;

namespace {

const QString kCli =
    shardscope::testing::envPath("SHARDSCOPE_TEST_CLI", "the shardscope-cli executable");
constexpr char kSecret[] = "s3cretPW";
// How long a child waits for the silent server, per host: time enough to read its /proc entries
// on a loaded machine.
constexpr int kTimeoutS = 8;

QByteArray procFile(qint64 pid, const char* name) {
  QFile f(QStringLiteral("/proc/%1/%2").arg(pid).arg(QLatin1String(name)));
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// True once `pid` runs shardscope-cli (spawnInSession returns the pid before the exec).
bool runsCli(qint64 pid) {
  return QFileInfo(QStringLiteral("/proc/%1/exe").arg(pid)).canonicalFilePath() ==
         QFileInfo(kCli).canonicalFilePath();
}

}  // namespace

class TestDbSecrets : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  int m_silent = -1;  // a socket that listens and never answers
  int m_port = 0;

  // The URL of each form, with the password, on the silent server; libpq gives up on each host
  // after `timeoutS`.
  QString url(const QString& form, int timeoutS = 2) const {
    const QString host = QStringLiteral("127.0.0.1:%1").arg(m_port);
    const QString s = QString::fromLatin1(kSecret);
    if (form == "userinfo")
      return "postgresql://alice:" + s + "@" + host +
             "/runs?connect_timeout=" + QString::number(timeoutS);
    if (form == "query") {
      return "postgresql://alice@" + host + "/runs?password=" + s +
             "&connect_timeout=" + QString::number(timeoutS);
    }
    if (form == "multi-host userinfo") {
      return "postgresql://alice:" + s + "@" + host + "," + host +
             "/runs?connect_timeout=" + QString::number(timeoutS);
    }
    return "postgresql://" + host + "," + host + "/runs?user=alice&password=" + s +
           "&connect_timeout=" + QString::number(timeoutS);
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    m_silent = ::socket(AF_INET, SOCK_STREAM, 0);
    QVERIFY(m_silent >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    QCOMPARE(::bind(m_silent, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    QCOMPARE(::listen(m_silent, 64), 0);
    socklen_t len = sizeof addr;
    QCOMPARE(::getsockname(m_silent, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    m_port = ntohs(addr.sin_port);
  }
  void cleanupTestCase() {
    if (m_silent >= 0) ::close(m_silent);
  }

  void forms_data() {
    QTest::addColumn<QString>("form");
    for (const char* f : {"userinfo", "query", "multi-host userinfo", "multi-host query"})
      QTest::newRow(f) << QString::fromLatin1(f);
  }

  // A sweep, an autotune and a supervisor, started as the dashboard starts them.
  void childrenGetTheRunLogInTheirEnvironmentOnly_data() { forms_data(); }
  void childrenGetTheRunLogInTheirEnvironmentOnly() {
    QFETCH(QString, form);
    const QString dir = m_dir.filePath(QString(form).replace(' ', '-'));
    QVERIFY(QDir().mkpath(dir + "/run"));
    testing::TinyExperiment e;
    e.name = QStringLiteral("secret");
    e.trainer = QStringLiteral("/bin/true");
    e.tables =
        "[search]\nname = \"secret\"\nsampler = \"random\"\nseed = 2\nn_trials = 1\n"
        "objectives = {objective = \"minimize\"}\n"
        "[search.space.\"train.lr\"]\ntype = \"float\"\nlow = 1e-4\nhigh = 1e-2\n";
    const QString experiment = testing::writeExperiment(dir, e);
    QVERIFY(!experiment.isEmpty());
    RunLifecycle::Settings settings;
    settings.dbPath = url(form, kTimeoutS);
    settings.supervisor = kCli;
    settings.runsRoot = dir + "/runs";
    const RunLifecycle life(settings);

    struct Child {
      QString what;
      qint64 pid;
      QString log;
    };
    QVector<Child> children;
    auto sweep = life.startSweep(experiment);
    QVERIFY2(sweep, sweep ? "" : sweep.message().c_str());
    children.append({"sweep", sweep->pid, sweep->logPath});
    RunLifecycle::AutotuneRequest tune;
    tune.studyName = QStringLiteral("tune");
    auto autotune = life.startAutotune(experiment, tune);
    QVERIFY2(autotune, autotune ? "" : autotune.message().c_str());
    children.append({"autotune", autotune->pid, autotune->logPath});
    backend::RunRecord run;
    run.id = 7;
    run.runDir = dir + "/run";
    auto supervisor = life.spawnSupervisor(run);
    QVERIFY2(supervisor, supervisor ? "" : supervisor.message().c_str());
    children.append({"supervisor", *supervisor, run.runDir + "/supervisor.log"});

    // All three at once, each as soon as it runs the CLI: they give up after the timeout.
    QHash<qint64, std::pair<QByteArray, QByteArray>> seen;  // pid: cmdline, environ
    QElapsedTimer waited;
    waited.start();
    while (seen.size() < children.size() && waited.elapsed() < 30000) {
      for (const Child& child : children) {
        if (seen.contains(child.pid) || !runsCli(child.pid)) continue;
        const QByteArray cmdline = procFile(child.pid, "cmdline");
        const QByteArray environment = procFile(child.pid, "environ");
        if (!cmdline.isEmpty()) seen.insert(child.pid, {cmdline, environment});
      }
      QTest::qWait(20);
    }
    for (const Child& child : children) {
      QVERIFY2(seen.contains(child.pid), qPrintable(child.what + ": never seen running the CLI"));
      const auto& [cmdline, environment] = seen[child.pid];
      QVERIFY2(!cmdline.contains(kSecret) && !cmdline.contains("--db"),
               qPrintable(child.what + ": " + QString::fromUtf8(cmdline).replace('\0', ' ')));
      // The environment carries it, and only its user (and root) may read that.
      QVERIFY2(environment.split('\0').contains("SHARDSCOPE_DB=" + url(form, kTimeoutS).toUtf8()),
               qPrintable(child.what));
    }
    QVERIFY(!QFileInfo(QStringLiteral("/proc/self/environ"))
                 .permissions()
                 .testAnyFlags(QFileDevice::ReadOther | QFileDevice::ReadGroup));
    // Each gives up on the silent server and says so, without the password.
    for (const Child& child : children) {
      QTRY_VERIFY2_WITH_TIMEOUT(!testing::alive(child.pid), qPrintable(child.what), 60000);
      const QByteArray log = testing::readAll(child.log);
      QVERIFY2(log.contains("127.0.0.1") && !log.contains(kSecret),
               qPrintable(child.what + ": " + QString::fromUtf8(log)));
    }
  }

  // shardscope-cli's own messages about a server, the URL given with --db or in SHARDSCOPE_DB;
  // a key=value connection string is refused, also without its password.
  void cliMessagesNameTheServerWithoutThePassword_data() {
    forms_data();
    QTest::newRow("key=value") << "key=value";
  }
  void cliMessagesNameTheServerWithoutThePassword() {
    QFETCH(QString, form);
    const QString spec = form == "key=value"
                             ? QStringLiteral("host=127.0.0.1 port=%1 password=%2 dbname=runs")
                                   .arg(m_port)
                                   .arg(QString::fromLatin1(kSecret))
                             : url(form);
    for (const bool inEnvironment : {false, true}) {
      QProcess cli;
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      if (inEnvironment) env.insert("SHARDSCOPE_DB", spec);
      cli.setProcessEnvironment(env);
      cli.start(kCli, inEnvironment ? QStringList{"ls"} : QStringList{"--db", spec, "ls"});
      QVERIFY(cli.waitForFinished(60000));
      const QString err = QString::fromUtf8(cli.readAllStandardError());
      QCOMPARE(cli.exitCode(), 1);
      QVERIFY2(!err.contains(kSecret) && !err.isEmpty(), qPrintable(err));
      QVERIFY2(err.contains("127.0.0.1"), qPrintable(err));
    }
  }
};

QTEST_GUILESS_MAIN(TestDbSecrets)
#include "tst_dbsecrets.moc"
