// Compare colours trials by a figure of their steps. A study of three complete trials is
// written through RunStore into a real SQLite run log: trial "low" with MFU 0.2 and an exposed
// communication share of 0.1 on rank 0 and 0.3 on rank 1 (0.2 rank-averaged), trial "high" with
// MFU 0.5 and a share of 0.6 on both ranks, trial "bare" with neither (no step events with them).
// Choosing MFU, then exposed communication share, in the "Colour by" combo draws "low" at the
// low end of the scale and "high" at the high end in the history, parallel coordinates and
// slice; "bare" grey, and its tooltip says so; the scale under the plots and the legend name the
// figure; choosing objective again draws what it drew before.
#include <qcustomplot.h>
#include <QComboBox>
#include <QDir>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "tests/support/paths.h"
#include "tests/ui/runlogfixture.h"
#include "ui/compare/comparepanel.h"
#include "ui/compare/triallines.h"
#include "ui/data/runlog.h"
#include "ui/widgets/curveplot.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

constexpr int kWaitMs = 60000;  // generous: the machine is shared
constexpr int kSteps = 12;

struct Trials {
  qint64 low = 0, high = 0, bare = 0;
};

// Step metrics of one trial: mfu on rank 0; phase.wall 0.1 s and phase.comm_exposed share x
// wall on each rank (shares: one per rank, empty: no phases, mfu < 0: no mfu).
void writeSteps(backend::RunStore& store, qint64 run, double mfu,
                const std::vector<double>& shares) {
  std::vector<backend::MetricRow> rows;
  for (int s = 0; s < kSteps; ++s) {
    const double t = 1.7e9 + s;
    rows.push_back({run, s, "loss", 2.0 - 0.01 * s, 0, t});
    if (mfu >= 0) rows.push_back({run, s, "mfu", mfu, 0, t});
    for (int r = 0; r < int(shares.size()); ++r) {
      rows.push_back({run, s, "phase.wall", 0.1, r, t});
      rows.push_back({run, s, "phase.comm_exposed", shares[std::size_t(r)] * 0.1, r, t});
    }
  }
  testing::waitOk(store.appendMetrics(std::move(rows)));
}

Trials writeStudy(const QString& path) {
  using testing::waitOk;
  auto opened = backend::RunStore::open(path);
  if (!opened) qFatal("%s", opened.message().c_str());
  backend::RunStore& store = **opened;
  backend::ExperimentRecord experiment;
  experiment.name = "colour-by";
  const qint64 experimentId = waitOk(store.createExperiment(experiment));
  backend::NewStudy study;
  study.name = "colour-by";
  study.experimentId = experimentId;
  study.objectives = {"loss"};
  study.directions = {"minimize"};
  study.sampler = "random";
  const qint64 studyId = waitOk(store.createStudy(study));
  Trials out;
  const auto trial = [&](int i, double objective) {
    backend::NewTrial t;
    t.studyId = studyId;
    t.runDir = QStringLiteral("/tmp/none/colour-%1").arg(i);
    t.params = QJsonObject{{"shard.strategy", i == 0 ? "FULL_SHARD" : "NO_SHARD"},
                           {"train.lr", 1e-4 * (i + 1)}};
    t.worldSize = 2;
    const qint64 run = waitOk(store.createTrialRun(t)).runId;
    waitOk(store.setRunObjectives(run, {objective}));
    waitOk(store.setRunStatus(run, spec::RunStatus::complete, {}, objective));
    return run;
  };
  out.low = trial(0, 1.5);
  writeSteps(store, out.low, 0.2, {0.1, 0.3});
  out.high = trial(1, 1.0);
  writeSteps(store, out.high, 0.5, {0.6, 0.6});
  out.bare = trial(2, 1.2);
  writeSteps(store, out.bare, -1, {});
  store.flush();
  return out;
}

// The colour of the history dot (a disc is filled with its pen's colour) of objective `objective`
// (each trial's is distinct).
QColor historyDot(QCustomPlot* plot, double objective) {
  for (int g = 0; g < plot->graphCount(); ++g) {
    const QCPGraph* graph = plot->graph(g);
    if (graph->lineStyle() != QCPGraph::lsNone) continue;
    for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it) {
      if (it->value == objective) return graph->scatterStyle().pen().color();
    }
  }
  return {};
}

// The slice's dot at objective `objective` (its x is the parameter).
QColor sliceDot(QCustomPlot* plot, double objective) {
  for (int g = 0; g < plot->graphCount(); ++g) {
    const QCPGraph* graph = plot->graph(g);
    for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it) {
      if (it->value == objective) return graph->scatterStyle().pen().color();
    }
  }
  return {};
}

// The colour scale under a plot (nullptr: none).
QCPColorScale* scaleOf(QCustomPlot* plot) {
  for (QCPLayoutElement* element : plot->plotLayout()->elements(true)) {
    if (auto* scale = qobject_cast<QCPColorScale*>(element)) return scale;
  }
  return nullptr;
}

// The name on a plot's colour scale ("": no scale).
QString scaleLabel(QCustomPlot* plot) {
  QCPColorScale* scale = scaleOf(plot);
  const QCPAxis* axis = scale != nullptr ? scale->axis() : nullptr;
  return axis != nullptr ? axis->label() : QString();
}

QStringList legendNames(QCustomPlot* plot) {
  QStringList names;
  for (int i = 0; i < plot->legend->itemCount(); ++i) {
    if (auto* item = qobject_cast<QCPPlottableLegendItem*>(plot->legend->item(i)))
      names << item->plottable()->name();
  }
  return names;
}

}  // namespace

