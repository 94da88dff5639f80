// The dashboard's workflow as a person drives it, on a real X server (Xvfb, through
// tests/ui/xvfb_run.sh; the test fails when Xvfb is missing). The launches go where the dashboard
// sends them: its own RunControl (app/shardscope/runcontrol.cpp, compiled into this test) starts
// runs and sweeps through backend/lifecycle in its control thread; supervisors
// (`shardscope-cli supervise RUN`) and sweeps (`shardscope-cli sweep`) run in their own
// sessions, and the window sees them only through the run log.
//   - a live run (fake trainer, 2 ranks, 40 steps of 150 ms) launched from the builder moves
//     the run table and the plots, and its curve ends holding every loss row of the log;
//   - a run stopped from the window resumes from its checkpoint with Resume;
//   - the real `shardscope --launch` starts a sweep and is SIGKILLed mid-sweep; a window opened
//     again finds the sweep running and follows it to its end;
//   - a sweep launched from the builder is pruned, paused, stopped and resumed from the window.
// The first window is kept as tests/artifacts/liverun-window.png in the build tree.
#include <qcustomplot.h>
#include <QtTest>

#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QLabel>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>

#include <csignal>

#include "app/shardscope/runcontrol.h"
#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "tests/support/experiment.h"
#include "tests/support/paths.h"
#include "ui/builder/buildercontroller.h"
#include "ui/builder/builderpanel.h"
#include "ui/compare/comparepanel.h"
#include "ui/mainwindow.h"
#include "ui/plots/plotspanel.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"
#include "ui/widgets/curveplot.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

const QString kCli =
    shardscope::testing::envPath("SHARDSCOPE_TEST_CLI", "the shardscope-cli executable");
const QString kGui =
    shardscope::testing::envPath("SHARDSCOPE_TEST_GUI", "the shardscope executable");
const QString kFake =
    shardscope::testing::envPath("SHARDSCOPE_TEST_FAKETRAINER", "the faketrainer executable");
constexpr int kWaitMs = 60000;  // generous: the machine is shared and loaded
constexpr int kSteps = 40;

QString statusAt(RunsPanel* runs, int row) {
  return runs->model()->index(row, RunTableModel::StatusCol).data().toString();
}

// Flaws once seen in liverun-window.png: the legend covered the memory curves' right end; MFU of
// a flat series drew on -10..10; the x axis stopped at step 38 of 40. After the run: every x axis
// reaches the last step, no y axis of these non-negative metrics goes below 0, a flat series
// includes 0, and no legend overlaps the data area or the curves' last points.
void checkPlotLayout(PlotsPanel* panel) {
  panel->repaint();  // a paint catches the plots up with points not yet replotted
  // The fake trainer writes no `sys` or `phases` events: those plots say so in words instead.
  const auto shown = [panel](const QString& id) { return panel->missingNote(id) == nullptr; };
  for (const QString& id : PlotsPanel::plotIds()) {
    if (!shown(id)) continue;
    QCustomPlot* cp = panel->plot(id)->customPlot();
    QVERIFY2(cp->graphCount() > 0, qPrintable(id));
    const QCPRange x = cp->xAxis->range();
    const QCPRange y = cp->yAxis->range();
    QVERIFY2(x.upper >= kSteps, qPrintable(id + ": x ends at " + QString::number(x.upper)));
    QVERIFY2(y.lower >= 0, qPrintable(id + ": y starts at " + QString::number(y.lower)));
    const QRect data = cp->axisRect()->rect();
    const QRect legend = cp->legend->outerRect();
    QVERIFY2(!legend.intersects(data), qPrintable(id + ": the legend overlaps the data area"));
    for (int g = 0; g < cp->graphCount(); ++g) {
      const QCPGraph* graph = cp->graph(g);
      QVERIFY2(!graph->data()->isEmpty(), qPrintable(graph->name()));
      const auto last = graph->data()->constEnd() - 1;
      const QPointF at(cp->xAxis->coordToPixel(last->key), cp->yAxis->coordToPixel(last->value));
      QVERIFY2(data.adjusted(-1, -1, 1, 1).contains(at.toPoint()),
               qPrintable(graph->name() + ": its last point is outside the data area"));
      QVERIFY2(!legend.contains(at.toPoint()),
               qPrintable(graph->name() + ": the legend covers its last point"));
    }
  }
  // Plots stacked in one grid column end their x axes at the same pixel, whatever their legends
  // hold (once loss and throughput ended 20 px apart, memory's long legend shrank its plot).
  const QStringList ids = PlotsPanel::plotIds();
  for (int i = PlotsPanel::kGridColumns; i < ids.size(); ++i) {
    if (!shown(ids[i]) || !shown(ids[i - PlotsPanel::kGridColumns])) continue;
    const int above =
        panel->plot(ids[i - PlotsPanel::kGridColumns])->customPlot()->axisRect()->rect().right();
    const int below = panel->plot(ids[i])->customPlot()->axisRect()->rect().right();
    QVERIFY2(above == below,
             qPrintable(ids[i - PlotsPanel::kGridColumns] + " ends at x " + QString::number(above) +
                        ", " + ids[i] + " at " + QString::number(below)));
  }
  // The fake trainer's MFU and throughput are flat: their axes start at 0 and hold the value.
  for (const QString& id : {QStringLiteral("mfu"), QStringLiteral("tokens_per_s")}) {
    QCustomPlot* cp = panel->plot(id)->customPlot();
    const double value = cp->graph(0)->data()->constBegin()->value;
    QCOMPARE(cp->yAxis->range().lower, 0.0);
    QVERIFY2(cp->yAxis->range().upper > value,
             qPrintable(id + ": " + QString::number(cp->yAxis->range().upper)));
  }
}

