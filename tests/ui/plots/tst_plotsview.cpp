// The Plots panel's controls in the real window on a real X server (tests/ui/xvfb_run.sh), over
// a real run log (tests/ui/runlogfixture.h: steps at t = 1.7e9 + step, tokens/s 1200..1260):
// the smoothing slider changes the drawn curve and neither the run log nor the points the panel
// holds; the x axis by wall time, relative time and tokens seen; log scale per axis; the hover
// read-out; Save through its dialog for a plot (PNG of the chosen size, SVG, PDF) and for the
// whole Compare page; screenshots in the build tree's tests/artifacts.
#include <qcustomplot.h>

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMouseEvent>
#include <QPushButton>
#include <QSettings>
#include <QSlider>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "backend/store/runreader.h"
#include "tests/support/paths.h"
#include "tests/ui/runlogfixture.h"
#include "ui/compare/comparepanel.h"
#include "ui/mainwindow.h"
#include "ui/plots/plotcontrols.h"
#include "ui/plots/plotspanel.h"
#include "ui/runs/runspanel.h"
#include "ui/widgets/curveplot.h"
#include "ui/widgets/plotexport.h"
#include "ui/widgets/smoothing.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

constexpr int kWaitMs = 20000;
const QString kTrain = QStringLiteral("sweep-0 train");

std::vector<double> valuesOf(const QCPGraph* graph) {
  std::vector<double> values;
  for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it)
    values.push_back(it->value);
  return values;
}

std::vector<double> keysOf(const QCPGraph* graph) {
  std::vector<double> keys;
  for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it)
    keys.push_back(it->key);
  return keys;
}

// Fills the Save dialog the next modal dialog is, then presses Save (or Cancel). `check` runs
// while the dialog is open (after a first Save, when `retry` names a second path).
void answerSaveDialog(const QString& path, QSize size, const QString& retry = {}) {
  QTimer::singleShot(0, [=] {
    auto* dialog = qobject_cast<ExportDialog*>(QApplication::activeModalWidget());
    QVERIFY2(dialog != nullptr, "no Save dialog opened");
    dialog->pathEdit()->setText(path);
    dialog->widthBox()->setValue(size.width());
    dialog->heightBox()->setValue(size.height());
    auto* buttons = dialog->findChild<QDialogButtonBox*>();
    QTest::mouseClick(buttons->button(QDialogButtonBox::Save), Qt::LeftButton);
    if (retry.isEmpty()) return;
    // A refused name keeps the dialog open, saying why.
    QVERIFY(dialog->isVisible());
    auto* error = dialog->findChild<QLabel*>();
    QVERIFY(error != nullptr);
    dialog->pathEdit()->setText(retry);
    QTest::mouseClick(buttons->button(QDialogButtonBox::Save), Qt::LeftButton);
  });
}

}  // namespace

