// The builder's memory panel bounds chat rows by the data, as `shardscope-cli estimate` does, on a
// real X server (Xvfb): the crafted chat set (tests/data/crafted_data.h), unpacked, LoRA (so the
// rows' activations make the peak), under a data.seq_len of 2048 its samples are far shorter than.
// The panel's peak equals the CLI's --json figure on the same file; editing data.seq_len or
// data.train_path reads the data again and updates it; a file that is not there falls back to the
// data.seq_len bound with the reason shown. The file is read on the panel's worker thread: every
// refresh after the first runs from the builder's timer inside an event loop, where
// backend::trainDataBound's GUI-thread guard (backend/guithread.h, on in every test) aborts a read
// made on the GUI thread. Screenshot: tests/artifacts/builder-memory-bound.png in the build tree.
#include <QtTest>

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTabWidget>
#include <QTemporaryDir>

#include <fstream>
#include <string>

#include "tests/data/crafted_data.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "ui/builder/buildercontroller.h"
#include "ui/builder/builderpanel.h"
#include "ui/builder/memorychart.h"

using namespace shardscope;
using shardscope::ui::BuilderPanel;
using shardscope::ui::MemoryChart;

class TestBuilderMemoryBound : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  crafted::Files m_files;
  QString m_short;  // good.jsonl without its long line 7
  QString m_toml;

  // `shardscope-cli --json estimate` of the saved experiment (uncalibrated: the panel has no run
  // log here), its per-rank total.
  qint64 cliPeak(const QStringList& sets = {}) {
    QStringList args{"--json", "estimate", m_toml, "--uncalibrated"};
    for (const QString& s : sets) args << "--set" << s;
    const auto run = testing::runProgram(
        testing::envPath("SHARDSCOPE_TEST_CLI", "the shardscope-cli executable"), args);
    if (run.exitCode != 0) {
      qWarning("shardscope-cli estimate: %s", run.err.constData());
      return -1;
    }
    return QJsonDocument::fromJson(run.out).object().value("mem_per_rank").toInteger(-1);
  }

  // The builder's refresh (its timer) and the worker's answer, inside the spy's event loop.
  static void waitRead(BuilderPanel& panel) {
    MemoryChart* chart = panel.memoryChart();
    QSignalSpy read(chart, &MemoryChart::dataBoundRead);
    do {
      QVERIFY2(read.wait(60000), qPrintable(chart->rowsText()));
    } while (panel.isRefreshPending() || chart->isReadingData());
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY(crafted::write(m_dir.path().toStdString(), m_files));
    QFile good(QString::fromStdString(m_files.good));
    QVERIFY(good.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = good.readAll().split('\n');
    m_short = m_dir.filePath("short.jsonl");
    QFile shortFile(m_short);
    QVERIFY(shortFile.open(QIODevice::WriteOnly));
    shortFile.write(lines[0] + '\n' + lines[1] + '\n' + lines[2] + '\n');  // lines 1, 2, 9
    shortFile.close();
    m_toml = m_dir.filePath("chat.toml");
    std::ofstream(m_toml.toStdString())
        << "[model]\narch = \"qwen2_vl\"\npath = \"" << m_files.model
        << "\"\n[data]\nformat = \"chat\"\ntrain_path = \"" << m_files.good
        << "\"\nseq_len = 2048\npack = false\nshuffle = false\n[train]\nbatch_size = 2\n"
        << "[lora]\nenabled = true\n";
  }

  void thePanelStatesTheDataBoundOfTheCli() {
    BuilderPanel panel;
    panel.resize(1400, 900);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QString error;
    QVERIFY2(panel.controller()->openFile(m_toml, &error), qPrintable(error));
    panel.controller()->validateNow();
    panel.refreshNow();
    MemoryChart* chart = panel.memoryChart();
    QVERIFY(chart->isReadingData());
    QVERIFY2(chart->rowsText().contains("until data.train_path is read"),
             qPrintable(chart->rowsText()));
    const qint64 bySeqLen = chart->peakBytes();
    waitRead(panel);

    // The data's bound: the longest of the 4 samples, the CLI's figure, below the seq_len one.
    QVERIFY(chart->dataBound().has_value());
    const std::int64_t longest = chart->dataBound()->longest;
    QVERIFY2(longest > 0 && longest < 2048, qPrintable(chart->rowsText()));
    QCOMPARE(chart->rowsText(),
             QStringLiteral("rows bounded by the data: longest %1 tokens (4 samples of good.jsonl)")
                 .arg(longest));
    QVERIFY2(chart->statusText().contains(chart->rowsText()), qPrintable(chart->statusText()));
    const qint64 cli = cliPeak();
    QCOMPARE(chart->peakBytes(), cli);
    QVERIFY2(chart->peakBytes() < bySeqLen, "the data's bound must be below data.seq_len's");

    // data.seq_len under the long line 7: read again (inside the event loop: the guard's), the
    // CLI's figure with the same data.seq_len.
    auto* seqLen = qobject_cast<QSpinBox*>(panel.editor("data.seq_len"));
    QVERIFY(seqLen);
    seqLen->setValue(64);
    waitRead(panel);
    QCOMPARE(panel.controller()->experiment().data.seq_len, std::int64_t{64});
    QVERIFY(chart->dataBound().has_value());
    QCOMPARE(chart->peakBytes(), cliPeak({"data.seq_len=64"}));
    QVERIFY2(chart->peakBytes() != cli, qPrintable(chart->rowsText()));
    seqLen->setValue(2048);
    waitRead(panel);
    QCOMPARE(chart->peakBytes(), cli);  // the first read's bound, as the CLI's

    // Another file: its own bound (3 short samples), the CLI's on it.
    auto* path = qobject_cast<QLineEdit*>(panel.editor("data.train_path"));
    QVERIFY(path);
    path->setText(m_short);
    emit path->editingFinished();
    waitRead(panel);
    QCOMPARE(QString::fromStdString(panel.controller()->experiment().data.train_path), m_short);
    QVERIFY2(chart->rowsText().contains("(3 samples of short.jsonl)"),
             qPrintable(chart->rowsText()));
    QVERIFY(chart->dataBound()->longest < longest);
    QCOMPARE(chart->peakBytes(), cliPeak({"data.train_path=\"" + m_short + "\""}));

    // A file that is not there: the seq_len bound, and why.
    const QString missing = m_dir.filePath("missing.jsonl");
    path->setText(missing);
    emit path->editingFinished();
    waitRead(panel);
    QVERIFY(!chart->dataBound().has_value());
    QVERIFY2(chart->rowsText().startsWith("rows bounded by data.seq_len = 2048: the data could "
                                          "not be read: ") &&
                 chart->rowsText().contains("missing.jsonl"),
             qPrintable(chart->rowsText()));
    QCOMPARE(chart->peakBytes(), bySeqLen);

    // Back to the short file for people to look at.
    path->setText(m_short);
    emit path->editingFinished();
    waitRead(panel);
    panel.showSideTab(chart);
    const QString artifacts = testing::binaryDir() + "/tests/artifacts";
    QDir().mkpath(artifacts);
    QVERIFY(panel.grab().save(artifacts + "/builder-memory-bound.png"));
  }
};

QTEST_MAIN(TestBuilderMemoryBound)
#include "tst_buildermemorybound.moc"
