// The Compare panel's study views on a real run log written through RunStore: a study of
// schema v3 with two objectives (eval.loss minimized, eval.accuracy maximized) where train.lr
// alone decides the loss. Asserts what is plotted: the Pareto points equal the brute-force
// non-dominated set of the stored trials, importance ranks train.lr first, the contour's cells
// hold the stored objectives at the trials, the overlay draws every trial's stored train loss
// and eval curve (pruned ones in the faint group, the best on top), and no legend lies over a
// plot's data.
// A sweep outside any study still gets a contour and importance (space inferred from values).
#include <qcustomplot.h>
#include <QComboBox>
#include <QDir>
#include <QListView>
#include <QListWidget>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <optional>
#include <random>
#include <set>

#include "tests/support/paths.h"
#include "tests/ui/runlogfixture.h"
#include "ui/compare/comparepanel.h"
#include "ui/compare/studyviews.h"
#include "ui/compare/triallines.h"
#include "ui/compare/triallistmodel.h"
#include "ui/data/runlog.h"
#include "ui/widgets/densitylines.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

constexpr int kWaitMs = 30000;  // generous: the reader polls every 50 ms here
constexpr int kTrials = 40;

struct StoredTrial {
  qint64 runId = 0;
  double lr = 0;
  qint64 rank = 0;
  double loss = 0;
  double accuracy = 0;
  bool complete = true;
  int steps = 0;
};

const char* const kStudyConfig = R"(
[search]
name = "lr-decides"
sampler = "random"
objectives = {"eval.loss" = "minimize", "eval.accuracy" = "maximize"}
[search.space."train.lr"]
type = "float"
low = 1e-5
high = 1e-2
log = true
[search.space."lora.rank"]
type = "int"
low = 4
high = 64
[search.space."train.warmup"]
type = "float"
low = 0.0
high = 1.0
)";

// A study whose loss depends on train.lr only; accuracy trades off against the loss through the
// rank, so the Pareto front has several points. Trials 5 and 11 are pruned, not complete.
std::vector<StoredTrial> writeStudy(backend::RunStore& store) {
  using testing::waitOk;
  backend::ExperimentRecord experiment;
  experiment.name = "lr-decides";
  experiment.toml = kStudyConfig;
  const qint64 experimentId = waitOk(store.createExperiment(experiment));
  backend::NewStudy study;
  study.name = "lr-decides";
  study.experimentId = experimentId;
  study.config = kStudyConfig;
  study.objectives = {"eval.loss", "eval.accuracy"};
  study.directions = {"minimize", "maximize"};
  study.sampler = "random";
  const qint64 studyId = waitOk(store.createStudy(study));
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<StoredTrial> out;
  for (int i = 0; i < kTrials; ++i) {
    StoredTrial t;
    t.lr = std::pow(10.0, -5.0 + 3.0 * unit(rng));
    t.rank = 4 + qint64(60 * unit(rng));
    const double warmup = unit(rng);
    t.loss = std::pow(std::log10(t.lr) + 3.5, 2.0) + 0.2;
    t.accuracy = 0.5 + 0.004 * double(t.rank) - 0.1 * t.loss;
    t.complete = i != 5 && i != 11;
    t.steps = t.complete ? 30 : 10;
    backend::NewTrial trial;
    trial.studyId = studyId;
    trial.runDir = QStringLiteral("/tmp/none/lr-%1").arg(i);
    trial.params = QJsonObject{{"train.lr", t.lr}, {"lora.rank", t.rank}, {"train.warmup", warmup}};
    trial.worldSize = 1;
    t.runId = waitOk(store.createTrialRun(trial)).runId;
    waitOk(store.setRunStatus(t.runId, spec::RunStatus::running));
    std::vector<backend::MetricRow> rows;
    for (int s = 0; s < t.steps; ++s) {
      rows.push_back({t.runId, s, "loss", t.loss + 2.0 / (1.0 + s), 0, 1.7e9 + s});
      if (s % 10 == 9)  // an evaluation every 10 steps: the intermediate values
        rows.push_back({t.runId, s, "eval.loss", t.loss + 1.0 / (1.0 + s), 0, 1.7e9 + s});
    }
    waitOk(store.appendMetrics(rows));
    if (t.complete) {
      waitOk(store.setRunObjectives(t.runId, {t.loss, t.accuracy}));
      waitOk(store.setRunStatus(t.runId, spec::RunStatus::complete, {}, t.loss));
    } else {
      waitOk(store.setRunStatus(t.runId, spec::RunStatus::pruned));
    }
    out.push_back(t);
  }
  store.flush();
  return out;
}

