// First paint before the curves. A study of 200 trials x 200 steps written through RunStore
// is opened in the main window with small curve batches; the run table and the Compare panel's
// history and parallel coordinates must be drawn from the summaries while no curve has arrived,
// the curves must then stream in batches with the progress bar shown, and end complete: every
// trial's intermediate values hold exactly its stored rows, in the panel's data and in the plot.
#include <qcustomplot.h>
#include <QComboBox>
#include <QProgressBar>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#include "tests/ui/runlogfixture.h"
#include "ui/compare/comparepanel.h"
#include "ui/compare/triallines.h"
#include "ui/data/runlog.h"
#include "ui/mainwindow.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

constexpr int kWaitMs = 120000;  // generous: the machine is shared
constexpr int kTrials = 200;
constexpr int kSteps = 200;
constexpr int kPrunedSteps = 60;  // every 7th trial is pruned here
constexpr int kBatchRows = 1000;  // ~5 trials per streamed batch: ~40 batches

bool prunedTrial(int i) { return i % 7 == 3; }

struct Stored {
  qint64 experimentId = 0;
  QHash<qint64, int> rows;  // run id -> stored loss rows
  int complete = 0;
};

Stored writeStudy(const QString& path) {
  using testing::waitOk;
  auto opened = backend::RunStore::open(path);
  if (!opened) qFatal("%s", opened.message().c_str());
  backend::RunStore& store = **opened;
  Stored out;
  backend::ExperimentRecord experiment;
  experiment.name = "curves-after-summaries";
  out.experimentId = waitOk(store.createExperiment(experiment));
  backend::NewStudy study;
  study.name = "curves-after-summaries";
  study.experimentId = out.experimentId;
  study.objectives = {"loss"};
  study.directions = {"minimize"};
  study.sampler = "random";
  const qint64 studyId = waitOk(store.createStudy(study));
  for (int i = 0; i < kTrials; ++i) {
    backend::NewTrial trial;
    trial.studyId = studyId;
    trial.runDir = QStringLiteral("/tmp/none/curves-%1").arg(i);
    const double lr = 1e-4 * (1.0 + (i * 37) % 100);
    trial.params = QJsonObject{{"train.lr", lr}, {"lora.rank", 4 << (i % 3)}};
    trial.worldSize = 1;
    const qint64 run = waitOk(store.createTrialRun(trial)).runId;
    const int steps = prunedTrial(i) ? kPrunedSteps : kSteps;
    const double floor = 0.2 + std::abs(std::log10(lr) + 2.5);
    std::vector<backend::MetricRow> rows;
    for (int s = 0; s < steps; ++s) rows.push_back({run, s, "loss", floor + 3.0 / (1 + s), 0, 0});
    waitOk(store.appendMetrics(std::move(rows)));
    out.rows.insert(run, steps);
    if (prunedTrial(i)) {
      waitOk(store.setRunStatus(run, spec::RunStatus::pruned));
    } else {
      waitOk(store.setRunObjectives(run, {floor}));
      waitOk(store.setRunStatus(run, spec::RunStatus::complete, {}, floor));
      ++out.complete;
    }
  }
  store.flush();
  return out;
}

qsizetype curvePoints(const SweepData& sweep) {
  qsizetype n = 0;
  for (const SweepTrial& t : sweep.trials) n += t.steps.size();
  return n;
}

}  // namespace

class TestCompareCurves : public QObject {
  Q_OBJECT

 private slots:
  void summariesPaintBeforeCurvesAndCurvesEndComplete() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const Stored stored = writeStudy(dir.filePath("curves.db"));

    MainWindow window(nullptr, 50);
    window.resize(1600, 1000);
    window.dock(QStringLiteral("compare"))->raise();
    window.runLog().setCurveBatchRows(kBatchRows);
    ComparePanel* compare = window.comparePanel();
    auto* progress = compare->findChild<QProgressBar*>(QStringLiteral("curveProgress"));
    QVERIFY(progress != nullptr);

