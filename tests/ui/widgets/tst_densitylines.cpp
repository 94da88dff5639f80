// DensityLines, the plottable the Compare overlay draws every trial with: it must paint where
// the lines go (and nowhere else), count a line once per pixel however many points it has there,
// keep groups in their own colour, and replot an unchanged view from its image; a pan shows the
// old image moved at once and the exact one once the view is still.
#include <qcustomplot.h>
#include <QTest>

#include <cmath>

#include "ui/widgets/densitylines.h"

using namespace shardscope::ui;

namespace {

constexpr int kWaitMs = 5000;

// A 400x300 plot, x in [0, 100], y in [0, 10], with one density of two groups.
struct Fixture {
  QCustomPlot plot;
  DensityLines* lines = nullptr;
  Fixture() {
    plot.resize(400, 300);
    plot.xAxis->setRange(0, 100);
    plot.yAxis->setRange(0, 10);
    lines = new DensityLines(plot.xAxis, plot.yAxis);
    lines->addGroup({QColor(0, 0, 255), 0.4});
    lines->addGroup({QColor(255, 0, 0), 0.4});
  }
  // The density's own image pixel under plot coordinates (x, y).
  QRgb at(double x, double y) const {
    const QRect rect = plot.axisRect()->rect();
    const int px = int(plot.xAxis->coordToPixel(x)) - rect.left();
    const int py = int(plot.yAxis->coordToPixel(y)) - rect.top();
    return lines->image().pixel(px, py);
  }
};

QVector<double> constant(int n, double v) { return QVector<double>(n, v); }

QVector<double> ramp(int n, double from, double to) {
  QVector<double> out;
  for (int i = 0; i < n; ++i) out.append(from + (to - from) * i / (n - 1));
  return out;
}

}  // namespace

class TestDensityLines : public QObject {
  Q_OBJECT

 private slots:
  void paintsWhereTheLinesGoInTheirGroupsColour() {
    Fixture f;
    f.lines->addLine(0, ramp(500, 0, 100), constant(500, 2.0));  // blue at y = 2
    f.lines->addLine(1, ramp(500, 0, 100), constant(500, 7.0));  // red at y = 7
    f.plot.replot();
    QCOMPARE(f.lines->rasterCount(), 1);
    QCOMPARE(f.lines->image().size(), f.plot.axisRect()->rect().size());
    const QRgb blue = f.at(50, 2.0);
    const QRgb red = f.at(50, 7.0);
    QVERIFY(qAlpha(blue) > 0 && qBlue(blue) > 0 && qRed(blue) == 0);
    QVERIFY(qAlpha(red) > 0 && qRed(red) > 0 && qBlue(red) == 0);
    QCOMPARE(qAlpha(f.at(50, 4.5)), 0);  // between the lines: nothing
    QCOMPARE(f.lines->linesIn(0), 1);
    QCOMPARE(f.lines->pointCount(), qsizetype(1000));
  }

  // 10 points per pixel column still count once: a dense line weighs what a sparse one does, and
  // a pixel two lines cross is more opaque than one line's.
  void aLineCountsOncePerPixel() {
    Fixture f;
    f.lines->addLine(0, ramp(5000, 0, 100), constant(5000, 2.0));  // ~15 points per column
    f.lines->addLine(0, ramp(3, 0, 100), constant(3, 8.0));        // 2 segments
    f.lines->addLine(0, ramp(3, 0, 100), constant(3, 8.0));        // the same again
    f.plot.replot();
    const int dense = qAlpha(f.at(50, 2.0));
    const int doubled = qAlpha(f.at(50, 8.0));
    QVERIFY2(dense < doubled, qPrintable(QString("%1 vs %2").arg(dense).arg(doubled)));
    QCOMPARE(dense, int(std::lround(0.4 * 255)));  // one line: the group's minimum opacity
    QCOMPARE(doubled, 255);                        // the busiest pixel: opaque
  }

  // Over a backdrop the image is opaque (blitted without blending): the backdrop where no line
  // is, the group's colour blended onto it where one is.
  void aBackdropMakesTheImageOpaque() {
    Fixture f;
    f.lines->setBackdrop(Qt::white);
    f.lines->addLine(0, ramp(500, 0, 100), constant(500, 2.0));
    f.plot.replot();
    QVERIFY(!f.lines->image().hasAlphaChannel());
    QCOMPARE(f.at(50, 6.0), qRgb(255, 255, 255));
    const QRgb line = f.at(50, 2.0);
    QCOMPARE(qBlue(line), 255);
    QCOMPARE(qRed(line), int(std::lround((1.0 - 0.4) * 255)));  // 40% blue over white
  }

  void aGapBreaksTheLine() {
    Fixture f;
    QVector<double> ys = ramp(101, 1, 9);
    ys[50] = qQNaN();
    f.lines->addLine(0, ramp(101, 0, 100), ys);
    f.plot.replot();
    QVERIFY(qAlpha(f.at(30, 1 + 8 * 0.3)) > 0);
    QCOMPARE(qAlpha(f.at(50, 5.0)), 0);  // the gap
  }

  void anUnchangedViewReplotsFromItsImage() {
    Fixture f;
    f.lines->addLine(0, ramp(100, 0, 100), ramp(100, 0, 10));
    f.plot.replot();
    f.plot.replot();
    f.plot.replot();
    QCOMPARE(f.lines->rasterCount(), 1);
    QVERIFY(f.lines->isExact());
    // New points: the next replot rasterises them at once.
    f.lines->setPoints(0, {100}, {10}, false);
    f.plot.replot();
    QCOMPARE(f.lines->rasterCount(), 2);
    QVERIFY(f.lines->isExact());
  }

  void aPanShowsTheOldImageThenTheExactOne() {
    Fixture f;
    f.lines->addLine(0, ramp(100, 0, 100), constant(100, 5.0));
    f.plot.replot();
    f.plot.xAxis->setRange(10, 110);
    f.plot.replot();
    QCOMPARE(f.lines->rasterCount(), 1);  // moved, not rasterised
    QVERIFY(!f.lines->isExact());
    QTRY_VERIFY_WITH_TIMEOUT(f.lines->isExact(), kWaitMs);
    QCOMPARE(f.lines->rasterCount(), 2);
    // The line ends at x = 100: in the new view nothing is drawn right of it.
    QVERIFY(qAlpha(f.at(50, 5.0)) > 0);
    QCOMPARE(qAlpha(f.at(105, 5.0)), 0);
  }

  void rangesComeFromTheFiniteData() {
    Fixture f;
    f.lines->addLine(0, {1, 2, qQNaN(), 40}, {3, 4, 5, -6});
    bool found = false;
    const QCPRange keys = f.lines->getKeyRange(found);
    QVERIFY(found);
    QCOMPARE(keys.lower, 1.0);
    QCOMPARE(keys.upper, 40.0);
    const QCPRange values = f.lines->getValueRange(found);
    QCOMPARE(values.lower, -6.0);
    QCOMPARE(values.upper, 4.0);  // (NaN, 5) is a gap
    f.lines->clearLines();
    f.lines->getKeyRange(found);
    QVERIFY(!found);
  }
};

QTEST_MAIN(TestDensityLines)
#include "tst_densitylines.moc"
