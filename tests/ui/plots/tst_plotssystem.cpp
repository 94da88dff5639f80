// The Plots panel's per-rank system plots in the real window on a real X server
// (tests/ui/xvfb_run.sh), over a run log this test writes through RunStore: a 2-rank "gpu" run
// with `sys` GPU figures and `phases` on both ranks, and a 2-rank "cpu" run with `phases` and
// host figures only (what a CPU rank's sys event stores). The GPU utilisation, power and
// exposed-communication plots draw one curve per rank with the stored values (utilisation and
// the share as percentages); for the CPU run the GPU plots are replaced by words naming the run
// and why, never empty axes, while its exposed share is drawn.
#include <qcustomplot.h>

#include <QDir>
#include <QDockWidget>
#include <QLabel>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

#include "tests/support/paths.h"
#include "tests/ui/runlogfixture.h"
#include "ui/mainwindow.h"
#include "ui/plots/plotspanel.h"
#include "ui/runs/runspanel.h"
#include "ui/widgets/curveplot.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

constexpr int kWaitMs = 20000;
constexpr int kSteps = 12;

// Rank r's exposed communication at step s, of a 0.5 s step: 10% + 5% per rank + 1% per step.
double exposedAt(int rank, int step) { return 0.5 * (0.10 + 0.05 * rank + 0.01 * step); }

std::vector<backend::MetricRow> runRows(qint64 runId, bool gpu) {
  std::vector<backend::MetricRow> rows;
  for (int s = 1; s <= kSteps; ++s) {
    const double t = 1.7e9 + s;
    rows.push_back({runId, s, "loss", 2.0 / s, 0, t});
    for (int r = 0; r < 2; ++r) {
      rows.push_back({runId, s, "phase.wall", 0.5, r, t});
      rows.push_back({runId, s, "phase.comm_exposed", exposedAt(r, s), r, t});
      rows.push_back({runId, s, "sys.cpu", 1.5, r, t});
      if (gpu) {
        rows.push_back({runId, s, "sys.gpu_util", 0.50 + 0.02 * s + 0.1 * r, r, t});
        rows.push_back({runId, s, "sys.power_w", 300.0 + 10.0 * r + s, r, t});
      }
    }
  }
  return rows;
}

qint64 makeRun(backend::RunStore& store, const QString& name, bool gpu) {
  backend::NewRun run;
  run.name = name;
  run.runDir = "/tmp/none/" + name;
  run.worldSize = 2;
  const qint64 id = testing::waitOk(store.createRun(run));
  testing::waitOk(store.setRunStatus(id, spec::RunStatus::running));
  testing::waitOk(store.appendMetrics(runRows(id, gpu)));
  testing::waitOk(store.setRunStatus(id, spec::RunStatus::complete));
  return id;
}

// The (key, value) points of a graph.
QVector<QPointF> pointsOf(const QCPGraph* graph) {
  QVector<QPointF> points;
  for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it)
    points.append({it->key, it->value});
  return points;
}

}  // namespace