    // What the first paint holds, taken the moment the run table and the summaries are both
    // shown (the reader sends the sweep's summaries first, then the run table's rows).
    int tableRows = -1;
    int historyDots = -1;
    int parallelLines = -1;
    qsizetype pointsAtSummary = -1;
    bool loadedAtSummary = true;
    connect(&window, &MainWindow::loadedChanged, this, [&] {
      if (tableRows >= 0 || !window.isSummaryShown()) return;
      tableRows = window.runsPanel()->model()->rowCount();
      historyDots = compare->historyPlot()->graph(0)->dataCount();
      parallelLines = compare->parallelLines();
      pointsAtSummary = curvePoints(compare->sweep());
      loadedAtSummary = window.isLoaded();
    });
    // Batches before the last one: the progress bar is up and counts trials.
    int partialBatches = 0;
    bool progressShown = true;
    connect(&window.runLog(), &RunLog::sweepCurvesLoaded, this, [&](const SweepCurves& c) {
      if (c.set != CurveSet::intermediate || c.last) return;
      ++partialBatches;
      progressShown = progressShown && !progress->isHidden() && progress->value() == c.done &&
                      progress->maximum() == c.total;
    });

    window.show();
    window.openRunLog(dir.filePath("curves.db"));
    QTRY_VERIFY_WITH_TIMEOUT(tableRows >= 0, kWaitMs);
    QCOMPARE(tableRows, kTrials);
    QCOMPARE(historyDots, stored.complete);
    QCOMPARE(parallelLines, stored.complete);
    QCOMPARE(pointsAtSummary, qsizetype(0));  // no curve had arrived: summaries came first
    QVERIFY(!loadedAtSummary);

    QTRY_VERIFY_WITH_TIMEOUT(window.isLoaded(), kWaitMs);
    QVERIFY2(partialBatches >= 5, qPrintable(QString::number(partialBatches)));
    QVERIFY(progressShown);
    QVERIFY(progress->isHidden());
    QCOMPARE(compare->curvesDone(), compare->curvesTotal());

    // Complete: each trial's intermediate values are its stored rows, in the data and the plot.
    const SweepData& sweep = compare->sweep();
    QCOMPARE(sweep.trials.size(), qsizetype(kTrials));
    QCOMPARE(sweep.objectiveKey, QString("loss"));
    // The plot holds every trial as one line of its TrialLines plottable (line i: trial i), and
    // the best trial once more on top (the last line), streamed in like the others.
    compare::TrialLines* lines = compare->intermediateLines();
    QVERIFY(lines != nullptr);
    QCOMPARE(lines->lineCount(), kTrials + 1);
    const int best = compare->bestTrial();
    QVERIFY(best >= 0);
    QCOMPARE(lines->line(kTrials).ys, sweep.trials[best].values);
    qsizetype total = 0;
    for (qsizetype i = 0; i < sweep.trials.size(); ++i) {
      const SweepTrial& trial = sweep.trials[i];
      const int rows = stored.rows.value(trial.runId);
      QCOMPARE(trial.steps.size(), qsizetype(rows));
      QCOMPARE(trial.steps.last(), double(rows - 1));
      QCOMPARE(lines->line(int(i)).xs, trial.steps);
      QCOMPARE(lines->line(int(i)).ys, trial.values);
      total += rows;
    }
    QCOMPARE(lines->pointCount(), total + sweep.trials[best].steps.size());
    QCOMPARE(compare->dimmedTrials(), kTrials - stored.complete);
  }

  // Compare polish: the picker names the study, and the history numbers trials from 0.
  void pickerNamesTheStudyAndHistoryCountsFromZero() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const Stored stored = writeStudy(dir.filePath("curves.db"));
    RunLog runLog(50);
    ComparePanel panel(runLog);
    runLog.open(dir.filePath("curves.db"));
    panel.showSweep(-1);
    QTRY_VERIFY_WITH_TIMEOUT(panel.isLoaded(), kWaitMs);
    QCOMPARE(panel.sweepPicker()->currentText(), QString("curves-after-summaries"));
    QCOMPARE(panel.sweepPicker()->currentData().toLongLong(), stored.experimentId);
    QCPGraph* dots = panel.historyPlot()->graph(0);
    QCOMPARE(dots->dataCount(), stored.complete);
    QCOMPARE(dots->data()->at(0)->key, 0.0);  // trial 0 is complete
    int lastComplete = kTrials - 1;
    while (prunedTrial(lastComplete)) --lastComplete;
    QCOMPARE(dots->data()->at(dots->dataCount() - 1)->key, double(lastComplete));
    QVERIFY(panel.historyPlot()->xAxis->range().contains(0.0));
  }
};

QTEST_MAIN(TestCompareCurves)
#include "tst_comparecurves.moc"
