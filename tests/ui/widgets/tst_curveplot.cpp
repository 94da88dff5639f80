// Toolchain proof 3: QCustomPlot renders offscreen, and a curve lands where the axes say. The
// line y = x is rendered to a PNG (kept in build/tests/artifacts for a human to look at) and
// read back: the curve's colour must be on the line and absent far from it.
#include <qcustomplot.h>
#include <QDir>
#include <QHash>
#include <QImage>
#include <QTest>

#include <cmath>
#include <limits>
#include <set>

#include "tests/support/paths.h"
#include "tests/support/verify_ok.h"
#include "ui/widgets/curvegraph.h"
#include "ui/widgets/curveplot.h"

using namespace shardscope;
using namespace shardscope::ui;

using shardscope::testing::why;

namespace {

constexpr int kWidth = 800;
constexpr int kHeight = 500;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kTolerance = 3;  // pixels between where a point should be and where it is drawn

QString artifactDir() {
  const QString dir = shardscope::testing::binaryDir() + "/tests/artifacts";
  QDir().mkpath(dir);
  return dir;
}

bool isCurveColour(QRgb pixel, const QColor& curve) {
  constexpr int kChannel = 24;  // the pen's core is the exact colour; edges are blended
  return std::abs(qRed(pixel) - curve.red()) <= kChannel &&
         std::abs(qGreen(pixel) - curve.green()) <= kChannel &&
         std::abs(qBlue(pixel) - curve.blue()) <= kChannel;
}

bool curveNear(const QImage& image, QPoint centre, const QColor& curve) {
  for (int dy = -kTolerance; dy <= kTolerance; ++dy) {
    for (int dx = -kTolerance; dx <= kTolerance; ++dx) {
      const QPoint p = centre + QPoint(dx, dy);
      if (image.valid(p) && isCurveColour(image.pixel(p), curve)) return true;
    }
  }
  return false;
}

int curvePixelsIn(const QImage& image, const QRect& area, const QColor& curve) {
  int count = 0;
  for (int y = area.top(); y <= area.bottom(); ++y) {
    for (int x = area.left(); x <= area.right(); ++x) {
      if (isCurveColour(image.pixel(x, y), curve)) ++count;
    }
  }
  return count;
}

}  // namespace

class TestCurvePlot : public QObject {
  Q_OBJECT

 private slots:
  void paletteColoursAreDistinctAndRepeat() {
    std::set<QRgb> colours;
    for (int i = 0; i < CurvePlot::paletteSize(); ++i) {
      const QColor colour = CurvePlot::seriesColor(i);
      QVERIFY(colour.isValid());
      QVERIFY2(colour.lightness() < 235, "a palette colour would vanish on white");
      colours.insert(colour.rgb());
    }
    QCOMPARE(static_cast<int>(colours.size()), CurvePlot::paletteSize());
    QCOMPARE(CurvePlot::seriesColor(CurvePlot::paletteSize()), CurvePlot::seriesColor(0));
    QCOMPARE(CurvePlot::seriesColor(-1), CurvePlot::seriesColor(CurvePlot::paletteSize() - 1));
  }

  void seriesAreCreatedReplacedAndAppended() {
    CurvePlot plot;
    plot.setSeries("loss", {0, 1, 2}, {3, 2, 1});
    plot.setSeries("lr", {0, 1}, {1e-4, 2e-4});
    QCOMPARE(plot.seriesCount(), 2);
    QCOMPARE(plot.customPlot()->legend->itemCount(), 2);
    QCOMPARE(plot.customPlot()->graph(0)->pen().color(), CurvePlot::seriesColor(0));
    QCOMPARE(plot.customPlot()->graph(1)->pen().color(), CurvePlot::seriesColor(1));
    plot.setSeries("loss", {0, 1}, {5, 4});  // replaces
    QCOMPARE(plot.pointCount("loss"), 2);
    plot.appendPoints("loss", {3, 2}, {2, 3});  // appends, unsorted is fine
    QCOMPARE(plot.pointCount("loss"), 4);
    QCOMPARE(plot.customPlot()->graph(0)->data()->at(2)->key, 2.0);
    plot.appendPoints("mem", {0}, {1});  // appending creates
    QCOMPARE(plot.seriesCount(), 3);
    plot.removeSeries("lr");
    QVERIFY(!plot.hasSeries("lr"));
    QCOMPARE(plot.customPlot()->graphCount(), 2);
    QCOMPARE(plot.pointCount("lr"), 0);
    plot.clear();
    QCOMPARE(plot.customPlot()->graphCount(), 0);
  }