// A run that reports MFU 0 throughout gets 0..1, not -10..10.
void checkZeroSeriesAxis(PlotsPanel* panel) {
  CurvePlot* mfu = panel->plot(QStringLiteral("mfu"));
  mfu->clear();
  mfu->setSeries(QStringLiteral("zeros"), {1, 2, 3}, {0, 0, 0});
  panel->fitAxes(QStringLiteral("mfu"));
  QCOMPARE(mfu->customPlot()->yAxis->range().lower, 0.0);
  QCOMPARE(mfu->customPlot()->yAxis->range().upper, 1.0);
}

// A sweep of program trials in `folder`: obj.py prints an eval line every 0.3 s for `steps`
// steps, then done; NAME.toml searches x in [-2, 2] with `trials` random trials, one at a time.
// Returns the experiment's path, empty when a file could not be written.
QString writeProgramSweep(const QString& folder, const QString& name, int steps, int seed,
                          int trials) {
  if (!QDir().mkpath(folder)) return {};
  QFile program(QDir(folder).filePath("obj.py"));
  if (!program.open(QIODevice::WriteOnly)) return {};
  program.write(QStringLiteral(R"(import json, sys, time
x = float(dict(a[2:].split("=", 1) for a in sys.argv[1:])["x"])
for step in range(1, %1):
    print(json.dumps({"ev": "eval", "step": step, "metrics": {"loss": x * x + 1.0 / step}}),
          flush=True)
    time.sleep(0.3)
print(json.dumps({"ev": "done", "status": "complete", "objective": x * x}), flush=True)
)")
                    .arg(steps + 1)
                    .toUtf8());
  const QString path = QDir(folder).filePath(name + ".toml");
  QFile exp(path);
  if (!exp.open(QIODevice::WriteOnly)) return {};
  exp.write(QStringLiteral(R"([experiment]
name = "%1"

[search]
program = ["python3", "obj.py"]
sampler = "random"
seed = %2
n_trials = %3
concurrency = 1
objectives = {loss = "minimize"}

[search.space.x]
type = "float"
low = -2.0
high = 2.0
)")
                .arg(name)
                .arg(seed)
                .arg(trials)
                .toUtf8());
  return path;
}

// Stops study `name`'s sweep when a test leaves (also when it fails early): the sweep runs in
// its own session and would outlive the test and its temporary folder.
struct StopSweepAtExit {
  QString db;
  QString name;
  ~StopSweepAtExit() { QProcess::execute(kCli, {"--db", db, "study", "stop", name}); }
};

}  // namespace