class TestCompareColour : public QObject {
  Q_OBJECT

 private slots:
  void coloursTrialsByMfuAndExposedShare() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const Trials trials = writeStudy(dir.filePath("colour.db"));
    RunLog runLog(50);
    ComparePanel panel(runLog);
    panel.resize(1600, 1000);
    panel.show();
    runLog.open(dir.filePath("colour.db"));
    panel.showSweep(-1);
    QTRY_VERIFY_WITH_TIMEOUT(panel.isSummaryDrawn(), kWaitMs);
    QCOMPARE(panel.sweep().trials.size(), qsizetype(3));
    // Objectives: "low" 1.5, "high" 1.0, "bare" 1.2.
    QCustomPlot* history = panel.historyPlot();
    const QColor before = historyDot(history, 1.5);
    QCOMPARE(before, CurvePlot::seriesColor(0));
    QVERIFY(scaleOf(history) == nullptr);

    QComboBox* picker = panel.findChild<QComboBox*>(QStringLiteral("colourBy"));
    QVERIFY(picker != nullptr);
    QCOMPARE(picker, panel.colourPicker());
    const QColor low(compare::kFigureLow);
    const QColor high(compare::kFigureHigh);
    const QColor grey(compare::kNoFigure);
    struct Case {
      const char* item;
      QString name;
      double lowValue;
      double highValue;
    };
    for (const Case& c :
         {Case{"MFU", "MFU", 0.2, 0.5},
          Case{"exposed communication share", "exposed communication share", 0.2, 0.6}}) {
      QSignalSpy drawn(&panel, &ComparePanel::colouringDrawn);
      picker->setCurrentIndex(picker->findText(c.item));
      QTRY_VERIFY_WITH_TIMEOUT(!drawn.isEmpty(), kWaitMs);
      const compare::TrialColouring& colouring = panel.colouring();
      QCOMPARE(colouring.name, c.name);
      QCOMPARE(colouring.values.size(), qsizetype(2));
      QCOMPARE(colouring.values.value(trials.low), c.lowValue);
      QCOMPARE(colouring.values.value(trials.high), c.highValue);
      QVERIFY(!colouring.values.contains(trials.bare));
      // History: the two ends of the scale, and grey.
      QCOMPARE(historyDot(history, 1.5), low);
      QCOMPARE(historyDot(history, 1.0), high);
      QCOMPARE(historyDot(history, 1.2), grey);
      QCPColorScale* scale = scaleOf(history);
      QVERIFY(scale != nullptr);
      QCOMPARE(scaleLabel(history), c.name);
      QCOMPARE(scale->dataRange().lower, c.lowValue);
      QCOMPARE(scale->dataRange().upper, c.highValue);
      QVERIFY2(
          legendNames(history).contains(QStringLiteral("objective, coloured by %1").arg(c.name)),
          qPrintable(legendNames(history).join(", ")));
      QVERIFY(legendNames(history).contains(QStringLiteral("no %1 (grey)").arg(c.name)));
      QVERIFY(panel.trialTip(trials.bare).contains(QStringLiteral("no %1 recorded").arg(c.name)));
      QVERIFY(panel.trialTip(trials.low).contains(c.name));
      // Slice: the same colours by objective value.
      QCOMPARE(sliceDot(panel.slicePlot(), 1.5), low);
      QCOMPARE(sliceDot(panel.slicePlot(), 1.0), high);
      QCOMPARE(sliceDot(panel.slicePlot(), 1.2), grey);
      QVERIFY(scaleOf(panel.slicePlot()) != nullptr);
      // Parallel coordinates: one line per trial, drawn worst first (1.5, 1.2, 1.0).
      compare::TrialLines* lines = nullptr;
      for (int p = 0; p < panel.parallelPlot()->plottableCount() && lines == nullptr; ++p)
        lines = dynamic_cast<compare::TrialLines*>(panel.parallelPlot()->plottable(p));
      QVERIFY(lines != nullptr);
      QCOMPARE(lines->lineCount(), 3);
      QCOMPARE(lines->line(0).pen.color(), low);
      QCOMPARE(lines->line(1).pen.color(), grey);
      QCOMPARE(lines->line(2).pen.color(), high);
      QCOMPARE(scaleLabel(panel.parallelPlot()), c.name);
      // Drawn as a user sees it: the low end's colour is on screen in the history.
      const QImage image = history->toPixmap().toImage();
      // For a human to look at: the whole panel, coloured (build/tests/artifacts).
      const QString artifacts = testing::binaryDir() + "/tests/artifacts";
      QDir().mkpath(artifacts);
      (void)panel.grab().save(artifacts + "/compare-colour-" +
                              QString(c.item).section(' ', 0, 0).toLower() + ".png");
      bool seen = false;
      for (int y = 0; y < image.height() && !seen; ++y)
        for (int x = 0; x < image.width() && !seen; ++x) seen = image.pixelColor(x, y) == low;
      QVERIFY(seen);
    }
    QSignalSpy drawn(&panel, &ComparePanel::colouringDrawn);
    picker->setCurrentIndex(picker->findText("objective"));
    QTRY_VERIFY_WITH_TIMEOUT(!drawn.isEmpty(), kWaitMs);
    QVERIFY(!panel.colouring().byFigure());
    QCOMPARE(historyDot(history, 1.5), before);
    QVERIFY(scaleOf(history) == nullptr);
    QVERIFY(scaleOf(panel.parallelPlot()) == nullptr);
    QVERIFY(!panel.trialTip(trials.bare).contains(QStringLiteral("recorded")));
  }
};

QTEST_MAIN(TestCompareColour)
#include "tst_comparecolour.moc"
