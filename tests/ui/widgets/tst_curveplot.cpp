// Toolchain proof 3: QCustomPlot renders offscreen, and a curve lands where the axes say. The
// line y = x is rendered to a PNG (kept in build/tests/artifacts for a human to look at) and
// read back: the curve's colour must be on the line and absent far from it.
#include <qcustomplot.h>
#include <QDir>
#include <QImage>
#include <QTest>

#include <cmath>
#include <set>

#include "tests/support/paths.h"
#include "tests/support/verify_ok.h"
#include "ui/widgets/curveplot.h"

using namespace shardscope;
using namespace shardscope::ui;

using shardscope::testing::why;

namespace {

constexpr int kWidth = 800;
constexpr int kHeight = 500;
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
