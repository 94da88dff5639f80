// bench_live: event-loop latency of the dashboard while it follows a live 4-trial sweep
// (target: p99 lateness under 50 ms). Not a test: it prints figures.
//
// The sweep is real: `shardscope-cli sweep` on an experiment with a [search] section (4 trials,
// concurrency 4) whose trials are the fake trainer (2 ranks each, real processes writing real
// event files: a step event per step on rank 0 and a mem event per step on every rank, by
// default 20 steps/s per trial). The fake trainer sleeps between steps, so the trainers do not
// starve the GUI thread of CPU: what is measured is the GUI's own cost of following the sweep.
// The scheduler packs local trials onto cores / ranks per trial slots (1 on a 2-core machine),
// so the 4 concurrent trials come from 4 `sweep` processes sharing one study of 4 trials (each
// takes one: a study's trial budget is shared by every sweep on it). The main window follows the
// run log with the 4 live runs selected, so every plot and the log view update live.
//
// Measured, side by side in one process: a 5 ms PreciseTimer's lateness (p50/p95/p99/max)
// first with the window idle on the same run log (the peer), then during the sweep; and the
// GUI thread's time in RunLog notifications (the queued signals the worker thread sends).
//
// With --launch the sweep is started the way the dashboard's Launch does (RunLifecycle's
// startSweep: one `shardscope-cli sweep` in its own session, its trials packed onto the
// machine's slots, so on 2 cores one trial of 2 ranks runs at a time and new trials keep
// appearing); with --big N the run log already holds a finished sweep of N trials x --big-steps
// loss points (bench_dashboard's, made once and reused through --big-db), whose Compare overlay
// is on screen throughout. Then it also prints the window's first paint of that run log and
// the Compare overlay's replot (p50/p99) while the live sweep goes on (targets: < 1 s,
// <= 16 ms, lateness p99 <= 50 ms).
//
//   bench_live [--seconds S] [--step-ms MS] [--cli PATH] [--trainer PATH] [--keep DIR]
//              [--launch] [--big N] [--big-steps S] [--big-db FILE] [--program-trials]
// QT_QPA_PLATFORM=offscreen works.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QHash>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "backend/lifecycle/runlifecycle.h"
#include "backend/store/runstore.h"
#include "bench/ui/bigrunlog.h"
#include "bench/ui/spin.h"
#include "tests/support/experiment.h"
#include "ui/compare/comparepanel.h"
#include "ui/compare/studyviews.h"
#include "ui/data/runlog.h"
#include "ui/mainwindow.h"
#include "ui/plots/plotspanel.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"

using namespace shardscope;

namespace {

constexpr int kTrials = 4;
constexpr int kRanks = 2;
constexpr double kTickMs = 5;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto index = static_cast<std::size_t>(std::ceil(p / 100.0 * double(v.size())) - 1);
  return v[std::min(index, v.size() - 1)];
}

