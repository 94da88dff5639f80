// Tags, notes and the query filter of the runs table, in the real main window on a real X server
// (tests/ui/xvfb_run.sh) over a real run log (runlogfixture.h): two runs tagged through the
// window's Edit tags action and its dialog (typed, completed, accepted), the Tags column, the
// filter's tag:, status:, parameter and metric terms with the visible rows checked, a bad query
// named beside the box while the last good one stays applied, and a note written through Edit
// note shown rendered.
#include <QAbstractItemView>
#include <QCompleter>
#include <QDialogButtonBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>
#include <QTreeView>

#include "tests/ui/mainwindowfixture.h"
#include "tests/ui/runlogfixture.h"
#include "ui/mainwindow.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"
#include "ui/runs/tagdialogs.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {
constexpr int kWaitMs = 20000;

QString tagsOf(RunsPanel* runs, qint64 id) {
  return runs->model()->index(runs->model()->rowOf(id), RunTableModel::TagsCol).data().toString();
}

}  // namespace

class TestRunTags : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  testing::SweepFixture m_fixture;
  std::unique_ptr<MainWindow> m_window;

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
    m_fixture = testing::makeSweep(m_dir.filePath("runs.db"));
    m_window = testing::openMainWindow(m_dir.filePath("runs.db"), 9, kWaitMs);
    QVERIFY(m_window);
  }

  void tagTwoRunsThroughTheWindow() {
    RunsPanel* runs = m_window->runsPanel();
    // An existing tag to complete from: sweep-1 carries "baseline" already.
    testing::waitOk(
        m_fixture.store->editTags(backend::TagOwner::run, m_fixture.trialIds[1], {"baseline"}, {}));
    QTRY_COMPARE_WITH_TIMEOUT(tagsOf(runs, m_fixture.trialIds[1]), QString("baseline"), kWaitMs);

    runs->selectRuns({m_fixture.trialIds[0], m_fixture.trialIds[4]});
    QVERIFY(runs->editTagsAction()->isEnabled());
    runs->editTagsAction()->trigger();
    TagEditDialog* dialog = runs->tagDialog();
    QVERIFY(dialog != nullptr);
    QVERIFY(QTest::qWaitForWindowExposed(dialog));
    QCOMPARE(dialog->windowTitle(), QString("Tags of 2 runs"));
    auto* ok = dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok);
    // A bad name keeps OK disabled and says why.
    QTest::keyClicks(dialog->edit(), "+a:b");
    QVERIFY(!ok->isEnabled());
    QVERIFY2(dialog->errorLabel()->text().contains("tag 'a:b' holds ':'"),
             qPrintable(dialog->errorLabel()->text()));
    dialog->edit()->clear();
    QTest::keyClicks(dialog->edit(), "+best +base");
    // The word being typed completes from the run log's tags.
    auto* completer = dialog->findChild<QCompleter*>();
    QVERIFY(completer != nullptr);
    QCOMPARE(completer->currentCompletion(), QString("baseline"));
    QTRY_VERIFY(completer->popup()->isVisible());
    completer->popup()->setCurrentIndex(completer->completionModel()->index(0, 0));
    QTest::keyClick(completer->popup(), Qt::Key_Return);
    QCOMPARE(dialog->edit()->text(), QString("+best +baseline "));
    QVERIFY(ok->isEnabled());
    QTest::mouseClick(ok, Qt::LeftButton);

    QTRY_COMPARE_WITH_TIMEOUT(tagsOf(runs, m_fixture.trialIds[0]), QString("baseline best"),
                              kWaitMs);
    QCOMPARE(tagsOf(runs, m_fixture.trialIds[4]), QString("baseline best"));
    QCOMPARE(tagsOf(runs, m_fixture.trialIds[2]), QString());
    // The chips' colours come with the tags, the store's palette pick.
    const QModelIndex cell =
        runs->model()->index(runs->model()->rowOf(m_fixture.trialIds[0]), RunTableModel::TagsCol);
    QCOMPARE(cell.data(RunTableModel::TagColorsRole).toStringList(),
             (QStringList{backend::defaultTagColor("baseline"), backend::defaultTagColor("best")}));
    // In the run log, not only in the table.
    auto reader = m_fixture.store->reader();
    QVERIFY(reader);
    QCOMPARE(*reader->tags(backend::TagOwner::run, m_fixture.trialIds[4]),
             (QStringList{"baseline", "best"}));
  }

  void filterByTagStatusParameterAndMetric() {
    RunsPanel* runs = m_window->runsPanel();
    runs->filterEdit()->setText("tag:best");
    QCOMPARE(testing::visibleRunNames(runs), (QStringList{"sweep-0", "sweep-4"}));
    runs->filterEdit()->setText("tag:baseline -tag:best");
    QCOMPARE(testing::visibleRunNames(runs), QStringList{"sweep-1"});
    runs->filterEdit()->setText("status:failed");
    QCOMPARE(testing::visibleRunNames(runs), QStringList{"sweep-6"});
    runs->filterEdit()->setText("lr>=5e-4");
    QCOMPARE(testing::visibleRunNames(runs), (QStringList{"sweep-2", "sweep-4", "sweep-6"}));
    // Metric terms are read by the worker once asked for: the rows follow.
    runs->filterEdit()->setText("tag:best loss<0.35");
    QTRY_COMPARE_WITH_TIMEOUT(testing::visibleRunNames(runs), QStringList{"sweep-4"}, kWaitMs);
    runs->filterEdit()->setText("best.eval.loss<0.4");
    QTRY_COMPARE_WITH_TIMEOUT(testing::visibleRunNames(runs), (QStringList{"sweep-1", "sweep-4"}),
                              kWaitMs);
    // A bare word still finds a name, as the box always did.
    runs->filterEdit()->setText("sweep-3");
    QCOMPARE(testing::visibleRunNames(runs), QStringList{"sweep-3"});
    QVERIFY(!runs->queryError()->isVisible());
    // A bad query is named beside the box; the last good one stays applied.
    runs->filterEdit()->setText("tag:best loss<<1");
    QVERIFY(runs->queryError()->isVisible());
    QVERIFY2(runs->queryError()->text().contains("at 14, '<<': not a comparison"),
             qPrintable(runs->queryError()->text()));
    QCOMPARE(testing::visibleRunNames(runs), QStringList{"sweep-3"});
    runs->filterEdit()->clear();
    QVERIFY(!runs->queryError()->isVisible());
    QCOMPARE(runs->visibleRowCount(), 9);
  }

  void noteIsWrittenAndShownRendered() {
    RunsPanel* runs = m_window->runsPanel();
    runs->selectRuns({m_fixture.trialIds[4]});
    QVERIFY(!runs->noteView()->isVisible());
    runs->editNoteAction()->trigger();
    NoteDialog* dialog = runs->noteDialog();
    QVERIFY(dialog != nullptr);
    QVERIFY(QTest::qWaitForWindowExposed(dialog));
    dialog->editor()->setPlainText("# Best so far\n\n**lr** 5e-4, rank 16");
    QTest::mouseClick(dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok),
                      Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(runs->noteView()->isVisible(), kWaitMs);
    const QString shown = runs->noteView()->toPlainText();
    QVERIFY2(shown.contains("Best so far") && shown.contains("lr 5e-4, rank 16"),
             qPrintable(shown));
    QVERIFY2(!shown.contains('#') && !shown.contains("**"), qPrintable(shown));  // rendered
    // Another run without a note hides it.
    runs->selectRuns({m_fixture.trialIds[2]});
    QVERIFY(!runs->noteView()->isVisible());
  }
};

QTEST_MAIN(TestRunTags)
#include "tst_runtags.moc"
