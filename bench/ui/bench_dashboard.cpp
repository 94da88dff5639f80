// bench_dashboard: the dashboard's three figures of #7, printed against their targets (not a
// test; the machine is shared, so each figure is a median over repeats):
//   1. time to first paint when opening a run log of 10,000 trials x 1,000 steps (< 1 s): a
//      fresh MainWindow (Compare tab raised) opens the file and paints once as soon as the run
//      table is filled and the Compare panel has drawn the sweep's summaries (history, parallel
//      coordinates, slice, study views); the curves (10M points) still stream then. Printed
//      beside it: the time until every panel has all its data, curves included, and its paint
//      (what `--screenshot` waits for);
//   2. replot time of 1M points in the dashboard's curve plot (< 16 ms), as one series and as
//      four of 250k;
//   3. event-loop latency percentiles while 4 live runs of the demo (shardtrain, one rank each,
//      started detached by shardscope-cli) write the run log the window follows (p99 < 50 ms).
//
//   bench_dashboard [--db FILE] [--trials N] [--steps S] [--live-s SECONDS] [--skip-live]
//                   [--cli PATH]
// --db keeps the big run log between invocations (it is made once, ~1 min, and reused when its
// trial count matches). QT_QPA_PLATFORM=offscreen works.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "backend/store/runstore.h"
#include "ui/mainwindow.h"
#include "ui/plot/curveplot.h"

using namespace shardscope;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto index = static_cast<std::size_t>(std::ceil(p / 100.0 * double(v.size())) - 1);
  return v[std::min(index, v.size() - 1)];
}

// A sweep of `trials` finished runs with `steps` loss points each, written through RunStore
// (on a worker thread: the store's writer is never driven from a GUI thread).
Result<void> makeSweep(const QString& path, int trials, int steps) {
  Result<void> outcome = ok();
  std::thread writer([&] {
    auto store = backend::RunStore::open(path);
    if (!store) {
      outcome = store.error();
      return;
    }
    auto exp = (*store)->createExperiment({0, "bench-sweep", "bench.toml", "[train]\n", 0}).get();
    if (!exp) {
      outcome = exp.error();
      return;
    }
    std::vector<backend::RunStore::Pending<void>> pending;
    for (int t = 0; t < trials; ++t) {
      const double lr = std::pow(10.0, -4.0 + 3.0 * double(t % 97) / 96.0);
      QJsonObject params{{"train.lr", lr}, {"lora.r", 4 << (t % 4)}};
      auto run = (*store)->createRun({*exp, QString("trial-%1").arg(t), "", params, 2}).get();
      if (!run) {
        outcome = run.error();
        return;
      }
      std::vector<backend::MetricRow> rows;
      rows.reserve(static_cast<std::size_t>(steps));
      const double floor = 0.5 + std::fabs(std::log10(lr) + 2.5);
      for (int s = 0; s < steps; ++s) {
        rows.push_back({*run, s, "loss", floor + 5.0 / (1.0 + 0.05 * s), 0, 1.7e9 + s});
      }
      pending.push_back((*store)->appendMetrics(std::move(rows)));
      pending.push_back((*store)->setRunStatus(*run, spec::RunStatus::complete, {}, floor));
      if (pending.size() > 256) {
        for (auto& p : pending) {
          if (auto r = p.get(); !r) outcome = r.error();
        }
        pending.clear();
        if (!outcome) return;
      }
    }
    for (auto& p : pending) {
      if (auto r = p.get(); !r) outcome = r.error();
    }
  });
  writer.join();
  return outcome;
}

// Runs the event loop until `done` holds or `ms` pass; false on timeout.
template <class Predicate>
bool spinUntil(Predicate done, int ms) {
  QElapsedTimer timer;
  timer.start();
  while (!done()) {
    if (timer.elapsed() > ms) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
  }
  return true;
}

struct OpenTimes {
  double firstPaint = -1;  ///< ms from openRunLog() to the summaries painted
  double complete = -1;    ///< ms from openRunLog() to every curve loaded and painted
};

