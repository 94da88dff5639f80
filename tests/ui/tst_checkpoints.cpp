// The Checkpoints dialog in the real main window on a real X server (tests/ui/xvfb_run.sh), over a
// real run log holding a run's rank-0 events as a follower stores them: sharded checkpoints at
// steps 2 and 4 (step 2's folder pruned since, step 4's on disk with files of known sizes), an
// evaluation at each, and a probe answer at step 4. The dialog, opened from the table's context
// menu, lists both with their kind, size ("removed" for step 2) and eval loss, and the total;
// Resume from here asks the app for a new run from step 4 (a pruned checkpoint cannot be resumed);
// Open samples at this step shows the run's answers in the Samples panel with step 4's column
// selected. The dialog is kept as a picture in build/tests/artifacts for a human to look at.
#include <QApplication>
#include <QContextMenuEvent>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QTreeView>

#include "backend/monitor/eventstream.h"
#include "spec/events.h"
#include "tests/support/paths.h"
#include "tests/ui/mainwindowfixture.h"
#include "tests/ui/runlogfixture.h"
#include "ui/mainwindow.h"
#include "ui/runs/checkpointsdialog.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"
#include "ui/samples/samplesmodel.h"
#include "ui/samples/samplespanel.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {
constexpr int kWaitMs = 20000;

bool writeBytes(const QString& path, qint64 bytes) {
  if (!QDir().mkpath(QFileInfo(path).absolutePath())) return false;
  QFile file(path);
  return file.open(QIODevice::WriteOnly) && file.write(QByteArray(bytes, 'x')) == bytes;
}

QByteArray line(qint64& seq, spec::Payload body) {
  const qint64 at = seq++;
  return QByteArray::fromStdString(
             spec::encode_event({{1, 0, at, 1.7e9 + double(at)}, std::move(body)})) +
         '\n';
}

QString text(QTableWidget* table, int row, int column) {
  const QTableWidgetItem* item = table->item(row, column);
  return item == nullptr ? QString() : item->text();
}

int columnNamed(QTableWidget* table, const QString& name) {
  for (int c = 0; c < table->columnCount(); ++c)
    if (table->horizontalHeaderItem(c)->text() == name) return c;
  return -1;
}

}  // namespace