class TestLiveRun : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;

  // A tiny experiment for the fake trainer: 2 local ranks, its own small data file.
  QString writeExperiment() {
    shardscope::testing::TinyExperiment experiment;
    experiment.name = QStringLiteral("live");
    experiment.trainer = kFake;
    experiment.steps = kSteps;
    return shardscope::testing::writeExperiment(m_dir.path(), experiment);
  }

 private slots:
  void initTestCase() {
    // A real X server, never a silent fallback to the offscreen platform.
    QCOMPARE(QGuiApplication::platformName(), QStringLiteral("xcb"));
    QStandardPaths::setTestModeEnabled(true);  // QSettings in a test location
    QVERIFY(m_dir.isValid());
    // The fake trainer reads its pace from the environment the launcher passes on.
    qputenv("SHARDSCOPE_FAKE_MODE",
            QByteArray("--steps ") + QByteArray::number(kSteps) + " --step-ms 150");
  }

  void liveRunMovesTableAndPlots() {
    const QString db = m_dir.filePath("runs.db");
    {
      auto store = backend::RunStore::open(db);  // an empty run log, as a first start makes
      QVERIFY2(store.ok(), store.ok() ? "" : store.message().c_str());
    }
    const QString experiment = writeExperiment();
    QVERIFY(!experiment.isEmpty());

    MainWindow window(nullptr, 50);
    window.resize(1600, 1000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    window.openRunLog(db);
    QTRY_VERIFY_WITH_TIMEOUT(window.runsPanel()->isLoaded(), kWaitMs);
    QCOMPARE(window.runCount(), 0);

    // What app/shardscope/main.cpp wires to MainWindow::launchRequested.
    backend::RunLifecycle::Settings settings;
    settings.dbPath = db;
    settings.supervisor = kCli;
    app::RunControl control(settings, 5);
    connect(&window, &MainWindow::launchRequested, &control, &app::RunControl::launch);
    QSignalSpy said(&control, &app::RunControl::message);
    QVERIFY(window.openExperiment(experiment).ok());
    BuilderPanel* builder = window.builderPanel();
    builder->controller()->validateNow();
    QVERIFY2(builder->launchButton()->isEnabled(),
             qPrintable(QStringList(builder->controller()->issues().keys()).join(", ")));
    QTest::mouseClick(builder->launchButton(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(said.count(), 1, kWaitMs);
    const QString started = said.first().first().toString();
    QVERIFY2(started.startsWith("Started run live-"), qPrintable(started));

    RunsPanel* runs = window.runsPanel();
    QTRY_COMPARE_WITH_TIMEOUT(runs->model()->rowCount(), 1, kWaitMs);
    const RunSummary* run = runs->model()->runAt(0);
    const QString name = run->record.name;
    const qint64 id = run->record.id;
    QVERIFY2(name.startsWith("live-"), qPrintable(name));
    CurvePlot* loss = window.plotsPanel()->plot(QStringLiteral("loss"));
    const QString series = PlotsPanel::seriesName(name, QStringLiteral("loss"), 0);

    // While it runs: the table says running and the curve grows between two looks.
    QTRY_VERIFY_WITH_TIMEOUT(statusAt(runs, 0) == "running" && loss->pointCount(series) > 0,
                             kWaitMs);
    const int first = loss->pointCount(series);
    QVERIFY2(first < kSteps, qPrintable(QString::number(first)));
    QTRY_VERIFY_WITH_TIMEOUT(loss->pointCount(series) > first, kWaitMs);
    const int second = loss->pointCount(series);
    qInfo("loss points: %d, then %d, while %s was running", first, second, qPrintable(name));
    QVERIFY(second < kSteps);
    QCOMPARE(statusAt(runs, 0), QStringLiteral("running"));

    // After the end: complete, and the curve holds every loss row the run log has.
    QTRY_COMPARE_WITH_TIMEOUT(statusAt(runs, 0), QStringLiteral("complete"), kWaitMs);
    auto reader = backend::RunReader::open(db);
    QVERIFY2(reader.ok(), reader.ok() ? "" : reader.message().c_str());
    auto rows = reader->metric(id, QStringLiteral("loss"));
    QVERIFY2(rows.ok(), rows.ok() ? "" : rows.message().c_str());
    QVERIFY(rows->size() >= std::size_t(kSteps));
    QTRY_COMPARE_WITH_TIMEOUT(loss->pointCount(series), int(rows->size()), kWaitMs);

    // The memory plot draws the estimate rank 0's hello announced (the fake trainer's 64 MiB)
    // as a line across the steps, beside each rank's measured peak.
    CurvePlot* memory = window.plotsPanel()->plot(QStringLiteral("memory"));
    const QString estimate = PlotsPanel::seriesName(name, QStringLiteral("mem.estimate"), 0);
    QTRY_COMPARE_WITH_TIMEOUT(memory->pointCount(estimate), 2, kWaitMs);
    QVERIFY(memory->pointCount(PlotsPanel::seriesName(name, QStringLiteral("mem.peak"), 1)) > 0);
    for (int g = 0; g < memory->customPlot()->graphCount(); ++g) {
      const QCPGraph* graph = memory->customPlot()->graph(g);
      if (graph->name() != estimate) continue;
      QCOMPARE(graph->data()->constBegin()->value, 64.0);  // MiB
      QCOMPARE(graph->pen().style(), Qt::DashLine);
    }

    QTRY_VERIFY_WITH_TIMEOUT(loss->customPlot()->xAxis->range().upper >= kSteps, kWaitMs);
    window.grab();  // the screenshot below shows the plots as checked
    checkPlotLayout(window.plotsPanel());
    if (QTest::currentTestFailed()) return;

    // Kept for people to look at.
    window.dock(QStringLiteral("runs"))->raise();  // the table, not the builder, above the plots
    window.plotsPanel()->repaint();
    const QString artifacts = shardscope::testing::binaryDir() + "/tests/artifacts";
    QVERIFY(QDir().mkpath(artifacts));
    QVERIFY(window.grab().save(artifacts + "/liverun-window.png"));
    checkZeroSeriesAxis(window.plotsPanel());
  }

  // A run stopped from the window resumes from its checkpoint with Resume: the same row
  // goes back to running, then complete, and its curve continues from the checkpoint's step.
  void stoppedRunResumesFromTheWindow() {
    const QString db = m_dir.filePath("resume.db");
    {
      auto store = backend::RunStore::open(db);
      QVERIFY2(store.ok(), store.ok() ? "" : store.message().c_str());
    }
    shardscope::testing::TinyExperiment experiment;
    experiment.name = QStringLiteral("again");
    experiment.trainer = kFake;
    experiment.steps = 80;
    const QString path = shardscope::testing::writeExperiment(m_dir.path(), experiment);
    qputenv("SHARDSCOPE_FAKE_MODE", "--steps 80 --step-ms 60 --ckpt-every 5");

    MainWindow window(nullptr, 50);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    window.openRunLog(db);
    QTRY_VERIFY_WITH_TIMEOUT(window.runsPanel()->isLoaded(), kWaitMs);
    backend::RunLifecycle::Settings settings;
    settings.dbPath = db;
    settings.supervisor = kCli;
    app::RunControl control(settings, 5);
    connect(&window, &MainWindow::launchRequested, &control, &app::RunControl::launch);
    connect(&window, &MainWindow::stopRequested, &control, &app::RunControl::stop);
    connect(&window, &MainWindow::resumeRequested, &control, &app::RunControl::resume);
    QSignalSpy said(&control, &app::RunControl::message);
    QVERIFY(window.openExperiment(path).ok());
    window.builderPanel()->controller()->validateNow();
    QTest::mouseClick(window.builderPanel()->launchButton(), Qt::LeftButton);
    RunsPanel* runs = window.runsPanel();
    QTRY_COMPARE_WITH_TIMEOUT(runs->model()->rowCount(), 1, kWaitMs);
    const qint64 id = runs->model()->runAt(0)->record.id;
    const auto checkpointStep = [&]() -> qint64 {
      auto reader = backend::RunReader::open(db);
      auto point = reader ? reader->resumePoint(id, 0)
                          : Result<std::optional<backend::ResumePoint>>(fail("no reader"));
      return point && *point ? (*point)->step : -1;
    };
    QTRY_VERIFY_WITH_TIMEOUT(checkpointStep() >= 10, kWaitMs);
    runs->selectRuns({id});
    QVERIFY(!runs->resumeAction()->isEnabled());  // running: nothing to resume
    runs->stopAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(statusAt(runs, 0), QStringLiteral("stopped"), kWaitMs);
    QTRY_VERIFY_WITH_TIMEOUT(runs->resumeAction()->isEnabled(), kWaitMs);
    const qint64 k = checkpointStep();
    runs->resumeAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(
        !said.isEmpty() && said.last().first().toString().startsWith("Resumed again-"), kWaitMs);
    QTRY_COMPARE_WITH_TIMEOUT(statusAt(runs, 0), QStringLiteral("complete"), kWaitMs);
    QCOMPARE(runs->model()->rowCount(), 1);  // the same run, not a new one
    auto reader = backend::RunReader::open(db);
    QVERIFY(reader.ok());
    QCOMPARE((*reader->run(id))->attempt, 1);
    auto loss = reader->metric(id, QStringLiteral("loss"));
    QVERIFY(loss.ok());
    qint64 expected = 1;
    for (const backend::MetricPoint& p : *loss) {
      if (p.rank != 0) continue;
      QCOMPARE(p.step, expected++);  // steps 1..k from the first attempt, then k+1.. resumed
    }
    QCOMPARE(expected, qint64(81));
    QVERIFY(k >= 10);
  }

  // File > Open of another run log moves the app's run control to it: a launch after it lands
  // in the run log the window shows (it went into the first one opened before).
  void launchGoesToTheRunLogOpenedLast() {
    const QString first = m_dir.filePath("first.db");
    const QString second = m_dir.filePath("second.db");
    for (const QString& db : {first, second}) {
      auto store = backend::RunStore::open(db);
      QVERIFY2(store.ok(), store.ok() ? "" : store.message().c_str());
    }
    const QString folder = m_dir.filePath("moved");
    QVERIFY(QDir().mkpath(folder));
    shardscope::testing::TinyExperiment experiment;
    experiment.name = QStringLiteral("moved");
    experiment.trainer = kFake;
    experiment.steps = 10;
    const QString path = shardscope::testing::writeExperiment(folder, experiment);
    QVERIFY(!path.isEmpty());
    qputenv("SHARDSCOPE_FAKE_MODE", "--steps 10 --step-ms 20");

    MainWindow window(nullptr, 50);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    backend::RunLifecycle::Settings settings;
    settings.dbPath = first;
    settings.runsRoot = backend::RunLifecycle::runsRootFor(first);
    settings.supervisor = kCli;
    app::RunControl control(settings, 5);
    connect(&window, &MainWindow::launchRequested, &control, &app::RunControl::launch);
    connect(&window, &MainWindow::runLogOpened, &control, &app::RunControl::setRunLog);
    window.openRunLog(first);
    window.openRunLog(second);  // File > Open
    QTRY_VERIFY_WITH_TIMEOUT(window.runsPanel()->isLoaded(), kWaitMs);
    QVERIFY(window.openExperiment(path).ok());
    window.builderPanel()->controller()->validateNow();
    QTest::mouseClick(window.builderPanel()->launchButton(), Qt::LeftButton);
    RunsPanel* runs = window.runsPanel();
    QTRY_COMPARE_WITH_TIMEOUT(runs->model()->rowCount(), 1, kWaitMs);
    QTRY_COMPARE_WITH_TIMEOUT(statusAt(runs, 0), QStringLiteral("complete"), kWaitMs);
    const auto runsIn = [](const QString& db) {
      auto reader = backend::RunReader::open(db);
      auto all = reader ? reader->listRuns() : Result<std::vector<backend::RunRecord>>(fail("-"));
      return all ? int(all->size()) : -1;
    };
    QCOMPARE(runsIn(second), 1);
    QCOMPARE(runsIn(first), 0);
  }

  // The dashboard (the real `shardscope`, a window on the same X server) launches a sweep and
  // is SIGKILLed mid-sweep: the sweep runs in its own session and goes on; a dashboard opened again
  // finds its trials running and follows them to the end.
  void sweepOutlivesAKilledDashboard() {
    const QString db = m_dir.filePath("killed.db");
    const QString experiment = writeProgramSweep(m_dir.filePath("killed"), "killgui", 10, 2, 3);
    QVERIFY(!experiment.isEmpty());
    {
      auto store = backend::RunStore::open(db);
      QVERIFY2(store.ok(), store.ok() ? "" : store.message().c_str());
    }
    const auto runStatus = [&](const QString& name) {
      auto reader = backend::RunReader::open(db);
      if (!reader) return QString();
      auto run = reader->runByName(name);
      return run && *run ? QString::fromLatin1(spec::to_string((*run)->status)) : QString();
    };

    const StopSweepAtExit cleanup{db, QStringLiteral("killgui")};
    QProcess gui;
    gui.setProcessChannelMode(QProcess::MergedChannels);
    gui.start(kGui, {"--db", db, "--launch", experiment});
    QVERIFY(gui.waitForStarted());
    QTRY_COMPARE_WITH_TIMEOUT(runStatus("killgui-0"), QString("running"), kWaitMs);
    QCOMPARE(gui.state(), QProcess::Running);  // the dashboard is up while the trial runs
    QCOMPARE(::kill(pid_t(gui.processId()), SIGKILL), 0);
    QVERIFY(gui.waitForFinished(30000));

    // Opened again: the sweep is still running, and the window follows its trials to the end.
    MainWindow window(nullptr, 50);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    window.openRunLog(db);
    RunsPanel* runs = window.runsPanel();
    const auto tableSays = [&](const QString& name) {
      for (int row = 0; row < runs->model()->rowCount(); ++row)
        if (runs->model()->runAt(row)->record.name == name) return statusAt(runs, row);
      return QString();
    };
    QTRY_VERIFY_WITH_TIMEOUT(runs->isLoaded(), kWaitMs);
    QTRY_COMPARE_WITH_TIMEOUT(tableSays("killgui-2"), QString("complete"), kWaitMs);
    for (const char* name : {"killgui-0", "killgui-1", "killgui-2"}) {
      QCOMPARE(tableSays(name), QString("complete"));
      QCOMPARE(runStatus(name), QString("complete"));
    }
    QTRY_COMPARE_WITH_TIMEOUT(window.comparePanel()->sweep().trials.size(), qsizetype(3), kWaitMs);
  }

  // A sweep launched from the builder and steered from the window, as a person does it:
  // the trials appear in the runs table and the Compare panel; Prune trial, Pause sweep, Stop
  // (on a trial), Resume sweep and Stop sweep each reach the sweep's own process (started by
  // RunControl through backend/lifecycle) through the run log, and the run log ends as the
  // window showed it.
  void sweepLaunchedAndSteeredFromTheWindow() {
    const QString db = m_dir.filePath("sweep.db");
    {
      auto store = backend::RunStore::open(db);
      QVERIFY2(store.ok(), store.ok() ? "" : store.message().c_str());
    }
    // One trial: an eval line every 0.3 s for 20 steps (6 s), then done.
    const QString experiment = writeProgramSweep(m_dir.filePath("sweep"), "steer", 20, 5, 6);
    QVERIFY(!experiment.isEmpty());

    MainWindow window(nullptr, 50);
    window.resize(1600, 1000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    window.openRunLog(db);
    QTRY_VERIFY_WITH_TIMEOUT(window.runsPanel()->isLoaded(), kWaitMs);
    backend::RunLifecycle::Settings settings;
    settings.dbPath = db;
    settings.supervisor = kCli;
    app::RunControl control(settings, 5);
    connect(&window, &MainWindow::launchRequested, &control, &app::RunControl::launch);
    connect(&window, &MainWindow::trialRequested, &control, &app::RunControl::requestTrial);
    connect(&window, &MainWindow::sweepControlRequested, &control, &app::RunControl::steerSweep);
    connect(&window, &MainWindow::stopRequested, &control, &app::RunControl::stop);
    QSignalSpy said(&control, &app::RunControl::message);
    const StopSweepAtExit cleanup{db, QStringLiteral("steer")};

    QVERIFY(window.openExperiment(experiment).ok());
    window.builderPanel()->controller()->validateNow();
    QVERIFY(window.builderPanel()->launchButton()->isEnabled());
    QTest::mouseClick(window.builderPanel()->launchButton(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(said.count(), 1, kWaitMs);
    const QString started = said.takeFirst().first().toString();
    QVERIFY2(started.startsWith("Started sweep steer"), qPrintable(started));

    RunsPanel* runs = window.runsPanel();
    const auto statusOf = [&](const QString& name) {
      const RunSummary* r = nullptr;
      for (int row = 0; row < runs->model()->rowCount(); ++row)
        if (runs->model()->runAt(row)->record.name == name) r = runs->model()->runAt(row);
      return r == nullptr ? QString() : QString::fromLatin1(spec::to_string(r->record.status));
    };
    const auto idOf = [&](const QString& name) {
      for (int row = 0; row < runs->model()->rowCount(); ++row)
        if (runs->model()->runAt(row)->record.name == name)
          return runs->model()->runAt(row)->record.id;
      return qint64(-1);
    };
    const auto action = [&](const char* name) {
      auto* a = window.findChild<QAction*>(QString::fromLatin1(name));
      return a;
    };

    // Trial 0 appears running, in the table and in the Compare panel; the user prunes it.
    QTRY_COMPARE_WITH_TIMEOUT(statusOf("steer-0"), QString("running"), kWaitMs);
    QTRY_VERIFY_WITH_TIMEOUT(window.comparePanel()->sweep().trials.size() >= 1, kWaitMs);
    runs->selectRuns({idOf("steer-0")});
    QVERIFY(runs->pruneAction()->isEnabled());
    runs->pruneAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(statusOf("steer-0"), QString("pruned"), kWaitMs);

    // Trial 1 runs; the user pauses the sweep, then stops the trial: no trial starts after it.
    QTRY_COMPARE_WITH_TIMEOUT(statusOf("steer-1"), QString("running"), kWaitMs);
    runs->selectRuns({idOf("steer-1")});
    QAction* pause = action("sweep-pause");
    QVERIFY(pause != nullptr && pause->isEnabled());
    pause->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(
        !said.isEmpty() && said.last().first().toString().startsWith("Pause sent to sweep"),
        kWaitMs);
    runs->stopAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(statusOf("steer-1"), QString("stopped"), kWaitMs);
    {
      // The sweep has read the run log since the pause (it carried out the stop after it).
      auto reader = backend::RunReader::open(db);
      QVERIFY(reader.ok());
      auto all = reader->listRuns();
      QVERIFY(all.ok());
      QCOMPARE(all->size(), std::size_t(2));
    }

    // Resumed, trial 2 starts; Stop sweep ends it and the sweep.
    action("sweep-run")->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(statusOf("steer-2"), QString("running"), kWaitMs);
    runs->selectRuns({idOf("steer-2")});
    action("sweep-stop")->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(statusOf("steer-2"), QString("stopped"), kWaitMs);

    // The run log says what the window showed: pruned, stopped (not retried), stopped.
    auto reader = backend::RunReader::open(db);
    QVERIFY(reader.ok());
    auto all = reader->listRuns();
    QVERIFY(all.ok());
    QCOMPARE(all->size(), std::size_t(3));
    for (const backend::RunRecord& r : *all) {
      QCOMPARE(statusOf(r.name), QString::fromLatin1(spec::to_string(r.status)));
      QCOMPARE(r.attempt, 0);
    }
    // The study has ended: Pause, Resume and Stop sweep have nothing left to steer.
    QTRY_VERIFY_WITH_TIMEOUT(!action("sweep-pause")->isEnabled() &&
                                 !action("sweep-run")->isEnabled() &&
                                 !action("sweep-stop")->isEnabled(),
                             kWaitMs);
  }

  // A sweep whose process died is shown as such in the window (the status bar's sweep
  // label, Sweep > Adopt sweep enabled) and adopted with one click: the new sweep process
  // reattaches the trial left running and finishes the study. The sweep was started from a
  // shell (RunLifecycle, as `shardscope-cli sweep` in its own session), not by this window.
  void deadSweepIsAdoptedFromTheWindow() {
    const QString db = m_dir.filePath("adopt.db");
    {
      auto store = backend::RunStore::open(db);
      QVERIFY2(store.ok(), store.ok() ? "" : store.message().c_str());
    }
    shardscope::testing::TinyExperiment experiment;
    experiment.name = QStringLiteral("orphaned");
    experiment.trainer = kFake;
    experiment.steps = kSteps;
    experiment.tables =
        "[search]\nname = \"adoptgui\"\nsampler = \"random\"\nseed = 3\nn_trials = 2\n"
        "concurrency = 1\nobjectives = {objective = \"minimize\"}\n"
        "[search.space.\"train.lr\"]\ntype = \"float\"\nlow = 1e-4\nhigh = 1e-2\nlog = true\n";
    const QString folder = m_dir.filePath("adopt");
    QVERIFY(QDir().mkpath(folder));
    const QString path = shardscope::testing::writeExperiment(folder, experiment);
    QVERIFY(!path.isEmpty());
    backend::RunLifecycle::Settings settings;
    settings.dbPath = db;
    settings.supervisor = kCli;
    // Trial 0 must still run when the sweep is killed and while the window offers the adoption:
    // 10 s of steps. (Left to the earlier tests' 10 x 20 ms, it ended before the table showed it
    // running on a loaded machine.)
    qputenv("SHARDSCOPE_FAKE_MODE", "--steps 40 --step-ms 250");
    const StopSweepAtExit cleanup{db, QStringLiteral("adoptgui")};
    auto sweep = backend::RunLifecycle(settings).startSweep(path);
    QVERIFY2(sweep.ok(), sweep.ok() ? "" : sweep.message().c_str());

    MainWindow window(nullptr, 50);
    window.resize(1600, 1000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    window.openRunLog(db);
    app::RunControl control(settings, 5);
    connect(&window, &MainWindow::sweepAdoptRequested, &control, &app::RunControl::adoptSweep);
    QSignalSpy said(&control, &app::RunControl::message);
    RunsPanel* runs = window.runsPanel();
    const auto row = [&](const QString& name) -> const RunSummary* {
      for (int r = 0; r < runs->model()->rowCount(); ++r)
        if (runs->model()->runAt(r)->record.name == name) return runs->model()->runAt(r);
      return nullptr;
    };
    const auto statusOf = [&](const QString& name) {
      const RunSummary* r = row(name);
      return r == nullptr ? QString() : QString::fromLatin1(spec::to_string(r->record.status));
    };
    auto* adopt = window.findChild<QAction*>(QStringLiteral("sweep-adopt"));
    auto* label = window.findChild<QLabel*>(QStringLiteral("sweepState"));
    QVERIFY(adopt != nullptr && label != nullptr);

    QTRY_COMPARE_WITH_TIMEOUT(statusOf("adoptgui-0"), QString("running"), kWaitMs);
    runs->selectRuns({row("adoptgui-0")->record.id});
    QTRY_COMPARE_WITH_TIMEOUT(window.comparePanel()->sweep().study.name, QString("adoptgui"),
                              kWaitMs);
    QVERIFY(!adopt->isEnabled());  // its process is alive: nothing to adopt
    QVERIFY(label->text().isEmpty());

    QCOMPARE(::kill(pid_t(sweep->pid), SIGKILL), 0);
    QTRY_VERIFY_WITH_TIMEOUT(adopt->isEnabled(), kWaitMs);
    QVERIFY2(label->text().contains("Sweep adoptgui: no process runs it"),
             qPrintable(label->text()));
    QCOMPARE(statusOf("adoptgui-0"), QString("running"));  // its ranks go on meanwhile
    adopt->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!said.isEmpty(), kWaitMs);
    QVERIFY2(said.last().first().toString().startsWith("Sweep adoptgui started again"),
             qPrintable(said.last().first().toString()));
    QTRY_VERIFY_WITH_TIMEOUT(!adopt->isEnabled(), kWaitMs);  // the new process stamped it
    QTRY_COMPARE_WITH_TIMEOUT(statusOf("adoptgui-1"), QString("complete"), kWaitMs);
    QCOMPARE(statusOf("adoptgui-0"), QString("complete"));  // reattached, followed to its end
    QTRY_VERIFY_WITH_TIMEOUT(label->text().isEmpty(), kWaitMs);
    auto reader = backend::RunReader::open(db);
    QVERIFY(reader.ok());
    auto study = reader->studyByName(QStringLiteral("adoptgui"));
    QVERIFY(study.ok() && study->has_value());
    QTRY_COMPARE_WITH_TIMEOUT((*reader->studyByName(QStringLiteral("adoptgui")))->status,
                              backend::StudyStatus::complete, kWaitMs);
    auto all = reader->listRuns();
    QVERIFY(all.ok());
    QCOMPARE(all->size(), std::size_t(2));  // no trial retried: the killed sweep lost nothing
  }
};

QTEST_MAIN(TestLiveRun)
#include "tst_liverun.moc"
