// Compare on a population-based training study: a real SQLite run log holding a PBT study (its
// experiment, its [search.pbt] config, one trial run per segment with its values, metrics and
// objective, and the lineage in the study's state as PbtLoop writes it: PbtLineage::toJson).
// The lineage view draws one bar per segment and one edge per continuation (the exploits
// marked, the best member's chain flagged), the best trial's schedule has one step plot per
// mutable parameter whose steps are the stored values, a hover names a segment's run and a click
// puts the segment and its source side by side in the diff. The intermediate values have one
// line per member running across its segments (each segment's evaluations at their global
// steps), the best member's again on top. A screenshot goes to tests/artifacts/compare-pbt.png.
#include <qcustomplot.h>
#include <QDir>
#include <QLabel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include <map>
#include <set>
#include <tuple>

#include "backend/store/runstore.h"
#include "backend/sweep/pbtlineage.h"
#include "tests/support/paths.h"
#include "tests/ui/runlogfixture.h"
#include "ui/compare/comparepanel.h"
#include "ui/compare/pbtviews.h"
#include "ui/compare/triallines.h"
#include "ui/data/runlog.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

constexpr int kWaitMs = 30000;
constexpr int kPopulation = 3;
constexpr int kSegments = 3;
constexpr int kInterval = 10;

const char* const kConfig = R"(
[search]
name = "pbt-lineage"
seed = 7
objectives = {"eval.loss" = "minimize"}
[search.space."train.lr"]
type = "float"
low = 1e-3
high = 1e-1
log = true
[search.space."train.weight_decay"]
type = "float"
low = 0.0
high = 0.2
[search.pbt]
population = 3
interval_steps = 10
quantile = 0.34
factors = [0.8, 1.2]
mutable = ["train.lr", "train.weight_decay"]
)";

// (segment, member) -> (source member, exploited, lr, weight decay, objective at the end).
// Segment 1: member 2 exploits member 0; segment 2: member 1 exploits member 2. The best at
// the last segment is member 1 (0.9), whose weights went 0 -> 2 -> 1.
struct Row {
  int from;
  bool exploited;
  double lr;
  double wd;
  double value;
};
const std::map<std::pair<int, int>, Row> kRows = {
    {{0, 0}, {-1, false, 0.02, 0.10, 3.0}}, {{0, 1}, {-1, false, 0.005, 0.05, 3.4}},
    {{0, 2}, {-1, false, 0.08, 0.15, 3.9}}, {{1, 0}, {0, false, 0.02, 0.10, 2.0}},
    {{1, 1}, {1, false, 0.005, 0.05, 2.6}}, {{1, 2}, {0, true, 0.024, 0.08, 1.7}},
    {{2, 0}, {0, false, 0.02, 0.10, 1.5}},  {{2, 1}, {2, true, 0.0192, 0.096, 0.9}},
    {{2, 2}, {2, false, 0.024, 0.08, 1.2}},
};

// A segment's evaluation half-way through it.
double midValue(const Row& r) { return r.value + 0.5; }