class TestCheckpoints : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  std::unique_ptr<backend::RunStore> m_store;
  std::unique_ptr<MainWindow> m_window;
  qint64 m_run = 0;

  QString runDir() const { return m_dir.filePath("runs/ck-1"); }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
    auto store = backend::RunStore::open(m_dir.filePath("runs.db"));
    QVERIFY2(store, store ? "" : store.message().c_str());
    m_store = std::move(*store);
    m_run = testing::waitOk(m_store->createRun({std::nullopt, "ck-1", runDir(), {}, 1}));
    testing::waitOk(m_store->setRunLocation(
        m_run, QJsonObject{{"kind", "local"}, {"run_dir", runDir()}, {"world_size", 1}}));
    testing::waitOk(m_store->setRunStatus(m_run, spec::RunStatus::running));
    qint64 seq = 0;
    spec::SampleEvent answer;
    answer.step = 4;
    answer.probe = "sum";
    answer.prompt = "2 + 2 =";
    answer.text = "four";
    answer.tokens = 1;
    QByteArray bytes;
    bytes += line(seq, spec::EvalEvent{2, {{"loss", 1.5}}});
    bytes += line(seq, spec::CkptEvent{2, "ckpt/step-000002", "sharded"});
    bytes += line(seq, spec::EvalEvent{4, {{"loss", 1.25}}});
    bytes += line(seq, answer);
    bytes += line(seq, spec::CkptEvent{4, "ckpt/step-000004", "sharded"});
    backend::EventStream stream;
    const auto stored = m_store->ingest(backend::parseEventsChunk(m_run, bytes, stream)).get();
    QVERIFY2(stored, stored ? "" : stored.message().c_str());
    testing::waitOk(m_store->setRunStatus(m_run, spec::RunStatus::complete, {}, 1.25));
    // Step 2's folder was pruned (train.ckpt_keep); step 4's holds 4900 + 100 bytes.
    QVERIFY(writeBytes(runDir() + "/ckpt/step-000004/rank-0.safetensors", 4900));
    QVERIFY(writeBytes(runDir() + "/ckpt/step-000004/meta.json", 100));
    QVERIFY(writeBytes(runDir() + "/rank-0.log", 1000));
    m_window = shardscope::testing::openMainWindow(m_dir.filePath("runs.db"), 1, kWaitMs);
    QVERIFY(m_window);
  }

  void contextMenuOpensTheListWithSizesAndEvals() {
    RunsPanel* runs = m_window->runsPanel();
    runs->selectRuns({m_run});
    const QModelIndex cell = runs->view()->model()->index(0, RunTableModel::NameCol);
    const QPoint at = runs->view()->visualRect(cell).center();
    bool picked = false;
    QTimer::singleShot(0, this, [&picked] {
      auto* menu = qobject_cast<QMenu*>(QApplication::activePopupWidget());
      if (menu == nullptr) return;
      for (QAction* action : menu->actions()) {
        if (action->text() == "Checkpoints...") {
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
    CheckpointsDialog* dialog = runs->checkpointsDialog();
    QVERIFY(dialog != nullptr);
    QVERIFY(QTest::qWaitForWindowExposed(dialog));
    QTRY_VERIFY_WITH_TIMEOUT(dialog->isLoaded(), kWaitMs);

    QTableWidget* table = dialog->table();
    QCOMPARE(table->rowCount(), 2);
    const int loss = columnNamed(table, "eval loss");
    QVERIFY(loss > 0);
    QCOMPARE(text(table, 0, 0), QString("2"));
    QCOMPARE(text(table, 0, 1), QString("sharded"));
    QCOMPARE(text(table, 0, 3), QString("removed"));
    QCOMPARE(text(table, 0, loss), QString("1.5"));
    QCOMPARE(text(table, 1, 0), QString("4"));
    QCOMPARE(text(table, 1, 3), QString("4.9 KiB"));
    QCOMPARE(text(table, 1, loss), QString("1.25"));
    QCOMPARE(text(table, 1, table->columnCount() - 1), runDir() + "/ckpt/step-000004");
    QCOMPARE(dialog->checkpoints()[1].bytes, qint64(5000));
    QCOMPARE(dialog->status()->text(),
             QString("2 checkpoint(s) recorded, 1 on disk taking 4.9 KiB"));
    QTest::qWait(50);
    const QString artifacts = testing::binaryDir() + "/tests/artifacts";
    QVERIFY(QDir().mkpath(artifacts));
    QVERIFY(dialog->grab().save(artifacts + "/checkpoints-dialog.png"));
  }

  void resumeFromHereAsksForANewRunFromThatStep() {
    CheckpointsDialog* dialog = m_window->runsPanel()->checkpointsDialog();
    QVERIFY(dialog != nullptr);
    QVERIFY(dialog->selectStep(2));
    QVERIFY(!dialog->resumeButton()->isEnabled());  // its folder is gone
    QVERIFY(!dialog->samplesButton()->isEnabled());
    QVERIFY(dialog->selectStep(4));
    QVERIFY(dialog->resumeButton()->isEnabled());
    QSignalSpy asked(m_window.get(), &MainWindow::resumeFromCheckpointRequested);
    QTest::mouseClick(dialog->resumeButton(), Qt::LeftButton);
    QCOMPARE(asked.size(), 1);
    QCOMPARE(asked[0][0].toLongLong(), m_run);
    QCOMPARE(asked[0][1].toString(), QString("ck-1"));
    QCOMPARE(asked[0][2].toLongLong(), qint64(4));
  }

  void openSamplesShowsThatStep() {
    CheckpointsDialog* dialog = m_window->runsPanel()->checkpointsDialog();
    QVERIFY(dialog != nullptr);
    QVERIFY(dialog->selectStep(4));
    QVERIFY(dialog->samplesButton()->isEnabled());
    QTest::mouseClick(dialog->samplesButton(), Qt::LeftButton);
    SamplesPanel* samples = m_window->findChild<SamplesPanel*>();
    QVERIFY(samples != nullptr);
    QTRY_VERIFY_WITH_TIMEOUT(samples->isLoaded(), kWaitMs);
    QCOMPARE(samples->model()->runs(), QList<qint64>{m_run});
    const int column = samples->model()->columnOf(m_run, 4);
    QVERIFY(column > 0);
    QTRY_COMPARE_WITH_TIMEOUT(samples->view()->currentIndex().column(), column, kWaitMs);
  }
};

QTEST_MAIN(TestCheckpoints)
#include "tst_checkpoints.moc"
