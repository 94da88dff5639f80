// The dashboard on a real run log (tests/ui/runlogfixture.h), offscreen: what the runs, plots,
// compare and hosts panels hold, that rows written while the window is open appear, and the
// exports.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <qcustomplot.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QAction>
#include <QDockWidget>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMutex>
#include <QPlainTextEdit>
#include <QProcess>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStatusBar>
#include <QSysInfo>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeView>

#include <optional>

#include "tests/support/files.h"
#include "tests/support/paths.h"
#include "tests/ui/mainwindowfixture.h"
#include "tests/ui/runlogfixture.h"
#include "ui/builder/buildercontroller.h"
#include "ui/builder/builderpanel.h"
#include "ui/compare/comparepanel.h"
#include "ui/compare/compareplots.h"
#include "ui/data/runlog.h"
#include "ui/hosts/hostspanel.h"
#include "ui/mainwindow.h"
#include "ui/plots/logview.h"
#include "ui/plots/plotspanel.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"
#include "ui/widgets/curveplot.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {
constexpr int kWaitMs = 20000;  // generous: the reader polls every 50 ms here

QString statusOf(RunsPanel* runs, const QString& name) {
  auto* model = runs->model();
  for (int row = 0; row < model->rowCount(); ++row) {
    if (model->runAt(row)->record.name == name) {
      return model->index(row, RunTableModel::StatusCol).data().toString();
    }
  }
  return {};
}
// A loopback port nobody listens on (bound, then closed): a connection to it is refused at once.
int unusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  return bound ? ntohs(addr.sin_port) : -1;
}

}  // namespace

