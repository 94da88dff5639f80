// The plots' smoothing (ui/widgets/smoothing.h): TensorBoard's debiased exponential moving
// average on known values, its handling of NaN and inf, flat series and weights out of range; and
// in CurvePlot, that a smoothed series keeps its points as given (irregular steps too) and draws
// their EMA by point, with the raw curve faint behind it; that a burst of weights over many
// points, smoothed in background passes, ends on the last weight's curves exactly; and that a live
// run's appends, reduced on from each curve's last pixel column, draw what a fresh graph would.
#include <qcustomplot.h>
#include <QSignalSpy>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "ui/widgets/curvegraph.h"
#include "ui/widgets/curveplot.h"
#include "ui/widgets/smoothing.h"

using namespace shardscope::ui;

namespace {

std::vector<double> smoothed(std::vector<double> values, double weight) {
  std::vector<double> out(values.size());
  smoothEma(values.data(), out.data(), values.size(), weight);
  return out;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

class TestSmoothing : public QObject {
  Q_OBJECT

 private slots:
  // Worked by hand: last = 0.5, 1.25, 2.125; debias 1 - 0.5^k = 0.5, 0.75, 0.875.
  void knownValues() {
    const auto out = smoothed({1, 2, 3}, 0.5);
    QCOMPARE(out.size(), std::size_t(3));
    QCOMPARE(out[0], 1.0);
    QVERIFY(std::abs(out[1] - 1.25 / 0.75) < 1e-12);
    QVERIFY(std::abs(out[2] - 2.125 / 0.875) < 1e-12);
  }

  // The bias correction: the first point is itself at any weight (an undebiased EMA starting
  // from 0 would draw 0.001 * 10 = 0.01 at weight 0.999).
  void firstPointIsNotDraggedToZero() {
    for (const double w : {0.1, 0.6, 0.9, 0.999}) {
      const auto out = smoothed({10, 20}, w);
      QCOMPARE(out[0], 10.0);
      QVERIFY2(out[1] > 10.0 && out[1] < 20.0, qPrintable(QString::number(out[1])));
    }
  }

  // A NaN (a diverged loss, stored as null) or an inf stays where it is, as itself, and the
  // average goes on over the finite values as if it were absent.
  void nonFiniteValuesPassThrough() {
    for (const double bad : {kNaN, kInf, -kInf}) {
      const auto out = smoothed({1, bad, 3}, 0.5);
      QCOMPARE(out[0], 1.0);
      if (std::isnan(bad)) {
        QVERIFY(std::isnan(out[1]));
      } else {
        QCOMPARE(out[1], bad);
      }
      // As {1, 3}: last = 0.5, then 0.25 + 1.5 = 1.75; debias 0.75.
      QVERIFY(std::abs(out[2] - 1.75 / 0.75) < 1e-12);
    }
    const auto leading = smoothed({kNaN, 4, 4.5}, 0.5);
    QVERIFY(std::isnan(leading[0]));
    QCOMPARE(leading[1], 4.0);
  }

  // Weight 0 is no smoothing; a flat series is written through as it is; weights out of range
  // are clamped (1 would freeze the curve at its first value), NaN is none.
  void edgesOfTheWeight() {
    const std::vector<double> values{3, 1, 4, 1, 5};
    QCOMPARE(smoothed(values, 0), values);
    QCOMPARE(smoothed(values, -2), values);
    QCOMPARE(smoothed(values, kNaN), values);
    QCOMPARE(smoothed(std::vector<double>(5, 0.1), 0.9), std::vector<double>(5, 0.1));
    QCOMPARE(smoothed(values, 1.0), smoothed(values, kMaxSmoothing));
    QVERIFY(smoothed(values, 1.0)[4] != values[0]);
    QVERIFY(smoothed({}, 0.5).empty());
  }

  // In place (out == values), as CurvePlot calls it.
  void inPlace() {
    std::vector<double> values{1, 2, 3};
    smoothEma(values.data(), values.data(), values.size(), 0.5);
    QCOMPARE(values, smoothed({1, 2, 3}, 0.5));
  }

  // A million noisy points at the highest weight stay finite and follow the trend.
  void millionPointsStayFinite() {
    std::vector<double> values(1'000'000);
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = 2.0 + 1.0 / (1.0 + 1e-4 * double(i)) + ((i % 2) != 0U ? 0.5 : -0.5);
    const auto out = smoothed(values, kMaxSmoothing);
    for (const double v : out) QVERIFY(std::isfinite(v));
    QVERIFY(std::abs(out.back() - (2.0 + 1.0 / 101.0)) < 0.01);
  }

  // CurvePlot: the series keeps its points (steps 1, 2, 10, 500: irregular); a second graph
  // of the same keys draws the EMA by point (TensorBoard's rule: spacing is ignored), and the raw
  // graph turns faint. Off again: one graph, the original pen.
  void curvePlotSmoothsWithoutTouchingThePoints() {
    CurvePlot plot;
    const QVector<double> xs{1, 2, 10, 500};
    const QVector<double> ys{4, 2, 6, kNaN};
    plot.setSeries("run", xs, ys);
    plot.setSmoothing(0.5);
    plot.replot();
    QCOMPARE(plot.customPlot()->graphCount(), 2);
    const QCPGraph* raw = plot.rawGraph("run");
    const QCPGraph* drawn = plot.drawnGraph("run");
    QVERIFY(drawn != raw);
    const auto expected = smoothed({4, 2, 6, kNaN}, 0.5);
    QCOMPARE(drawn->dataCount(), 4);
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(drawn->data()->at(i)->key, xs[i]);
      QCOMPARE(drawn->data()->at(i)->value, expected[std::size_t(i)]);
      QCOMPARE(raw->data()->at(i)->value, ys[i]);
    }
    QVERIFY(std::isnan(drawn->data()->at(3)->value));
    QVERIFY(raw->pen().color().alpha() < 255);
    QCOMPARE(drawn->pen().color(), CurvePlot::seriesColor(0));
    QCOMPARE(plot.customPlot()->legend->itemCount(), 1);
    // New points: the smoothed graph follows at the next replot.
    plot.appendPoints("run", {600}, {8});
    plot.replot();
    QCOMPARE(plot.drawnGraph("run")->dataCount(), 5);
    plot.setSmoothing(0);
    QCOMPARE(plot.customPlot()->graphCount(), 1);
    QCOMPARE(plot.drawnGraph("run"), plot.rawGraph("run"));
    QCOMPARE(plot.rawGraph("run")->pen().color(), CurvePlot::seriesColor(0));
    QCOMPARE(plot.customPlot()->legend->itemCount(), 1);
  }

  // A series smoothed batch by batch (a live run's new steps) equals the whole series smoothed
  // at once, bit for bit: NaN and inf inside, a flat start that later moves (its points were
  // written through and must now be smoothed: the append says so and the caller starts again),
  // batches of one point and of none.
  void appendedBatchesEqualTheWholeSeries() {
    const std::vector<double> series{3, 3, 3, 5, kNaN, 4, kInf, 2.5, 2, 2, 7, -1, 0.25, 9};
    for (const double weight : {0.0, 0.3, 0.6, 0.99, kMaxSmoothing}) {
      const auto expected = smoothed(series, weight);
      for (const std::size_t batch : {std::size_t(1), std::size_t(2), std::size_t(5)}) {
        EmaState state(weight);
        std::vector<double> out(series.size());
        std::size_t done = 0;
        while (done < series.size()) {
          const std::size_t n = std::min(batch, series.size() - done);
          QVERIFY(smoothEmaAppend(state, series.data() + done, out.data() + done, 0));
          if (!smoothEmaAppend(state, series.data() + done, out.data() + done, n)) {
            QVERIFY(weight > 0);
            QVERIFY(state.constant);  // only a flat series refuses, and only once
            state = EmaState(weight);
            QVERIFY(smoothEmaAppend(state, series.data(), out.data(), done + n));
          }
          done += n;
        }
        QCOMPARE(state.count, series.size());
        for (std::size_t i = 0; i < series.size(); ++i) {
          QVERIFY2(std::memcmp(&out[i], &expected[i], sizeof(double)) == 0,
                   qPrintable(QString("weight %1, batch %2, point %3: %4 != %5")
                                  .arg(weight)
                                  .arg(batch)
                                  .arg(i)
                                  .arg(out[i])
                                  .arg(expected[i])));
        }
      }
    }
  }

  // CurvePlot smooths appended points on from where the EMA stood: after each append and
  // replot, the drawn values equal smoothEma over all the points exactly; points inserted
  // before the end, and a flat start that moves, are handled too; moving the slider recomputes
  // every value with the new weight (the keys stay).
  void curvePlotSmoothsAppendsIncrementallyAndRecomputesOnANewWeight() {
    CurvePlot plot;
    plot.setSeries("run", {1, 2, 3}, {2, 2, 2});  // flat: written through
    plot.setSmoothing(0.8);
    plot.replot();
    const auto expectSmoothed = [&plot](double weight) {
      const QCPGraph* raw = plot.rawGraph("run");
      const QCPGraph* drawn = plot.drawnGraph("run");
      std::vector<double> values;
      for (auto it = raw->data()->constBegin(); it != raw->data()->constEnd(); ++it)
        values.push_back(it->value);
      const auto expected = smoothed(values, weight);
      if (drawn->dataCount() != int(values.size())) return false;
      for (int i = 0; i < drawn->dataCount(); ++i) {
        const double v = drawn->data()->at(i)->value;
        if (drawn->data()->at(i)->key != raw->data()->at(i)->key) return false;
        if (std::memcmp(&v, &expected[std::size_t(i)], sizeof(double)) != 0) return false;
      }
      return true;
    };
    QVERIFY(expectSmoothed(0.8));
    plot.appendPoints("run", {4, 5}, {2, 3});  // the flat start moves
    plot.replot();
    QVERIFY(expectSmoothed(0.8));
    quint32 seed = 99;
    for (int batch = 0; batch < 20; ++batch) {
      QVector<double> xs, ys;
      for (int i = 0; i < 37; ++i) {
        seed = seed * 1664525u + 1013904223u;
        xs.append(6 + batch * 37 + i);
        ys.append(i == 5 ? kNaN : double(seed >> 8) / double(1u << 24));
      }
      plot.appendPoints("run", xs, ys);
      if (batch % 3 == 0) plot.replot();  // some batches arrive between two replots
    }
    plot.replot();
    QVERIFY(expectSmoothed(0.8));
    plot.appendPoints("run", {2.5}, {10});  // before the end: everything again
    plot.replot();
    QVERIFY(expectSmoothed(0.8));
    plot.setSmoothing(0.3);
    plot.replot();
    QVERIFY(expectSmoothed(0.3));
    plot.appendPoints("run", {1000}, {4});
    plot.replot();
    QVERIFY(expectSmoothed(0.3));
  }

  // The slider dragged over many points (CurvePlot::kBackgroundPoints and more): a burst of
  // weights, each applied and replotted as PlotsPanel does, smooths in background passes; the
  // curves drawn once they settle are the last weight's, bit for bit, with the points a live
  // run appended meanwhile and a series whose points were replaced meanwhile; a curve newly
  // smoothed shows its points as they are until its pass arrives; finishSmoothing() (before a
  // picture is saved) gives the chosen weight's curves at once. Off, the same weight is
  // smoothed before the replot returns.
  void curvePlotSmoothsABurstOfWeightsInTheBackground() {
    CurvePlot plot;
    plot.resize(800, 500);
    plot.show();
    quint32 seed = 7;
    const auto series = [&seed](int n, int from) {
      QVector<double> xs(n), ys(n);
      for (int i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        xs[i] = from + i;
        ys[i] = i == 1000 ? kNaN : 1.0 / (1.0 + 1e-4 * i) + double(seed >> 8) / double(1u << 24);
      }
      return std::pair{xs, ys};
    };
    const auto [xa, ya] = series(150'000, 0);
    const auto [xb, yb] = series(40'000, 0);  // below the threshold alone; together, above
    plot.setSeries("a", xa, ya);
    plot.setSeries("b", xb, yb);
    // Drawn values equal smoothEma(weight) of the raw points (weight < 0: the raw values).
    const auto drawnIs = [&plot](const QString& name, double weight) {
      const QCPGraph* raw = plot.rawGraph(name);
      const QCPGraph* drawn = plot.drawnGraph(name);
      if (raw == nullptr || drawn == nullptr || drawn == raw) return false;
      std::vector<double> values;
      for (auto it = raw->data()->constBegin(); it != raw->data()->constEnd(); ++it)
        values.push_back(it->value);
      const auto expected = weight < 0 ? values : smoothed(values, weight);
      if (drawn->dataCount() != int(values.size())) return false;
      for (int i = 0; i < drawn->dataCount(); ++i) {
        const double v = drawn->data()->at(i)->value;
        if (drawn->data()->at(i)->key != raw->data()->at(i)->key) return false;
        if (std::memcmp(&v, &expected[std::size_t(i)], sizeof(double)) != 0) return false;
      }
      return true;
    };
    const auto settle = [&plot] {
      QTRY_VERIFY_WITH_TIMEOUT(!plot.isSmoothingPending(), 60000);
      plot.replot();  // points appended while a pass ran are smoothed on here
    };
    QSignalSpy settled(&plot, &CurvePlot::smoothingSettled);
    plot.setSmoothing(0.5);
    plot.replot();
    QVERIFY(plot.isSmoothingPending());
    QVERIFY(drawnIs("a", -1));  // newly smoothed: its points as they are, until the pass
    settle();
    QVERIFY(!settled.isEmpty());
    QVERIFY(drawnIs("a", 0.5));
    QVERIFY(drawnIs("b", 0.5));

    // A drag: twenty weights with no event handled between them, a live run's points appended
    // on the way; the curves keep the last settled weight's values meanwhile.
    for (int tick = 1; tick <= 20; ++tick) {
      plot.setSmoothing(0.5 + 0.02 * tick);
      plot.replot();
      if (tick == 10) {
        const auto [xs, ys] = series(500, 150'000);
        plot.appendPoints("a", xs, ys);
      }
    }
    QVERIFY(plot.isSmoothingPending());
    settle();
    QVERIFY(drawnIs("a", 0.9));
    QVERIFY(drawnIs("b", 0.9));
    QCOMPARE(plot.pointCount("a"), 150'500);
    // The block summary the pass made on its thread is the one the graph makes itself.
    auto* drawn = dynamic_cast<CurveGraph*>(plot.drawnGraph("b"));
    QVERIFY(drawn != nullptr);
    plot.replot();
    const QVector<QRectF> passSpans = CurvePlot::columnSpans(drawn->reducedLines(), 1.0);
    drawn->pointsChanged(0);
    QCOMPARE(CurvePlot::columnSpans(drawn->reducedLines(), 1.0), passSpans);

    // Points replaced while a pass runs: the pass's curve for the old points is dropped.
    plot.setSmoothing(0.7);
    plot.replot();
    const auto [xc, yc] = series(120'000, 10);
    plot.setSeries("a", xc, yc);
    plot.replot();
    settle();
    QVERIFY(drawnIs("a", 0.7));
    QVERIFY(drawnIs("b", 0.7));

    // Saving a picture first brings the curves to the weight chosen, waiting for the pass.
    plot.setSmoothing(0.4);
    plot.replot();
    QVERIFY(plot.isSmoothingPending());
    plot.finishSmoothing();
    QVERIFY(!plot.isSmoothingPending());
    QVERIFY(drawnIs("a", 0.4));
    QVERIFY(drawnIs("b", 0.4));
    plot.setSmoothing(0.45);  // not replotted yet: smoothed there and then
    plot.finishSmoothing();
    QVERIFY(drawnIs("a", 0.45));
    QVERIFY(drawnIs("b", 0.45));

    // Off: the EMA on the GUI thread, done when the replot returns.
    plot.setBackgroundSmoothing(false);
    plot.setSmoothing(0.2);
    plot.replot();
    QVERIFY(!plot.isSmoothingPending());
    QVERIFY(drawnIs("a", 0.2));
    QVERIFY(drawnIs("b", 0.2));
  }
  // A live run's points appended to smoothed curves: each curve's reduced points, gone on from
  // its last pixel column while the axes stand, equal those of a fresh graph over the same
  // points and axes (every pixel column, point for point, NaN breaks included); an append that
  // moves the auto-ranged x axis, a zoomed view and points past the view's end too.
  void appendedPointsReduceAsAFreshGraphWould() {
    CurvePlot plot;
    plot.resize(800, 500);
    plot.show();
    QVERIFY(QTest::qWaitForWindowExposed(&plot));
    plot.setBackgroundSmoothing(false);
    QCustomPlot* cp = plot.customPlot();
    quint32 seed = 11;
    int next = 0;
    int lastBatch = 0;  // points in the last append
    // n points from step `from` on, noisy, a NaN every 4999th, a spike every 997th.
    const auto batch = [&seed](int n, int from) {
      QVector<double> xs(n), ys(n);
      for (int i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        const int step = from + i;
        xs[i] = step;
        ys[i] = step % 4999 == 4998
                    ? kNaN
                    : 2.0 / (1.0 + 1e-4 * step) + double(seed >> 8) / double(1u << 24) +
                          (step % 997 == 0 ? 3.0 : 0.0);
      }
      return std::pair{xs, ys};
    };
    const auto append = [&](int n) {
      for (const char* name : {"a", "b"}) {  // two series, the same steps, other noise
        const auto [xs, ys] = batch(n, next);
        plot.appendPoints(name, xs, ys);
      }
      next += n;
      lastBatch = n;
    };
    for (const char* name : {"a", "b"}) {
      const auto [xs, ys] = batch(60'000, 0);
      plot.setSeries(name, xs, ys);
    }
    next = 60'000;
    plot.setSmoothing(0.6);
    plot.setRanges(0, 70'000, -1, 8);
    // Equal as points, NaN to NaN; a message naming the first difference otherwise.
    const auto same = [](const QVector<QPointF>& got, const QVector<QPointF>& want) -> QString {
      const auto eq = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
      for (qsizetype i = 0; i < std::min(got.size(), want.size()); ++i) {
        if (!eq(got[i].x(), want[i].x()) || !eq(got[i].y(), want[i].y()))
          return QStringLiteral("point %1 of %2: (%3, %4), a fresh graph (%5, %6)")
              .arg(i)
              .arg(want.size())
              .arg(got[i].x())
              .arg(got[i].y())
              .arg(want[i].x())
              .arg(want[i].y());
      }
      if (got.size() != want.size())
        return QStringLiteral("%1 points, a fresh graph %2").arg(got.size()).arg(want.size());
      return {};
    };
    // Replots, then checks every curve (raw and smoothed) against a fresh graph; `goneOn`: the
    // reduction went on from the last column before the append (a few hundred points before the
    // new ones at most), not from the axes' lower end.
    const auto check = [&](const char* what, bool goneOn) {
      plot.replot();
      for (const QString& name : {QStringLiteral("a"), QStringLiteral("b")}) {
        for (QCPGraph* g : {plot.rawGraph(name), plot.drawnGraph(name)}) {
          auto* graph = dynamic_cast<CurveGraph*>(g);
          QVERIFY(graph != nullptr);
          const QVector<QPointF> got = graph->reducedLines();  // what the replot drew
          QVERIFY2(got.size() > 800, what);                    // dense: reduced per column
          const int start = graph->lastReductionStart();
          QVERIFY2(goneOn == (start > graph->dataCount() - lastBatch - 1000),
                   qPrintable(QStringLiteral("%1: %2 started at point %3 of %4")
                                  .arg(what, name)
                                  .arg(start)
                                  .arg(graph->dataCount())));
          auto* fresh = new CurveGraph(cp->xAxis, cp->yAxis);
          fresh->setData(graph->data());  // the same container
          const QString diff = same(got, fresh->reducedLines());
          cp->removeGraph(fresh);
          QVERIFY2(diff.isEmpty(), qPrintable(QStringLiteral("%1, %2: %3").arg(what, name, diff)));
        }
      }
    };
    check("first", false);
    append(100);
    check("100 appended", true);
    for (int n : {1, 7, 64, 333, 2, 4998}) {  // across blocks, columns and a NaN
      append(n);
      check("a batch appended", true);
    }
    // The x axis auto-ranged to the last point (PlotsPanel::fitAxes): every column moves.
    append(100);
    cp->xAxis->setRange(0, next - 1);
    check("auto-ranged", false);
    append(100);  // past the view's end: the point just beyond it changes
    check("past the end", true);
    append(100);
    cp->xAxis->setRange(0, next - 1);
    check("auto-ranged again", false);
    // Zoomed into the middle, then appended past the view (findBegin from a later point).
    cp->xAxis->setRange(20'000.5, next + 500.25);
    check("zoomed", false);
    append(250);
    check("zoomed, appended", true);
    // The value axis moved: all again; then on as before.
    cp->yAxis->setRange(0.5, 3.5);
    check("value axis moved", false);
    append(40);
    check("appended after", true);
    // Before: every change from the start, equal too.
    plot.setIncrementalLines(false);
    append(100);
    plot.replot();
    auto* raw = dynamic_cast<CurveGraph*>(plot.rawGraph("a"));
    const QVector<QPointF> byBlocks = raw->reducedLines();
    plot.setIncrementalLines(true);
    QVERIFY(same(raw->reducedLines(), byBlocks).isEmpty());
  }
};

QTEST_MAIN(TestSmoothing)
#include "tst_smoothing.moc"