class TestPlotsSystem : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  std::unique_ptr<backend::RunStore> m_store;
  qint64 m_gpu = 0;
  qint64 m_cpu = 0;
  std::unique_ptr<MainWindow> m_window;

  PlotsPanel* plots() const { return m_window->plotsPanel(); }

  void select(const QList<qint64>& ids) {
    m_window->runsPanel()->selectRuns(ids);
    QTRY_VERIFY_WITH_TIMEOUT(plots()->isLoaded() && plots()->runs() == ids, kWaitMs);
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QSettings().remove("mainWindow");
    QVERIFY(m_dir.isValid());
    auto store = backend::RunStore::open(m_dir.filePath("runs.db"));
    QVERIFY2(store.ok(), store.ok() ? "" : store.message().c_str());
    m_store = std::move(*store);
    m_gpu = makeRun(*m_store, "gpu", true);
    m_cpu = makeRun(*m_store, "cpu", false);
    m_store->flush();
    m_window = std::make_unique<MainWindow>(nullptr, 50);
    m_window->resize(1600, 1000);
    m_window->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
    m_window->openRunLog(m_dir.filePath("runs.db"));
    QTRY_VERIFY_WITH_TIMEOUT(m_window->isLoaded() && m_window->runCount() == 2, kWaitMs);
    m_window->dock("plots")->raise();
  }

  // One curve per rank in each of the three plots, with the stored values: utilisation and the
  // share as percentages, power in watts, x the step.
  void gpuRunDrawsEveryRank() {
    select({m_gpu});
    for (const QString id : {"gpu_util", "power", "comm_exposed"})
      QVERIFY2(plots()->missingNote(id) == nullptr, qPrintable(id));
    CurvePlot* util = plots()->plot("gpu_util");
    CurvePlot* power = plots()->plot("power");
    CurvePlot* share = plots()->plot("comm_exposed");
    QVERIFY(util != nullptr && power != nullptr && share != nullptr);
    for (int r = 0; r < 2; ++r) {
      const QString name = QStringLiteral("gpu r%1").arg(r);
      QTRY_COMPARE_WITH_TIMEOUT(share->pointCount(name), kSteps, kWaitMs);
      QCOMPARE(util->pointCount(name), kSteps);
      QCOMPARE(power->pointCount(name), kSteps);
      const auto u = pointsOf(util->rawGraph(name));
      const auto p = pointsOf(power->rawGraph(name));
      const auto e = pointsOf(share->rawGraph(name));
      for (int i = 0; i < kSteps; ++i) {
        const int s = i + 1;
        QCOMPARE(u[i].x(), double(s));
        QVERIFY(qFuzzyCompare(u[i].y(), 100.0 * (0.50 + 0.02 * s + 0.1 * r)));
        QVERIFY(qFuzzyCompare(p[i].y(), 300.0 + 10.0 * r + s));
        QVERIFY2(qFuzzyCompare(e[i].y(), 100.0 * exposedAt(r, s) / 0.5),
                 qPrintable(QString("rank %1 step %2: %3").arg(r).arg(s).arg(e[i].y())));
      }
    }
    QCOMPARE(util->seriesCount(), 2);
    QVERIFY(util->isVisible());
    // The axes are fitted at the coalesced replot (at most 20 a second, one plot per turn of the
    // event loop while points arrive), which may come after the points under load.
    QTRY_VERIFY_WITH_TIMEOUT(
        util->customPlot()->yAxis->range().upper >= 100.0 * (0.50 + 0.02 * kSteps + 0.1), kWaitMs);
  }

  // A CPU run: words in place of the two GPU plots (naming the run and saying why), the
  // exposed share drawn per rank all the same.
  void cpuRunSaysItHasNoGpuMetrics() {
    select({m_cpu});
    for (const QString id : {"gpu_util", "power"}) {
      QTRY_VERIFY_WITH_TIMEOUT(plots()->missingNote(id) != nullptr, kWaitMs);
      QLabel* note = plots()->missingNote(id);
      CurvePlot* plot = plots()->plot(id);
      QVERIFY(note != nullptr && plot != nullptr);
      QVERIFY(note->isVisible());
      QVERIFY(!plot->isVisible());
      QVERIFY2(note->text().contains("No GPU metrics") && note->text().contains("cpu") &&
                   note->text().contains("CPU"),
               qPrintable(note->text()));
      QVERIFY(plot->seriesNames().isEmpty());
    }
    QVERIFY(plots()->missingNote("comm_exposed") == nullptr);
    CurvePlot* share = plots()->plot("comm_exposed");
    QVERIFY(share != nullptr);
    QTRY_COMPARE_WITH_TIMEOUT(share->pointCount("cpu r1"), kSteps, kWaitMs);
    const QString artifacts = testing::binaryDir() + "/tests/artifacts";
    QVERIFY(QDir().mkpath(artifacts));
    QVERIFY(m_window->grab().save(artifacts + "/window-plots-cpu-run.png"));
  }

  // Both runs: the GPU run's curves, and the title names the run that has none.
  void mixedSelectionNamesTheRunWithout() {
    select({m_gpu, m_cpu});
    CurvePlot* util = plots()->plot("gpu_util");
    CurvePlot* share = plots()->plot("comm_exposed");
    QVERIFY(util != nullptr && share != nullptr);
    QTRY_COMPARE_WITH_TIMEOUT(util->seriesCount(), 2, kWaitMs);
    QVERIFY(plots()->missingNote("gpu_util") == nullptr);
    QVERIFY(util->isVisible());
    QTRY_COMPARE_WITH_TIMEOUT(share->seriesCount(), 4, kWaitMs);
    auto* title = qobject_cast<QCPTextElement*>(util->customPlot()->plotLayout()->element(0, 0));
    QVERIFY(title != nullptr);
    QVERIFY2(title->text().contains("no GPU metrics: cpu"), qPrintable(title->text()));
  }
};

QTEST_MAIN(TestPlotsSystem)
#include "tst_plotssystem.moc"
