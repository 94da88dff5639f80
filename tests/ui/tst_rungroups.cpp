// Groups of runs (schema 12) in the real main window on a real X server (tests/ui/xvfb_run.sh)
// over a real run log (runlogfixture.h's sweep and a run of no experiment): two runs put in a new
// group through the table's real context menu and its dialog, the filter's group:, the rows
// grouped by group under a parent that shows the count, collapsed with the mouse and kept
// collapsed and selected through a refresh, the group opened in Compare from the parent row's
// context menu (its two runs of different experiments as trials, the parameter plots over the one
// parameter both have), the group still there after the window is opened again, and one run
// taken out of it through the context menu's Remove from group, then the group renamed and
// deleted from its parent row's context menu (its run stays).
#include <QAbstractItemView>
#include <QApplication>
#include <QComboBox>
#include <QContextMenuEvent>
#include <QDialogButtonBox>
#include <QDir>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QTreeView>

#include "tests/support/paths.h"
#include "tests/ui/mainwindowfixture.h"
#include "tests/ui/runlogfixture.h"
#include "ui/compare/comparepanel.h"
#include "ui/compare/studyviews.h"
#include "ui/mainwindow.h"
#include "ui/runs/groupdialog.h"
#include "ui/runs/rungroupmodel.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {
constexpr int kWaitMs = 20000;

// Opens the table's real context menu at `cell` and clicks the action whose text starts with
// `text` once the menu is up; false when there was none (or it was disabled).
bool pickFromContextMenu(RunsPanel* runs, const QModelIndex& cell, const QString& text) {
  const QPoint at = runs->view()->visualRect(cell).center();
  bool picked = false;
  QTimer::singleShot(0, runs, [&picked, text] {
    auto* menu = qobject_cast<QMenu*>(QApplication::activePopupWidget());
    if (menu == nullptr) return;
    for (QAction* action : menu->actions()) {
      if (action->text().startsWith(text) && action->isEnabled()) {
        QTest::mouseClick(menu, Qt::LeftButton, {}, menu->actionGeometry(action).center());
        picked = true;
        return;
      }
    }
    menu->close();
  });
  QContextMenuEvent event(QContextMenuEvent::Mouse, at, runs->view()->viewport()->mapToGlobal(at));
  QApplication::sendEvent(runs->view()->viewport(), &event);
  return picked;
}

QStringList groupsOf(RunsPanel* runs, qint64 id) {
  const RunSummary* run = runs->model()->runById(id);
  return run != nullptr ? run->groups : QStringList{"(no such run)"};
}

}  // namespace