class TestPlotsView : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  testing::SweepFixture m_fixture;
  std::unique_ptr<MainWindow> m_window;

  PlotsPanel* plots() const { return m_window->plotsPanel(); }
  CurvePlot* loss() const { return plots()->plot("loss"); }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QSettings().remove("mainWindow");  // the default layout, not one another test left
    QVERIFY(m_dir.isValid());
    m_fixture = testing::makeSweep(m_dir.filePath("runs.db"));
    m_window = std::make_unique<MainWindow>(nullptr, 50);
    m_window->resize(1600, 1000);
    m_window->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
    m_window->openRunLog(m_dir.filePath("runs.db"));
    QTRY_VERIFY_WITH_TIMEOUT(m_window->isLoaded() && m_window->runCount() == 9, kWaitMs);
    m_window->runsPanel()->selectRuns({m_fixture.trialIds[0]});
    QTRY_VERIFY_WITH_TIMEOUT(plots()->isLoaded() && loss()->pointCount(kTrain) == 40, kWaitMs);
    m_window->dock("plots")->raise();
  }

  // At 1600 x 1000 the runs table takes the upper third at most and the big panels the rest:
  // Compare's plots get room for their axes, the Builder most of the height. Before, the
  // Builder shared the top with the runs and its minimum height split the window in halves:
  // Compare's eight plots in 436 px (history's data area 40 px high), the Builder as short.
  // The window's minimum keeps 100 px below 1000, so a summary line that wraps cannot make it
  // grow: at 989 px (the Builder's Inspect data tab unscrolled) it once grew to 1003 (844 now,
  // Compare's plots the tallest tab).
  void defaultLayoutGivesTheBigPanelsRoom() {
    QCOMPARE(m_window->size(), QSize(1600, 1000));
    QVERIFY2(m_window->minimumSizeHint().height() <= 900,
             qPrintable(QString::number(m_window->minimumSizeHint().height())));
    QVERIFY2(m_window->dock("runs")->height() <= 1000 / 3,
             qPrintable(QString::number(m_window->dock("runs")->height())));
    m_window->dock("compare")->raise();
    ComparePanel* compare = m_window->comparePanel();
    QTRY_VERIFY_WITH_TIMEOUT(compare->isSummaryDrawn(), kWaitMs);
    for (QCustomPlot* plot : {compare->historyPlot(), compare->intermediatePlot(),
                              compare->parallelPlot(), compare->slicePlot()}) {
      plot->replot();
      QVERIFY2(
          plot->axisRect()->height() >= 75,
          qPrintable(QString("%1: %2 px").arg(plot->objectName()).arg(plot->axisRect()->height())));
    }
    m_window->dock("builder")->raise();
    QVERIFY2(m_window->dock("builder")->height() >= 600,
             qPrintable(QString::number(m_window->dock("builder")->height())));
    m_window->dock("plots")->raise();
  }

  // The slider, moved by the keyboard, draws the train loss as its debiased EMA (weight 0.6)
  // over the raw curve, now faint; the run log's values and the panel's points stay as they
  // were. Back to 0: the raw curve alone again.
  void smoothingChangesTheDrawnCurveNotTheData() {
    QSlider* slider = plots()->controls()->smoothingSlider();
    QVERIFY(slider->isVisible());
    const std::vector<double> before = valuesOf(loss()->rawGraph(kTrain));
    auto reader = backend::RunReader::open(m_dir.filePath("runs.db"));
    QVERIFY(reader.ok());
    auto stored = reader->metric(m_fixture.trialIds[0], "loss");
    QVERIFY(stored.ok());
    QCOMPARE(stored->size(), std::size_t(40));

    slider->setFocus();
    for (int i = 0; i < 6; ++i) QTest::keyClick(slider, Qt::Key_PageUp);
    QCOMPARE(plots()->controls()->smoothing(), 0.6);
    QCOMPARE(loss()->smoothing(), 0.6);
    const QCPGraph* drawn = loss()->drawnGraph(kTrain);
    QVERIFY(drawn != loss()->rawGraph(kTrain));
    std::vector<double> expected(before.size());
    smoothEma(before.data(), expected.data(), before.size(), 0.6);
    QCOMPARE(valuesOf(drawn), expected);
    QVERIFY(valuesOf(drawn) != before);
    QCOMPARE(keysOf(drawn), keysOf(loss()->rawGraph(kTrain)));
    QVERIFY(loss()->rawGraph(kTrain)->pen().color().alpha() < 255);  // faint behind
    // Every chart is smoothed, not only the loss.
    QVERIFY(plots()->plot("tokens_per_s")->drawnGraph("sweep-0") !=
            plots()->plot("tokens_per_s")->rawGraph("sweep-0"));

    QCOMPARE(valuesOf(loss()->rawGraph(kTrain)), before);
    auto after = reader->metric(m_fixture.trialIds[0], "loss");
    QVERIFY(after.ok());
    for (std::size_t i = 0; i < stored->size(); ++i)
      QCOMPARE((*after)[i].value, (*stored)[i].value);
    // The CSV export writes the points as read, not smoothed.
    QVERIFY(plots()->exportCsv("loss", m_dir.filePath("smoothed.csv")).ok());
    QFile csv(m_dir.filePath("smoothed.csv"));
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = csv.readAll().split('\n');
    QVERIFY(lines.size() > 2);
    QVERIFY(std::abs(lines[2].split(',').last().toDouble() - before[1]) < 1e-9);  // 10 digits

    // A new point of the run is smoothed as it comes.
    for (int i = 0; i < 6; ++i) QTest::keyClick(slider, Qt::Key_PageDown);
    QCOMPARE(loss()->smoothing(), 0.0);
    QCOMPARE(loss()->drawnGraph(kTrain), loss()->rawGraph(kTrain));
    QCOMPARE(loss()->rawGraph(kTrain)->pen().color().alpha(), 255);
  }

  // Wall time: a date-time axis over the points' own times; relative time: seconds from the
  // run's start; tokens seen: step x the run's tokens per step (median of tokens/s x 1 s per
  // step: 1230 here); step again: the steps.
  void xAxisChoices() {
    QComboBox* picker = plots()->controls()->xAxisPicker();
    const auto choose = [picker](XAxis axis) {
      picker->setCurrentIndex(picker->findData(int(axis)));
    };
    QCustomPlot* cp = loss()->customPlot();
    choose(XAxis::wallTime);
    QCOMPARE(plots()->xAxis(), XAxis::wallTime);
    QVERIFY(qSharedPointerDynamicCast<QCPAxisTickerDateTime>(cp->xAxis->ticker()) != nullptr);
    QCOMPARE(cp->xAxis->label(), QString("wall time"));
    std::vector<double> keys = keysOf(loss()->rawGraph(kTrain));
    QCOMPARE(keys.front(), 1.7e9);
    QCOMPARE(keys.back(), 1.7e9 + 39);
    QVERIFY(cp->xAxis->range().lower >= 1.7e9 - 1 && cp->xAxis->range().upper <= 1.7e9 + 40);
    // The eval points (every 10 steps) by their own times too.
    QCOMPARE(keysOf(loss()->rawGraph("sweep-0 eval")).front(), 1.7e9 + 9);

    choose(XAxis::relativeTime);
    QVERIFY(qSharedPointerDynamicCast<QCPAxisTickerTime>(cp->xAxis->ticker()) != nullptr);
    keys = keysOf(loss()->rawGraph(kTrain));
    QCOMPARE(keys.front(), 0.0);
    QCOMPARE(keys.back(), 39.0);

    choose(XAxis::tokens);
    keys = keysOf(loss()->rawGraph(kTrain));
    QCOMPARE(keys[2], 2 * 1230.0);
    QCOMPARE(keys.back(), 39 * 1230.0);
    QVERIFY(cp->xAxis->label().startsWith("tokens seen"));

    choose(XAxis::step);
    keys = keysOf(loss()->rawGraph(kTrain));
    QCOMPARE(keys.back(), 39.0);
    QCOMPARE(cp->xAxis->label(), QString("step"));
    QCOMPARE(loss()->pointCount(kTrain), 40);
  }

  // The log boxes, clicked, make each axis logarithmic on every chart (a log ticker, the range
  // over positive points only); clicked again, linear.
  void logScaleToggles() {
    QCheckBox* logY = plots()->controls()->logYBox();
    QCheckBox* logX = plots()->controls()->logXBox();
    QTest::mouseClick(logY, Qt::LeftButton);
    for (const QString& id : PlotsPanel::plotIds()) {
      QCOMPARE(plots()->plot(id)->customPlot()->yAxis->scaleType(), QCPAxis::stLogarithmic);
      QCOMPARE(plots()->plot(id)->customPlot()->xAxis->scaleType(), QCPAxis::stLinear);
    }
    QVERIFY(loss()->customPlot()->yAxis->range().lower > 0);
    QTest::mouseClick(logX, Qt::LeftButton);
    QCustomPlot* cp = loss()->customPlot();
    QCOMPARE(cp->xAxis->scaleType(), QCPAxis::stLogarithmic);
    QVERIFY(qSharedPointerDynamicCast<QCPAxisTickerLog>(cp->xAxis->ticker()) != nullptr);
    QVERIFY(cp->xAxis->range().lower > 0);  // step 0 is not on a log axis
    QTest::mouseClick(logX, Qt::LeftButton);
    QTest::mouseClick(logY, Qt::LeftButton);
    QCOMPARE(cp->xAxis->scaleType(), QCPAxis::stLinear);
    QCOMPARE(cp->yAxis->scaleType(), QCPAxis::stLinear);
  }

  // The pointer over the loss chart at step ~20: the read-out names both series with their
  // nearest point (train at 20, eval at 19), and a dot marks each.
  void hoverReadsOutEveryCurve() {
    QCustomPlot* cp = loss()->customPlot();
    cp->replot();
    const int y = cp->axisRect()->center().y();
    // The pointer's move as the window system delivers it to the plot (a warp of the X pointer
    // by QTest::mouseMove reached the plot in some orders of these tests and not in others).
    const QPoint at(int(cp->xAxis->coordToPixel(20.2)), y);
    QMouseEvent move(QEvent::MouseMove, at, cp->mapToGlobal(at), Qt::NoButton, Qt::NoButton,
                     Qt::NoModifier);
    QApplication::sendEvent(cp, &move);
    QTRY_VERIFY_WITH_TIMEOUT(!loss()->hoverText().isEmpty(), kWaitMs);
    const QString text = loss()->hoverText();
    const QCPGraph* train = loss()->rawGraph(kTrain);
    QVERIFY(train != nullptr);
    const double train20 = valuesOf(train)[20];
    QVERIFY2(text.contains(QString("sweep-0 train: %1 at step 20").arg(train20, 0, 'g', 5)),
             qPrintable(text));
    QVERIFY2(text.contains("sweep-0 eval: ") && text.contains("at step 19"), qPrintable(text));
    int dots = 0;
    for (int i = 0; i < cp->itemCount(); ++i) {
      if (auto* tracer = qobject_cast<QCPItemTracer*>(cp->item(i)); tracer && tracer->visible())
        ++dots;
    }
    QCOMPARE(dots, 2);
    // Off the chart: the read-out goes.
    QEvent leave(QEvent::Leave);
    QApplication::sendEvent(cp, &leave);
    QTRY_VERIFY_WITH_TIMEOUT(loss()->hoverText().isEmpty(), kWaitMs);
  }

  // Save from the chart's menu: the dialog refuses a .bmp (staying open), then writes the PNG
  // at the size asked; SVG and PDF are valid files of their kind.
  void savePlotThroughTheDialog() {
    std::unique_ptr<QMenu> menu(plots()->plotMenu("loss"));
    auto* save = menu->findChild<QAction*>("savePlot");
    QVERIFY(save != nullptr);
    const QString png = m_dir.filePath("loss-report.png");
    answerSaveDialog(m_dir.filePath("loss.bmp"), QSize(640, 360), png);
    save->trigger();
    QVERIFY(!QFile::exists(m_dir.filePath("loss.bmp")));
    QImage image(png);
    QCOMPARE(image.size(), QSize(640, 360));
    // Not blank: the curve's colour is in it.
    bool curve = false;
    for (int x = 0; x < image.width() && !curve; ++x)
      for (int y = 0; y < image.height() && !curve; ++y)
        curve = image.pixelColor(x, y) == CurvePlot::seriesColor(0);
    QVERIFY(curve);

    const QString svg = m_dir.filePath("loss-report.svg");
    answerSaveDialog(svg, QSize(900, 500));
    save->trigger();
    QFile svgFile(svg);
    QVERIFY(svgFile.open(QIODevice::ReadOnly));
    const QByteArray svgText = svgFile.readAll();
    QVERIFY(svgText.startsWith("<?xml"));
    QVERIFY(svgText.contains("<svg") && svgText.contains("</svg>"));
    QVERIFY(svgText.contains("width=\"") && svgText.contains("viewBox=\"0 0 900 500\""));

    const QString pdf = m_dir.filePath("loss-report.pdf");
    answerSaveDialog(pdf, QSize(900, 500));
    save->trigger();
    QFile pdfFile(pdf);
    QVERIFY(pdfFile.open(QIODevice::ReadOnly));
    const QByteArray pdfBytes = pdfFile.readAll();
    QVERIFY(pdfBytes.startsWith("%PDF-"));
    QVERIFY(pdfBytes.trimmed().endsWith("%%EOF"));
  }

  // The whole Compare page through its Save page button, at 1600 x 1000: an image that size,
  // with the page's plots in it (not one colour).
  void saveTheComparePage() {
    m_window->dock("compare")->raise();
    ComparePanel* compare = m_window->comparePanel();
    QTRY_VERIFY_WITH_TIMEOUT(compare->isSummaryDrawn(), kWaitMs);
    auto* button = compare->findChild<QPushButton*>("savePage");
    QVERIFY(button != nullptr && button->isVisible());
    const QString png = m_dir.filePath("compare.png");
    answerSaveDialog(png, QSize(1600, 1000));
    QTest::mouseClick(button, Qt::LeftButton);
    QImage image(png);
    QCOMPARE(image.size(), QSize(1600, 1000));
    QSet<QRgb> colours;
    for (int y = 0; y < image.height(); y += 7)
      for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, y));
    QVERIFY2(colours.size() > 20, qPrintable(QString::number(colours.size())));
    const QString pdf = m_dir.filePath("compare.pdf");
    answerSaveDialog(pdf, QSize(1600, 1000));
    QTest::mouseClick(button, Qt::LeftButton);
    QFile pdfFile(pdf);
    QVERIFY(pdfFile.open(QIODevice::ReadOnly));
    QVERIFY(pdfFile.readAll().startsWith("%PDF-"));
  }

  // For people to look at (tests/artifacts in the build tree): the window at 1600 x 1000 with
  // the Plots tab in front and smoothing at 0.9, and the Compare and Builder tabs as they open.
  void screenshots() {
    const QString artifacts = testing::binaryDir() + "/tests/artifacts";
    QVERIFY(QDir().mkpath(artifacts));
    m_window->dock("plots")->raise();
    QSlider* slider = plots()->controls()->smoothingSlider();
    slider->setValue(900);
    QCOMPARE(loss()->smoothing(), 0.9);
    QTest::qWait(100);
    QVERIFY(m_window->grab().save(artifacts + "/window-plots-smoothed.png"));
    QVERIFY(plots()->grab().save(artifacts + "/plots-smoothed.png"));
    slider->setValue(0);
    for (const char* name : {"compare", "builder"}) {
      m_window->dock(name)->raise();
      QTest::qWait(100);
      QVERIFY(m_window->grab().save(artifacts + QStringLiteral("/window-%1.png").arg(name)));
    }
  }

  void cleanupTestCase() { m_window.reset(); }
};

QTEST_MAIN(TestPlotsView)
#include "tst_plotsview.moc"
