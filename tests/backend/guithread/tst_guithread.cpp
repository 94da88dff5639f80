// The dashboard's rule that its GUI thread never writes the run log or drives a launcher,
// checked on real processes: guithread_probe (a QGuiApplication) makes the call from its event
// loop, from a worker thread, or at start-up, with the guard switched on as in debug builds.
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>

#include "tests/support/paths.h"

namespace {

struct Outcome {
  QProcess::ExitStatus status = QProcess::NormalExit;
  int code = -1;
  QString out;
  QString err;
};

Outcome probe(const QString& action, const QString& where, const QString& db) {
  QProcess process;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("SHARDSCOPE_THREAD_CHECKS", "1");
  env.insert("QT_QPA_PLATFORM", "offscreen");
  process.setProcessEnvironment(env);
  process.start(shardscope::testing::envPath("SHARDSCOPE_TEST_GUITHREAD_PROBE",
                                             "the guithread_probe executable"),
                {action, where, db});
  Outcome outcome;
  if (!process.waitForFinished(60000)) {
    process.kill();
    process.waitForFinished();
    outcome.err = "timed out";
    return outcome;
  }
  outcome.status = process.exitStatus();
  outcome.code = process.exitCode();
  outcome.out = QString::fromUtf8(process.readAllStandardOutput());
  outcome.err = QString::fromUtf8(process.readAllStandardError());
  return outcome;
}

}  // namespace

class TestGuiThread : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;

 private slots:
  void callsOnTheGuiThreadAbortNamingTheCall_data() {
    QTest::addColumn<QString>("action");
    QTest::addColumn<QString>("named");
    QTest::newRow("store") << "store"
                           << "opening the run log for writing";
    QTest::newRow("launcher") << "launcher"
                              << "a launcher";
  }
  void callsOnTheGuiThreadAbortNamingTheCall() {
    QFETCH(QString, action);
    QFETCH(QString, named);
    const QString db = m_dir.filePath(action + "-gui.db");
    const Outcome o = probe(action, "gui", db);
    QCOMPARE(o.status, QProcess::CrashExit);
    QVERIFY2(o.err.contains(named + " on the GUI thread"), qPrintable(o.err));
    QVERIFY(!o.out.contains("survived"));
    QVERIFY(!QFileInfo::exists(db));  // aborted before the store created its file
  }

  void callsOnAWorkerThreadGoThrough_data() { callsOnTheGuiThreadAbortNamingTheCall_data(); }
  void callsOnAWorkerThreadGoThrough() {
    QFETCH(QString, action);
    const QString db = m_dir.filePath(action + "-worker.db");
    const Outcome o = probe(action, "worker", db);
    QCOMPARE(o.status, QProcess::NormalExit);
    QVERIFY2(o.code == 0 && o.out.contains("survived"), qPrintable(o.out + o.err));
    if (action == QLatin1String("store")) QVERIFY(QFileInfo::exists(db));
  }

  void startUpBeforeTheEventLoopIsAllowed() {
    // The dashboard migrates an old run log before its window opens; that may block.
    const QString db = m_dir.filePath("startup.db");
    const Outcome o = probe("store", "startup", db);
    QCOMPARE(o.status, QProcess::NormalExit);
    QVERIFY2(o.code == 0 && o.out.contains("survived"), qPrintable(o.out + o.err));
    QVERIFY(QFileInfo::exists(db));
  }
};

QTEST_GUILESS_MAIN(TestGuiThread)
#include "tst_guithread.moc"