  void mismatchedLengthsPlotTheCommonPart() {
    CurvePlot plot;
    QTest::ignoreMessage(QtWarningMsg, QRegularExpression("'loss' got 3 x values and 2 y"));
    plot.setSeries("loss", {0, 1, 2}, {3, 2});
    QCOMPARE(plot.pointCount("loss"), 2);
  }

  void rendersAStraightLineWhereTheAxesSayItIs() {
    CurvePlot plot;
    plot.resize(kWidth, kHeight);
    plot.setAxisLabels("step", "loss");
    plot.setLineWidth(4);
    QVector<double> xs;
    for (int i = 0; i <= 100; ++i) xs << i;
    plot.setSeries("y = x", xs, xs);
    plot.setRanges(0, 100, 0, 100);
    plot.show();
    QVERIFY(QTest::qWaitForWindowExposed(&plot));
    plot.replot();
    QCustomPlot* custom = plot.customPlot();
    QCOMPARE(custom->size(), QSize(kWidth, kHeight));  // so widget and PNG pixels coincide

    const QString path = artifactDir() + "/curveplot-line.png";
    QFile::remove(path);
    auto saved = plot.savePng(path, kWidth, kHeight);
    QVERIFY2(saved, why(saved).c_str());
    const QImage image = QImage(path).convertToFormat(QImage::Format_RGB32);
    QCOMPARE(image.size(), QSize(kWidth, kHeight));

    const QColor curve = CurvePlot::seriesColor(0);
    auto pixel = [&](double x, double y) {
      return QPoint(qRound(custom->xAxis->coordToPixel(x)), qRound(custom->yAxis->coordToPixel(y)));
    };
    const QRect legend = custom->legend->outerRect();  // top right, over the line's end
    for (double t : {5.0, 20.0, 35.0, 50.0, 65.0, 80.0}) {
      QVERIFY(!legend.adjusted(-kTolerance, -kTolerance, kTolerance, kTolerance)
                   .contains(pixel(t, t)));  // else the legend's swatch could pass for the line
      QVERIFY2(curveNear(image, pixel(t, t), curve),
               qPrintable(QString("no curve pixel near (%1, %1) = pixel (%2, %3)")
                              .arg(t)
                              .arg(pixel(t, t).x())
                              .arg(pixel(t, t).y())));
    }
    // Far from y = x: the top-left and bottom-right corners of the data area.
    const QRect topLeft(pixel(2, 98), pixel(30, 70));
    const QRect bottomRight(pixel(70, 30), pixel(98, 2));
    QVERIFY(topLeft.width() > 50 && topLeft.height() > 50);
    QCOMPARE(curvePixelsIn(image, topLeft, curve), 0);
    QCOMPARE(curvePixelsIn(image, bottomRight, curve), 0);
    // A solid stretch of line, not a stray pixel, in the middle.
    QVERIFY(curvePixelsIn(image, QRect(pixel(40, 40), pixel(60, 60)).normalized(), curve) > 40);
  }

  // A dense line is drawn as one span per pixel column: from the column's lowest to its highest
  // point, joined to the previous column's last point, widened by the pen; NaN breaks it.
  void columnSpansKeepEachColumnsExtremes() {
    const double nan = std::nan("");
    const QVector<QPointF> pixels = {{10.2, 50}, {10.5, 20},  {10.8, 70}, {11.3, 40},
                                     {12.1, 45}, {12.4, nan}, {13.5, 30}, {16.5, 35}};
    const QVector<QRectF> spans = CurvePlot::columnSpans(pixels, 2.0);
    const QVector<QRectF> expected = {
        QRectF(10, 19, 1, 52),  // 20..70
        QRectF(11, 39, 1, 32),  // 40, joined to column 10's last point (70)
        QRectF(12, 39, 1, 7),   // 45, joined to 40
        QRectF(13, 29, 1, 2),   // after the NaN: 30 alone, not joined
        QRectF(16, 34, 1, 2),   // three columns on: its own span (the gap is a stroked segment)
    };
    QCOMPARE(spans, expected);
  }

