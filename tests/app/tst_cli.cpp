// The built binaries answer --version and report usage errors with exit code 2, as scripts and
// the packaging smoke test expect. shardscope --version must work without any display.
#include <QProcess>
#include <QTest>

#include "spec/version.h"
#include "tests/support/paths.h"

namespace {

struct Run {
  QProcess::ExitStatus status = QProcess::CrashExit;
  int exitCode = -1;
  QString out;
  QString err;
};

Run run(const QString& program, const QStringList& args,
        const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  QProcess process;
  process.setProcessEnvironment(env);
  process.start(program, args);
  Run result;
  if (!process.waitForStarted(10000)) {
    result.err = QStringLiteral("did not start: ") + process.errorString();
    return result;
  }
  if (!process.waitForFinished(30000)) {
    process.kill();
    process.waitForFinished();
    result.err = QStringLiteral("did not finish within 30 s");
    return result;
  }
  result.status = process.exitStatus();
  result.exitCode = process.exitCode();
  result.out = QString::fromUtf8(process.readAllStandardOutput());
  result.err += QString::fromUtf8(process.readAllStandardError());
  return result;
}

const QString kCli = shardscope::testing::binaryDir() + "/bin/shardscope-cli";
#ifdef SHARDSCOPE_HAS_GUI
const QString kGui = shardscope::testing::binaryDir() + "/bin/shardscope";

// An environment in which QApplication cannot start: no display and no usable platform plugin.
QProcessEnvironment noDisplay() {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.remove("DISPLAY");
  env.remove("WAYLAND_DISPLAY");
  env.insert("QT_QPA_PLATFORM", "no-such-platform");
  return env;
}
#endif

}  // namespace

class TestCli : public QObject {
  Q_OBJECT

 private slots:
  void cliPrintsItsVersion() {
    const Run r = run(kCli, {"--version"});
    QCOMPARE(r.status, QProcess::NormalExit);
    QCOMPARE(r.exitCode, 0);
    QCOMPARE(r.out.trimmed(), QString("shardscope-cli ") + shardscope::kVersion);
  }

  void cliHelpListsTheDbOption() {
    const Run r = run(kCli, {"--help"});
    QCOMPARE(r.exitCode, 0);
    QVERIFY2(r.out.contains("--db"), qPrintable(r.out));
  }

  void cliWithoutAVerbPrintsHelpAndIsUsage_data() {
    QTest::addColumn<QStringList>("args");
    QTest::newRow("no arguments") << QStringList{};
    QTest::newRow("only --db") << QStringList{"--db", "/tmp/runs.db"};
  }

  void cliWithoutAVerbPrintsHelpAndIsUsage() {
    QFETCH(QStringList, args);
    const Run r = run(kCli, args);
    QCOMPARE(r.status, QProcess::NormalExit);
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains("Usage") && r.err.contains("--db"), qPrintable(r.err));
  }

  void cliUnknownOptionIsUsageNamingIt() {
    const Run r = run(kCli, {"--frobnicate"});
    QCOMPARE(r.status, QProcess::NormalExit);
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains("--frobnicate"), qPrintable(r.err));
  }

  void cliDbWithoutAPathIsUsage() {
    const Run r = run(kCli, {"--db"});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains("--db"), qPrintable(r.err));
  }

  void guiPrintsItsVersionWithoutADisplay() {
#ifndef SHARDSCOPE_HAS_GUI
    QSKIP("built with SHARDSCOPE_BUILD_GUI=OFF");
#else
    const Run r = run(kGui, {"--version"}, noDisplay());
    QCOMPARE(r.status, QProcess::NormalExit);
    QCOMPARE(r.exitCode, 0);
    QCOMPARE(r.out.trimmed(), QString("shardscope ") + shardscope::kVersion);
#endif
  }

  // The control for the test above: in that environment the GUI itself cannot start, so the
  // version really was answered without a display.
  void guiWithoutADisplayCannotStart() {
#ifndef SHARDSCOPE_HAS_GUI
    QSKIP("built with SHARDSCOPE_BUILD_GUI=OFF");
#else
    const Run r = run(kGui, {}, noDisplay());
    QVERIFY2(r.status == QProcess::CrashExit || r.exitCode != 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("no-such-platform"), qPrintable(r.err));
#endif
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
