// UnitView (ui/timeline/unitview.h) on a real window: one step of the per-unit traces of a real
// 2-rank FULL_SHARD CPU run (tests/backend/monitor/data/unittrace, written by
// tests/trainer/shard/unit_trace.py): both ranks drawn, one bar per unit collective in its
// lane, the compute stretches in theirs, and hovering a bar names its unit.
#include <QTest>
#include <QToolTip>

#include <map>

#include "backend/monitor/unittrace.h"
#include "ui/timeline/unitview.h"

using namespace shardscope;
using namespace shardscope::backend;
using shardscope::ui::UnitView;

namespace {

UnitTrace realTrace() {
  const QString dir = qEnvironmentVariable("SHARDSCOPE_TEST_SOURCE_DIR") +
                      QStringLiteral("/tests/backend/monitor/data/unittrace/");
  UnitTrace trace;
  for (int rank = 0; rank < 2; ++rank) {
    auto r = readUnitTraceFile(dir + QStringLiteral("rank-%1.jsonl").arg(rank), rank, trace);
    if (!r) qFatal("%s", r.message().c_str());
  }
  return trace;
}

}  // namespace

class TestUnitView : public QObject {
  Q_OBJECT

 private slots:
  void drawsEachRanksStreams() {
    const auto trace = realTrace();
    const auto& step = trace.steps.at(2);
    UnitView view;
    view.resize(1000, 420);
    view.showStep(step);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QCOMPARE(view.step(), 2);
    QCOMPARE(view.ranks(), QVector<int>({0, 1}));
    // One bar per unit collective, in its lane; compute in the compute lane.
    std::map<std::tuple<int, QString, int, QString>, int> collectives;
    int compute = 0;
    for (const auto& bar : view.bars()) {
      QVERIFY2(!bar.rect.isEmpty(), qPrintable(bar.span.unit));  // the whole step is in view
      const QRectF lane = view.laneRect(view.ranks().indexOf(bar.rank), bar.lane);
      QVERIFY(lane.contains(bar.rect.center()));
      switch (bar.span.kind) {
        case UnitSpanKind::allGather:
          QCOMPARE(bar.lane, UnitView::GatherLane);
          break;
        case UnitSpanKind::reduceScatter:
          QCOMPARE(bar.lane, UnitView::ReduceLane);
          break;
        default:
          QCOMPARE(bar.lane, UnitView::ComputeLane);
          ++compute;
          continue;
      }
      ++collectives[{bar.rank, bar.span.unit, static_cast<int>(bar.span.kind), bar.span.phase}];
    }
    for (int rank : {0, 1}) {
      for (const auto& unit : step.units) {
        const int gathers = unit == "root" ? 1 : 2;  // layers gather again for backward
        const int fwd = collectives[{rank, unit, int(UnitSpanKind::allGather), "forward"}];
        const int bwd = collectives[{rank, unit, int(UnitSpanKind::allGather), "backward"}];
        QVERIFY2(fwd == 1 && fwd + bwd == gathers, qPrintable(unit));
        QCOMPARE((collectives[{rank, unit, int(UnitSpanKind::reduceScatter), "backward"}]), 1);
      }
    }
    QVERIFY(compute >= 2 * 2 * step.units.size());  // both ranks, forward and backward
    // A bar is painted where it is laid out.
    const QImage image = view.grab().toImage();
    const auto& first = view.bars().front();
    const QRgb lane = image.pixel(view.laneRect(0, first.lane).topLeft().toPoint() + QPoint(1, 1));
    QVERIFY(image.pixel(first.rect.center().toPoint()) != lane);
  }

  void hoverNamesTheUnit() {
    const auto trace = realTrace();
    UnitView view;
    view.resize(1000, 420);
    view.showStep(trace.steps.at(4));
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    // Rank 1's all-gather of layers.1 in forward.
    const UnitView::Bar* target = nullptr;
    for (const auto& bar : view.bars())
      if (bar.rank == 1 && bar.span.kind == UnitSpanKind::allGather &&
          bar.span.unit == "layers.1" && bar.span.phase == "forward")
        target = &bar;
    QVERIFY(target != nullptr);
    const QPoint at = target->rect.center().toPoint();
    const QString details = view.detailsAt(at);
    QVERIFY2(details.startsWith("layers.1: all_gather (forward)\nrank 1, step 4"),
             qPrintable(details));
    QVERIFY2(details.contains("KiB, ") && details.contains("/s") && details.contains("waited"),
             qPrintable(details));
    QTest::mouseMove(&view, at);
    QTRY_VERIFY2(QToolTip::isVisible() && QToolTip::text() == details,
                 qPrintable(QToolTip::text()));
    // Off every bar: nothing to show.
    QVERIFY(view.detailsAt(QPoint(2, 2)).isEmpty());
  }

  void zoomKeepsBarsInTheirPlace() {
    const auto trace = realTrace();
    UnitView view;
    view.resize(800, 300);
    view.showStep(trace.steps.at(2));
    const double end = view.viewHi();
    view.setTimeRange(0, end / 4);
    int shown = 0;
    for (const auto& bar : view.bars()) {
      if (bar.span.start >= end / 4 + 1e-9) {
        QVERIFY2(bar.rect.isEmpty(), qPrintable(bar.span.unit));  // right of the view
      } else {
        ++shown;
      }
    }
    QVERIFY(shown > 0 && shown < view.bars().size());
    view.fit();
    QCOMPARE(view.viewHi(), end);
  }
};

QTEST_MAIN(TestUnitView)
#include "tst_unitview.moc"
