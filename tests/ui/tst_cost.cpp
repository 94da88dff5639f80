// Device-hours and cost in the real main window on a real X server (tests/ui/xvfb_run.sh), over a
// real run log: a sweep of four local runs on 2 CPU ranks (no CUDA hello) with known times (set in
// the run log by SQL: 15, 30, 60 and 90 minutes) and objectives 2.0, 1.5, 1.7 and 1.0, and a
// price of 2 per hour for "local" in the dashboard's settings. The runs table's column is named
// CPU-hours and reads 0.500, 1.000, 2.000 and 3.000, the Cost column 1.00 ... 6.00; Compare's
// "Slice by" cost mode draws the four trials against CPU-hours with the Pareto front (the 1.7
// trial is dominated by the 1.5 one, cheaper and better) of three. Both are kept as pictures in
// build/tests/artifacts for a human to look at.
#include <qcustomplot.h>
#include <QComboBox>
#include <QDir>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeView>

#include "backend/store/db.h"
#include "backend/store/runusage.h"
#include "tests/support/paths.h"
#include "tests/ui/mainwindowfixture.h"
#include "tests/ui/runlogfixture.h"
#include "ui/compare/comparepanel.h"
#include "ui/mainwindow.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"
#include "ui/settingsdialog.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {
constexpr int kWaitMs = 20000;
}  // namespace

class TestCost : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  std::unique_ptr<backend::RunStore> m_store;
  std::unique_ptr<MainWindow> m_window;
  qint64 m_experiment = 0;
  QList<qint64> m_runs;

  QString cell(qint64 runId, int column) {
    RunTableModel* model = m_window->runsPanel()->model();
    return model->index(model->rowOf(runId), column).data().toString();
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    qputenv("XDG_CONFIG_HOME", m_dir.filePath("config").toUtf8());
    backend::saveHostPrices({{"local", 2.0}});
    auto store = backend::RunStore::open(m_dir.filePath("runs.db"));
    QVERIFY2(store, store ? "" : store.message().c_str());
    m_store = std::move(*store);
    backend::ExperimentRecord experiment;
    experiment.name = "cost-sweep";
    m_experiment = testing::waitOk(m_store->createExperiment(experiment));
    const int minutes[] = {15, 30, 60, 90};
    const double objectives[] = {2.0, 1.5, 1.7, 1.0};
    auto db = backend::Db::open(m_dir.filePath("runs.db"));
    QVERIFY(db);
    for (int i = 0; i < 4; ++i) {
      const QString name = QStringLiteral("cost-%1").arg(i);
      backend::NewRun run{m_experiment, name, m_dir.filePath(name), {{"lr", 1e-3 * (i + 1)}}, 2};
      const qint64 id = testing::waitOk(m_store->createRun(run));
      testing::waitOk(m_store->setRunLocation(
          id, QJsonObject{{"kind", "local"}, {"run_dir", m_dir.filePath(name)}}));
      testing::waitOk(m_store->setRunStatus(id, spec::RunStatus::running));
      testing::waitOk(m_store->setRunStatus(id, spec::RunStatus::complete, {}, objectives[i]));
      m_store->flush();
      const std::string sql = "UPDATE runs SET started_at = 1000, ended_at = " +
                              std::to_string(1000 + 60 * minutes[i]) +
                              " WHERE id = " + std::to_string(id);
      QVERIFY(db->exec(sql));
      m_runs << id;
    }
    m_window = shardscope::testing::openMainWindow(m_dir.filePath("runs.db"), 4, kWaitMs);
    QVERIFY(m_window);
  }

  void runsTableColumns() {
    RunTableModel* model = m_window->runsPanel()->model();
    QCOMPARE(model->headerData(RunTableModel::UsageCol, Qt::Horizontal, Qt::DisplayRole).toString(),
             QString("CPU-hours"));
    const QStringList hours{"0.500", "1.000", "2.000", "3.000"};
    const QStringList costs{"1.00", "2.00", "4.00", "6.00"};
    for (int i = 0; i < 4; ++i) {
      QCOMPARE(cell(m_runs[i], RunTableModel::UsageCol), hours[i]);
      QCOMPARE(cell(m_runs[i], RunTableModel::CostCol), costs[i]);
    }
    QTreeView* view = m_window->runsPanel()->view();
    view->scrollTo(view->model()->index(0, RunTableModel::CostCol));
    QTest::qWait(50);
    const QString artifacts = testing::binaryDir() + "/tests/artifacts";
    QVERIFY(QDir().mkpath(artifacts));
    QVERIFY(view->grab().save(artifacts + "/cost-runs-table.png"));
  }

  void compareParetoOfObjectiveAgainstHours() {
    ComparePanel* compare = m_window->comparePanel();
    compare->showSweep(m_experiment);
    QTRY_VERIFY_WITH_TIMEOUT(compare->isSummaryDrawn(), kWaitMs);
    QVERIFY(!compare->showsCostPareto());
    QCOMPARE(compare->slicePicker()->itemText(compare->slicePicker()->count() - 1),
             QString("CPU-hours (Pareto front)"));
    compare->showCostPareto();
    QVERIFY(compare->showsCostPareto());
    QCOMPARE(compare->costPareto().points, 4);
    QCOMPARE(compare->costPareto().front, 3);
    QCOMPARE(compare->slicePlot()->xAxis->label(), QString("CPU-hours"));
    // The front, cheapest first: 0.5 h at 2.0, 1 h at 1.5, 3 h at 1.0.
    QCPGraph* front = compare->slicePlot()->graph(1);
    QVERIFY(front != nullptr);
    QCOMPARE(front->data()->size(), 3);
    QCOMPARE(front->data()->at(0)->key, 0.5);
    QCOMPARE(front->data()->at(1)->value, 1.5);
    QCOMPARE(front->data()->at(2)->key, 3.0);
    const QString artifacts = testing::binaryDir() + "/tests/artifacts";
    QVERIFY(compare->slicePlot()->savePng(artifacts + "/cost-pareto.png", 520, 360));
  }

  // Settings' price table lists "local" and the given hosts with their saved prices; an edit is
  // what prices() returns (an empty cell: no price).
  void settingsPriceTable() {
    SettingsDialog dialog(NotifySettings{}, {{"local", 2.0}}, {"gpu-box"});
    QTableWidget* table = dialog.pricesTable();
    QCOMPARE(table->rowCount(), 2);
    QCOMPARE(table->item(0, 0)->text(), QString("local"));
    QCOMPARE(table->item(0, 1)->text(), QString("2"));
    QCOMPARE(table->item(1, 0)->text(), QString("gpu-box"));
    table->item(1, 1)->setText("3.5");
    table->item(0, 1)->setText("");
    QCOMPARE(dialog.prices(), (backend::HostPrices{{"gpu-box", 3.5}}));
    dialog.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dialog));
    QVERIFY(dialog.grab().save(testing::binaryDir() + "/tests/artifacts/cost-settings.png"));
  }
};

QTEST_MAIN(TestCost)
#include "tst_cost.moc"
