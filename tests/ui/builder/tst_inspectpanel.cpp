// The builder's Inspect data tab on a real X server (Xvfb): an experiment file opened in the
// builder, Inspect data pressed, the figures, histogram (with its data.seq_len line), refused and
// over-long lines and largest images shown as the crafted set (tests/data/crafted_data.h) has
// them; a refused line clicked shows the trainer's reason; a good line's chat with its loss tokens
// highlighted and its image as a thumbnail; a long file cancelled while the window stays live.
// Screenshot: tests/artifacts/inspect-panel.png in the build tree.
#include <qcustomplot.h>
#include <QtTest>

#include <QDir>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <fstream>

#include "data/text/sft_prepare.h"
#include "tests/data/crafted_data.h"
#include "tests/support/paths.h"
#include "ui/builder/buildercontroller.h"
#include "ui/builder/builderpanel.h"
#include "ui/builder/inspectpanel.h"

using namespace shardscope;
using shardscope::ui::BuilderPanel;
using shardscope::ui::InspectPanel;

class TestInspectPanel : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  crafted::Files m_files;
  std::int64_t m_seqLen = 0;  // the longest of lines 1, 2 and 9, as the trainer's loader counts

  // An experiment on the crafted set, saved as DIR/NAME.toml and opened in `panel`.
  void open(BuilderPanel& panel, const std::string& train, std::int64_t seq_len,
            const QString& name) {
    const QString path = m_dir.filePath(name + ".toml");
    std::ofstream(path.toStdString())
        << "[model]\narch = \"qwen2_vl\"\npath = \"" << m_files.model
        << "\"\n[data]\nformat = \"chat\"\ntrain_path = \"" << train << "\"\nseq_len = " << seq_len
        << "\nshuffle = false\n[train]\nbatch_size = 2\n";
    QString error;
    QVERIFY2(panel.controller()->openFile(path, &error), qPrintable(error));
    panel.controller()->validateNow();
    panel.refreshNow();
  }

  static void waitDone(InspectPanel* inspect, QSignalSpy& done) {
    if (inspect->isBusy()) QVERIFY(done.wait(60000));
    QVERIFY(!inspect->isBusy());
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY(crafted::write(m_dir.path().toStdString(), m_files));
    auto prep = data::SftPreparer::open(m_files.model);
    QVERIFY2(prep.ok(), prep ? "" : prep.message().c_str());
    auto samples = data::load_prepared_sft(m_files.good, *prep, 0, 0);  // lines 1, 2, 9, 7
    QVERIFY2(samples.ok(), samples ? "" : samples.message().c_str());
    for (std::size_t i = 0; i < 3; ++i)
      m_seqLen = std::max(m_seqLen, static_cast<std::int64_t>((*samples)[i].input_ids.size()));
    QVERIFY(static_cast<std::int64_t>((*samples)[3].input_ids.size()) > m_seqLen);
  }

  void figuresOfTheCraftedFile() {
    BuilderPanel panel;
    panel.resize(1400, 900);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    // data.seq_len holds lines 1, 2 and 9, not line 7 (200 z's).
    open(panel, m_files.train, m_seqLen, QStringLiteral("crafted"));
    auto* inspect = panel.inspectPanel();
    panel.showSideTab(inspect);
    QSignalSpy done(inspect, &InspectPanel::finished);
    QTest::mouseClick(inspect->inspectButton(), Qt::LeftButton);
    waitDone(inspect, done);
    QVERIFY2(inspect->inspection().files.size() == 1, qPrintable(inspect->statusText()));
    const auto& f = inspect->inspection().files[0];
    QVERIFY2(f.max_tokens > m_seqLen, qPrintable(inspect->figuresText()));

    const QString figures = inspect->figuresText();
    for (const char* want :
         {"8 lines", "<b>3 samples</b>", "<b>4 refused</b>", "<b>1 over data.seq_len</b>",
          "<b>2 images</b>, 30 visual tokens", "packing efficiency"})
      QVERIFY2(figures.contains(QLatin1String(want)), qPrintable(want + (": " + figures)));

    // The histogram: one bar per bin, the four tokenized lines, and data.seq_len's line.
    auto* plot = inspect->histogram();
    auto* bars = qobject_cast<QCPBars*>(plot->plottable(0));
    QVERIFY(bars != nullptr);
    double counted = 0;
    for (auto it = bars->data()->constBegin(); it != bars->data()->constEnd(); ++it)
      counted += it->value;
    QCOMPARE(counted, 4.0);
    auto* line = qobject_cast<QCPItemStraightLine*>(plot->item(0));
    QVERIFY(line != nullptr);
    QCOMPARE(line->point1->coords().x(), static_cast<double>(m_seqLen));

    // Refused lines then the over-long one, by line, with the kind.
    auto* lines = inspect->linesTable();
    QCOMPARE(lines->rowCount(), 5);
    const QStringList kinds = {"malformed_json", "invalid_sample", "missing_image",
                               "unreadable_image", "over_seq_len"};
    const QStringList numbers = {"3", "4", "5", "6", "7"};
    for (int r = 0; r < 5; ++r) {
      QCOMPARE(lines->item(r, 1)->text(), numbers[r]);
      QCOMPARE(lines->item(r, 2)->text(), kinds[r]);
    }
    // The largest image first.
    QCOMPARE(inspect->imagesTable()->rowCount(), 2);
    QCOMPARE(inspect->imagesTable()->item(0, 1)->text(), QStringLiteral("1 x 8 x 12"));
    QCOMPARE(inspect->imagesTable()->item(0, 2)->text(), QStringLiteral("24"));

    // A click on the missing image's row shows the trainer's reason.
    lines->scrollToItem(lines->item(2, 1));
    QTest::mouseClick(lines->viewport(), Qt::LeftButton, {},
                      lines->visualItemRect(lines->item(2, 1)).center());
    waitDone(inspect, done);
    QVERIFY2(inspect->statusText().contains(QLatin1String("missing.png")),
             qPrintable(inspect->statusText()));

    // Line 2: its chat, the answer and <|im_end|> highlighted, the image as a thumbnail.
    inspect->showLine(2);
    waitDone(inspect, done);
    QCOMPARE(inspect->sampleLossText(), QStringLiteral("abc<|im_end|>"));
    QCOMPARE(inspect->sampleThumbnails(), 1);
    QVERIFY2(inspect->sampleText().contains(QLatin1String("4 x 6 patches, 6 tokens")),
             qPrintable(inspect->sampleText()));
    QVERIFY(inspect->sampleText().contains(QLatin1String("<|im_start|>assistant")));

    const QString artifacts = testing::binaryDir() + "/tests/artifacts";
    QDir().mkpath(artifacts);
    QVERIFY(inspect->grab().save(artifacts + "/inspect-panel.png"));
  }

  // A long file: Cancel stops the job at its next line, the window answered all along, and the
  // figures cover the lines read.
  void cancelKeepsTheWindowLive() {
    const std::string big = m_dir.filePath("big.jsonl").toStdString();
    {
      std::ofstream out(big);
      const std::string line = crafted::chat("", "hello hello hello", "bc bc bc");
      for (int i = 0; i < 50000; ++i) out << line << '\n';
    }
    BuilderPanel panel;
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    open(panel, big, 200, QStringLiteral("big"));
    auto* inspect = panel.inspectPanel();
    QSignalSpy done(inspect, &InspectPanel::finished);
    int ticks = 0;
    QTimer tick;
    connect(&tick, &QTimer::timeout, this, [&] { ++ticks; });
    tick.start(1);
    inspect->inspect();
    QVERIFY(inspect->isBusy());
    QVERIFY(!inspect->inspectButton()->isEnabled());
    QVERIFY(inspect->cancelButton()->isEnabled());
    // The event loop runs while the file is read: wait for the GUI to tick a few times.
    QTRY_VERIFY_WITH_TIMEOUT(ticks >= 5, 60000);
    QTest::mouseClick(inspect->cancelButton(), Qt::LeftButton);
    waitDone(inspect, done);
    QVERIFY(inspect->inspectButton()->isEnabled());
    QVERIFY2(inspect->inspection().cancelled, qPrintable(inspect->statusText()));
    QVERIFY(inspect->inspection().files[0].lines < 50000);
    QVERIFY(inspect->statusText().contains(QLatin1String("Cancelled")));
  }
};

QTEST_MAIN(TestInspectPanel)
#include "tst_inspectpanel.moc"