// Opens `db` in a fresh window and times the first paint and the complete one.
OpenTimes openTimes(const QString& db) {
  OpenTimes t;
  ui::MainWindow window;
  window.resize(1600, 1000);
  window.dock(QStringLiteral("compare"))->raise();  // the first paint shows the Compare plots
  QElapsedTimer timer;
  timer.start();
  window.openRunLog(db);
  window.show();
  if (!spinUntil([&] { return window.isSummaryShown(); }, 120000)) return t;
  (void)window.grab();  // one full paint of every visible panel
  t.firstPaint = double(timer.nsecsElapsed()) / 1e6;
  if (!spinUntil([&] { return window.isLoaded(); }, 600000)) return t;
  (void)window.grab();
  t.complete = double(timer.nsecsElapsed()) / 1e6;
  return t;
}

void replotFigures() {
  std::printf("\n== replot of 1M points (CurvePlot = QCustomPlot, 1200x800, offscreen) ==\n");
  for (const int series : {1, 4}) {
    ui::CurvePlot plot;
    plot.resize(1200, 800);
    plot.show();
    const int per = 1'000'000 / series;
    for (int s = 0; s < series; ++s) {
      QVector<double> xs(per);
      QVector<double> ys(per);
      for (int i = 0; i < per; ++i) {
        xs[i] = i;
        ys[i] = 2.0 + s + 3.0 / (1.0 + 1e-4 * i) + 0.2 * std::sin(i * 0.37) * std::cos(i * 0.011);
      }
      plot.setSeries(QString("s%1").arg(s), xs, ys);
    }
    plot.rescale();
    QCoreApplication::processEvents();
    std::vector<double> ms;
    for (int r = 0; r < 21; ++r) {
      QElapsedTimer timer;
      timer.start();
      plot.replot();
      ms.push_back(double(timer.nsecsElapsed()) / 1e6);
    }
    ms.erase(ms.begin());  // the first one fills caches
    std::printf("%d series x %d points: replot median %.2f ms, max %.2f ms (target < 16 ms)\n",
                series, per, median(ms), *std::max_element(ms.begin(), ms.end()));
  }
}

// Starts `n` detached demo runs (one rank each) into `db`; their names (empty when the CLI
// refuses).
QStringList startLiveRuns(const QString& cli, const QString& db, int n, int steps) {
  QStringList names;
  for (int i = 0; i < n; ++i) {
    QProcess p;
    const QString demo = QStringLiteral(SHARDSCOPE_SOURCE_DIR) + "/examples/demo.toml";
    p.start(cli, {"--db", db, "run", "--detach", demo, "--set", "launch.nproc_per_node=1", "--set",
                  QString("train.max_steps=%1").arg(steps), "--set",
                  QString("train.seed=%1").arg(i + 1)});
    if (!p.waitForFinished(120000) || p.exitCode() != 0) {
      std::fprintf(stderr, "bench_dashboard: %s run failed: %s\n", qPrintable(cli),
                   p.readAllStandardError().constData());
      return {};
    }
    names << QString::fromUtf8(p.readAllStandardOutput()).trimmed();
  }
  return names;
}

void liveLatency(const QString& cli, const QString& folder, int seconds) {
  std::printf("\n== event-loop latency, window following 4 live demo runs (%d s) ==\n", seconds);
  const QString db = folder + "/live.db";
  const QStringList runs = startLiveRuns(cli, db, 4, 100000);
  if (runs.isEmpty()) return;
  ui::MainWindow window;
  window.resize(1600, 1000);
  window.openRunLog(db);
  window.show();
  // A 5 ms timer: how late each tick fires is how long the loop was busy with something else.
  constexpr double kTickMs = 5;
  std::vector<double> late;
  QElapsedTimer clock;
  clock.start();
  double last = 0;
  QTimer tick;
  tick.setTimerType(Qt::PreciseTimer);
  QObject::connect(&tick, &QTimer::timeout, [&] {
    const double now = double(clock.nsecsElapsed()) / 1e6;
    if (last > 0) late.push_back(std::max(0.0, now - last - kTickMs));
    last = now;
  });
  tick.start(static_cast<int>(kTickMs));
  QEventLoop loop;
  QTimer::singleShot(seconds * 1000, &loop, &QEventLoop::quit);
  loop.exec();
  tick.stop();
  std::printf(
      "ticks %zu, runs shown %d; lateness p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max "
      "%.1f ms (target p99 < 50 ms)\n",
      late.size(), window.runCount(), percentile(late, 50), percentile(late, 90),
      percentile(late, 99), late.empty() ? 0 : *std::max_element(late.begin(), late.end()));
  for (const QString& run : runs) {
    QProcess stop;
    stop.start(cli, {"--db", db, "stop", run});
    stop.waitForFinished(60000);
  }
}

