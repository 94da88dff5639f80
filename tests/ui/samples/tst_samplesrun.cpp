// The Samples view on a real probed run (#30 item 5): the run log that shard_probes leaves
// behind, where `shardscope-cli run` trained the demo's tiny Qwen2-VL on 2 FULL_SHARD ranks and
// its run monitor stored the `sample` events of four probes (two with the same image, one with
// another, one text only without a reference) at steps 2 and 3. Under Xvfb the main window opens
// that run log as a user would; the Samples view shows one row per probe and one column per
// evaluation, and each cell's answer, scores, thumbnails and highlights are those of the stored
// events (read back through the backend, as `shardscope-cli samples` does). The answers of a
// model with random weights are not known in advance, so the highlights are checked against each
// event's own exact match and the answer to its left.
#include <QDir>
#include <QDockWidget>
#include <QFileInfo>
#include <QImage>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTableView>
#include <QTest>
#include <QTextLayout>

#include <map>
#include <memory>
#include <set>

#include "backend/monitor/samples.h"
#include "backend/store/runstore.h"
#include "tests/support/paths.h"
#include "tests/support/verify_ok.h"
#include "ui/mainwindow.h"
#include "ui/samples/samplesmodel.h"
#include "ui/samples/samplespanel.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {
constexpr int kWaitMs = 30000;

// The dark pixels in the top half of `cell` on screen, where the answer is drawn (the scores sit
// at the bottom).
int inkAbove(SamplesPanel* panel, const QModelIndex& cell) {
  QTableView* view = panel->view();
  const QModelIndex shown = panel->filter()->mapFromSource(cell);
  view->scrollTo(shown);
  const QImage shot = view->viewport()->grab().toImage();
  const QRect rect = view->visualRect(shown);
  const qreal dpr = shot.devicePixelRatio();
  int ink = 0;
  for (int y = rect.top() + 2; y < rect.top() + rect.height() / 2; ++y)
    for (int x = rect.left() + 8; x < rect.right() - 2; ++x)
      if (shot.pixelColor(int(x * dpr), int(y * dpr)).lightness() < 128) ++ink;
  return ink;
}
}  // namespace

class TestSamplesRun : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void theViewShowsTheRunsAnswers() {
    const QString db = testing::envPath("SHARDSCOPE_PROBES_RUNLOG", "shard_probes' run log");
    QVERIFY2(QFileInfo::exists(db),
             qPrintable(db + " does not exist: shard_probes (this test's fixture) makes it"));
    // What the run log holds, as the backend reads it.
    auto store = backend::RunStore::open(db);
    VERIFY_OK(store);
    auto reader = (*store)->reader();
    VERIFY_OK(reader);
    auto runs = reader->listRuns();
    VERIFY_OK(runs);
    QCOMPARE(runs->size(), std::size_t{1});
    const qint64 runId = runs->front().id;
    auto samples = backend::samplesOfRun(*reader, runId);
    VERIFY_OK(samples);
    QCOMPARE(samples->size(), std::size_t{8});  // four probes at steps 2 and 3
    std::map<std::pair<std::string, qint64>, spec::SampleEvent> answer;
    for (const auto& s : *samples) answer[{s.probe, s.step}] = s;

