// Disk use and clean-up in the real main window on a real X server (tests/ui/xvfb_run.sh), over a
// real run log with two complete runs whose folders have known sizes: the Disk column and the
// status bar's total come from the background measurement; one run is deleted through the table's
// context menu (its confirmation names the bytes, and is accepted by clicking its Delete button):
// its folder is gone, its row leaves the table and its rows the run log, the other run is whole;
// then the other is archived (hidden) and "Show archived" lists it again; and a sweep's trials keep
// only the best one's checkpoints through "Keep the best N checkpoints".
#include <QApplication>
#include <QCheckBox>
#include <QContextMenuEvent>
#include <QDir>
#include <QFile>
#include <QInputDialog>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QTreeView>

#include "tests/ui/mainwindowfixture.h"
#include "tests/ui/runlogfixture.h"
#include "ui/mainwindow.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {
constexpr int kWaitMs = 20000;

bool writeBytes(const QString& path, qint64 bytes) {
  if (!QDir().mkpath(QFileInfo(path).absolutePath())) return false;
  QFile file(path);
  return file.open(QIODevice::WriteOnly) && file.write(QByteArray(bytes, 'x')) == bytes;
}

QString diskOf(RunsPanel* runs, qint64 id) {
  return runs->model()->index(runs->model()->rowOf(id), RunTableModel::DiskCol).data().toString();
}

}  // namespace