  // Rendered: 20,000 jagged points across 800 px (the per-rank step times a Plots panel draws):
  // in every pixel column of the data area, the pixel rows of the highest and the lowest point
  // of that column are painted in the series' colour. Before, the same line was stroked as one
  // antialiased 2 px polyline (seconds a replot); the extremes must be what they were.
  void denseLineKeepsEveryColumnsMinAndMax() {
    CurvePlot plot;
    plot.resize(kWidth, kHeight);
    plot.customPlot()->legend->setVisible(false);
    constexpr int kPoints = 20000;
    QVector<double> xs(kPoints);
    QVector<double> ys(kPoints);
    quint32 seed = 7;
    for (int i = 0; i < kPoints; ++i) {
      seed = seed * 1664525u + 1013904223u;
      xs[i] = i;
      ys[i] = 50 + 20 * (double(seed >> 8) / double(1u << 24) - 0.5) + (i % 313 == 0 ? 40 : 0);
    }
    plot.setSeries("ranks", xs, ys);
    plot.setLineWidth(2);
    plot.setRanges(0, kPoints - 1, 0, 100);
    plot.show();
    QVERIFY(QTest::qWaitForWindowExposed(&plot));
    plot.replot();
    QCustomPlot* custom = plot.customPlot();
    const QImage image =
        custom->toPixmap(kWidth, kHeight).toImage().convertToFormat(QImage::Format_RGB32);
    (void)image.save(artifactDir() + "/curveplot-dense.png");
    const QColor curve = CurvePlot::seriesColor(0);
    // Each column's extremes, from the data.
    QHash<int, std::pair<double, double>> extremes;  // column -> (min, max)
    for (int i = 0; i < kPoints; ++i) {
      const int column = int(std::floor(custom->xAxis->coordToPixel(xs[i])));
      auto it = extremes.find(column);
      if (it == extremes.end()) {
        extremes.insert(column, {ys[i], ys[i]});
      } else {
        it->first = std::min(it->first, ys[i]);
        it->second = std::max(it->second, ys[i]);
      }
    }
    const QRect data = custom->axisRect()->rect();
    int checked = 0;
    for (auto it = extremes.cbegin(); it != extremes.cend(); ++it) {
      const int x = it.key();
      if (x <= data.left() || x >= data.right()) continue;  // the frame's columns
      for (const double value : {it->first, it->second}) {
        const int y = int(std::round(custom->yAxis->coordToPixel(value)));
        bool painted = false;
        for (int dy = -1; dy <= 1 && !painted; ++dy)
          painted = image.valid(x, y + dy) && isCurveColour(image.pixel(x, y + dy), curve);
        QVERIFY2(painted, qPrintable(QString("column %1: value %2 (pixel row %3) not painted")
                                         .arg(x)
                                         .arg(value)
                                         .arg(y)));
        ++checked;
      }
    }
    QVERIFY2(checked > 2 * (data.width() - 4), qPrintable(QString::number(checked)));
  }