bool firstPaintFigures(const QString& db, int trials, int steps);

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure shows as soon as it is measured
  QApplication app(argc, argv);
  QCommandLineParser parser;
  const QCommandLineOption dbOpt("db", "Big run log to make or reuse.", "FILE");
  const QCommandLineOption trialsOpt("trials", "Trials in the big run log.", "N", "10000");
  const QCommandLineOption stepsOpt("steps", "Loss points per trial.", "S", "1000");
  const QCommandLineOption liveOpt("live-s", "Seconds of the live part.", "SECONDS", "20");
  const QCommandLineOption skipLive("skip-live", "Skip the live part.");
  const QCommandLineOption skipFirst("skip-first-paint", "Skip the big run log's first paint.");
  const QCommandLineOption cliOpt(
      "cli", "shardscope-cli that starts the live runs (its sibling shardtrain trains them).",
      "PATH", QCoreApplication::applicationDirPath() + "/shardscope-cli");
  parser.addOptions({dbOpt, trialsOpt, stepsOpt, liveOpt, skipLive, skipFirst, cliOpt});
  parser.process(app);
  QTemporaryDir tmp;
  const int trials = parser.value(trialsOpt).toInt();
  const int steps = parser.value(stepsOpt).toInt();
  const QString db = parser.isSet(dbOpt) ? parser.value(dbOpt) : tmp.filePath("sweep.db");

  if (!parser.isSet(skipFirst) && !firstPaintFigures(db, trials, steps)) return 1;
  replotFigures();
  if (!parser.isSet(skipLive))
    liveLatency(parser.value(cliOpt), tmp.path(), parser.value(liveOpt).toInt());
  return 0;
}

namespace {

// Makes (or reuses) the big run log and opens it three times: first paint and complete load.
bool firstPaintFigures(const QString& db, int trials, int steps) {
  std::printf("== time to first paint: %d trials x %d steps ==\n", trials, steps);
  const QString marker = db + QString(".%1x%2").arg(trials).arg(steps);
  if (!QFileInfo::exists(marker)) {
    QFile::remove(db);
    QElapsedTimer timer;
    timer.start();
    if (auto made = makeSweep(db, trials, steps); !made) {
      std::fprintf(stderr, "bench_dashboard: %s\n", made.message().c_str());
      return false;
    }
    QFile(marker).open(QIODevice::WriteOnly);
    std::printf("made %s in %.1f s (%.0f MB)\n", qPrintable(db), timer.elapsed() / 1000.0,
                double(QFileInfo(db).size()) / 1e6);
  }
  std::vector<double> first;
  std::vector<double> complete;
  for (int r = 0; r < 3; ++r) {
    const OpenTimes t = openTimes(db);
    std::printf("  open %d: first paint %.0f ms, every curve %.0f ms\n", r + 1, t.firstPaint,
                t.complete);
    first.push_back(t.firstPaint);
    complete.push_back(t.complete);
  }
  std::printf(
      "first paint (table + Compare summaries): median %.0f ms of 3 (%.0f, %.0f, %.0f) "
      "(target < 1000 ms)\n",
      median(first), first[0], first[1], first[2]);
  std::printf("every curve loaded and painted: median %.0f ms of 3 (%.0f, %.0f, %.0f)\n",
              median(complete), complete[0], complete[1], complete[2]);
  return true;
}

}  // namespace
