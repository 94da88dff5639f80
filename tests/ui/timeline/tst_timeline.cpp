// The Timeline in the dashboard (ui/timeline/), under Xvfb, on a real run log that holds a real
// 2-rank CPU run's events: tests/ui/timeline/straggler-run/ holds the events-rank-N.jsonl of a
// run of tests/trainer/shard/straggler.py (rank 1 slowed from outside by SIGSTOP/SIGCONT), stored
// here through the monitor's parser and RunStore::ingest, as a followed run's are. The main window
// shows it: one lane per rank, bars whose phases add up to each step's wall time, a zoom down to
// one step that shows that step's phases, the straggler verdict above, and new steps as they are
// committed.
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QToolButton>
#include <QWheelEvent>

#include <map>
#include <memory>

#include "backend/monitor/eventstream.h"
#include "backend/store/runstore.h"
#include "tests/support/paths.h"
#include "ui/data/runlog.h"
#include "ui/mainwindow.h"
#include "ui/timeline/timelinepanel.h"
#include "ui/timeline/timelineview.h"
#include "ui/timeline/unitview.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {
constexpr int kWaitMs = 20000;  // generous: the reader polls every 50 ms here

QByteArray recorded(int rank) {
  QFile file(testing::sourceDir() +
             QStringLiteral("/tests/ui/timeline/straggler-run/events-rank-%1.jsonl").arg(rank));
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(file.fileName()));
  return file.readAll();
}

// The recorded `phases` lines as JSON objects, by rank and step (read here without the product's
// parser, so the expectations do not come from the code under test).
std::map<int, std::map<qint64, QJsonObject>> recordedPhases() {
  std::map<int, std::map<qint64, QJsonObject>> out;
  for (int rank : {0, 1}) {
    for (const QByteArray& line : recorded(rank).split('\n')) {
      const QJsonObject e = QJsonDocument::fromJson(line).object();
      if (e.value("ev").toString() == "phases") out[rank][e.value("step").toInteger()] = e;
    }
  }
  return out;
}

void ingest(backend::RunStore& store, qint64 runId, int rank, const QByteArray& bytes,
            backend::EventStream& stream) {
  stream.rank = rank;
  backend::FileChunk chunk = backend::parseEventsChunk(runId, bytes, stream);
  chunk.rank = rank;
  const auto stored = store.ingest(chunk).get();
  if (!stored) qFatal("ingest: %s", stored.message().c_str());
}

void wheel(QWidget* target, QPointF at, int notches) {
  QWheelEvent event(at, target->mapToGlobal(at), QPoint(), QPoint(0, 120 * notches), Qt::NoButton,
                    Qt::NoModifier, Qt::NoScrollPhase, false);
  QApplication::sendEvent(target, &event);
}

}  // namespace

