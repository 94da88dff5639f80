// The Plots panel's x axes (ui/plots/plotaxes.h): a run's start, the time of a step between step
// events, the tokens-per-step estimate (an evaluation's pause does not inflate it), and the xs
// of a series on each axis.
#include <QTest>

#include <cmath>

#include "ui/plots/plotaxes.h"

using namespace shardscope::ui;

class TestPlotAxes : public QObject {
  Q_OBJECT

 private slots:
  void startIsTheEarlierOfTheRowAndThePoints() {
    RunClock clock;
    QVERIFY(std::isnan(clock.start()));
    clock.steps = {1, 2};
    clock.times = {100, 101};
    QCOMPARE(clock.start(), 100.0);
    clock.firstTime = 99;
    QCOMPARE(clock.start(), 99.0);
    clock.startedAt = 90;  // launched, then loading for 9 s
    QCOMPARE(clock.start(), 90.0);
    clock.startedAt = 5000;  // imported long after it ran
    QCOMPARE(clock.start(), 99.0);
  }

  void timeAtInterpolatesBetweenStepEvents() {
    RunClock clock;
    QVERIFY(std::isnan(clock.timeAt(3)));
    clock.steps = {10, 20, 40};
    clock.times = {100, 110, 150};
    QCOMPARE(clock.timeAt(15), 105.0);
    QCOMPARE(clock.timeAt(30), 130.0);
    QCOMPARE(clock.timeAt(0), 100.0);   // clamped before the first
    QCOMPARE(clock.timeAt(99), 150.0);  // and after the last
  }

  // Steps every 1 s at 1000 tokens/s, one 60 s evaluation between steps 3 and 4, steps logged
  // every 2 from step 6 (log_every): 1000 tokens per step, not more.
  void tokensPerStepIgnoresPauses() {
    RunClock clock;
    clock.steps = {1, 2, 3, 4, 6, 8, 10};
    clock.times = {0, 1, 2, 62, 64, 66, 68};
    clock.tps = {1000, 1000, 1000, 1000, 1000, 1000, 1000};
    QCOMPARE(clock.tokensPerStep(), 1000.0);
    RunClock one;
    one.steps = {1};
    one.times = {0};
    one.tps = {1000};
    QVERIFY(std::isnan(one.tokensPerStep()));
  }

  void xsOnEachAxis() {
    RunClock clock;
    clock.steps = {1, 2, 3};
    clock.times = {1000, 1002, 1004};
    clock.tps = {50, 50, 50};
    const QVector<double> steps{1, 3};
    const QVector<double> times{1000, 1004};
    QCOMPARE(mapX(XAxis::step, clock, steps, times), steps);
    QCOMPARE(mapX(XAxis::wallTime, clock, steps, times), times);
    QCOMPARE(mapX(XAxis::relativeTime, clock, steps, times), (QVector<double>{0, 4}));
    QCOMPARE(mapX(XAxis::tokens, clock, steps, times), (QVector<double>{100, 300}));
    // A series without its own times (the memory estimate) is placed by the clock.
    QCOMPARE(mapX(XAxis::wallTime, clock, {2}, {}), (QVector<double>{1002}));
    // No clock yet: NaN, which the panel leaves out until it can place the point.
    QVERIFY(std::isnan(mapX(XAxis::tokens, RunClock{}, {2}, {5})[0]));
    QCOMPARE(xText(XAxis::relativeTime, 3725), QString("1:02:05"));
    QCOMPARE(xText(XAxis::step, 20), QString("step 20"));
  }
};

QTEST_MAIN(TestPlotAxes)
#include "tst_plotaxes.moc"