// The non-dominated (loss minimized, accuracy maximized) trials, by definition.
std::set<std::pair<double, double>> bruteForceFront(const std::vector<StoredTrial>& trials) {
  std::set<std::pair<double, double>> front;
  for (const StoredTrial& a : trials) {
    if (!a.complete) continue;
    bool dominated = false;
    for (const StoredTrial& b : trials) {
      if (!b.complete || &a == &b) continue;
      const bool noWorse = b.loss <= a.loss && b.accuracy >= a.accuracy;
      const bool better = b.loss < a.loss || b.accuracy > a.accuracy;
      dominated = dominated || (noWorse && better);
    }
    if (!dominated) front.insert({a.loss, a.accuracy});
  }
  return front;
}

}  // namespace

class TestCompareStudy : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  std::vector<StoredTrial> m_trials;
  std::unique_ptr<RunLog> m_runLog;
  std::unique_ptr<ComparePanel> m_panel;

  compare::StudyViews* views() { return m_panel->studyViews(); }
  /// The run id on row `row` of the overlay's trial list (best first).
  qint64 listedRun(int row) {
    return views()->trialList()->model()->index(row, 0).data(Qt::UserRole).toLongLong();
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    {
      auto store = backend::RunStore::open(m_dir.filePath("study.db"));
      QVERIFY2(store, store ? "" : store.message().c_str());
      m_trials = writeStudy(**store);
    }
    m_runLog = std::make_unique<RunLog>(50);
    m_panel = std::make_unique<ComparePanel>(*m_runLog);
    m_panel->resize(1600, 1000);
    m_panel->show();
    m_runLog->open(m_dir.filePath("study.db"));
    m_panel->showSweep(-1);
    QTRY_VERIFY_WITH_TIMEOUT(m_panel->isLoaded(), kWaitMs);
    QCOMPARE(m_panel->study().objectives, QStringList({"eval.loss", "eval.accuracy"}));
  }

  void finishedTrialsCarryBothObjectives() {
    QCOMPARE(views()->trials().size(), qsizetype(kTrials - 2));  // two pruned
    for (const auto& t : views()->trials()) QCOMPARE(t.values.size(), size_t(2));
  }

  void paretoEqualsTheBruteForceFront() {
    const auto expected = bruteForceFront(m_trials);
    QVERIFY(expected.size() >= 3);  // a front, not a single winner
    QCOMPARE(views()->paretoPoints().size(), qsizetype(kTrials - 2));
    std::set<std::pair<double, double>> shown;
    for (int i : views()->paretoFrontIndices()) {
      const QPointF p = views()->paretoPoints()[i];
      shown.insert({p.x(), p.y()});
    }
    QCOMPARE(shown, expected);
    // The highlighted graph holds exactly the front.
    QCPGraph* front = views()->paretoPlot()->graph(1);
    QCOMPARE(front->dataCount(), int(expected.size()));
    // Swapping the axes keeps the same trials on the front.
    views()->setParetoObjectives(1, 0);
    std::set<std::pair<double, double>> swapped;
    for (int i : views()->paretoFrontIndices()) {
      const QPointF p = views()->paretoPoints()[i];
      swapped.insert({p.y(), p.x()});
    }
    QCOMPARE(swapped, expected);
    views()->setParetoObjectives(0, 1);
  }

  void importanceRanksTheDecidingParameterFirst() {
    const auto& bars = views()->importanceBars();
    QVERIFY2(bars, bars ? "" : bars.message().c_str());
    QCOMPARE(bars->size(), qsizetype(3));
    QCOMPARE(bars->first().name, QString("train.lr"));
    double total = 0;
    for (const auto& b : *bars) total += b.share;
    QVERIFY(std::abs(total - 1.0) < 1e-9);
    QVERIFY2(bars->first().share > 2 * (*bars)[1].share,
             qPrintable(QString("lr %1 vs %2").arg(bars->first().share).arg((*bars)[1].share)));
    auto* plotted = qobject_cast<QCPBars*>(views()->importancePlot()->plottable(0));
    QVERIFY(plotted != nullptr);
    QCOMPARE(plotted->dataCount(), 3);
  }

  void contourHoldsTheStoredObjectives() {
    views()->setContourParams("train.lr", "lora.rank");
    const compare::ContourData& c = views()->contour();
    QVERIFY(c.x.log);  // 1e-5 .. 1e-2: a log axis
    QVERIFY(!c.y.log);
    QCOMPARE(c.points.size(), qsizetype(kTrials - 2));
    int checked = 0;
    for (const StoredTrial& t : m_trials) {
      if (!t.complete) continue;
      const double x = std::log10(t.lr);
      const double y = double(t.rank);
      // A trial alone in its cell colours it with its own loss.
      int inCell = 0;
      for (const QPointF& p : c.points) {
        const auto cellOf = [&](double v, double lo, double hi, int n) {
          return std::clamp(int((v - lo) / (hi - lo) * n), 0, n - 1);
        };
        inCell += cellOf(p.x(), c.xLo, c.xHi, c.nx) == cellOf(x, c.xLo, c.xHi, c.nx) &&
                  cellOf(p.y(), c.yLo, c.yHi, c.ny) == cellOf(y, c.yLo, c.yHi, c.ny);
      }
      if (inCell != 1) continue;
      QCOMPARE(c.valueAt(x, y), t.loss);
      ++checked;
    }
    QVERIFY(checked > kTrials / 2);
    QCPColorMap* map = nullptr;
    for (int i = 0; i < views()->contourPlot()->plottableCount(); ++i) {
      if (auto* m = qobject_cast<QCPColorMap*>(views()->contourPlot()->plottable(i))) map = m;
    }
    QVERIFY(map != nullptr);
    QCOMPARE(map->data()->keySize(), c.nx);
    QCOMPARE(map->data()->cell(3, 5), c.cells[5 * c.nx + 3]);
  }

  // Every trial is in the overlay, not only the ticked ones: its train loss in the train group
  // (pruned ones in the faint pruned group), its eval curve in the eval group; the best trial
  // is drawn bold on top, the other ticked ones highlighted.
  void overlayDrawsEveryTrialsTrainAndEvalCurves() {
    const compare::TrialOverlay& overlay = views()->overlay();
    QCOMPARE(overlay.trials, kTrials);
    QCOMPARE(overlay.pruned, 2);
    DensityLines* density = overlay.density;
    QVERIFY(density != nullptr);
    QCOMPARE(density->linesIn(compare::kTrainGroup), kTrials - 2);
    QCOMPARE(density->linesIn(compare::kEvalGroup), kTrials - 2);
    QCOMPARE(density->linesIn(compare::kPrunedGroup), 2 * 2);  // train + eval of each
    qsizetype points = 0;
    for (const StoredTrial& t : m_trials) points += t.steps + t.steps / 10;
    QCOMPARE(density->pointCount(), points);
    // Pruned trials are dimmed: grey and fainter than the others.
    const auto& pruned = density->group(compare::kPrunedGroup);
    QVERIFY(pruned.minAlpha < density->group(compare::kTrainGroup).minAlpha);
    QCOMPARE(pruned.color.saturation(), 0);
    const auto best = std::min_element(m_trials.begin(), m_trials.end(), [](auto& a, auto& b) {
      return (a.complete ? a.loss : 1e9) < (b.complete ? b.loss : 1e9);
    });
    QCOMPARE(overlay.bestRun, best->runId);
    QCustomPlot* plot = views()->overlayPlot();
    QCPGraph* bestTrain = nullptr;
    QCPGraph* bestEval = nullptr;
    for (int g = 0; g < plot->graphCount(); ++g) {
      if (plot->graph(g)->name().startsWith("best") && plot->graph(g)->name().endsWith("train"))
        bestTrain = plot->graph(g);
      if (plot->graph(g)->name().startsWith("best") && plot->graph(g)->name().endsWith("eval.loss"))
        bestEval = plot->graph(g);
    }
    QVERIFY(bestTrain != nullptr && bestEval != nullptr);
    QCOMPARE(bestTrain->dataCount(), 30);
    QCOMPARE(bestTrain->data()->at(29)->value, best->loss + 2.0 / 30.0);
    QCOMPARE(bestEval->dataCount(), 3);
    QCOMPARE(bestEval->data()->at(2)->value, best->loss + 1.0 / 30.0);
    QVERIFY(bestTrain->pen().widthF() > 2.0);
    // Default ticks: the best three; the best is drawn bold, the other two highlighted.
    QCOMPARE(overlay.highlighted, 2);
    views()->setOverlayRuns({listedRun(0), listedRun(3), listedRun(4), listedRun(5)});
    QCOMPARE(views()->overlay().highlighted, 3);
    QCOMPARE(views()->overlay().trials, kTrials);  // unticking draws no fewer
  }

  // The intermediate values draw the best trial once more, bold, on top of every trial.
  void intermediateHighlightsTheBestTrial() {
    const int best = m_panel->bestTrial();
    QVERIFY(best >= 0);
    const SweepTrial& trial = m_panel->sweep().trials[best];
    for (const StoredTrial& t : m_trials) {
      if (t.complete) QVERIFY(trial.objective.value() <= t.loss);
    }
    compare::TrialLines* lines = m_panel->intermediateLines();
    QCOMPARE(lines->lineCount(), kTrials + 1);
    const auto& top = lines->line(kTrials);
    QCOMPARE(top.ys, trial.values);
    QCOMPARE(top.ys.size(), qsizetype(3));
    QVERIFY(top.pen.widthF() > 2.0);
    QCOMPARE(m_panel->dimmedTrials(), 2);
  }

  // A legend is a row of its own under the axis rect: it never covers a data point.
  void legendsAreNeverOverTheData() {
    QList<QCustomPlot*> plots = {m_panel->historyPlot(),  m_panel->intermediatePlot(),
                                 m_panel->parallelPlot(), m_panel->slicePlot(),
                                 views()->contourPlot(),  views()->importancePlot(),
                                 views()->paretoPlot(),   views()->overlayPlot()};
    views()->setParetoObjectives(0, 1);
    int legends = 0;
    for (QCustomPlot* plot : plots) {
      plot->replot();
      // The legend's row never squeezes the axis rect's width (an empty wrapped legend did).
      QVERIFY2(plot->axisRect()->width() > plot->width() / 2,
               qPrintable(QStringLiteral("%1 of %2, legend %3 columns")
                              .arg(plot->axisRect()->width())
                              .arg(plot->width())
                              .arg(plot->legend->columnCount()) +
                          QStringLiteral(" margins %1 %2 outer %3 layout cols %4 title %5")
                              .arg(plot->axisRect()->margins().left())
                              .arg(plot->axisRect()->margins().right())
                              .arg(plot->axisRect()->outerRect().width())
                              .arg(plot->plotLayout()->columnCount())
                              .arg(plot->plotLayout()->element(0, 0)
                                       ? plot->plotLayout()->element(0, 0)->outerRect().width()
                                       : -1)));
      if (!plot->legend->visible() || plot->legend->itemCount() == 0) continue;
      ++legends;
      const QRect legend = plot->legend->outerRect();
      QVERIFY2(!legend.intersects(plot->axisRect()->rect()),
               qPrintable(plot->plotLayout()->element(0, 0)->objectName()));
      QVERIFY(plot->rect().contains(legend));
      // Every entry is inside the legend's rect, so inside the plot and off the axis rect.
      for (int i = 0; i < plot->legend->itemCount(); ++i) {
        if (const QCPAbstractLegendItem* item = plot->legend->item(i))
          QVERIFY(legend.contains(item->outerRect()));
      }
    }
    QVERIFY(legends >= 4);  // history, intermediate, Pareto, overlay
  }

  void screenshot() {
    views()->setOverlayRuns({listedRun(0), listedRun(1), listedRun(2)});
    QCOMPARE(views()->overlayCurves(), kTrials);
    QCOMPARE(views()->overlay().highlighted, 2);  // and the best, bold
    const QString artifacts = shardscope::testing::binaryDir() + "/tests/artifacts";
    QDir().mkpath(artifacts);
    QVERIFY(m_panel->grab().save(artifacts + "/compare-panel.png"));
  }

  // Marks on trials' answers show as counts beside each trial in the overlay's list and in the
  // config diff's choosers: marks made here (RunLog, as the Samples view makes them) and one made
  // from outside (another writer on the same run log, as `shardscope-cli verdict` is).
  void verdictCountsBesideEachTrial() {
    const qint64 a = listedRun(0);
    const qint64 b = listedRun(1);
    const auto edit = [](qint64 run, const char* probe, qint64 step,
                         std::optional<backend::Verdict> verdict) {
      return VerdictEdit{run, QString::fromLatin1(probe), step, verdict};
    };
    m_runLog->setVerdicts({edit(a, "p1", 29, backend::Verdict::good),
                           edit(a, "p2", 29, backend::Verdict::good),
                           edit(a, "p3", 29, backend::Verdict::bad)});
    m_runLog->setVerdicts({edit(b, "p1", 29, backend::Verdict::bad)});
    {
      auto outside = backend::RunStore::open(m_dir.filePath("study.db"));
      QVERIFY2(outside, outside ? "" : outside.message().c_str());
      testing::waitOk((*outside)->setVerdict(b, "p2", 19, backend::Verdict::good, "tester"));
    }
    QComboBox* diff = nullptr;
    for (QComboBox* combo : m_panel->findChildren<QComboBox*>())
      if (qobject_cast<compare::TrialListModel*>(combo->model()) != nullptr) diff = combo;
    QVERIFY(diff != nullptr);
    const auto text = [](const QAbstractItemModel* model, qint64 run) {
      for (int row = 0; row < model->rowCount(); ++row) {
        const QModelIndex at = model->index(row, 0);
        if (at.data(Qt::UserRole).toLongLong() == run) return at.data(Qt::DisplayRole).toString();
      }
      return QString();
    };
    const QAbstractItemModel* list = views()->trialList()->model();
    QTRY_VERIFY_WITH_TIMEOUT(
        text(list, a).endsWith(QString::fromUtf8("  · 2 good · 1 bad (67%)")) &&
            text(list, b).endsWith(QString::fromUtf8("  · 1 good · 1 bad (50%)")),
        kWaitMs);
    QVERIFY2(text(diff->model(), a).endsWith(QString::fromUtf8("2 good · 1 bad (67%)")),
             qPrintable(text(diff->model(), a)));
    QVERIFY2(text(diff->model(), b).endsWith(QString::fromUtf8("1 good · 1 bad (50%)")),
             qPrintable(text(diff->model(), b)));
    int unmarked = 0;
    for (int row = 0; row < list->rowCount(); ++row) {
      const QString shown = list->index(row, 0).data().toString();
      if (!shown.contains(QLatin1String(" good "))) ++unmarked;
    }
    QCOMPARE(unmarked, list->rowCount() - 2);
    // A cleared mark: the counts follow.
    m_runLog->setVerdicts({edit(b, "p1", 29, std::nullopt)});
    QTRY_VERIFY_WITH_TIMEOUT(text(list, b).endsWith(QString::fromUtf8("  · 1 good · 0 bad (100%)")),
                             kWaitMs);
  }

  // A sweep of runs sharing an experiment, without study tables: one objective, so no Pareto
  // front; contour and importance still work on the values.
  void sweepOutsideAStudy() {
    const QString path = m_dir.filePath("sweep.db");
    testing::SweepFixture fixture = testing::makeSweep(path);
    fixture.store.reset();
    RunLog runLog(50);
    ComparePanel panel(runLog);
    panel.resize(1600, 1000);
    runLog.open(path);
    panel.showSweep(-1);
    QTRY_VERIFY_WITH_TIMEOUT(panel.isLoaded(), kWaitMs);
    compare::StudyViews* v = panel.studyViews();
    QCOMPARE(panel.study().studyId, qint64(-1));
    QCOMPARE(v->trials().size(), qsizetype(6));  // complete ones
    QVERIFY(v->paretoPoints().isEmpty());
    QVERIFY2(v->importanceBars(), v->importanceBars() ? "" : v->importanceBars().message().c_str());
    QCOMPARE(v->importanceBars()->size(), qsizetype(3));
    v->setContourParams("lr", "schedule");
    QCOMPARE(v->contour().y.categories.size(), qsizetype(2));
    QCOMPARE(v->contour().points.size(), qsizetype(6));
  }

  void cleanupTestCase() {
    m_panel.reset();
    m_runLog.reset();
  }
};

QTEST_MAIN(TestCompareStudy)
#include "tst_comparestudy.moc"
