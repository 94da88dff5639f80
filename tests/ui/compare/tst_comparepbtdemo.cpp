// Compare on the real population-based training demo: examples/demo-pbt.toml run through
// `shardscope-cli sweep` (the tiny model, 2 ranks, 4 members x 4 segments of 15 steps, ~20 s)
// into a temporary run log, then the panel checked against `study show --json`'s lineage: one bar
// per segment, one edge per continuation with the exploits as the CLI names them, and the best
// trial's schedule stepping through the best_schedule's values at its segments' first steps.
// A screenshot goes to tests/artifacts/compare-pbt-demo.png.
#include <qcustomplot.h>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <set>
#include <tuple>

#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "ui/compare/comparepanel.h"
#include "ui/compare/pbtviews.h"
#include "ui/data/runlog.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

const QString kCli =
    shardscope::testing::envPath("SHARDSCOPE_TEST_CLI", "the shardscope-cli executable");
constexpr int kWaitMs = 60000;

using Cli = shardscope::testing::ProgramRun;

Cli cli(const QString& cwd, const QStringList& args) {
  return shardscope::testing::runProgram(kCli, args, cwd);
}

}  // namespace

class TestComparePbtDemo : public QObject {
  Q_OBJECT

 private slots:
  void compareMatchesTheStoredLineage() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString exp = dir.filePath("demo-pbt.toml");
    QVERIFY(QFile::copy(shardscope::testing::sourceDir() + "/examples/demo-pbt.toml", exp));
    const QString db = dir.filePath("runs.db");
    const Cli sweep = cli(dir.path(), {"--db", db, "sweep", exp});
    QVERIFY2(sweep.exitCode == 0, (sweep.out + sweep.err).constData());
    const Cli show = cli(dir.path(), {"--db", db, "--json", "study", "show", "demo-pbt"});
    QVERIFY2(show.exitCode == 0, show.err.constData());
    const QJsonObject stored = QJsonDocument::fromJson(show.out).object().value("pbt").toObject();
    const QJsonArray segments = stored.value("segments").toArray();
    const QJsonArray best = stored.value("best_schedule").toArray();
    QCOMPARE(segments.size(), 16);
    QVERIFY(!best.isEmpty());

    RunLog runLog(50);
    ComparePanel panel(runLog);
    panel.resize(1600, 1000);
    panel.show();
    runLog.open(db);
    panel.showSweep(-1);
    QTRY_VERIFY_WITH_TIMEOUT(panel.isLoaded(), kWaitMs);
    compare::PbtViews* pbt = panel.pbtViews();
    QVERIFY(pbt->isVisible());
    QCOMPARE(pbt->nodeCount(), int(segments.size()));
    using Edge = std::tuple<int, int, int, bool>;  // segment, from, to, exploited
    std::set<Edge> expected;
    for (const auto& v : segments) {
      const QJsonObject s = v.toObject();
      if (s.value("from_member").toInt(-1) < 0) continue;
      expected.insert({s.value("segment").toInt(), s.value("from_member").toInt(),
                       s.value("member").toInt(), s.value("exploited").toBool()});
    }
    std::set<Edge> drawn;
    for (const compare::LineageEdge& e : pbt->edges())
      drawn.insert({e.segment, e.fromMember, e.toMember, e.exploited});
    QCOMPARE(drawn, expected);
    QCOMPARE(pbt->edges().size(), qsizetype(expected.size()));
    // The schedule: the best chain's stored values at its segments' first steps, the last held
    // to the chain's end.
    QCOMPARE(pbt->scheduleParams(), QStringList({"train.lr", "train.weight_decay"}));
    for (const QString& param : pbt->scheduleParams()) {
      QCPGraph* graph = pbt->scheduleGraph(param);
      QCOMPARE(graph->data()->size(), int(best.size()) + 1);
      for (int i = 0; i <= best.size(); ++i) {
        const QJsonObject s = best[std::min(i, int(best.size()) - 1)].toObject();
        const double key =
            i < best.size() ? s.value("start_step").toDouble() : s.value("end_step").toDouble();
        QCOMPARE(graph->data()->at(i)->key, key);
        QCOMPARE(graph->data()->at(i)->value, s.value("params").toObject().value(param).toDouble());
      }
    }
    const QString artifacts = shardscope::testing::binaryDir() + "/tests/artifacts";
    QDir().mkpath(artifacts);
    QVERIFY(panel.grab().save(artifacts + "/compare-pbt-demo.png"));
  }
};

QTEST_MAIN(TestComparePbtDemo)
#include "tst_comparepbtdemo.moc"