class TestRunFiles : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  std::unique_ptr<backend::RunStore> m_store;
  std::unique_ptr<MainWindow> m_window;
  qint64 m_a = 0;
  qint64 m_b = 0;

  QString runDir(const QString& name) const { return m_dir.filePath("runs/" + name); }

  qint64 makeRun(const QString& name) {
    const qint64 id =
        testing::waitOk(m_store->createRun({std::nullopt, name, runDir(name), {}, 1}));
    testing::waitOk(m_store->setRunLocation(
        id, QJsonObject{{"kind", "local"}, {"run_dir", runDir(name)}, {"world_size", 1}}));
    testing::waitOk(m_store->appendMetrics(testing::stepRows(id, 0, 5, 1.0)));
    testing::waitOk(m_store->setRunStatus(id, spec::RunStatus::complete, {}, 1.5));
    if (!writeBytes(runDir(name) + "/rank-0.log", 1000) ||
        !writeBytes(runDir(name) + "/ckpt/step-000004/rank-0.safetensors", 5000))
      return 0;
    return id;
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
    auto store = backend::RunStore::open(m_dir.filePath("runs.db"));
    QVERIFY2(store, store ? "" : store.message().c_str());
    m_store = std::move(*store);
    m_a = makeRun("a");
    m_b = makeRun("b");
    QVERIFY(m_a > 0 && m_b > 0);
    m_window = shardscope::testing::openMainWindow(m_dir.filePath("runs.db"), 2, kWaitMs);
    QVERIFY(m_window);
  }

  void diskColumnAndTotal() {
    RunsPanel* runs = m_window->runsPanel();
    QTRY_COMPARE_WITH_TIMEOUT(diskOf(runs, m_a), QString("5.9 KiB (ckpt 4.9 KiB)"), kWaitMs);
    QTRY_COMPARE_WITH_TIMEOUT(diskOf(runs, m_b), QString("5.9 KiB (ckpt 4.9 KiB)"), kWaitMs);
    QTRY_COMPARE_WITH_TIMEOUT(runs->diskTotal()->text(), QString("Runs on disk: 11.7 KiB"),
                              kWaitMs);
    QVERIFY(runs->diskTotal()->isVisible());  // in the status bar
  }

  void deleteOneThroughTheContextMenu() {
    RunsPanel* runs = m_window->runsPanel();
    runs->selectRuns({m_a});
    QVERIFY(runs->deleteAction()->isEnabled());
    // The real context menu of the row: pick Delete... in it once it is up.
    const QModelIndex cell = runs->view()->model()->index(
        runs->view()->selectionModel()->selectedRows().first().row(), RunTableModel::NameCol);
    const QPoint at = runs->view()->visualRect(cell).center();
    bool picked = false;
    QTimer::singleShot(0, this, [&picked] {
      auto* menu = qobject_cast<QMenu*>(QApplication::activePopupWidget());
      if (menu == nullptr) return;
      for (QAction* action : menu->actions()) {
        if (action->text() == "Delete...") {
          QTest::mouseClick(menu, Qt::LeftButton, {}, menu->actionGeometry(action).center());
          picked = true;
          return;
        }
      }
      menu->close();
    });
    QContextMenuEvent event(QContextMenuEvent::Mouse, at,
                            runs->view()->viewport()->mapToGlobal(at));
    QApplication::sendEvent(runs->view()->viewport(), &event);
    QVERIFY(picked);

    QMessageBox* box = runs->deleteDialog();
    QVERIFY(box != nullptr);
    QVERIFY(QTest::qWaitForWindowExposed(box));
    QVERIFY2(box->text().contains("Delete a? This frees 5.9 KiB (6000 bytes)"),
             qPrintable(box->text()));
    QTest::mouseClick(box->button(QMessageBox::Yes), Qt::LeftButton);

    QTRY_COMPARE_WITH_TIMEOUT(testing::visibleRunNames(runs), QStringList{"b"}, kWaitMs);
    QVERIFY(!QFileInfo::exists(runDir("a")));
    QVERIFY(QFileInfo::exists(runDir("b") + "/ckpt/step-000004/rank-0.safetensors"));
    auto reader = m_store->reader();
    QVERIFY(reader);
    QVERIFY(!reader->run(m_a)->has_value());
    QCOMPARE(*reader->metricCount(m_a), 0);
    QVERIFY(*reader->metricCount(m_b) > 0);
    QTRY_COMPARE_WITH_TIMEOUT(runs->diskTotal()->text(), QString("Runs on disk: 5.9 KiB"), kWaitMs);
  }

  void archiveHidesAndShowArchivedLists() {
    RunsPanel* runs = m_window->runsPanel();
    runs->selectRuns({m_b});
    QVERIFY(runs->archiveAction()->isEnabled());
    runs->archiveAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(testing::visibleRunNames(runs), QStringList{}, kWaitMs);
    QVERIFY(QFileInfo::exists(runDir("b") + "/ckpt"));  // kept on disk
    runs->showArchived()->click();
    QCOMPARE(testing::visibleRunNames(runs), QStringList{"b"});
    runs->selectRuns({m_b});
    QVERIFY(runs->unarchiveAction()->isEnabled());
    runs->unarchiveAction()->trigger();
    runs->showArchived()->click();
    QTRY_COMPARE_WITH_TIMEOUT(testing::visibleRunNames(runs), QStringList{"b"}, kWaitMs);
  }

  // A sweep of three trials (minimize; 0.3, 0.1, 0.2): Keep the best N checkpoints with N = 1
  // from the current trial's context actions keeps sw-1's checkpoints and removes the others'.
  void keepTheBestCheckpointsOfASweep() {
    RunsPanel* runs = m_window->runsPanel();
    const qint64 study = testing::waitOk(
        m_store->createStudy({"sw", std::nullopt, "", {"loss"}, {"minimize"}, "tpe", 1, {}}));
    QList<qint64> ids;
    const double objectives[] = {0.3, 0.1, 0.2};
    for (int i = 0; i < 3; ++i) {
      const QString name = QStringLiteral("sw-%1").arg(i);
      const auto trial = testing::waitOk(
          m_store->createTrialRun({study, std::nullopt, name, runDir(name), {}, 1}));
      QVERIFY(writeBytes(runDir(name) + "/ckpt/step-000004/rank-0.safetensors", 5000));
      testing::waitOk(
          m_store->finishTrial(trial.runId, spec::RunStatus::complete, {objectives[i]}));
      ids << trial.runId;
    }
    QTRY_VERIFY_WITH_TIMEOUT(runs->model()->rowOf(ids.last()) >= 0, kWaitMs);
    runs->selectRuns({ids[0]});
    QVERIFY(runs->keepBestAction()->isEnabled());
    runs->keepBestAction()->trigger();
    auto* dialog = runs->findChild<QInputDialog*>("keepBestDialog");
    QVERIFY(dialog != nullptr);
    QVERIFY(QTest::qWaitForWindowExposed(dialog));
    dialog->setIntValue(1);
    dialog->accept();
    QTRY_VERIFY_WITH_TIMEOUT(!QFileInfo::exists(runDir("sw-0") + "/ckpt"), kWaitMs);
    QTRY_VERIFY_WITH_TIMEOUT(!QFileInfo::exists(runDir("sw-2") + "/ckpt"), kWaitMs);
    QVERIFY(QFileInfo::exists(runDir("sw-1") + "/ckpt/step-000004/rank-0.safetensors"));
    QTRY_VERIFY_WITH_TIMEOUT(m_window->statusBar()->currentMessage().contains(
                                 "sw: kept the checkpoints of the best 1, freed 9.8 KiB"),
                             kWaitMs);
  }

  void cleanupTestCase() { m_window.reset(); }
};

QTEST_MAIN(TestRunFiles)
#include "tst_runfiles.moc"