    MainWindow window(nullptr, 50);
    window.resize(1600, 1000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    window.openRunLog(db);
    SamplesPanel* panel = window.samplesPanel();
    SamplesModel* model = panel->model();
    QTRY_VERIFY_WITH_TIMEOUT(model->runs() == QList<qint64>{runId} && panel->isLoaded() &&
                                 model->rowCount() == 4 && model->columnCount() == 3,
                             kWaitMs);
    window.dock(QStringLiteral("samples"))->raise();
    QTRY_VERIFY(panel->view()->isVisible());
    QCOMPARE(model->headerData(1, Qt::Horizontal, Qt::DisplayRole).toString(), "step 2");
    QCOMPARE(model->headerData(2, Qt::Horizontal, Qt::DisplayRole).toString(), "step 3");

    std::set<std::string> probes;
    for (int row = 0; row < model->rowCount(); ++row) {
      const QString probe = model->headerData(row, Qt::Vertical, Qt::DisplayRole).toString();
      probes.insert(probe.toStdString());
      const spec::SampleEvent& first = answer.at({probe.toStdString(), 2});
      QCOMPARE(model->index(row, 0).data(Qt::DisplayRole).toString().toStdString(), first.prompt);
      QCOMPARE(model->index(row, 0).data(SamplesModel::ReferenceRole).toString().toStdString(),
               first.reference.value_or(""));
      const auto thumbs =
          model->index(row, 0).data(SamplesModel::ThumbnailsRole).value<QList<QImage>>();
      QCOMPARE(std::size_t(thumbs.size()), first.images.size());
      for (const QImage& thumb : thumbs) QVERIFY(!thumb.isNull());
      for (int column = 1; column <= 2; ++column) {
        const spec::SampleEvent& e = answer.at({probe.toStdString(), column + 1});
        const QModelIndex cell = model->index(row, column);
        const QString what = probe + QStringLiteral(" at step %1").arg(column + 1);
        QVERIFY2(cell.data(Qt::DisplayRole).toString().toStdString() == e.text, qPrintable(what));
        const QString scores = cell.data(SamplesModel::ScoresRole).toString();
        QVERIFY2(scores.endsWith(QStringLiteral("%1 tok").arg(e.tokens)), qPrintable(scores));
        const auto wrong = cell.data(SamplesModel::WrongWordsRole).toStringList();
        const auto formats =
            cell.data(SamplesModel::FormatsRole).value<QList<QTextLayout::FormatRange>>();
        int red = 0;
        for (const auto& f : formats)
          if (f.format.foreground().color() == SamplesModel::wrongFormat().foreground().color())
            ++red;
        if (!e.exact_match) {  // no reference: nothing is wrong, and no score but the tokens
          QVERIFY2(wrong.isEmpty() && red == 0, qPrintable(what));
          QVERIFY2(!scores.contains("EM"), qPrintable(scores));
        } else {
          QVERIFY2(scores.startsWith(QStringLiteral("EM %1").arg(*e.exact_match ? 1 : 0)),
                   qPrintable(scores));
          QCOMPARE(cell.data(SamplesModel::WrongRole).toBool(), !*e.exact_match);
          if (*e.exact_match) QVERIFY2(wrong.isEmpty() && red == 0, qPrintable(what));
          // Every word marked wrong is one of the answer's, and each is drawn red.
          const QStringList words = QString::fromStdString(e.text).split(
              QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts);
          for (const QString& w : wrong) QVERIFY2(words.contains(w), qPrintable(what + ": " + w));
          QCOMPARE(red, int(wrong.size()));
        }
        // Something is drawn in the answer's part of the cell exactly when there is an answer:
        // one of white space alone shows its characters as marks.
        QVERIFY2((inkAbove(panel, cell) > 0) == !e.text.empty(),
                 qPrintable(what + QStringLiteral(": %1 dark pixels for %2 characters")
                                       .arg(inkAbove(panel, cell))
                                       .arg(e.text.size())));
        if (column == 2) {  // step 3 against step 2
          const bool changed = e.text != answer.at({probe.toStdString(), 2}).text;
          QCOMPARE(cell.data(SamplesModel::ChangedRole).toBool(), changed);
        }
      }
    }
    QCOMPARE(probes, (std::set<std::string>{"colour", "shape", "3", "other"}));
    // For a human to look at (build/tests/artifacts).
    const QString artifacts = testing::binaryDir() + "/tests/artifacts";
    QDir().mkpath(artifacts);
    (void)window.grab().save(artifacts + "/samples-real-run.png");
  }
};

QTEST_MAIN(TestSamplesRun)
#include "tst_samplesrun.moc"