double maxOf(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

double sumOf(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// A QApplication that times every event the GUI thread delivers to the run log's RunLog
// object: the worker's results arrive there as queued calls and are re-emitted to the panels
// directly, so this is the panels' whole cost of a notification. Also sums the time per
// receiver class (where the rest of the loop's time goes).
class ProbeApp : public QApplication {
 public:
  ProbeApp(int& argc, char** argv) : QApplication(argc, argv) {}

  bool notify(QObject* receiver, QEvent* event) override {
    // Every thread's events pass here: count the GUI thread's only.
    if (m_depth > 0 || !m_recording || QThread::currentThread() != thread())
      return QApplication::notify(receiver, event);
    // Read before delivery: a DeferredDelete event deletes its receiver.
    const char* cls = receiver->metaObject()->className();
    // A timer's cost is its owner's: name the class of the QTimer's parent.
    QString label = QString::fromLatin1(cls);
    if (qstrcmp(cls, "QTimer") == 0) {
      if (!receiver->objectName().isEmpty()) label += " " + receiver->objectName();
      if (receiver->parent() != nullptr)
        label += QStringLiteral(" in ") + receiver->parent()->metaObject()->className();
    }
    const int type = int(event->type());
    ++m_depth;
    QElapsedTimer timer;
    timer.start();
    const bool done = QApplication::notify(receiver, event);
    const double ms = double(timer.nsecsElapsed()) / 1e6;
    --m_depth;
    if (qstrcmp(cls, "shardscope::ui::RunLog") == 0) m_notifications.push_back(ms);
    m_byClass[label + " / " + QString::number(type)] += ms;
    if (ms > m_worstMs) {
      m_worstMs = ms;
      m_worst = label + " / " + QString::number(type);
    }
    return done;
  }

  void record(bool on) { m_recording = on; }
  void resetProbe() {
    m_notifications.clear();
    m_byClass.clear();
    m_worstMs = 0;
    m_worst.clear();
  }
  /// The longest single event delivered since resetProbe(), and its receiver.
  QString worst() const {
    return QStringLiteral("%1 (%2 ms)").arg(m_worst).arg(m_worstMs, 0, 'f', 1);
  }
  const std::vector<double>& notifications() const { return m_notifications; }
  const QHash<QString, double>& byClass() const { return m_byClass; }

 private:
  int m_depth = 0;
  bool m_recording = false;
  std::vector<double> m_notifications;
  QHash<QString, double> m_byClass;
  double m_worstMs = 0;
  QString m_worst;
};

ProbeApp* probe() { return static_cast<ProbeApp*>(QCoreApplication::instance()); }

using bench::spinUntil;

struct Lateness {
  std::vector<double> late;           ///< ms each 5 ms tick fired after it was due
  std::vector<double> notifications;  ///< ms the GUI thread spent in each RunLog notification
  QHash<QString, double> byClass;     ///< ms per receiver class / event type
  QString worst;                      ///< the longest single event and its receiver
  double seconds = 0;
};

// Runs the event loop for `seconds` with a 5 ms timer and records how late each tick fires.
Lateness measure(int seconds) {
  Lateness out;
  QElapsedTimer clock;
  clock.start();
  double last = 0;
  QTimer tick;
  tick.setTimerType(Qt::PreciseTimer);
  tick.setObjectName(QStringLiteral("bench-tick"));
  QObject::connect(&tick, &QTimer::timeout, [&] {
    const double now = double(clock.nsecsElapsed()) / 1e6;
    if (last > 0) out.late.push_back(std::max(0.0, now - last - kTickMs));
    last = now;
  });
  probe()->resetProbe();
  probe()->record(true);
  tick.start(static_cast<int>(kTickMs));
  QEventLoop loop;
  QTimer::singleShot(seconds * 1000, &loop, &QEventLoop::quit);
  loop.exec();
  tick.stop();
  probe()->record(false);
  out.seconds = double(clock.nsecsElapsed()) / 1e9;
  out.notifications = probe()->notifications();
  out.byClass = probe()->byClass();
  out.worst = probe()->worst();
  return out;
}

void printLateness(const char* what, const Lateness& l) {
  std::printf("%-28s ticks %6zu  lateness p50 %6.2f  p95 %6.2f  p99 %6.2f  max %7.2f ms\n", what,
              l.late.size(), percentile(l.late, 50), percentile(l.late, 95), percentile(l.late, 99),
              maxOf(l.late));
}

void printNotifications(const Lateness& l) {
  const double total = sumOf(l.notifications);
  std::printf(
      "RunLog notifications on the GUI thread: %zu in %.1f s, %.0f ms in all (%.1f%% of the "
      "thread), each p50 %.2f  p99 %.2f  max %.2f ms\n",
      l.notifications.size(), l.seconds, total, 100.0 * total / (1000.0 * l.seconds),
      percentile(l.notifications, 50), percentile(l.notifications, 99), maxOf(l.notifications));
  QList<QPair<double, QString>> top;
  for (auto it = l.byClass.cbegin(); it != l.byClass.cend(); ++it)
    top.append({it.value(), it.key()});
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::printf("longest single event: %s\n", qPrintable(l.worst));
  std::printf("GUI thread's busiest receivers (class / QEvent type: ms):\n");
  for (qsizetype i = 0; i < std::min<qsizetype>(8, top.size()); ++i) {
    std::printf("  %-60s %8.1f\n", qPrintable(top[i].second), top[i].first);
  }
}

// The sweep experiment: the fake trainer as `shardtrain`, 2 ranks per trial, a random search
// of `trials` trials run up to that many at a time.
bool writeExperiment(const QString& dir, const QString& trainer, int steps, bool program,
                     int trials) {
  shardscope::testing::TinyExperiment experiment;
  experiment.name = QStringLiteral("live");
  experiment.fileName = QStringLiteral("sweep.toml");
  experiment.trainer = trainer;
  experiment.steps = steps;
  experiment.ranks = kRanks;
  experiment.tables = QStringLiteral(
                          "[search]\nname = \"live\"\nsampler = \"random\"\nseed = 1\n"
                          "n_trials = %1\nconcurrency = %1\n%2"
                          "objectives = {objective = \"minimize\"}\n"
                          "[search.space.\"train.lr\"]\ntype = \"float\"\nlow = 1e-4\n"
                          "high = 1e-2\nlog = true\n")
                          .arg(trials)
                          .arg(program ? QStringLiteral("program = [\"sh\", \"-c\", \"exec '%1' "
                                                        "train '%2'\", \"trial\"]\n")
                                             .arg(trainer, dir + "/sweep.toml")
                                       : QString())
                          .toUtf8();
  return !shardscope::testing::writeExperiment(dir, experiment).isEmpty();
}

// An empty run log, made on a worker thread (the store's writer is never driven from the GUI
// thread).
bool makeRunLog(const QString& path) {
  bool made = false;
  std::thread writer([&] { made = backend::RunStore::open(path).ok(); });
  writer.join();
  return made;
}

using Processes = std::vector<std::unique_ptr<QProcess>>;

// Starts one `sweep` process per trial on the shared study (see the file comment).
Processes startSweeps(const QString& cli, const QString& db, const QString& dir,
                      const QByteArray& fakeMode) {
  Processes sweeps;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("SHARDSCOPE_FAKE_MODE", QString::fromLatin1(fakeMode));
  for (int i = 0; i < kTrials; ++i) {
    auto p = std::make_unique<QProcess>();
    p->setProcessEnvironment(env);
    p->setWorkingDirectory(dir);
    p->setProcessChannelMode(QProcess::MergedChannels);
    p->setStandardOutputFile(dir + QString("/sweep-%1.out").arg(i));
    // --max-retries: works around an intermittent validation failure of the trial's experiment
    // (data.blank_images read uninitialised in spec, reported to the lead).
    p->start(cli, {"--db", db, "sweep", dir + "/sweep.toml", "--max-retries", "20"});
    sweeps.push_back(std::move(p));
  }
  return sweeps;
}

// Ids of the runs the table shows as running.
QList<qint64> runningRuns(ui::MainWindow& window) {
  QList<qint64> ids;
  ui::RunTableModel* model = window.runsPanel()->model();
  for (int row = 0; row < model->rowCount(); ++row) {
    const ui::RunSummary* run = model->runAt(row);
    if (run != nullptr && run->record.status == spec::RunStatus::running) ids << run->record.id;
  }
  return ids;
}

// The experiment of the big sweep (its trials are named trial-N), -1 when none.
qint64 bigExperiment(ui::MainWindow& window) {
  ui::RunTableModel* model = window.runsPanel()->model();
  for (int row = 0; row < model->rowCount(); ++row) {
    const ui::RunSummary* run = model->runAt(row);
    if (run != nullptr && run->record.name.startsWith(QStringLiteral("trial-")) &&
        run->record.experimentId)
      return *run->record.experimentId;
  }
  return -1;
}

void stopSweeps(const QString& cli, const QString& db, const QList<qint64>& runs,
                Processes& sweeps) {
  for (qint64 id : runs) {
    QProcess stop;
    stop.start(cli, {"--db", db, "stop", QString::number(id)});
    stop.waitForFinished(60000);
  }
  for (auto& p : sweeps) {
    if (!p->waitForFinished(60000)) {
      p->terminate();
      p->waitForFinished(10000);
    }
  }
}

struct Options {
  int seconds = 20;
  int stepMs = 50;
  QString cli;
  QString trainer;
  QString keep;
  bool program = false;  ///< trials as a [search] program (1 rank each) instead of the trainer
  bool launch = false;   ///< one sweep started as the dashboard's Launch starts it
  int big = 0;           ///< trials of the finished sweep the run log holds first (0: none)
  int bigSteps = 1000;   ///< loss points of each of them
  QString bigDb;         ///< where the big run log is made once and reused (copied per run)
};

// Trials of the launched sweep: more than fit the measured window, so trials keep starting.
constexpr int kLaunchTrials = 12;

// Milliseconds of each of `n` QCustomPlot::replot()s of `plot`, the event loop run between them
// (what every repaint of the Compare overlay costs).
std::vector<double> replotTimes(QCustomPlot* plot, int n) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
    QElapsedTimer timer;
    timer.start();
    plot->replot(QCustomPlot::rpImmediateRefresh);
    ms.push_back(double(timer.nsecsElapsed()) / 1e6);
  }
  return ms;
}