class TestTimeline : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  std::unique_ptr<backend::RunStore> m_store;
  qint64 m_runId = 0;
  backend::EventStream m_streams[2];
  std::map<int, std::map<qint64, QJsonObject>> m_phases;
  std::unique_ptr<MainWindow> m_window;

  TimelinePanel* panel() const { return m_window->timelinePanel(); }
  TimelineView* view() const { return panel()->view(); }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    m_phases = recordedPhases();
    QCOMPARE(m_phases.size(), std::size_t(2));
    auto store = backend::RunStore::open(m_dir.filePath("runs.db"));
    QVERIFY2(store, store ? "" : store.message().c_str());
    m_store = std::move(*store);
    auto run = m_store->createRun({std::nullopt, "straggler", m_dir.path(), {}, 2}).get();
    QVERIFY2(run, run ? "" : run.message().c_str());
    m_runId = *run;
    for (int rank : {0, 1}) ingest(*m_store, m_runId, rank, recorded(rank), m_streams[rank]);

    m_window = std::make_unique<MainWindow>(nullptr, 50);
    m_window->resize(1400, 900);
    m_window->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
    m_window->openRunLog(m_dir.filePath("runs.db"));
    // The newest run is selected on the first load; the Timeline follows the selection.
    QTRY_VERIFY_WITH_TIMEOUT(panel()->run() == m_runId && panel()->isLoaded(), kWaitMs);
    m_window->dock(QStringLiteral("timeline"))->raise();
    QTRY_VERIFY(view()->isVisible() && view()->width() > 400);
  }

  void showsOneLanePerRank() {
    QCOMPARE(view()->laneCount(), 2);
    QCOMPARE(view()->rankOfLane(0), 0);
    QCOMPARE(view()->rankOfLane(1), 1);
    QCOMPARE(view()->firstStep(), 1);
    QCOMPARE(view()->lastStep(), 10);
  }

  // Fitted, every step has a bar of its own in each lane, and its stacked phases (the rectangles
  // drawn, in pixels, and the seconds they stand for) add up to the step's wall time.
  void barsAddUpToTheWallTime() {
    view()->fit();
    const double pxPerSecond = [&] {
      double highest = 0;
      for (const auto& [rank, steps] : m_phases)
        for (const auto& [step, e] : steps) highest = std::max(highest, e.value("wall").toDouble());
      return view()->laneRect(0).height() / highest;
    }();
    for (int lane = 0; lane < 2; ++lane) {
      const auto& bars = view()->bars(lane);
      QCOMPARE(bars.size(), 10);
      const QRectF laneRect = view()->laneRect(lane);
      for (const auto& bar : bars) {
        QCOMPARE(bar.steps, 1);
        const double wall = m_phases.at(lane).at(bar.stepLo).value("wall").toDouble();
        double seconds = 0;
        double pixels = 0;
        double top = laneRect.bottom();
        for (int p = 0; p < TimelineView::kPhaseCount; ++p) {
          seconds += bar.seconds[p];
          pixels += bar.rects[p].height();
          if (!bar.rects[p].isNull()) top = std::min(top, bar.rects[p].top());
        }
        QVERIFY2(std::abs(seconds - wall) < 1e-6 * wall,
                 qPrintable(QStringLiteral("rank %1 step %2: phases %3 s, wall %4 s")
                                .arg(lane)
                                .arg(bar.stepLo)
                                .arg(seconds)
                                .arg(wall)));
        QVERIFY2(std::abs(pixels - wall * pxPerSecond) < 0.01,
                 qPrintable(QStringLiteral("%1 px for %2 px").arg(pixels).arg(wall * pxPerSecond)));
        QVERIFY(std::abs(laneRect.bottom() - top - pixels) < 0.01);  // stacked, no gaps
      }
    }
  }

  // The mouse wheel over step 4 of rank 1 zooms down to one step; that step's bar shows its
  // phases, and hovering it gives each in ms and % of the wall time. Dragging pans; Fit shows
  // every step again.
  void wheelZoomsToOneStepAndShowsItsPhases() {
    view()->fit();
    const auto& bars = view()->bars(1);
    const auto four =
        std::find_if(bars.begin(), bars.end(), [](const auto& b) { return b.stepLo == 4; });
    QVERIFY(four != bars.end());
    const QPointF at((four->x0 + four->x1) / 2, view()->laneRect(1).center().y());
    for (int i = 0; i < 20; ++i) wheel(view(), at, 1);
    QVERIFY2(view()->viewHi() - view()->viewLo() <= 1.0 + 1e-9,
             qPrintable(QStringLiteral("%1..%2").arg(view()->viewLo()).arg(view()->viewHi())));
    const QJsonObject e = m_phases.at(1).at(4);
    const auto& zoomed = view()->bars(1);
    const auto bar =
        std::find_if(zoomed.begin(), zoomed.end(), [](const auto& b) { return b.stepLo == 4; });
    QVERIFY(bar != zoomed.end());
    QCOMPARE(bar->steps, 1);
    QCOMPARE(bar->seconds[TimelineView::Forward], e.value("forward").toDouble());
    QCOMPARE(bar->seconds[TimelineView::Backward], e.value("backward").toDouble());
    QCOMPARE(bar->seconds[TimelineView::CommExposed], e.value("comm_exposed").toDouble());
    QVERIFY(bar->x1 - bar->x0 > view()->laneRect(1).width() * 0.5);  // one step fills the view
    const QString details = view()->detailsAt(at.toPoint());
    QVERIFY2(details.startsWith("step 4, rank 1"), qPrintable(details));
    const double wall = e.value("wall").toDouble();
    const double backward = e.value("backward").toDouble();
    const QString line = QStringLiteral("backward: %1 ms (%2%)")
                             .arg(backward * 1e3, 0, 'f', 1)
                             .arg(100 * backward / wall, 0, 'f', 1);
    QVERIFY2(details.contains(line), qPrintable(details + "\nmissing: " + line));

    // Drag half the view's width to the left: the view moves half a step on.
    const double lo = view()->viewLo();
    const QPoint from = at.toPoint();
    const QPoint to = from - QPoint(static_cast<int>(view()->laneRect(1).width() / 2), 0);
    QTest::mousePress(view(), Qt::LeftButton, Qt::NoModifier, from);
    QMouseEvent move(QEvent::MouseMove, QPointF(to), view()->mapToGlobal(QPointF(to)), Qt::NoButton,
                     Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(view(), &move);
    QTest::mouseRelease(view(), Qt::LeftButton, Qt::NoModifier, to);
    QVERIFY2(std::abs(view()->viewLo() - (lo + 0.5)) < 0.02,
             qPrintable(QStringLiteral("%1 -> %2").arg(lo).arg(view()->viewLo())));

    QTest::mouseClick(panel()->fitButton(), Qt::LeftButton);
    QCOMPARE(view()->viewLo(), 0.5);
    QCOMPARE(view()->viewHi(), 10.5);
  }

  // The verdict above the Timeline names the rank that was busiest (wall less its wait on
  // collectives) on most steps, counted here from the recorded lines.
  void verdictNamesTheSlowestRank() {
    std::map<int, int> slowestOn;
    for (const auto& [step, e0] : m_phases.at(0)) {
      const QJsonObject& e1 = m_phases.at(1).at(step);
      const auto busy = [](const QJsonObject& e) {
        return e.value("wall").toDouble() - e.value("comm_exposed").toDouble();
      };
      ++slowestOn[busy(e1) > busy(e0) ? 1 : 0];
    }
    const int slowest = slowestOn[1] > slowestOn[0] ? 1 : 0;
    QCOMPARE(slowest, 1);  // the recorded run slowed rank 1
    const QString text = panel()->verdict()->text();
    QVERIFY2(text.startsWith(QStringLiteral("rank %1 was the slowest on").arg(slowest)),
             qPrintable(text));
    QVERIFY2(panel()->verdict()->isVisible(), "the verdict is shown");
    // Above the steps (the view sits in a splitter with the per-unit view: panel coordinates).
    QVERIFY(panel()->verdict()->geometry().bottom() < view()->mapTo(panel(), QPoint(0, 0)).y());
  }

  // Steps committed while the window is open appear (the view, fitted, follows them); a
  // double-click on a step names it for a per-unit view.
  void followsTheRunAndActivatesSteps() {
    for (int rank : {0, 1}) {
      QJsonObject e = m_phases.at(rank).at(10);
      e["step"] = 11;
      e["seq"] = 100;
      ingest(*m_store, m_runId, rank, QJsonDocument(e).toJson(QJsonDocument::Compact) + '\n',
             m_streams[rank]);
    }
    QTRY_COMPARE_WITH_TIMEOUT(view()->lastStep(), 11, kWaitMs);
    QTRY_COMPARE(view()->bars(0).size(), 11);
    QCOMPARE(view()->viewHi(), 11.5);
    QSignalSpy activated(panel(), &TimelinePanel::stepActivated);
    const auto& bar = view()->bars(0).at(6);
    QTest::mouseDClick(view(), Qt::LeftButton, Qt::NoModifier,
                       QPointF((bar.x0 + bar.x1) / 2, view()->laneRect(0).bottom() - 2).toPoint());
    QCOMPARE(activated.size(), 1);
    QCOMPARE(activated.at(0).at(0).toLongLong(), m_runId);
    QCOMPARE(activated.at(0).at(1).toLongLong(), bar.stepLo);
    QCOMPARE(activated.at(0).at(2).toInt(), 0);
  }

  // A double-clicked step opens its per-unit streams under the steps when [trace] recorded it
  // (here the real 2-rank per-unit traces of tests/backend/monitor/data/unittrace, steps 2 and
  // 4, put into the run's directory), and says which steps were recorded and how to record
  // more when it was not.
  void aDoubleClickedStepShowsItsUnits() {
    // The read asked for by followsTheRunAndActivatesSteps' double-click lands first.
    QTRY_VERIFY_WITH_TIMEOUT(!panel()->unitLabel()->text().startsWith("Reading"), kWaitMs);
    auto dClick = [&](int barIndex) {
      const auto& bar = view()->bars(0).at(barIndex);
      QSignalSpy shown(panel(), &TimelinePanel::unitStepShown);
      QTest::mouseDClick(
          view(), Qt::LeftButton, Qt::NoModifier,
          QPointF((bar.x0 + bar.x1) / 2, view()->laneRect(0).bottom() - 2).toPoint());
      QVERIFY(shown.wait(kWaitMs));
    };
    dClick(6);  // step 7: no trace/ folder yet
    QVERIFY2(panel()->unitLabel()->text().contains("every_n_steps"),
             qPrintable(panel()->unitLabel()->text()));
    QVERIFY(!panel()->unitView()->isVisible());
    QVERIFY(QDir(m_dir.path()).mkpath("trace"));
    for (int rank : {0, 1}) {
      const QString to = m_dir.filePath(QStringLiteral("trace/rank-%1.jsonl").arg(rank));
      QFile::remove(to);
      QVERIFY(QFile::copy(
          testing::sourceDir() +
              QStringLiteral("/tests/backend/monitor/data/unittrace/rank-%1.jsonl").arg(rank),
          to));
    }
    dClick(6);
    QVERIFY2(panel()->unitLabel()->text().contains("Step 7 was not recorded in detail "
                                                   "(recorded: 2, 4)"),
             qPrintable(panel()->unitLabel()->text()));
    QVERIFY(!panel()->unitView()->isVisible());
    dClick(3);  // step 4
    QVERIFY2(panel()->unitLabel()->text().startsWith("Step 4 per FSDP unit"),
             qPrintable(panel()->unitLabel()->text()));
    QVERIFY(panel()->unitView()->isVisible());
    QCOMPARE(panel()->unitView()->step(), 4);
    QCOMPARE(panel()->unitView()->ranks(), (QVector<int>{0, 1}));
    QVERIFY(!panel()->unitView()->bars().isEmpty());
  }

  // A rank whose first steps are committed after another rank's: its lane appears with all of
  // them (the worker reads from the start until every rank of the run has a step).
  void aRankThatStartsLateGetsAllItsSteps() {
    auto run = m_store->createRun({std::nullopt, "late-rank", m_dir.path(), {}, 2}).get();
    QVERIFY2(run, run ? "" : run.message().c_str());
    backend::EventStream streams[2];
    const auto phasesOf = [&](int rank) {
      QByteArray out;
      for (const auto& [step, e] : m_phases.at(rank))
        out += QJsonDocument(e).toJson(QJsonDocument::Compact) + '\n';
      return out;
    };
    ingest(*m_store, *run, 0, phasesOf(0), streams[0]);
    RunLog runLog(50);
    TimelinePanel late(runLog);
    late.resize(1000, 400);
    late.show();
    runLog.open(m_dir.filePath("runs.db"));
    late.setRun(*run);
    QTRY_VERIFY_WITH_TIMEOUT(late.isLoaded() && late.view()->laneCount() == 1, kWaitMs);
    QCOMPARE(late.view()->lastStep(), 10);
    ingest(*m_store, *run, 1, phasesOf(1), streams[1]);
    QTRY_COMPARE_WITH_TIMEOUT(late.view()->laneCount(), 2, kWaitMs);
    QTRY_COMPARE_WITH_TIMEOUT(late.view()->bars(1).size(), 10, kWaitMs);
    QCOMPARE(late.view()->bars(1).front().stepLo, 1);
  }

  void cleanupTestCase() { m_window.reset(); }
};

QTEST_MAIN(TestTimeline)
#include "tst_timeline.moc"
