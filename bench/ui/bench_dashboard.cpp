// bench_dashboard: the dashboard's three figures, printed against their targets (not a
// test; the machine is shared, so each figure is a median over repeats):
//   1. time to first paint when opening a run log of 10,000 trials x 1,000 steps (< 1 s): a
//      fresh MainWindow (Compare tab raised) opens the file and paints once as soon as the run
//      table is filled and the Compare panel has drawn the sweep's summaries (history, parallel
//      coordinates, slice, study views); the curves (10M points) still stream then. Printed
//      beside it: the time until every panel has all its data, curves included, and its paint
//      (what `--screenshot` waits for);
//   2. replot time of 1M points in the dashboard's curve plot (< 16 ms), as one series and as
//      four of 250k;
//   3. the Compare overlay of every trial's train and eval curves at --trials x --steps (first
//      paint, replot p50/p99 of a still and a panned view; overlaybench.h).
// The third figure, event-loop latency during a live 4-trial sweep, is bench_live's.
//
//   bench_dashboard [--db FILE] [--trials N] [--steps S] [--skip-first-paint] [--overlay-only]
// --db keeps the big run log between invocations (it is made once, ~1 min, and reused when its
// trial count matches). QT_QPA_PLATFORM=offscreen works.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QGuiApplication>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "bench/ui/bigrunlog.h"
#include "bench/ui/overlaybench.h"
#include "bench/ui/spin.h"
#include "ui/compare/comparepanel.h"
#include "ui/data/runlog.h"
#include "ui/data/sweepsource.h"
#include "ui/mainwindow.h"
#include "ui/widgets/curveplot.h"

using namespace shardscope;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

using bench::spinUntil;

struct OpenTimes {
  double firstPaint = -1;  ///< ms from openRunLog() to the summaries painted
  double complete = -1;    ///< ms from openRunLog() to every curve loaded and painted
  double runsShown = -1;   ///< ms until the run table had handled the runs
  double sweepShown = -1;  ///< ms until the Compare panel had drawn the summaries
  double paint = -1;       ///< ms of the first full paint (grab) itself
  QList<QPair<QString, double>> compareSteps;  ///< the Compare panel's summary draw, per plot
};

// Opens `db` in a fresh window and times the first paint and the complete one.
OpenTimes openTimes(const QString& db) {
  OpenTimes t;
  ui::MainWindow window;
  window.resize(1600, 1000);
  window.dock(QStringLiteral("compare"))->raise();  // the first paint shows the Compare plots
  QElapsedTimer timer;
  const auto now = [&timer] { return double(timer.nsecsElapsed()) / 1e6; };
  // Connected after the panels: each fires once the panels have handled the data.
  QObject::connect(&window.runLog(), &ui::RunLog::runsLoaded, &window, [&] {
    if (t.runsShown < 0) t.runsShown = now();
  });
  QObject::connect(&window.runLog(), &ui::RunLog::sweepLoaded, &window, [&] {
    if (t.sweepShown < 0) t.sweepShown = now();
  });
  timer.start();
  window.openRunLog(db);
  window.show();
  if (!spinUntil([&] { return window.isSummaryShown(); }, 120000)) return t;
  const double beforePaint = now();
  (void)window.grab();  // one full paint of every visible panel
  t.firstPaint = now();
  t.paint = t.firstPaint - beforePaint;
  t.compareSteps = window.comparePanel()->drawTimings();
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

bool firstPaintFigures(const QString& db, int trials, int steps);

// What the reader thread does before the first paint, timed on a reader of its own: the run
// table's queries and the sweep's summaries (each the median of 3).
void readerFigures(const QString& db) {
  auto reader = backend::RunReader::open(db);
  if (!reader) {
    std::fprintf(stderr, "bench_dashboard: %s\n", reader.message().c_str());
    return;
  }
  std::vector<double> list, last, sweep;
  for (int r = 0; r < 3; ++r) {
    QElapsedTimer timer;
    timer.start();
    auto runs = reader->listRuns();
    list.push_back(double(timer.nsecsElapsed()) / 1e6);
    timer.restart();
    auto steps = reader->lastSteps(QStringLiteral("loss"));
    last.push_back(double(timer.nsecsElapsed()) / 1e6);
    if (!runs || !steps) return;
    timer.restart();
    ui::ExperimentSweepSource source;
    auto data = source.load(*reader, *runs, ui::ExperimentSweepSource::largest(*runs));
    sweep.push_back(double(timer.nsecsElapsed()) / 1e6);
    if (!data) return;
  }
  std::printf(
      "  reader thread: listRuns %.0f ms, lastSteps(loss) %.0f ms, sweep summaries %.0f ms "
      "(medians of 3)\n",
      median(list), median(last), median(sweep));
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure shows as soon as it is measured
  QApplication app(argc, argv);
  QCommandLineParser parser;
  const QCommandLineOption dbOpt("db", "Big run log to make or reuse.", "FILE");
  const QCommandLineOption trialsOpt("trials", "Trials in the big run log.", "N", "10000");
  const QCommandLineOption stepsOpt("steps", "Loss points per trial.", "S", "1000");
  const QCommandLineOption skipFirst("skip-first-paint", "Skip the big run log's first paint.");
  const QCommandLineOption overlayOnly("overlay-only", "Only the overlay's figures.");
  parser.addOptions({dbOpt, trialsOpt, stepsOpt, skipFirst, overlayOnly});
  parser.process(app);
  QTemporaryDir tmp;
  const int trials = parser.value(trialsOpt).toInt();
  const int steps = parser.value(stepsOpt).toInt();
  const QString db = parser.isSet(dbOpt) ? parser.value(dbOpt) : tmp.filePath("sweep.db");

  std::printf("CPU: %s, Qt %s, QPA %s\n", qPrintable(bench::cpuModel()), qVersion(),
              qPrintable(QGuiApplication::platformName()));
  if (!parser.isSet(overlayOnly)) {
    if (!parser.isSet(skipFirst) && !firstPaintFigures(db, trials, steps)) return 1;
    replotFigures();
  }
  bench::overlayFigures(trials, steps);
  return 0;
}

namespace {

// Makes (or reuses) the big run log and opens it three times: first paint and complete load.
bool firstPaintFigures(const QString& db, int trials, int steps) {
  std::printf("== time to first paint: %d trials x %d steps ==\n", trials, steps);
  QElapsedTimer timer;
  timer.start();
  bool made = false;
  if (auto big = bench::ensureBigSweep(db, trials, steps, &made); !big) {
    std::fprintf(stderr, "bench_dashboard: %s\n", big.message().c_str());
    return false;
  }
  if (made) {
    std::printf("made %s in %.1f s (%.0f MB)\n", qPrintable(db), timer.elapsed() / 1000.0,
                double(QFileInfo(db).size()) / 1e6);
  }
  readerFigures(db);
  std::vector<double> first;
  std::vector<double> complete;
  for (int r = 0; r < 3; ++r) {
    const OpenTimes t = openTimes(db);
    std::printf("  open %d: first paint %.0f ms, every curve %.0f ms\n", r + 1, t.firstPaint,
                t.complete);
    QString laps;
    for (const auto& [name, ms] : t.compareSteps)
      laps += QString(" %1 %2,").arg(name).arg(ms, 0, 'f', 0);
    std::printf(
        "    breakdown: run table shown at %.0f ms, Compare summaries drawn at %.0f ms "
        "(%s), first paint (grab) %.0f ms\n",
        t.runsShown, t.sweepShown, qPrintable(laps.trimmed()), t.paint);
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
