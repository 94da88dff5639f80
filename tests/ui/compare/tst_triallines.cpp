// TrialLines, the one plottable that draws a sweep's trials. Its per-pixel-column reduction
// must paint what plain polylines through every point paint, batched lines must paint what
// lines drawn one by one paint, and 10,000 trials must stay one plottable.
#include <qcustomplot.h>
#include <QTest>

#include <cmath>

#include "ui/compare/compareplots.h"
#include "ui/compare/triallines.h"

using namespace shardscope;
using namespace shardscope::ui;
using compare::TrialLines;

namespace {

// A plot with fixed ranges, no antialiasing, 400x300 offscreen.
void setup(QCustomPlot& plot) {
  plot.resize(400, 300);
  plot.setNotAntialiasedElements(QCP::aeAll);
  plot.xAxis->setRange(0, 1000);
  plot.yAxis->setRange(-2, 2);
}

// A dense wiggly curve: about 5 points per pixel column.
void curve(int seed, QVector<double>& xs, QVector<double>& ys) {
  for (int i = 0; i < 2000; ++i) {
    xs.append(i * 0.5);
    ys.append(std::sin(i * 0.05 + seed) + 0.3 * std::sin(i * 1.7 * (seed + 1)));
  }
}

QImage render(QCustomPlot& plot) {
  plot.replot();
  return plot.toPixmap(400, 300).toImage().convertToFormat(QImage::Format_RGB32);
}

int differingPixels(const QImage& a, const QImage& b) {
  int n = 0;
  for (int y = 0; y < a.height(); ++y)
    for (int x = 0; x < a.width(); ++x) n += a.pixel(x, y) != b.pixel(x, y);
  return n;
}

}  // namespace

class TestTrialLines : public QObject {
  Q_OBJECT

 private slots:
  // The reduced line covers the pixels the full polyline covers (a few pixels of difference at
  // column edges are the price of the reduction; a wrong reduction differs by hundreds).
  void reductionPaintsLikeTheFullPolyline() {
    QCustomPlot full;
    setup(full);
    QCustomPlot reduced;
    setup(reduced);
    for (int seed = 0; seed < 3; ++seed) {
      QVector<double> xs, ys;
      curve(seed, xs, ys);
      QCPGraph* graph = full.addGraph();
      graph->setAdaptiveSampling(false);
      graph->setPen(QPen(Qt::blue, 0));
      graph->setData(xs, ys, true);
      auto* lines = reduced.findChild<TrialLines*>();
      if (lines == nullptr) lines = new TrialLines(reduced.xAxis, reduced.yAxis);
      lines->addLine({xs, ys, QPen(Qt::blue, 0), {}});
    }
    const QImage a = render(full);
    const QImage b = render(reduced);
    int inked = 0;
    for (int y = 0; y < a.height(); ++y)
      for (int x = 0; x < a.width(); ++x) inked += a.pixel(x, y) == QColor(Qt::blue).rgb();
    QVERIFY2(inked > 1000, qPrintable(QString::number(inked)));
    const int differ = differingPixels(a, b);
    QVERIFY2(differ < inked / 50, qPrintable(QString("%1 of %2").arg(differ).arg(inked)));
  }

  // Appending and resetting points changes what the line holds and the ranges it reports.
  void appendAndResetKeepPointsAndRanges() {
    QCustomPlot plot;
    auto* lines = new TrialLines(plot.xAxis, plot.yAxis);
    const int a = lines->addLine({{0, 1}, {5, 6}, QPen(Qt::red), {}});
    const int b = lines->addLine({{}, {}, QPen(Qt::red), {}});
    lines->setPoints(b, {2, 3}, {-1, qQNaN()}, false);
    lines->setPoints(a, {7}, {4}, false);
    QCOMPARE(lines->line(a).xs, QVector<double>({0, 1, 7}));
    QCOMPARE(lines->pointCount(), qsizetype(5));
    bool found = false;
    const QCPRange keys = lines->getKeyRange(found);
    QVERIFY(found);
    QCOMPARE(keys.lower, 0.0);
    QCOMPARE(keys.upper, 7.0);
    const QCPRange values = lines->getValueRange(found);
    QCOMPARE(values.lower, -1.0);  // the NaN is a gap, not a value
    QCOMPARE(values.upper, 6.0);
    lines->setPoints(b, {9}, {1}, true);
    QCOMPARE(lines->line(b).xs, QVector<double>({9}));
    QCOMPARE(lines->pointCount(), qsizetype(4));
  }

  // 10,000 trials in the intermediate values and the parallel coordinates: one plottable each.
  void tenThousandTrialsAreOnePlottable() {
    SweepData sweep;
    sweep.experimentId = 1;
    sweep.objectiveKey = QStringLiteral("loss");
    for (int t = 0; t < 10000; ++t) {
      SweepTrial trial;
      trial.runId = t + 1;
      trial.name = QStringLiteral("trial-%1").arg(t);
      trial.status = t % 5 == 0 ? spec::RunStatus::pruned : spec::RunStatus::complete;
      trial.params = QJsonObject{{"lr", 1e-4 * (1 + t % 97)}, {"rank", 4 << (t % 4)}};
      if (trial.status == spec::RunStatus::complete) trial.objective = 1.0 + (t % 97) / 97.0;
      trial.steps = {0, 1, 2};
      trial.values = {3.0, 2.0, 1.0 + t % 7};
      sweep.trials.append(trial);
    }
    QCustomPlot intermediate;
    intermediate.resize(400, 300);
    int dimmed = -1;
    int best = -1;
    TrialLines* lines = compare::drawIntermediate(&intermediate, sweep, true, &dimmed, &best);
    // One TrialLines, and two empty graphs that name the best and the pruned in the legend.
    QCOMPARE(intermediate.plottableCount(), 3);
    QCOMPARE(intermediate.graphCount(), 2);
    for (int g = 0; g < 2; ++g) QCOMPARE(intermediate.graph(g)->dataCount(), 0);
    QCOMPARE(lines->lineCount(), 10000 + 1);  // and the best trial once more, bold, on top
    QCOMPARE(best, 97);  // the first complete trial with objective 1.0 (t % 97 == 0)
    QCOMPARE(lines->line(10000).ys, sweep.trials[best].values);
    QCOMPARE(dimmed, 2000);
    QCOMPARE(lines->line(5).end.shape(), QCPScatterStyle::ssCross);  // pruned: its cut marked
    QCOMPARE(lines->line(6).end.shape(), QCPScatterStyle::ssNone);
    QCustomPlot parallel;
    parallel.resize(400, 300);
    QCOMPARE(compare::drawParallel(&parallel, sweep, true), 8000);
    QCOMPARE(parallel.plottableCount(), 1);
  }
};

QTEST_MAIN(TestTrialLines)
#include "tst_triallines.moc"