// The study as PbtLoop leaves it: a run per segment, the lineage in the study's state.
backend::PbtLineage writeStudy(backend::RunStore& store) {
  using testing::waitOk;
  backend::ExperimentRecord experiment;
  experiment.name = "pbt-lineage";
  experiment.toml = kConfig;
  const qint64 experimentId = waitOk(store.createExperiment(experiment));
  backend::NewStudy study;
  study.name = "pbt-lineage";
  study.experimentId = experimentId;
  study.config = kConfig;
  study.objectives = {"eval.loss"};
  study.directions = {"minimize"};
  study.sampler = "auto";
  const qint64 studyId = waitOk(store.createStudy(study));
  auto space = search::parse_search_space(kConfig);
  if (!space) qFatal("config: %s", space.message().c_str());
  backend::PbtLineage lineage;
  lineage.population = kPopulation;
  std::map<std::pair<int, int>, qint64> runOf;
  for (int segment = 0; segment < kSegments; ++segment) {
    for (int member = 0; member < kPopulation; ++member) {
      const Row& r = kRows.at({segment, member});
      backend::NewTrial trial;
      trial.studyId = studyId;
      trial.runDir = QStringLiteral("/tmp/none/pbt-%1-%2").arg(segment).arg(member);
      trial.params = QJsonObject{{"train.lr", r.lr}, {"train.weight_decay", r.wd}};
      trial.worldSize = 2;
      const qint64 runId = waitOk(store.createTrialRun(trial)).runId;
      runOf[{segment, member}] = runId;
      waitOk(store.setRunStatus(runId, spec::RunStatus::running));
      const int start = segment * kInterval;
      std::vector<backend::MetricRow> rows;
      for (int s = start + 1; s <= start + kInterval; ++s)
        rows.push_back({runId, s, "loss", r.value + 0.1 * (start + kInterval - s), 0, 1.7e9 + s});
      // Two evaluations a segment, at global steps: mid-way and at its end (the objective).
      rows.push_back({runId, start + kInterval / 2, "eval.loss", midValue(r), 0, 1.7e9 + start});
      rows.push_back({runId, start + kInterval, "eval.loss", r.value, 0, 1.7e9 + start});
      waitOk(store.appendMetrics(rows));
      waitOk(store.setRunObjectives(runId, {r.value}));
      waitOk(store.setRunStatus(runId, spec::RunStatus::complete, {}, r.value));
      backend::PbtSegment s;
      s.member = member;
      s.segment = segment;
      s.trial = segment * kPopulation + member;
      s.runId = runId;
      s.startStep = start;
      s.endStep = start + kInterval;
      s.fromMember = r.from;
      s.fromRunId = r.from >= 0 ? runOf.at({segment - 1, r.from}) : 0;
      s.fromCheckpoint = r.from >= 0 ? QStringLiteral("/tmp/none/ckpt") : QString();
      s.exploited = r.exploited;
      s.params = {{"train.lr", r.lr}, {"train.weight_decay", r.wd}};
      s.value = r.value;
      s.state = QStringLiteral("complete");
      lineage.segments.push_back(s);
    }
  }
  waitOk(store.setStudyState(studyId, QJsonObject{{"pbt", lineage.toJson()}}));
  store.flush();
  return lineage;
}

}  // namespace