class TestRunGroups : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  testing::SweepFixture m_fixture;
  qint64 m_solo = 0;
  std::unique_ptr<MainWindow> m_window;

  QString db() const { return m_dir.filePath("runs.db"); }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
    m_fixture = testing::makeSweep(db());
    // A run of no experiment, sharing one parameter (lr) with the sweep's trials.
    backend::NewRun solo;
    solo.name = "solo";
    solo.runDir = "/tmp/none/solo";
    solo.params = QJsonObject{{"lr", 0.01}, {"warmup", 10}};
    solo.worldSize = 1;
    m_solo = testing::waitOk(m_fixture.store->createRun(solo));
    testing::waitOk(m_fixture.store->setRunStatus(m_solo, spec::RunStatus::complete));
    m_window = testing::openMainWindow(db(), 10, kWaitMs);
    QVERIFY(m_window);
    m_window->resize(1600, 1000);
  }

  void groupTwoRunsThroughTheContextMenu() {
    RunsPanel* runs = m_window->runsPanel();
    const qint64 trial = m_fixture.trialIds[1];
    runs->selectRuns({trial, m_solo});
    QVERIFY(runs->addToGroupAction()->isEnabled());
    const QModelIndex cell =
        runs->view()->selectionModel()->selectedRows(RunTableModel::NameCol).first();
    QVERIFY(pickFromContextMenu(runs, cell, "Add to group..."));
    GroupDialog* dialog = runs->groupDialog();
    QVERIFY(dialog != nullptr);
    QVERIFY(QTest::qWaitForWindowExposed(dialog));
    QCOMPARE(dialog->windowTitle(), QString("Add 2 runs to a group"));
    auto* ok = dialog->buttons()->button(QDialogButtonBox::Ok);
    // A bad name keeps OK disabled and says why.
    QTest::keyClicks(dialog->nameBox()->lineEdit(), "a:b");
    QVERIFY(!ok->isEnabled());
    QVERIFY2(dialog->errorLabel()->text().contains("group 'a:b' holds ':'"),
             qPrintable(dialog->errorLabel()->text()));
    dialog->nameBox()->lineEdit()->clear();
    QTest::keyClicks(dialog->nameBox()->lineEdit(), "pair");
    QVERIFY(ok->isEnabled());
    QTest::mouseClick(ok, Qt::LeftButton);

    QTRY_COMPARE_WITH_TIMEOUT(groupsOf(runs, trial), QStringList{"pair"}, kWaitMs);
    QCOMPARE(groupsOf(runs, m_solo), QStringList{"pair"});
    QCOMPARE(groupsOf(runs, m_fixture.trialIds[2]), QStringList{});
    auto reader = m_fixture.store->reader();
    QVERIFY(reader);
    const auto group = reader->group("pair");
    QVERIFY(group && group->has_value());
    QCOMPARE(*reader->groupRuns((*group)->id), (std::vector<qint64>{trial, m_solo}));

    // The filter finds them by group.
    runs->filterEdit()->setText("group:pair");
    QCOMPARE(testing::visibleRunNames(runs), (QStringList{"solo", "sweep-1"}));
    runs->filterEdit()->clear();
    QCOMPARE(runs->visibleRowCount(), 10);
  }

  void groupRowsByGroupAndCollapse() {
    RunsPanel* runs = m_window->runsPanel();
    QTreeView* view = runs->view();
    runs->groupBy()->setCurrentIndex(runs->groupBy()->findText("group"));
    QCOMPARE(view->model(), static_cast<QAbstractItemModel*>(runs->groupModel()));
    QAbstractItemModel* model = view->model();
    QCOMPARE(model->rowCount(), 2);  // pair, then the runs in no group
    const QModelIndex pair = model->index(0, 0);
    QCOMPARE(pair.data().toString(), QString("group pair · 2 runs"));
    QCOMPARE(model->index(1, 0).data().toString(), QString("no group · 8 runs"));
    QCOMPARE(model->rowCount(pair), 2);
    QVERIFY(view->isExpanded(pair));
    QVERIFY(view->isFirstColumnSpanned(0, {}));
    // The columns keep working under a parent, and the selection stayed.
    QStringList children;
    for (int row = 0; row < 2; ++row)
      children << model->index(row, RunTableModel::NameCol, pair).data().toString();
    children.sort();
    QCOMPARE(children, (QStringList{"solo", "sweep-1"}));
    QCOMPARE(runs->selectedRunIds().size(), qsizetype(2));

    // Collapse it with the mouse: a click on the parent row's branch arrow, left of its text.
    const QRect parentRect = view->visualRect(pair);
    QVERIFY(parentRect.isValid());
    QVERIFY(parentRect.left() >= view->indentation());
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {},
                      QPoint(parentRect.left() - view->indentation() / 2, parentRect.center().y()));
    QTRY_VERIFY(!view->isExpanded(pair));
    QVERIFY(!view->visualRect(model->index(0, RunTableModel::NameCol, pair)).isValid());

    // For a human to look at: the window with its rows grouped (build/tests/artifacts).
    const QString artifacts = testing::binaryDir() + "/tests/artifacts";
    QDir().mkpath(artifacts);
    (void)m_window->grab().save(artifacts + "/rungroups-grouped.png");

    // A refresh that regroups (a new run) keeps the parent collapsed and the runs selected.
    backend::NewRun late;
    late.name = "late";
    late.runDir = "/tmp/none/late";
    testing::waitOk(m_fixture.store->createRun(late));
    QTRY_COMPARE_WITH_TIMEOUT(m_window->runCount(), 11, kWaitMs);
    QTRY_COMPARE_WITH_TIMEOUT(model->index(1, 0).data().toString(), QString("no group · 9 runs"),
                              kWaitMs);
    QVERIFY(!view->isExpanded(model->index(0, 0)));
    QVERIFY(view->isExpanded(model->index(1, 0)));
    QList<qint64> selected = runs->selectedRunIds();
    std::sort(selected.begin(), selected.end());
    QCOMPARE(selected, (QList<qint64>{m_fixture.trialIds[1], m_solo}));
  }

  void openTheGroupInCompare() {
    RunsPanel* runs = m_window->runsPanel();
    ComparePanel* compare = m_window->comparePanel();
    const QModelIndex pair = runs->view()->model()->index(0, 0);
    QVERIFY(pickFromContextMenu(runs, pair, "Compare group pair"));
    auto reader = m_fixture.store->reader();
    QVERIFY(reader);
    const qint64 sweepId = groupSweepId((*reader->group("pair"))->id);
    QTRY_VERIFY_WITH_TIMEOUT(compare->sweep().experimentId == sweepId && compare->isSummaryDrawn(),
                             kWaitMs);
    QVERIFY(compare->isVisible());
    QCOMPARE(compare->sweepPicker()->currentText(), QString("group pair"));
    QList<qint64> trials;
    for (const SweepTrial& t : compare->sweep().trials) trials << t.runId;
    QCOMPARE(trials, (QList<qint64>{m_fixture.trialIds[1], m_solo}));
    QCOMPARE(compare->sweep().study.studyId, qint64(-1));  // a group is no study
    // The parameter plots are over what both runs have: lr, not the sweep's lora_rank nor
    // solo's warmup.
    auto* slice = compare->findChild<QComboBox*>("sliceParam");
    QVERIFY(slice != nullptr);
    QStringList sliceParams;
    // (The last entry is the objective against device-hours, not a parameter.)
    for (int i = 0; i < slice->count(); ++i) {
      if (!slice->itemText(i).endsWith("(Pareto front)")) sliceParams << slice->itemText(i);
    }
    QCOMPARE(sliceParams, QStringList{"lr"});
    // The contour's and importance's parameters too.
    QTRY_VERIFY_WITH_TIMEOUT(!compare->studyViews()->trials().isEmpty(), kWaitMs);
    for (const auto& t : compare->studyViews()->trials())
      QCOMPARE(t.params.keys(), QStringList{"lr"});
    const QString artifacts = testing::binaryDir() + "/tests/artifacts";
    (void)m_window->grab().save(artifacts + "/rungroups-compare.png");
  }

  void theGroupSurvivesAReload() {
    m_window.reset();
    m_window = testing::openMainWindow(db(), 11, kWaitMs);
    QVERIFY(m_window);
    RunsPanel* runs = m_window->runsPanel();
    QCOMPARE(groupsOf(runs, m_fixture.trialIds[1]), QStringList{"pair"});
    QCOMPARE(groupsOf(runs, m_solo), QStringList{"pair"});
    runs->filterEdit()->setText("group:pair");
    QCOMPARE(testing::visibleRunNames(runs), (QStringList{"solo", "sweep-1"}));
  }

  void removeOneRunFromTheGroup() {
    RunsPanel* runs = m_window->runsPanel();
    runs->selectRuns({m_solo});
    const QModelIndex cell =
        runs->view()->selectionModel()->selectedRows(RunTableModel::NameCol).first();
    const QPoint at = runs->view()->visualRect(cell).center();
    // The context menu's Remove from group lists the selected runs' groups.
    QStringList offered;
    QTimer::singleShot(0, runs, [&offered] {
      auto* menu = qobject_cast<QMenu*>(QApplication::activePopupWidget());
      if (menu == nullptr) return;
      for (QAction* action : menu->actions()) {
        if (action->text() != "Remove from group" || action->menu() == nullptr) continue;
        for (QAction* group : action->menu()->actions()) {
          offered << group->text();
          if (group->text() == "pair (1 run)") group->trigger();
        }
      }
      menu->close();
    });
    QContextMenuEvent event(QContextMenuEvent::Mouse, at,
                            runs->view()->viewport()->mapToGlobal(at));
    QApplication::sendEvent(runs->view()->viewport(), &event);
    QCOMPARE(offered, QStringList{"pair (1 run)"});
    QTRY_COMPARE_WITH_TIMEOUT(groupsOf(runs, m_solo), QStringList{}, kWaitMs);
    QCOMPARE(testing::visibleRunNames(runs), QStringList{"sweep-1"});  // filter: group:pair
    QCOMPARE(groupsOf(runs, m_fixture.trialIds[1]), QStringList{"pair"});
  }

  // The group's parent row's context menu renames it (a bad name is refused as it is typed, OK
  // disabled and the reason shown) and deletes it after asking: its run stays, in no group.
  void renameThenDeleteTheGroup() {
    RunsPanel* runs = m_window->runsPanel();
    const qint64 trial = m_fixture.trialIds[1];
    runs->filterEdit()->clear();
    runs->groupBy()->setCurrentIndex(runs->groupBy()->findText("group"));
    QAbstractItemModel* model = runs->view()->model();
    QCOMPARE(model->index(0, 0).data().toString(), QString("group pair · 1 run"));
    QSignalSpy said(runs, &RunsPanel::message);
    QVERIFY(pickFromContextMenu(runs, model->index(0, 0), "Rename group pair..."));
    QInputDialog* dialog = runs->renameGroupDialog();
    QVERIFY(dialog != nullptr);
    QVERIFY(QTest::qWaitForWindowExposed(dialog));
    QCOMPARE(dialog->textValue(), QString("pair"));
    auto* name = dialog->findChild<QLineEdit*>();
    QPushButton* ok = dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok);
    QVERIFY(name != nullptr && ok != nullptr);
    QVERIFY(!ok->isEnabled());  // the same name: nothing to rename
    name->clear();
    QTest::keyClicks(name, "a:b");
    QVERIFY(!ok->isEnabled());
    QVERIFY2(dialog->labelText().contains("group 'a:b' holds ':'"),
             qPrintable(dialog->labelText()));
    QTest::qWait(50);  // the dialog's new size, for the picture
    (void)dialog->grab().save(testing::binaryDir() + "/tests/artifacts/rungroups-rename.png");
    name->clear();
    QTest::keyClicks(name, "kept");
    QVERIFY(ok->isEnabled());
    QCOMPARE(dialog->labelText(), QString("New name of group pair:"));
    QTest::mouseClick(ok, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(groupsOf(runs, trial), QStringList{"kept"}, kWaitMs);
    QTRY_COMPARE_WITH_TIMEOUT(model->index(0, 0).data().toString(), QString("group kept · 1 run"),
                              kWaitMs);
    QVERIFY(!said.isEmpty());
    QCOMPARE(said.last().at(0).toString(), QString("group pair renamed kept"));

    QVERIFY(pickFromContextMenu(runs, model->index(0, 0), "Delete group kept..."));
    QMessageBox* box = runs->deleteGroupDialog();
    QVERIFY(box != nullptr);
    QVERIFY(QTest::qWaitForWindowExposed(box));
    QCOMPARE(box->text(),
             QString("Delete group kept? Its run stays in the run log; only the group goes."));
    (void)box->grab().save(testing::binaryDir() + "/tests/artifacts/rungroups-delete.png");
    QTest::mouseClick(box->button(QMessageBox::Yes), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(groupsOf(runs, trial), QStringList{}, kWaitMs);
    QTRY_COMPARE_WITH_TIMEOUT(model->rowCount(), 1, kWaitMs);
    QCOMPARE(model->index(0, 0).data().toString(), QString("no group · 11 runs"));
    QCOMPARE(m_window->runCount(), 11);
    auto reader = m_fixture.store->reader();
    QVERIFY(reader);
    const auto gone = reader->group("kept");
    QVERIFY(gone && !gone->has_value());
    // With no group under the cursor (a run in none), the group actions are disabled.
    QVERIFY(!pickFromContextMenu(runs, model->index(0, 0), "Rename group"));
  }

  // Grouped by tag, a run with two tags is a row under each; selecting it selects both rows and
  // it counts once.
  void groupRowsByTagWithARunUnderTwo() {
    RunsPanel* runs = m_window->runsPanel();
    runs->filterEdit()->clear();
    const qint64 trial = m_fixture.trialIds[1];
    testing::waitOk(m_fixture.store->editTags(backend::TagOwner::run, trial, {"best", "x"}, {}));
    testing::waitOk(m_fixture.store->editTags(backend::TagOwner::run, m_solo, {"best"}, {}));
    QTRY_COMPARE_WITH_TIMEOUT(runs->model()->runById(m_solo)->tags, QStringList{"best"}, kWaitMs);
    runs->groupBy()->setCurrentIndex(runs->groupBy()->findText("tag"));
    QAbstractItemModel* model = runs->view()->model();
    QCOMPARE(model->rowCount(), 3);
    QCOMPARE(model->index(0, 0).data().toString(), QString("tag best · 2 runs"));
    QCOMPARE(model->index(1, 0).data().toString(), QString("tag x · 1 run"));
    QCOMPARE(model->index(2, 0).data().toString(), QString("no tag · 9 runs"));
    runs->selectRuns({trial});
    QCOMPARE(runs->view()->selectionModel()->selectedRows().size(), qsizetype(2));
    QCOMPARE(runs->selectedRunIds(), QList<qint64>{trial});
    QCOMPARE(runs->currentRunId(), trial);
    // Back to the flat table: the same run selected, one row.
    runs->groupBy()->setCurrentIndex(runs->groupBy()->findText("none"));
    QCOMPARE(runs->view()->model()->rowCount(), 11);
    QCOMPARE(runs->selectedRunIds(), QList<qint64>{trial});
  }
};

QTEST_MAIN(TestRunGroups)
#include "tst_rungroups.moc"