class TestMainWindow : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  testing::SweepFixture m_fixture;
  std::unique_ptr<MainWindow> m_window;

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);  // QSettings in a test location
    QVERIFY(m_dir.isValid());
    m_fixture = testing::makeSweep(m_dir.filePath("runs.db"));
    m_window = testing::openMainWindow(m_dir.filePath("runs.db"), 9, kWaitMs);
    QVERIFY(m_window);
  }

  void hasEveryPanelAsADock() {
    for (const QString& name : MainWindow::panelNames()) {
      QVERIFY2(m_window->dock(name) != nullptr, qPrintable(name));
      QVERIFY(m_window->panel(name) != nullptr);
    }
    QVERIFY(
        m_window->recentFiles().contains(QFileInfo(m_dir.filePath("runs.db")).absoluteFilePath()));
  }

  // A 1080p screen's work area (a panel or task bar taken off, a title bar above) leaves about
  // 1000 pixels: the window opens no taller, every dock's content can shrink to fit.
  void windowFitsA1080pScreen() {
    QString hints;
    for (const QString& name : MainWindow::panelNames())
      hints +=
          QStringLiteral(" %1 %2").arg(name).arg(m_window->panel(name)->minimumSizeHint().height());
    QVERIFY2(m_window->minimumSizeHint().height() <= 1000,
             qPrintable(QStringLiteral("minimum height %1; panels:%2")
                            .arg(m_window->minimumSizeHint().height())
                            .arg(hints)));
    QVERIFY2(m_window->height() <= 1000, qPrintable(QString::number(m_window->height())));
    qInfo("minimum height %d; panels:%s", m_window->minimumSizeHint().height(), qPrintable(hints));
  }

  void runTableShowsRowsAndStatuses() {
    RunsPanel* runs = m_window->runsPanel();
    QCOMPARE(runs->model()->rowCount(), 9);
    QCOMPARE(statusOf(runs, "sweep-3"), QString("pruned"));
    QCOMPARE(statusOf(runs, "sweep-6"), QString("failed"));
    QCOMPARE(statusOf(runs, "sweep-0"), QString("complete"));
    QCOMPARE(statusOf(runs, "live"), QString("running"));
    const int row = runs->model()->rowOf(m_fixture.trialIds[6]);
    QCOMPARE(runs->model()->index(row, RunTableModel::StepCol).data().toString(), QString("11"));
    QVERIFY(runs->model()
                ->index(row, RunTableModel::ParamsCol)
                .data()
                .toString()
                .contains("lr=0.0008"));
    QCOMPARE(runs->model()->index(row, 0).data(Qt::ToolTipRole).toString(),
             QString("rank 1 exited with signal 9"));
    // Filtering by text narrows the table; clearing it restores every row.
    runs->filterEdit()->setText("sweep-3");
    QCOMPARE(runs->visibleRowCount(), 1);
    runs->filterEdit()->clear();
    QCOMPARE(runs->visibleRowCount(), 9);
  }

  void selectionDrivesThePlots() {
    m_window->runsPanel()->selectRuns({m_fixture.trialIds[0], m_fixture.trialIds[3]});
    PlotsPanel* plots = m_window->plotsPanel();
    QTRY_VERIFY_WITH_TIMEOUT(plots->isLoaded(), kWaitMs);
    QCOMPARE(plots->plot("loss")->pointCount("sweep-0 train"), 40);
    QCOMPARE(plots->plot("loss")->pointCount("sweep-0 eval"), 4);
    QCOMPARE(plots->plot("loss")->pointCount("sweep-3 train"), 20);
    QCOMPARE(plots->plot("lr")->pointCount("sweep-0"), 40);
    QCOMPARE(plots->plot("memory")->pointCount("sweep-0 r1 peak"), 40);
    QCOMPARE(plots->plot("memory")->pointCount("sweep-3 r0 allocated"), 20);
    // 2 runs x 2 ranks x 3 memory series.
    CurvePlot* memory = plots->plot("memory");
    QVERIFY(memory != nullptr);
    QCOMPARE(memory->seriesCount(), 12);
    // Stop is for live runs only; both selected runs have ended.
    QVERIFY(!m_window->runsPanel()->stopAction()->isEnabled());
  }

  void compareShowsTheSweep() {
    ComparePanel* compare = m_window->comparePanel();
    QTRY_COMPARE_WITH_TIMEOUT(compare->sweep().trials.size(), qsizetype(8), kWaitMs);
    QCOMPARE(compare->sweep().experimentId, m_fixture.experimentId);
    QCOMPARE(compare->sweep().objectiveKey, QString("eval.loss"));
    QVector<double> expected;
    for (const auto& objective : m_fixture.objectives) {
      if (!objective) continue;
      expected.append(expected.isEmpty() ? *objective : std::min(expected.last(), *objective));
    }
    QCOMPARE(compare->bestSoFar(), expected);
    QCOMPARE(compare->dimmedTrials(), 1);   // sweep-3, pruned
    QCOMPARE(compare->parallelLines(), 6);  // every trial with an objective
    QCOMPARE(compare->slicePoints(), 6);
    compare->setMinimize(false);
    double highest = -1e9;
    for (const auto& objective : m_fixture.objectives)
      highest = std::max(highest, objective.value_or(-1e9));
    QCOMPARE(compare->bestSoFar().last(), highest);
    compare->setMinimize(true);
    // Config diff: the differing parameters first, highlighted.
    compare->setDiffRuns(m_fixture.trialIds[0], m_fixture.trialIds[1]);
    QTableWidget* diff = compare->diffTable();
    QCOMPARE(diff->item(0, 0)->text(), QString("lora_rank"));
    QCOMPARE(diff->item(0, 1)->text(), QString("4"));
    QCOMPARE(diff->item(0, 2)->text(), QString("8"));
    QCOMPARE(diff->item(diff->rowCount() - 1, 0)->text(), QString("objective"));
  }

  void bestSoFarIsARunningMinimum() {
    QCOMPARE(compare::bestSoFar({3, 1, 2, 0.5}, true), QVector<double>({3, 1, 1, 0.5}));
    QCOMPARE(compare::bestSoFar({3, 1, 4, 2}, false), QVector<double>({3, 3, 4, 4}));
  }

  void rowsWrittenWhileOpenAppear() {
    m_window->runsPanel()->selectRuns({m_fixture.liveId});
    PlotsPanel* plots = m_window->plotsPanel();
    QTRY_COMPARE_WITH_TIMEOUT(plots->plot("loss")->pointCount("live train"), 10, kWaitMs);
    QVERIFY(m_window->runsPanel()->stopAction()->isEnabled());
    testing::waitOk(
        m_fixture.store->appendMetrics(testing::stepRows(m_fixture.liveId, 10, 25, 1.0)));
    QTRY_COMPARE_WITH_TIMEOUT(plots->plot("loss")->pointCount("live train"), 25, kWaitMs);
    QCOMPARE(plots->plot("memory")->pointCount("live r1 reserved"), 25);
    RunsPanel* runs = m_window->runsPanel();
    QTRY_COMPARE_WITH_TIMEOUT(
        runs->model()
            ->index(runs->model()->rowOf(m_fixture.liveId), RunTableModel::StepCol)
            .data()
            .toString(),
        QString("24"), kWaitMs);
    backend::NewRun extra;
    extra.name = "late-arrival";
    extra.runDir = "/tmp/none/late";
    extra.worldSize = 1;
    testing::waitOk(m_fixture.store->createRun(extra));
    QTRY_COMPARE_WITH_TIMEOUT(runs->model()->rowCount(), 10, kWaitMs);
    QCOMPARE(runs->selectedRunIds(), QList<qint64>({m_fixture.liveId}));  // selection survives
  }

  void logViewFollowsAndSearches() {
    backend::FileChunk chunk;
    chunk.runId = m_fixture.liveId;
    chunk.rank = 1;
    chunk.file = backend::RankFile::log;
    QByteArray bytes;
    for (int i = 0; i < 30; ++i) {
      const QString text =
          QStringLiteral("rank 1: step %1 %2").arg(i).arg(i % 10 == 0 ? "checkpoint" : "ok");
      chunk.logs.push_back({m_fixture.liveId, 1, backend::RankFile::log, bytes.size(), text});
      bytes += text.toUtf8() + '\n';
    }
    chunk.endOffset = bytes.size();
    QVERIFY(testing::waitOk(m_fixture.store->ingest(chunk)).applied);
    LogView* log = m_window->plotsPanel()->logView();
    QCOMPARE(log->runId(), m_fixture.liveId);
    log->setRank(1);
    QTRY_COMPARE_WITH_TIMEOUT(log->lineCount(), 30, kWaitMs);
    QCOMPARE(log->search("checkpoint"), 3);
    QCOMPARE(log->search("no such text"), 0);
    QVERIFY(log->textEdit()->toPlainText().endsWith("rank 1: step 29 ok"));
  }

  // With several runs selected the log shows the current one, the last the user ctrl+clicked
  // into the selection, and its header says so. Before, three selected runs showed "Select a
  // run to see its log". Clicking back to a single run gives the plain header.
  void logShowsTheCurrentOfSeveralSelectedRuns() {
    RunsPanel* runs = m_window->runsPanel();
    LogView* log = m_window->plotsPanel()->logView();
    QTreeView* view = runs->view();
    const auto rect = [view](qint64 id) {
      for (int row = 0; row < view->model()->rowCount(); ++row) {
        const QModelIndex index = view->model()->index(row, 0);
        if (index.data(RunTableModel::RunIdRole).toLongLong() == id) return view->visualRect(index);
      }
      return QRect();
    };
    const auto click = [&](qint64 id, Qt::KeyboardModifiers modifiers) {
      const QRect cell = rect(id);
      QVERIFY(cell.isValid());
      QTest::mouseClick(view->viewport(), Qt::LeftButton, modifiers, cell.center());
    };
    click(m_fixture.trialIds[0], Qt::NoModifier);
    QCOMPARE(log->runId(), m_fixture.trialIds[0]);
    QCOMPARE(log->title(), QString("Log of sweep-0"));
    click(m_fixture.trialIds[2], Qt::ControlModifier);
    click(m_fixture.trialIds[4], Qt::ControlModifier);
    QCOMPARE(runs->selectedRunIds().size(), qsizetype(3));
    QCOMPARE(log->runId(), m_fixture.trialIds[4]);
    QCOMPARE(log->title(), QString("Log of sweep-4 (current of 3 selected)"));
    QVERIFY(log->textEdit()->placeholderText().contains("sweep-4"));
    // The plots still show all three.
    QCOMPARE(m_window->plotsPanel()->runs().size(), qsizetype(3));
    runs->selectRuns({m_fixture.liveId});
    QCOMPARE(log->runId(), m_fixture.liveId);
    QCOMPARE(log->title(), QString("Log of live"));
    QTRY_VERIFY_WITH_TIMEOUT(m_window->plotsPanel()->isLoaded(), kWaitMs);
  }

  void exportsPlotsAndCsv() {
    PlotsPanel* plots = m_window->plotsPanel();
    // A refresh of the runs table announces the same selection again: the curves must stay (they
    // were cleared, and the reader, having delivered them, sent nothing back).
    QTRY_VERIFY_WITH_TIMEOUT(plots->isLoaded(), kWaitMs);
    emit m_window->runsPanel()->selectionChanged({m_fixture.liveId});
    QTRY_VERIFY_WITH_TIMEOUT(plots->isLoaded(), kWaitMs);
    for (const char* suffix : {"png", "svg", "pdf"}) {
      const QString path = m_dir.filePath(QStringLiteral("loss.%1").arg(suffix));
      auto written = plots->exportPlot("loss", path, 800, 500);
      QVERIFY2(written.ok(), written.ok() ? "" : written.message().c_str());
      QVERIFY2(QFileInfo(path).size() > 500, qPrintable(path));
    }
    QCOMPARE(QImage(m_dir.filePath("loss.png")).size(), QSize(800, 500));
    QVERIFY(!plots->exportPlot("loss", m_dir.filePath("loss.bmp"), 10, 10).ok());
    const QString csv = m_dir.filePath("loss.csv");
    QVERIFY(plots->exportCsv("loss", csv).ok());
    QFile file(csv);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = file.readAll().trimmed().split('\n');
    QCOMPARE(lines.first(), QByteArray("series,step,value"));
    // live train (25 points) + live eval (2 evaluations: steps 9 and 19).
    QCOMPARE(lines.size(), 1 + 25 + 2);
  }

  // A plot's x tick labels never run together. The plots of a grid column share one legend
  // width (the memory plot's, two columns of entries), so the gradient norm plot above it is a
  // narrow one: with 300 steps and QCustomPlot's default of 5 ticks it drew "50 100150200250300"
  // (the demo's first run, 1600x1000). Its ticks now thin out to the width it has.
  void tickLabelsNeverRunTogether() {
    backend::NewRun longer;
    longer.name = "demo-sweep-12";  // a trial's name: its legend entries as wide as they come
    longer.runDir = m_dir.filePath("longer");
    longer.worldSize = testing::SweepFixture::kWorld;
    const qint64 id = testing::waitOk(m_fixture.store->createRun(longer));
    auto rows = testing::stepRows(id, 1, 301, 1.0);
    rows.push_back({id, 1, "mem.estimate", 2.0 * 1048576.0, 0, 1.7e9});  // as the trainer's hello
    testing::waitOk(m_fixture.store->appendMetrics(std::move(rows)));
    testing::waitOk(m_fixture.store->setRunStatus(id, spec::RunStatus::complete));
    RunsPanel* runs = m_window->runsPanel();
    QTRY_VERIFY_WITH_TIMEOUT(runs->model()->runById(id) != nullptr, kWaitMs);
    runs->selectRuns({id});
    PlotsPanel* plots = m_window->plotsPanel();
    QTRY_VERIFY_WITH_TIMEOUT(plots->isLoaded() && plots->runs() == QList<qint64>{id}, kWaitMs);
    m_window->dock("plots")->raise();
    // The labels' extents along the axis, as drawn: none reaches into the next one.
    const auto crowded = [plots]() -> QString {
      for (const QString& plotId : PlotsPanel::plotIds()) {
        const CurvePlot* plot = plots->plot(plotId);
        if (plot == nullptr) return plotId + ": no such plot";
        QCustomPlot* cp = plot->customPlot();
        const QVector<double> ticks = cp->xAxis->tickVector();
        const QVector<QString> labels = cp->xAxis->tickVectorLabels();
        const QFontMetrics metrics(cp->xAxis->tickLabelFont());
        double right = -1e9;
        QString previous;
        for (qsizetype i = 0; i < ticks.size() && i < labels.size(); ++i) {
          const double at = cp->xAxis->coordToPixel(ticks[i]);
          if (at < cp->axisRect()->left() - 1 || at > cp->axisRect()->right() + 1) continue;
          const double half = metrics.horizontalAdvance(labels[i]) / 2.0;
          if (at - half < right + 4)
            return plotId + ": \"" + previous + "\" and \"" + labels[i] + "\" touch (" +
                   QString::number(cp->axisRect()->width()) + " px wide)";
          right = at + half;
          previous = labels[i];
        }
      }
      return {};
    };
    QTRY_COMPARE_WITH_TIMEOUT((plots->repaint(), crowded()), QString(), kWaitMs);
  }

  void hostsPanelLoads() {
    testing::waitOk(
        m_fixture.store->saveHost({"gpu-a", "10.0.0.5", 2222, "alice", "", std::nullopt}));
    QTRY_COMPARE_WITH_TIMEOUT(m_window->hostsPanel()->table()->rowCount(), 1, kWaitMs);
    QCOMPARE(m_window->hostsPanel()->table()->item(0, 1)->text(), QString("alice@10.0.0.5:2222"));
  }

  // Last: it adds an experiment and a run to the log.
  void builderFollowsTheCurrentRun() {
    BuilderController* builder = m_window->builderPanel()->controller();
    // A run started from a file that still says what ran: the builder opens that file.
    const QString file = m_dir.filePath("other.toml");
    const QByteArray text = "[experiment]\nname = \"other\"\n[train]\nlr = 0.002\n";
    {
      QFile out(file);
      QVERIFY(out.open(QIODevice::WriteOnly));
      out.write(text);
    }
    const qint64 otherId = testing::waitOk(m_fixture.store->createExperiment(
        {0, QStringLiteral("other"), file, QString::fromUtf8(text), 0}));
    backend::NewRun run;
    run.experimentId = otherId;
    run.name = QStringLiteral("other-1");
    run.runDir = QStringLiteral("/tmp/none/other-1");
    run.worldSize = 1;
    const qint64 runId = testing::waitOk(m_fixture.store->createRun(run));
    RunsPanel* runs = m_window->runsPanel();
    QTRY_VERIFY_WITH_TIMEOUT(runs->model()->rowOf(runId) >= 0, kWaitMs);
    runs->selectRuns({runId});
    QTRY_COMPARE_WITH_TIMEOUT(builder->recordedExperimentId(), otherId, kWaitMs);
    QCOMPARE(builder->filePath(), file);
    QCOMPARE(builder->experiment().train.lr, 0.002);

    // A trial of the sweep: the experiment as recorded (no file recorded), unsaved, [search] in.
    runs->selectRuns({m_fixture.trialIds[1]});
    QTRY_COMPARE_WITH_TIMEOUT(builder->recordedExperimentId(), m_fixture.experimentId, kWaitMs);
    QVERIFY(builder->filePath().isEmpty());
    QVERIFY(builder->experiment().search.present);

    // Unsaved edits are never replaced: the builder stays and the status bar says why.
    QVERIFY(builder->setField(QStringLiteral("experiment.name"), QStringLiteral("edited")));
    runs->selectRuns({runId});
    QVERIFY2(m_window->statusBar()->currentMessage().contains("unsaved edits"),
             qPrintable(m_window->statusBar()->currentMessage()));
    QTRY_VERIFY_WITH_TIMEOUT(m_window->isLoaded(), kWaitMs);
    QCOMPARE(builder->recordedExperimentId(), m_fixture.experimentId);
    QCOMPARE(builder->fieldText(QStringLiteral("experiment.name")), QString("edited"));
    // Undone, the next pick is followed again.
    builder->undoStack()->undo();
    runs->selectRuns({m_fixture.trialIds[2]});
    runs->selectRuns({runId});
    QTRY_COMPARE_WITH_TIMEOUT(builder->recordedExperimentId(), otherId, kWaitMs);

    // A file the user opens stays while code selects runs (the first load, the showcase), and
    // gives way when the user picks a run.
    const QString mine = m_dir.filePath("mine.toml");
    {
      QFile out(mine);
      QVERIFY(out.open(QIODevice::WriteOnly));
      out.write("[experiment]\nname = \"mine\"\n");
    }
    QVERIFY(m_window->openExperiment(mine));
    QCOMPARE(builder->recordedExperimentId(), qint64(-1));
    m_window->selectShowcase();
    QTRY_VERIFY_WITH_TIMEOUT(m_window->isLoaded(), kWaitMs);
    QCOMPARE(builder->filePath(), mine);
    runs->selectRuns({runId});
    QTRY_COMPARE_WITH_TIMEOUT(builder->recordedExperimentId(), otherId, kWaitMs);

    // Clone and edit on a trial: its experiment without [search], the trial's values applied
    // as edits (unsaved); values that are not fields of the experiment (this fixture's program
    // parameters) are named, not dropped silently.
    runs->selectRuns({m_fixture.trialIds[4]});
    QTRY_COMPARE_WITH_TIMEOUT(builder->recordedExperimentId(), m_fixture.experimentId, kWaitMs);
    runs->cloneAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(builder->isModified(), kWaitMs);
    QVERIFY(!builder->experiment().search.present);
    const QString said = m_window->statusBar()->currentMessage();
    QVERIFY2(said.contains("Cloned into the builder") && said.contains("left out: lora_rank, lr"),
             qPrintable(said));
  }

  // File > Import… without its dialogs: the file is read on a pool thread, so startImport
  // returns before anything reaches the builder and the result comes back through the event
  // loop (the GUI thread never parses a file, which a YAML bomb could make take minutes). The
  // report's mapped values are then in the builder; a second import waits for the first; a file
  // with contradictory keys opens nothing and leaves the builder's experiment as it was.
  void importIsReadOffTheGuiThreadThenOpensInTheBuilder() {
    BuilderController* builder = m_window->builderPanel()->controller();
    const QString fixtures = shardscope::testing::sourceDir() + "/tests/backend/import/fixtures/";
    std::optional<Result<backend::ImportResult>> finished;
    QString finishedPath;
    const auto connection =
        connect(m_window.get(), &MainWindow::importFinished, this,
                [&](const QString& path, const Result<backend::ImportResult>& r) {
                  finishedPath = path;
                  finished = r;
                });
    const QString before = builder->fieldText(QStringLiteral("launch.nproc_per_node"));
    QVERIFY(
        m_window->startImport(backend::ImportKind::accelerate, fixtures + "accelerate_fsdp2.yaml"));
    QVERIFY(!finished);
    QVERIFY(m_window->isImporting());
    QCOMPARE(builder->fieldText(QStringLiteral("launch.nproc_per_node")), before);
    QCOMPARE(m_window->statusBar()->currentMessage(), QString("Importing accelerate_fsdp2.yaml…"));
    QVERIFY(!m_window->startImport(backend::ImportKind::accelerate,
                                   fixtures + "accelerate_fsdp1.yaml"));
    QTRY_VERIFY_WITH_TIMEOUT(finished.has_value(), kWaitMs);
    QVERIFY(!m_window->isImporting());
    QCOMPARE(finishedPath, fixtures + "accelerate_fsdp2.yaml");
    QVERIFY2(*finished && (*finished)->ok(), *finished ? "" : finished->message().c_str());
    QCOMPARE(builder->fieldText(QStringLiteral("shard.strategy")), QString("SHARD_GRAD_OP"));
    QCOMPARE(builder->fieldText(QStringLiteral("launch.nproc_per_node")), QString("4"));
    QCOMPARE(builder->filePath(), QString());  // unsaved
    finished.reset();
    QVERIFY(m_window->startImport(backend::ImportKind::accelerate,
                                  fixtures + "accelerate_legacy_conflict.yaml"));
    QTRY_VERIFY_WITH_TIMEOUT(finished.has_value(), kWaitMs);
    QVERIFY(*finished && !(*finished)->ok());
    QCOMPARE(builder->fieldText(QStringLiteral("shard.strategy")), QString("SHARD_GRAD_OP"));
    disconnect(connection);
  }

  // Launch as a new user does it: New from template > demo, then Launch. The unsaved template
  // is saved for them (before: a warning in a log nobody reads, and nothing happened); the
  // window says what it launches, brings the runs to the front (before: the Builder stayed in
  // front) and selects the run once it is recorded, so the plots show it.
  void launchSaysAndShowsWhatItStarted() {
    BuilderPanel* builder = m_window->builderPanel();
    m_window->dock("builder")->raise();
    QSignalSpy launched(m_window.get(), &MainWindow::launchRequested);
    QString error;
    QVERIFY2(builder->controller()->loadTemplate("demo", &error), qPrintable(error));
    builder->controller()->validateNow();
    QVERIFY(builder->launchButton()->isEnabled());
    QTest::mouseClick(builder->launchButton(), Qt::LeftButton);
    QCOMPARE(launched.size(), 1);
    const QString saved = launched.at(0).at(0).toString();
    QVERIFY2(QFile::exists(saved), qPrintable(saved));
    QCOMPARE(builder->controller()->filePath(), saved);
    QVERIFY2(m_window->statusBar()->currentMessage().startsWith("Launching " + saved),
             qPrintable(m_window->statusBar()->currentMessage()));
    QVERIFY(!m_window->dock("runs")->visibleRegion().isEmpty());
    QVERIFY(m_window->dock("builder")->visibleRegion().isEmpty());
    // What the run lifecycle then records (app::RunControl's supervisor, tst_liverun).
    backend::NewRun run;
    run.name = "demo-1";
    run.runDir = m_dir.filePath("demo-1");
    run.worldSize = 2;
    const qint64 id = testing::waitOk(m_fixture.store->createRun(run));
    QTRY_COMPARE_WITH_TIMEOUT(m_window->runsPanel()->selectedRunIds(), QList<qint64>({id}),
                              kWaitMs);
    // The run count sits apart, so the reload did not wipe what the launch said.
    QVERIFY2(m_window->statusBar()->currentMessage().startsWith("Launching"),
             qPrintable(m_window->statusBar()->currentMessage()));
    auto* count = m_window->statusBar()->findChild<QLabel*>("runCount");
    QVERIFY(count != nullptr);
    QVERIFY2(count->text().startsWith(QString("%1 run(s) in").arg(m_window->runCount())),
             qPrintable(count->text()));
    QFile::remove(saved);
  }

  // A new run log: the runs panel says how to start (before: an empty table, empty axes and no
  // word), and steps aside for the table once a run exists.
  void emptyRunLogSaysHowToStart() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    MainWindow window(nullptr, 50);
    window.resize(1600, 1000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    const QString path = dir.filePath("new.db");
    window.openRunLog(path);
    RunsPanel* runs = window.runsPanel();
    QTRY_VERIFY_WITH_TIMEOUT(runs->isLoaded(), kWaitMs);
    QVERIFY(runs->emptyState()->isVisible());
    QVERIFY(!runs->view()->isVisible());
    const QString hint = runs->emptyState()->text();
    QVERIFY2(hint.contains("New from") && hint.contains("demo") && hint.contains("Launch"),
             qPrintable(hint));
    // The plots too: a word on how to start in place of six empty axes (before: axes 0..5).
    auto* plotsHint = window.plotsPanel()->findChild<QLabel*>("plotsEmptyState");
    QVERIFY(plotsHint != nullptr);
    QVERIFY(plotsHint->isVisible());
    QVERIFY2(plotsHint->text().contains("Builder") && plotsHint->text().contains("demo") &&
                 plotsHint->text().contains("Launch"),
             qPrintable(plotsHint->text()));
    for (const QString& id : PlotsPanel::plotIds()) {
      const CurvePlot* plot = window.plotsPanel()->plot(id);
      QVERIFY2(plot != nullptr && !plot->isVisible(), qPrintable(id));
    }
    // Compare (behind Plots): what a sweep is and how to start one, in place of eight empty
    // plots (before: their axes and "No finished trial with an objective yet").
    ComparePanel* compare = window.comparePanel();
    auto* compareHint = compare->findChild<QLabel*>("compareEmptyState");
    QVERIFY(compareHint != nullptr);
    QTRY_VERIFY_WITH_TIMEOUT(compareHint->isVisibleTo(compare), kWaitMs);
    QVERIFY2(compareHint->text().contains("Builder") && compareHint->text().contains("search") &&
                 compareHint->text().contains("demo-sweep.toml"),
             qPrintable(compareHint->text()));
    for (auto* plot : compare->findChildren<QCustomPlot*>())
      QVERIFY2(!plot->isVisibleTo(compare), qPrintable(plot->objectName()));
    auto store = backend::RunStore::open(path);
    QVERIFY2(store.ok(), store.ok() ? "" : store.message().c_str());
    backend::NewRun run;
    run.name = "first";
    run.runDir = dir.filePath("first");
    run.worldSize = 1;
    const qint64 first = testing::waitOk((*store)->createRun(run));
    QTRY_VERIFY_WITH_TIMEOUT(runs->view()->isVisible(), kWaitMs);
    QVERIFY(!runs->emptyState()->isVisible());
    // The first run is selected by itself: its plots replace the hint.
    const CurvePlot* loss = window.plotsPanel()->plot("loss");
    QVERIFY(loss != nullptr);
    QTRY_VERIFY_WITH_TIMEOUT(loss->isVisible(), kWaitMs);
    QVERIFY(!plotsHint->isVisible());
    // Its log panel says "yet" while it may still write, not once it has ended (before: "No log
    // lines from first yet" on a finished run whose trainer printed nothing).
    auto* log = window.plotsPanel()->logView()->findChild<QPlainTextEdit*>();
    QVERIFY(log != nullptr);
    QVERIFY2(log->placeholderText().contains("yet"), qPrintable(log->placeholderText()));
    testing::waitOk((*store)->setRunStatus(first, spec::RunStatus::running));
    testing::waitOk((*store)->setRunStatus(first, spec::RunStatus::complete));
    QTRY_VERIFY_WITH_TIMEOUT(log->placeholderText().contains("has ended"), kWaitMs);
    QVERIFY2(
        !log->placeholderText().contains("yet") && log->placeholderText().contains("rank-N.log"),
        qPrintable(log->placeholderText()));
    // With runs but none selected, the hint says to pick one.
    runs->selectRuns({});
    QTRY_VERIFY_WITH_TIMEOUT(plotsHint->isVisible(), kWaitMs);
    QVERIFY2(plotsHint->text().contains("Select a run"), qPrintable(plotsHint->text()));
    // A run of an experiment: Compare shows it (its plots replace the hint).
    backend::ExperimentRecord experiment;
    experiment.name = "second";
    experiment.toml = "[experiment]\nname = \"second\"\n";
    run.experimentId = testing::waitOk((*store)->createExperiment(experiment));
    run.name = "second";
    run.runDir = dir.filePath("second");
    testing::waitOk((*store)->createRun(run));
    QTRY_VERIFY_WITH_TIMEOUT(!compareHint->isVisibleTo(compare), kWaitMs);
    QVERIFY(compare->findChild<QCustomPlot*>()->isVisibleTo(compare));
  }

  // A sweep marks its study ended, then exits. The window's sweep watch looked at the study as
  // last read, which may predate the end (the poll that delivers it not come yet), found the
  // process gone and said "no process runs it (killed or crashed)" with Sweep > Adopt sweep
  // enabled, for a sweep that had finished: seen after the first Launch of the demo sweep. Now it
  // reads the run log again before saying so; a study that is really left running with no process
  // is still reported. The window here never polls, so only the watch's own read brings the end.
  void finishedSweepIsNotCalledKilled() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("ending.db");
    auto opened = backend::RunStore::open(path);
    QVERIFY2(opened.ok(), opened.ok() ? "" : opened.message().c_str());
    backend::RunStore& store = **opened;
    backend::ExperimentRecord experiment;
    experiment.name = "ending";
    experiment.toml = "[search]\nobjective = \"objective\"\n";
    backend::NewStudy newStudy;
    newStudy.name = "ending";
    newStudy.experimentId = testing::waitOk(store.createExperiment(experiment));
    newStudy.objectives = {"objective"};
    newStudy.directions = {"minimize"};
    newStudy.sampler = "random";
    const qint64 studyId = testing::waitOk(store.createStudy(newStudy));
    backend::NewTrial trial;
    trial.studyId = studyId;
    trial.runDir = dir.filePath("ending-0");
    trial.worldSize = 1;
    testing::waitOk(store.startTrialRun(trial));
    // The sweep's process: alive while the study runs.
    QProcess sweeper;
    sweeper.start("sleep", {"600"});
    QVERIFY(sweeper.waitForStarted());
    const qint64 pid = sweeper.processId();
    const QString host = QSysInfo::machineHostName();
    testing::waitOk(store.stampSweep(studyId, pid, host));

    MainWindow window(nullptr, 3600 * 1000);
    window.resize(1600, 1000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    window.openRunLog(path);
    QTRY_VERIFY_WITH_TIMEOUT(window.comparePanel()->sweep().study.studyId == studyId &&
                                 window.comparePanel()->sweep().study.running,
                             kWaitMs);
    auto* adopt = window.findChild<QAction*>(QStringLiteral("sweep-adopt"));
    auto* label = window.findChild<QLabel*>(QStringLiteral("sweepState"));
    QVERIFY(adopt != nullptr && label != nullptr);
    window.checkSweepProcess();
    QVERIFY(!adopt->isEnabled());
    QVERIFY(label->text().isEmpty());

    // The sweep ends as SweepLoop::finish and ~SweepControl do, then its process exits.
    testing::waitOk(store.setStudyStatus(studyId, backend::StudyStatus::complete));
    testing::waitOk(store.clearSweepStamp(studyId, pid, host));
    sweeper.kill();
    QVERIFY(sweeper.waitForFinished());
    QVERIFY(window.comparePanel()->sweep().study.running);  // as last read
    window.checkSweepProcess();
    QVERIFY2(label->text().isEmpty(), qPrintable(label->text()));
    QVERIFY(!adopt->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(!window.comparePanel()->sweep().study.running, kWaitMs);
    QVERIFY2(label->text().isEmpty(), qPrintable(label->text()));
    QVERIFY(!adopt->isEnabled());

    // Running again with a process that has died (killed): said, and Adopt offered.
    testing::waitOk(store.setStudyStatus(studyId, backend::StudyStatus::running));
    testing::waitOk(store.stampSweep(studyId, pid, host));
    window.runLog().refresh();
    QTRY_VERIFY_WITH_TIMEOUT(adopt->isEnabled(), kWaitMs);
    QVERIFY2(label->text().contains("Sweep ending: no process runs it"), qPrintable(label->text()));
  }

  // A PostgreSQL password in any form libpq takes shows in no window text (title, status bar,
  // labels, tool tips, menus), in no log line and in no settings file, while the window tries to
  // open the server's run log (here a port nobody listens on) and says it cannot.
  void passwordIsInNoWindowTextLogOrSettings() {
    const int port = unusedPort();
    QVERIFY(port > 0);
    const QString host = QStringLiteral("127.0.0.1:%1").arg(port);
    const QStringList specs{
        "postgresql://alice:s3cretPW@" + host + "/runs",
        "postgresql://alice:s3cretPW@" + host,  // no database name: the title used the host part
        "postgresql://alice@" + host + "/runs?password=s3cretPW&sslmode=disable",
        "postgresql://alice:s3cretPW@" + host + "," + host + "/runs",
        "postgresql://" + host + "," + host + "/runs?user=alice&password=s3cretPW",
        QStringLiteral("host=127.0.0.1 port=%1 password=s3cretPW dbname=runs").arg(port)};
    static QMutex logMutex;
    static QStringList logged;
    const QtMessageHandler previous =
        qInstallMessageHandler([](QtMsgType, const QMessageLogContext&, const QString& text) {
          const QMutexLocker lock(&logMutex);
          logged << text;
        });
    MainWindow window(nullptr, 50);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    for (const QString& spec : specs) {
      window.statusBar()->clearMessage();
      window.openRunLog(spec);
      // The reader tried and said why it could not (libpq's refusal, or the key=value refusal).
      QTRY_VERIFY2_WITH_TIMEOUT(window.statusBar()->currentMessage().contains("127.0.0.1") &&
                                    !window.statusBar()->currentMessage().startsWith("Reading"),
                                qPrintable(window.statusBar()->currentMessage()), kWaitMs);
      QStringList shown{window.windowTitle(), window.statusBar()->currentMessage()};
      for (const QWidget* w : window.findChildren<QWidget*>()) {
        shown << w->windowTitle() << w->toolTip();
        if (const auto* label = qobject_cast<const QLabel*>(w)) shown << label->text();
      }
      for (const QAction* a : window.findChildren<QAction*>()) shown << a->text() << a->toolTip();
      const QString all = shown.join('\n');
      QVERIFY2(!all.contains("s3cret"), qPrintable(spec + ": " + all));
    }
    QSettings settings;
    settings.sync();
    const QByteArray file = testing::readAll(settings.fileName());
    QVERIFY2(!file.isEmpty() && !file.contains("s3cret"), file.constData());
    qInstallMessageHandler(previous);
    const QMutexLocker lock(&logMutex);
    QVERIFY(!logged.isEmpty());
    QVERIFY2(!logged.join('\n').contains("s3cret"), qPrintable(logged.join('\n')));
  }

  void cleanupTestCase() {
    m_window.reset();
    m_fixture.store.reset();
  }
};

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