class TestComparePbt : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;

 private slots:
  void lineageAndBestSchedule() {
    QVERIFY(m_dir.isValid());
    backend::PbtLineage lineage;
    {
      auto store = backend::RunStore::open(m_dir.filePath("runs.db"));
      QVERIFY2(store, store ? "" : store.message().c_str());
      lineage = writeStudy(**store);
    }
    RunLog runLog(50);
    ComparePanel panel(runLog);
    panel.resize(1600, 1000);
    panel.show();
    runLog.open(m_dir.filePath("runs.db"));
    panel.showSweep(-1);
    QTRY_VERIFY_WITH_TIMEOUT(panel.isLoaded(), kWaitMs);
    compare::PbtViews* pbt = panel.pbtViews();
    QVERIFY(pbt != nullptr);
    QVERIFY(pbt->isVisible());
    // The summary names what applies to PBT, not the unused sampler.
    auto* summary = panel.findChild<QLabel*>(QStringLiteral("sweepSummary"));
    QVERIFY2(
        summary->text().endsWith("; population-based training: 3 members, segments of 10 steps"),
        qPrintable(summary->text()));

    // One bar per stored segment; an edge per segment after the first, from its source.
    QCOMPARE(pbt->nodeCount(), kSegments * kPopulation);
    using Edge = std::tuple<int, int, int, bool, bool>;  // segment, from, to, exploited, best
    std::set<Edge> drawn;
    for (const compare::LineageEdge& e : pbt->edges())
      drawn.insert({e.segment, e.fromMember, e.toMember, e.exploited, e.best});
    // The best chain is member 1 at segment 2 <- member 2 at 1 <- member 0 at 0.
    const std::set<Edge> expected = {{1, 0, 0, false, false}, {1, 1, 1, false, false},
                                     {1, 0, 2, true, true},   {2, 0, 0, false, false},
                                     {2, 2, 1, true, true},   {2, 2, 2, false, false}};
    QCOMPARE(drawn, expected);
    QCOMPARE(pbt->edges().size(), qsizetype(expected.size()));

    // The schedule: one step plot per mutable parameter, its steps the chain's stored values
    // (each from its segment's first step, the last held to the end).
    QCOMPARE(pbt->scheduleParams(), QStringList({"train.lr", "train.weight_decay"}));
    const std::vector<std::pair<int, int>> chain = {{0, 0}, {1, 2}, {2, 1}};
    for (const QString& param : pbt->scheduleParams()) {
      QCPGraph* graph = pbt->scheduleGraph(param);
      QVERIFY(graph != nullptr);
      QCOMPARE(graph->lineStyle(), QCPGraph::lsStepLeft);
      QCOMPARE(graph->data()->size(), int(chain.size()) + 1);
      for (std::size_t i = 0; i <= chain.size(); ++i) {
        const auto& at = chain[std::min(i, chain.size() - 1)];
        const Row& r = kRows.at(at);
        const double key = i < chain.size() ? at.first * kInterval : kSegments * kInterval;
        const auto point = graph->data()->at(int(i));
        QCOMPARE(point->key, key);
        QCOMPARE(point->value, param == QLatin1String("train.lr") ? r.lr : r.wd);
      }
    }
    // train.lr is searched on a log scale: its axis is logarithmic.
    QCOMPARE(pbt->scheduleGraph("train.lr")->valueAxis()->scaleType(), QCPAxis::stLogarithmic);
    QCOMPARE(pbt->scheduleGraph("train.weight_decay")->valueAxis()->scaleType(), QCPAxis::stLinear);

    // A segment under the pointer: member 1's last one, the chain's end.
    QCustomPlot* plot = pbt->lineagePlot();
    const QPoint at(int(plot->xAxis->coordToPixel(25)), int(plot->yAxis->coordToPixel(1)));
    const backend::PbtSegment* hit = pbt->segmentAt(at);
    QVERIFY(hit != nullptr);
    QCOMPARE(hit->segment, 2);
    QCOMPARE(hit->member, 1);
    const backend::PbtSegment* stored = lineage.at(2, 1);
    QCOMPARE(hit->runId, stored->runId);
    const QString tip = compare::PbtViews::segmentTip(*hit);
    QVERIFY2(tip.contains(QStringLiteral("run %1").arg(stored->runId)) &&
                 tip.contains(QStringLiteral("exploited member 2")) &&
                 tip.contains(QStringLiteral("train.lr = 0.0192")),
             qPrintable(tip));
    // Between two lanes: nothing.
    QVERIFY(pbt->segmentAt(QPoint(at.x(), int(plot->yAxis->coordToPixel(1.5)))) == nullptr);

    // A click on it: the diff compares it with the segment it went on from.
    QTest::mouseClick(plot, Qt::LeftButton, {}, at);
    QTableWidget* diff = panel.diffTable();
    QTRY_VERIFY(diff->rowCount() > 0);
    const QString source = QStringLiteral("0.024");  // member 2's segment 1, the source
    bool lrRow = false;
    for (int row = 0; row < diff->rowCount(); ++row) {
      if (diff->item(row, 0)->text() != QLatin1String("train.lr")) continue;
      lrRow = true;
      QCOMPARE(diff->item(row, 1)->text(), QStringLiteral("0.0192"));
      QCOMPARE(diff->item(row, 2)->text(), source);
    }
    QVERIFY(lrRow);

    // The intermediate values: a line per member across its 3 segments (6 evaluations at their
    // global steps, in step order), then the best member's (member 1, the best chain's end) again.
    compare::TrialLines* lines = panel.intermediateLines();
    QVERIFY(lines != nullptr);
    QCOMPARE(lines->lineCount(), kPopulation + 1);
    for (int member = 0; member <= kPopulation; ++member) {
      const int shown = member < kPopulation ? member : 1;
      QVector<double> xs;
      QVector<double> ys;
      for (int segment = 0; segment < kSegments; ++segment) {
        const Row& r = kRows.at({segment, shown});
        xs << segment * kInterval + kInterval / 2 << (segment + 1) * kInterval;
        ys << midValue(r) << r.value;
      }
      QCOMPARE(lines->line(member).xs, xs);
      QCOMPARE(lines->line(member).ys, ys);
    }
    auto* intermediate = panel.intermediatePlot();
    QStringList legend;
    for (int i = 0; i < intermediate->legend->itemCount(); ++i) {
      if (auto* item = qobject_cast<QCPPlottableLegendItem*>(intermediate->legend->item(i)))
        legend << item->plottable()->name();
    }
    QCOMPARE(legend, QStringList({"member 0", "member 1", "member 2", "best: member 1"}));
    auto* title = qobject_cast<QCPTextElement*>(intermediate->plotLayout()->element(0, 0));
    QVERIFY(title != nullptr);
    QCOMPARE(title->text(), QStringLiteral("Intermediate values (a line per member)"));

    const QString artifacts = shardscope::testing::binaryDir() + "/tests/artifacts";
    QDir().mkpath(artifacts);
    QVERIFY(panel.grab().save(artifacts + "/compare-pbt.png"));
  }
};

QTEST_MAIN(TestComparePbt)
#include "tst_comparepbt.moc"