// Asks the launched sweep to stop through the run log, as the Sweep menu's Stop does, and waits
// until the table shows no running trial.
void stopLaunched(const QString& cli, const QString& db, ui::MainWindow& window) {
  QProcess stop;
  stop.start(cli, {"--db", db, "study", "stop", "live"});
  stop.waitForFinished(60000);
  spinUntil([&] { return runningRuns(window).isEmpty(); }, 120000);
}

int run(const Options& o) {
  QTemporaryDir tmp;
  const QString dir = o.keep.isEmpty() ? tmp.path() : o.keep;
  QDir().mkpath(dir);
  const QString db = dir + "/live.db";
  QFile::remove(db);
  // Long enough to cover start-up, the measured window and a margin; a launched sweep's
  // trials run one after another, each about a third of the window.
  const int steps = o.launch ? std::max(20, o.seconds * 1000 / 3 / std::max(1, o.stepMs))
                             : (o.seconds + 30) * 1000 / std::max(1, o.stepMs);
  const int trials = o.launch ? kLaunchTrials : kTrials;
  bool logMade = false;
  if (o.big > 0) {
    QElapsedTimer made;
    made.start();
    bool fresh = false;
    const QString bigDb = o.bigDb.isEmpty() ? dir + "/big.db" : o.bigDb;
    if (auto ready = bench::ensureBigSweep(bigDb, o.big, o.bigSteps, &fresh); !ready) {
      std::fprintf(stderr, "bench_live: %s\n", ready.message().c_str());
      return 1;
    }
    if (fresh) std::printf("made %s in %.1f s\n", qPrintable(bigDb), made.elapsed() / 1000.0);
    logMade = QFile::copy(bigDb, db);
  } else {
    logMade = makeRunLog(db);
  }
  if (!writeExperiment(dir, o.trainer, steps, o.program, trials) || !logMade) {
    std::fprintf(stderr, "bench_live: cannot write the experiment or the run log in %s\n",
                 qPrintable(dir));
    return 1;
  }
  std::printf("CPU: %s, Qt %s, QPA %s\n", qPrintable(bench::cpuModel()), qVersion(),
              qPrintable(QGuiApplication::platformName()));
  ui::MainWindow window;
  window.resize(1600, 1000);
  window.dock(QStringLiteral("compare"))->raise();  // the Compare overlay is on screen
  QElapsedTimer opening;
  opening.start();
  window.openRunLog(db);
  window.show();
  const auto shown = [&] {
    return o.big > 0 ? window.isSummaryShown() : window.runsPanel()->isLoaded();
  };
  if (!spinUntil(shown, 120000)) {
    std::fprintf(stderr, "bench_live: the window did not show %s within 120 s\n", qPrintable(db));
    return 1;
  }
  (void)window.grab();
  const double firstPaint = double(opening.nsecsElapsed()) / 1e6;
  if (o.big > 0 && !spinUntil([&] { return window.isLoaded(); }, 600000)) {
    std::fprintf(stderr, "bench_live: the window did not load %s within 600 s\n", qPrintable(db));
    return 1;
  }
  const double loaded = double(opening.nsecsElapsed()) / 1e6;
  if (o.big > 0) {
    std::printf(
        "run log of %d trials x %d steps: first paint %.0f ms (target < 1000 ms), every curve "
        "%.0f ms\n",
        o.big, o.bigSteps, firstPaint, loaded);
  }
  QCustomPlot* overlay = window.comparePanel()->studyViews()->overlayPlot();
  const std::vector<double> idleReplot = replotTimes(overlay, 100);
  const int idleOverlay = window.comparePanel()->studyViews()->overlayCurves();
  std::printf("== event-loop latency: 5 ms timer, window 1600x1000, %d s each ==\n", o.seconds);
  const Lateness idle = measure(o.seconds);
  printLateness("idle", idle);

  const QByteArray mode = "--steps " + QByteArray::number(steps) + " --step-ms " +
                          QByteArray::number(o.stepMs) + " --mem-every 1";
  Processes sweeps;
  if (o.launch) {
    // What RunControl::launch does for an experiment with [search].
    qputenv("SHARDSCOPE_FAKE_MODE", mode);
    const backend::RunLifecycle lifecycle({db, {}, o.cli, {}});
    if (auto started = lifecycle.startSweep(dir + "/sweep.toml"); !started) {
      std::fprintf(stderr, "bench_live: launch: %s\n", started.message().c_str());
      return 1;
    }
  } else {
    sweeps = startSweeps(o.cli, db, dir, mode);
  }
  const int wanted = o.launch ? 1 : kTrials;
  if (!spinUntil([&] { return runningRuns(window).size() >= wanted; }, 120000)) {
    std::fprintf(stderr, "bench_live: %d trials were not running within 120 s (see %s)\n", wanted,
                 qPrintable(o.launch ? dir + "/runs/sweep-*.log" : dir + "/sweep-*.out"));
    if (o.launch) {
      stopLaunched(o.cli, db, window);
    } else {
      stopSweeps(o.cli, db, runningRuns(window), sweeps);
    }
    return 1;
  }
  const QList<qint64> live = runningRuns(window);
  window.runsPanel()->selectRuns(live);  // the plots and the log follow the 4 live runs
  // Measured from when their curves are drawn: following, not the first load of the selection.
  QElapsedTimer selecting;
  selecting.start();
  const bool plotted = spinUntil([&] { return window.plotsPanel()->isLoaded(); }, 60000);
  std::printf("the selected live run(s) plotted in %.0f ms%s; %d running when measured\n",
              double(selecting.elapsed()), plotted ? "" : " (not within 60 s)",
              int(runningRuns(window).size()));
  qint64 points = 0;
  const QMetaObject::Connection counter = QObject::connect(
      &window.runLog(), &ui::RunLog::seriesLoaded, [&](const QVector<ui::SeriesChunk>& chunks) {
        for (const ui::SeriesChunk& c : chunks) points += c.steps.size();
      });
  const Lateness busy = measure(o.seconds);
  QObject::disconnect(counter);
  const std::vector<double> busyReplot = replotTimes(overlay, 100);
  const int busyOverlay = window.comparePanel()->studyViews()->overlayCurves();
  // The big sweep picked in Compare while the launched one goes on (its 10,000 curves drawn in
  // the overlay, the live trials still in the table, the plots and the log).
  Lateness bigBusy;
  std::vector<double> bigReplot;
  int bigOverlay = 0;
  if (o.big > 0) {
    window.comparePanel()->showSweep(bigExperiment(window));
    spinUntil([&] { return window.comparePanel()->isLoaded(); }, 600000);
    int deliveries = 0;
    int curveBatches = 0;
    int tables = 0;
    const auto c1 =
        QObject::connect(&window.runLog(), &ui::RunLog::sweepLoaded, [&] { ++deliveries; });
    const auto c2 =
        QObject::connect(&window.runLog(), &ui::RunLog::sweepCurvesLoaded, [&] { ++curveBatches; });
    const auto c3 = QObject::connect(&window.runLog(), &ui::RunLog::runsLoaded, [&] { ++tables; });
    bigBusy = measure(o.seconds);
    QObject::disconnect(c1);
    QObject::disconnect(c2);
    QObject::disconnect(c3);
    std::printf("while the big sweep was shown: %d sweep deliveries, %d curve batches, %d tables\n",
                deliveries, curveBatches, tables);
    bigReplot = replotTimes(overlay, 100);
    bigOverlay = window.comparePanel()->studyViews()->overlayCurves();
  }
  const int stillRunning = int(runningRuns(window).size());
  std::printf(
      "%s: %d trials x %d rank(s) of the fake trainer, %d steps/s each (step + mem every "
      "step)\n",
      o.launch ? "one sweep launched as the dashboard does" : "4 sweep processes", trials,
      o.program ? 1 : kRanks, 1000 / std::max(1, o.stepMs));
  printLateness("idle", idle);
  printLateness("sweep", busy);
  const double p99Idle = std::max(0.01, percentile(idle.late, 99));
  const double p50Idle = std::max(0.01, percentile(idle.late, 50));
  std::printf("ratio sweep/idle: p50 %.1fx, p99 %.1fx; sweep p99 %.2f ms (target < 50 ms)\n",
              percentile(busy.late, 50) / p50Idle, percentile(busy.late, 99) / p99Idle,
              percentile(busy.late, 99));
  std::printf(
      "points delivered to the plots: %lld (%.0f/s); %d of %d trials still running at "
      "the end\n",
      static_cast<long long>(points), double(points) / busy.seconds, stillRunning, trials);
  printNotifications(busy);
  std::printf("Compare overlay replot, %dx%d, p50 / p99 of 100 (target <= 16 ms):\n",
              overlay->width(), overlay->height());
  std::printf("  idle, before the sweep (%d trials drawn): %.2f / %.2f ms\n", idleOverlay,
              percentile(idleReplot, 50), percentile(idleReplot, 99));
  std::printf("  during the sweep, the live sweep shown (%d trials drawn): %.2f / %.2f ms\n",
              busyOverlay, percentile(busyReplot, 50), percentile(busyReplot, 99));
  if (o.big > 0) {
    printLateness("sweep, big sweep in Compare", bigBusy);
    printNotifications(bigBusy);
    std::printf(
        "  during the sweep, the big sweep shown (%d trials drawn): %.2f / %.2f ms; lateness "
        "p99 %.2f ms (target < 50 ms)\n",
        bigOverlay, percentile(bigReplot, 50), percentile(bigReplot, 99),
        percentile(bigBusy.late, 99));
  }
  if (o.launch) {
    stopLaunched(o.cli, db, window);
  } else {
    stopSweeps(o.cli, db, live, sweeps);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ProbeApp app(argc, argv);
  QCommandLineParser parser;
  const QCommandLineOption secondsOpt("seconds", "Seconds measured idle, then live.", "S", "20");
  const QCommandLineOption stepOpt("step-ms", "Fake trainer's milliseconds per step.", "MS", "50");
  const QCommandLineOption cliOpt("cli", "shardscope-cli that runs the sweep.", "PATH",
                                  QStringLiteral(SHARDSCOPE_CLI));
  const QCommandLineOption trainerOpt("trainer", "The fake trainer.", "PATH",
                                      QStringLiteral(FAKETRAINER_PATH));
  const QCommandLineOption keepOpt("keep", "Folder for the run log and the runs (kept).", "DIR");
  const QCommandLineOption programOpt(
      "program-trials",
      "Trials as a [search] program of one rank (sh -c faketrainer) instead of "
      "the experiment's trainer with 2 ranks.");
  const QCommandLineOption launchOpt(
      "launch",
      "One sweep started as the dashboard's Launch starts it (RunLifecycle::startSweep).");
  const QCommandLineOption bigOpt("big", "The run log first holds a finished sweep of N trials.",
                                  "N", "0");
  const QCommandLineOption bigStepsOpt("big-steps", "Loss points of each --big trial.", "S",
                                       "1000");
  const QCommandLineOption bigDbOpt("big-db", "Where the --big run log is made once and reused.",
                                    "FILE");
  parser.addOptions({secondsOpt, stepOpt, cliOpt, trainerOpt, keepOpt, programOpt, launchOpt,
                     bigOpt, bigStepsOpt, bigDbOpt});
  parser.addHelpOption();
  parser.process(app);
  Options o;
  o.seconds = std::max(1, parser.value(secondsOpt).toInt());
  o.stepMs = std::max(1, parser.value(stepOpt).toInt());
  o.cli = parser.value(cliOpt);
  o.trainer = parser.value(trainerOpt);
  o.keep = parser.value(keepOpt);
  o.program = parser.isSet(programOpt);
  o.launch = parser.isSet(launchOpt);
  o.big = std::max(0, parser.value(bigOpt).toInt());
  o.bigSteps = std::max(1, parser.value(bigStepsOpt).toInt());
  o.bigDb = parser.value(bigDbOpt);
  if (o.trainer.isEmpty()) {
    std::fprintf(stderr,
                 "bench_live: no fake trainer (this tree was built without tests); pass "
                 "--trainer PATH (tests/tools/faketrainer of a test build)\n");
    return 2;
  }
  return run(o);
}
