// `shardscope --screenshot DIR` as a user runs it (a separate process, no display): every panel's
// PNG at the requested size with real content, index.json naming what is shown; a non-zero exit
// on an empty run log and on a folder that cannot be written.
#include <QColor>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

#include "tests/support/paths.h"
#include "tests/ui/runlogfixture.h"

namespace {

const QString kExe =
    shardscope::testing::envPath("SHARDSCOPE_TEST_GUI", "the shardscope executable");

struct Outcome {
  int exitCode = -1;
  QString output;
};

Outcome runShardscope(const QStringList& args) {
  QProcess process;
  process.setProcessChannelMode(QProcess::MergedChannels);
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.remove("QT_QPA_PLATFORM");  // --screenshot must select offscreen by itself
  env.insert("XDG_CONFIG_HOME", QDir::tempPath() + "/shardscope-tst-screenshot-config");
  process.setProcessEnvironment(env);
  process.start(kExe, args);
  if (!process.waitForFinished(120000)) return {-2, "timed out"};
  return {process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -3,
          QString::fromUtf8(process.readAll())};
}

int distinctColours(const QImage& image) {
  QSet<QRgb> colours;
  for (int y = 0; y < image.height(); y += 7) {
    for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, y));
  }
  return static_cast<int>(colours.size());
}

}  // namespace

class TestScreenshot : public QObject {
  Q_OBJECT

 private slots:
  void writesEveryPanelAndIndex() {
    QTemporaryDir dir;
    auto fixture = shardscope::testing::makeSweep(dir.filePath("runs.db"));
    fixture.store.reset();  // the screenshot process reads the file on its own
    const QString out = dir.filePath("shots");
    const Outcome outcome =
        runShardscope({"--screenshot", out, "--db", dir.filePath("runs.db"), "--size", "1000x700"});
    QVERIFY2(outcome.exitCode == 0, qPrintable(outcome.output));
    for (const char* name :
         {"builder", "runs", "plots", "compare", "timeline", "samples", "hosts"}) {
      const QImage image(QStringLiteral("%1/%2.png").arg(out, name));
      QVERIFY2(!image.isNull(), name);
      QCOMPARE(image.size(), QSize(1000, 700));
      QVERIFY2(distinctColours(image) > 1, name);
    }
    // The plots and compare panels draw curves: many colours, not a blank frame.
    QVERIFY(distinctColours(QImage(out + "/plots.png")) > 20);
    QVERIFY(distinctColours(QImage(out + "/compare.png")) > 20);
    QFile indexFile(out + "/index.json");
    QVERIFY(indexFile.open(QIODevice::ReadOnly));
    const QJsonObject index = QJsonDocument::fromJson(indexFile.readAll()).object();
    QCOMPARE(index.value("experiment_id").toInteger(), fixture.experimentId);
    QCOMPARE(index.value("trials").toInt(), 8);
    QCOMPARE(index.value("panels").toArray().size(), 7);
    // The three best trials are shown: sweep-4 (scale 0.5) first.
    QVERIFY2(index.value("runs_shown").toString().startsWith("sweep-4"),
             qPrintable(index.value("runs_shown").toString()));
  }

  void failsOnAnEmptyRunLog() {
    QTemporaryDir dir;
    {
      auto store = shardscope::backend::RunStore::open(dir.filePath("empty.db"));
      QVERIFY(store.ok());
    }
    const Outcome outcome =
        runShardscope({"--screenshot", dir.filePath("shots"), "--db", dir.filePath("empty.db")});
    QVERIFY2(outcome.exitCode != 0, qPrintable(outcome.output));
    QVERIFY2(outcome.output.contains("no runs"), qPrintable(outcome.output));
  }

  void failsWhenTheFolderCannotBeWritten() {
    QTemporaryDir dir;
    auto fixture = shardscope::testing::makeSweep(dir.filePath("runs.db"));
    fixture.store.reset();
    QFile blocker(dir.filePath("file"));
    QVERIFY(blocker.open(QIODevice::WriteOnly));
    blocker.close();
    const Outcome outcome = runShardscope(
        {"--screenshot", dir.filePath("file/shots"), "--db", dir.filePath("runs.db")});
    QVERIFY2(outcome.exitCode != 0, qPrintable(outcome.output));
    QVERIFY2(outcome.output.contains("file/shots"), qPrintable(outcome.output));
  }

  void rejectsABadSize() {
    QTemporaryDir dir;
    const Outcome outcome = runShardscope({"--screenshot", dir.path(), "--size", "huge"});
    QVERIFY(outcome.exitCode != 0);
    QVERIFY2(outcome.output.contains("--size"), qPrintable(outcome.output));
  }
};

QTEST_MAIN(TestScreenshot)
#include "tst_screenshot.moc"