  // The block summary (curvegraph.h) reads whole blocks where they fall in one pixel column:
  // what it hands the dense drawing gives the same spans as every point in view, in pixels, would
  // (NaN gaps, a sparse stretch, a block split between columns); after points are appended at
  // the end and after they are replaced; fitted and zoomed in. It is a few points per column,
  // kept between replots that change neither the points nor the axes.
  // The value range PlotsPanel fits its axes to, read off the pyramid, is QCPGraph's (a pass
  // over every point), after appends too; with a NaN or an inf it is QCPGraph's own.
  void valueRangeOffThePyramidIsQCPGraphs() {
    CurvePlot plot;
    QVector<double> xs, ys;
    quint32 seed = 5;
    const auto add = [&](int count) {
      for (int i = 0; i < count; ++i) {
        seed = seed * 1664525u + 1013904223u;
        xs.append(xs.size());
        ys.append(-3 + 1e-5 * xs.size() + double(seed >> 8) / double(1u << 24));
      }
    };
    add(100'003);
    plot.setSeries("s", xs, ys);
    auto* graph = dynamic_cast<CurveGraph*>(plot.rawGraph("s"));
    QVERIFY(graph != nullptr);
    const auto same = [graph] {
      bool found = false;
      bool foundAll = false;
      const QCPRange range = graph->getValueRange(found);
      const QCPRange all = graph->QCPGraph::getValueRange(foundAll);
      return found && foundAll && range == all;
    };
    QVERIFY(same());
    for (const int n : {1, 7, 64, 4095, 30'000}) {
      const qsizetype before = xs.size();
      add(n);
      ys.last() = 50 + n;  // a new highest point, at the end
      plot.appendPoints("s", xs.mid(before), ys.mid(before));
      QVERIFY(same());
    }
    for (const double odd : {kNaN, std::numeric_limits<double>::infinity()}) {
      ys[500] = odd;
      plot.setSeries("s", xs, ys);
      QVERIFY(same());
    }
  }

  void blockSummaryGivesTheSameSpansAsEveryPoint() {
    CurvePlot plot;
    plot.resize(kWidth, kHeight);
    plot.show();
    QVERIFY(QTest::qWaitForWindowExposed(&plot));
    QVector<double> xs, ys;
    quint32 seed = 3;
    const auto add = [&](int count) {
      for (int i = 0; i < count; ++i) {
        seed = seed * 1664525u + 1013904223u;
        const double step = xs.isEmpty() ? 0.0 : xs.last() + (xs.size() % 20000 == 0 ? 3000 : 1);
        xs.append(step);
        const bool gap = xs.size() % 7919 == 0 || (xs.size() > 30000 && xs.size() < 30100);
        ys.append(gap ? kNaN : 50 + 20 * (double(seed >> 8) / double(1u << 24) - 0.5));
      }
    };
    add(100003);
    plot.setSeries("s", xs, ys);
    auto* graph = dynamic_cast<CurveGraph*>(plot.rawGraph("s"));
    QVERIFY(graph != nullptr);
    QCustomPlot* custom = plot.customPlot();
    const auto allSpans = [&] {
      QVector<QPointF> pixels;
      const auto& data = *graph->data();
      const auto from = data.findBegin(custom->xAxis->range().lower);
      const auto to = data.findEnd(custom->xAxis->range().upper);
      for (auto it = from; it != to; ++it)
        pixels.append(
            QPointF(custom->xAxis->coordToPixel(it->key), custom->yAxis->coordToPixel(it->value)));
      return CurvePlot::columnSpans(pixels, 1.0);
    };
    const auto check = [&](const char* what) {
      custom->replot();
      const QVector<QPointF> reduced = graph->reducedLines();
      QVERIFY2(reduced.size() < 4 * kWidth + 200, qPrintable(QString::number(reduced.size())));
      QVERIFY2(CurvePlot::columnSpans(reduced, 1.0) == allSpans(), what);
    };
    plot.rescale();
    check("fitted");
    add(5000);
    plot.appendPoints("s", xs.mid(100003), ys.mid(100003));
    plot.rescale();
    check("after an append");
    custom->xAxis->setRange(29000.5, 41000.25);
    check("zoomed");
    for (double& y : ys) y = std::isnan(y) ? y : 100 - y;
    plot.setSeries("s", xs, ys);
    check("replaced");
    custom->yAxis->setRange(35, 70);
    check("value axis moved");
    // Nothing changed: the reduced points are reused (the same shared data), not read again;
    // reduced again on request, they are the same.
    custom->replot();
    QCOMPARE(graph->reducedLines().constData(), graph->reducedLines().constData());
    const QVector<QPointF> kept = graph->reducedLines();
    graph->setReuseLines(false);
    QVERIFY(graph->reducedLines().constData() != kept.constData());
    QCOMPARE(CurvePlot::columnSpans(graph->reducedLines(), 1.0),
             CurvePlot::columnSpans(kept, 1.0));  // NaN breaks compare unequal as points
    graph->setReuseLines(true);
  }

  void savePngToAMissingFolderNamesIt() {
    CurvePlot plot;
    plot.setSeries("loss", {0, 1}, {1, 0});
    const QString path = artifactDir() + "/no-such-folder/plot.png";
    auto saved = plot.savePng(path, 200, 100);
    QVERIFY(!saved);
    QVERIFY2(saved.message().find(path.toStdString()) == 0, saved.message().c_str());
    auto empty = plot.savePng(artifactDir() + "/empty.png", 0, 100);
    QVERIFY(!empty);
  }
};

QTEST_MAIN(TestCurvePlot)
#include "tst_curveplot.moc"
