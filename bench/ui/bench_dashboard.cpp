// bench_dashboard: the dashboard's three figures, printed against their targets (not a
// test; the machine is shared, so each figure is a median over repeats):
//   1. time to first paint when opening a run log of 10,000 trials x 1,000 steps (< 1 s): a
//      fresh MainWindow (Compare tab raised) opens the file and paints once as soon as the run
//      table is filled and the Compare panel has drawn the sweep's summaries (history, parallel
//      coordinates, slice, study views); the curves (10M points) still stream then. Printed
//      beside it: the time until every panel has all its data, curves included, and its paint
//      (what `--screenshot` waits for);
//   2. replot time of 1M points in the dashboard's curve plot (< 16 ms), as one series and as
//      four of 250k; beside it, smoothing + replot (the EMA of every point recomputed, the
//      smoothed curve drawn over the faint raw one) and its ratio to the raw replot, and the
//      smoothing slider dragged, the EMA on the GUI thread (before) against background passes
//      (now) in the same run (--smoothing-only: this figure alone);
//   3. the Compare overlay of every trial's train and eval curves at --trials x --steps (first
//      paint, replot p50/p99 of a still and a panned view; overlaybench.h).
//   4. the Timeline's replot (layout of its bars and paint) at 10,000 steps x 8 ranks, fitted
//      (a pixel column's mean per bar) and zoomed to 100 steps, beside the curve plot's replot of
//      the same 8 x 10,000 points, as ratios (--timeline-only: this figure alone).
//   5. the Timeline's per-unit view of one detailed step, 28 layers x 8 ranks, beside the curve
//      plot (unitviewbench.h; --unit-view-only: this figure alone).
//   6. the Samples view filled with --probes x --columns answers, and a page scrolled
//      (samplesbench.h; --samples-only: this figure alone).
//   7. --inspect EXP.toml (this figure alone, never in the full run): the builder's Inspect data
//      tab reading the experiment's data, with the GUI thread's tick gaps meanwhile
//      (inspectbench.h).
// The third figure, event-loop latency during a live 4-trial sweep, is bench_live's.
//
//   bench_dashboard [--db FILE] [--trials N] [--steps S] [--skip-first-paint] [--overlay-only]
//                   [--replot-only] [--smoothing-only] [--append-only] [--timeline-only]
//                   [--unit-view-only]
//                   [--samples-only [--probes N] [--columns C]] [--inspect EXP.toml]
//                   [--pg [--pg-server URL]]
// --db keeps the big run log between invocations (it is made once, ~1 min, and reused when its
// trial count matches). --pg measures figure 1 on SQLite and then on a PostgreSQL run log of the
// same sweep (written through the same RunStore) and prints both and their ratio, and nothing
// else (figures 2 and 3 read no run log). The server is --pg-server, else $SHARDSCOPE_TEST_DB;
// with neither, the tool runs itself again under tests/support/with_postgres.py, which starts a
// throwaway server on loopback. QT_QPA_PLATFORM=offscreen works.
#include <qcustomplot.h>

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QGuiApplication>
#include <QImage>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "backend/store/db.h"
#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "bench/ui/bigrunlog.h"
#include "bench/ui/inspectbench.h"
#include "bench/ui/overlaybench.h"
#include "bench/ui/samplesbench.h"
#include "bench/ui/spin.h"
#include "bench/ui/unitviewbench.h"
#include "ui/compare/comparepanel.h"
#include "ui/data/runlog.h"
#include "ui/data/sweepsource.h"
#include "ui/mainwindow.h"
#include "ui/timeline/timelineview.h"
#include "ui/widgets/curvegraph.h"
#include "ui/widgets/curveplot.h"
#include "ui/widgets/smoothing.h"

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

// The peer of a CurvePlot: a plain QCustomPlot with plain QCPGraphs holding the same points,
// pens, antialiasing and layers, at the same size and ranges: how CurvePlot drew before its
// dense lines were drawn per pixel column (ui/widgets/curveplot.cpp).
std::unique_ptr<QCustomPlot> plainPeer(ui::CurvePlot& plot) {
  QCustomPlot* from = plot.customPlot();
  auto peer = std::make_unique<QCustomPlot>();
  peer->resize(from->size());
  peer->addLayer("raw", peer->layer("main"), QCustomPlot::limBelow);
  for (int g = 0; g < from->graphCount(); ++g) {
    const QCPGraph* source = from->graph(g);
    QCPGraph* graph = peer->addGraph();
    graph->data()->set(*source->data());
    graph->setPen(source->pen());
    graph->setAntialiased(source->antialiased());
    graph->setAdaptiveSampling(source->adaptiveSampling());
    graph->setLayer(source->layer()->name());
  }
  peer->xAxis->setRange(from->xAxis->range());
  peer->yAxis->setRange(from->yAxis->range());
  peer->show();
  QCoreApplication::processEvents();
  return peer;
}

// The median of `n` replots after one to fill caches, in ms (the old drawing takes seconds).
template <class F>
double fewMs(F&& replot, int n = 5) {
  replot();
  std::vector<double> ms;
  for (int r = 0; r < n; ++r) {
    QElapsedTimer timer;
    timer.start();
    replot();
    ms.push_back(double(timer.nsecsElapsed()) / 1e6);
  }
  return median(ms);
}

// 8 jagged series of 10,000 points (a per-rank step time: noise, a slow drift, a spike every 97
// steps), as the Plots panel draws per-rank curves: CurvePlot's replot beside its plain peer's.
void jaggedFigures() {
  constexpr int kSeries = 8;
  constexpr int kPoints = 10'000;
  std::printf("\n== CurvePlot, %d jagged series x %d points, 1200x800, offscreen ==\n", kSeries,
              kPoints);
  ui::CurvePlot plot;
  plot.resize(1200, 800);
  plot.show();
  quint32 seed = 12345;
  const auto noise = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return double(seed >> 8) / double(1u << 24) - 0.5;
  };
  for (int s = 0; s < kSeries; ++s) {
    QVector<double> xs(kPoints);
    QVector<double> ys(kPoints);
    for (int i = 0; i < kPoints; ++i) {
      xs[i] = i + 1;
      ys[i] = 0.5 + 0.05 * s + 0.00001 * i + 0.08 * noise() + (i % 97 == s ? 0.4 : 0.0);
    }
    plot.setSeries(QString("r%1").arg(s), xs, ys);
  }
  plot.rescale();
  QCoreApplication::processEvents();
  const double now = fewMs([&] { plot.replot(); }, 20);
  auto peer = plainPeer(plot);
  const double before = fewMs([&] { peer->replot(); }, 3);
  std::printf(
      "replot median: before (plain QCPGraph, antialiased 2 px polyline) %.1f ms, now (a span "
      "per pixel column) %.2f ms: %.0fx faster, on %s\n",
      before, now, before / now, qPrintable(bench::cpuModel()));
}

// Median and max of 20 replots (a 21st first, to fill caches), each after `before` (untimed
// apart from what it does inside the timer: it runs within it).
std::pair<double, double> timedReplots(ui::CurvePlot& plot,
                                       const std::function<void(int)>& before) {
  std::vector<double> ms;
  for (int r = 0; r < 21; ++r) {
    QElapsedTimer timer;
    timer.start();
    before(r);
    plot.replot();
    ms.push_back(double(timer.nsecsElapsed()) / 1e6);
  }
  ms.erase(ms.begin());  // the first one fills caches
  return {median(ms), *std::max_element(ms.begin(), ms.end())};
}

// The CPU time this thread has used, in ms (the wall time less what the load takes).
double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

// The load average over the last minute (/proc/loadavg), printed beside the figures.
double loadAverage() {
  QFile file(QStringLiteral("/proc/loadavg"));
  if (!file.open(QIODevice::ReadOnly)) return -1;
  return file.readLine().split(' ').value(0).toDouble();
}

// A drag of the smoothing slider as a user makes it: a new weight every 16 ms frame (30 ticks,
// 0.60 .. 0.89), each applied as PlotsPanel applies it (setSmoothing, then replot), the GUI
// thread's events handled for the rest of each frame (a background pass's curves taken, their
// replot). What the user feels: how long a tick holds the GUI thread, the longest the thread is
// busy at once (a tick or one event's handling), and how long after the last tick the last
// weight's curves are drawn.
struct DragFigures {
  double tickMedian = 0;
  double tickMax = 0;
  double tickCpu = 0;     // the median tick's GUI-thread CPU time
  double tickMaxCpu = 0;  // the slowest tick's
  double longestBusy = 0;
  double settle = 0;
  bool exact = false;  // the drawn curves equal smoothEma of the last weight, bit for bit
};

DragFigures dragSlider(ui::CurvePlot& plot, bool background) {
  DragFigures f;
  plot.setBackgroundSmoothing(background);
  plot.setSmoothing(0.5);
  plot.replot();
  spinUntil([&plot] { return !plot.isSmoothingPending(); }, 60000);
  QCoreApplication::processEvents();
  QElapsedTimer clock;
  clock.start();
  const auto now = [&clock] { return double(clock.nsecsElapsed()) / 1e6; };
  double lastDrawn = -1;  // when the last replot with no pass pending ended
  const QMetaObject::Connection drawn =
      QObject::connect(plot.customPlot(), &QCustomPlot::afterReplot, &plot, [&] {
        if (!plot.isSmoothingPending()) lastDrawn = now();
      });
  // Handles the GUI thread's events until `done`, timing each batch.
  const auto eventsUntil = [&](const std::function<bool()>& done) {
    while (!done()) {
      const double t0 = now();
      QCoreApplication::processEvents(QEventLoop::AllEvents);
      f.longestBusy = std::max(f.longestBusy, now() - t0);
      if (now() - t0 < 0.05) QThread::usleep(200);
    }
  };
  constexpr int kTicks = 30;
  std::vector<double> ticks;
  std::vector<double> tickCpu;
  double lastTick = 0;  // when the last tick began, and ended
  double lastTickEnd = 0;
  for (int t = 0; t < kTicks; ++t) {
    const double frame = 16.0 * t;
    eventsUntil([&] { return now() >= frame; });
    lastTick = now();
    const double cpu0 = threadCpuMs();
    plot.setSmoothing(0.6 + 0.01 * t);
    plot.replot();
    tickCpu.push_back(threadCpuMs() - cpu0);
    lastTickEnd = now();
    ticks.push_back(lastTickEnd - lastTick);
    f.longestBusy = std::max(f.longestBusy, ticks.back());
  }
  eventsUntil([&] { return !plot.isSmoothingPending() && lastDrawn >= lastTick; });
  // The GUI-thread path draws the last weight in the last tick itself: 0.
  f.settle = std::max(0.0, lastDrawn - lastTickEnd);
  QObject::disconnect(drawn);
  f.tickMedian = median(ticks);
  f.tickCpu = median(tickCpu);
  const auto slowest = std::max_element(ticks.begin(), ticks.end());
  f.tickMax = *slowest;
  f.tickMaxCpu = tickCpu[std::size_t(slowest - ticks.begin())];
  f.exact = true;
  for (const QString& name : plot.seriesNames()) {
    const QCPGraph* rawGraph = plot.rawGraph(name);
    const QCPGraph* drawnGraph = plot.drawnGraph(name);
    if (rawGraph == nullptr || drawnGraph == nullptr) continue;
    const QSharedPointer<QCPGraphDataContainer> raw = rawGraph->data();
    const QSharedPointer<QCPGraphDataContainer> shown = drawnGraph->data();
    std::vector<double> values(std::size_t(raw->size()));
    for (int i = 0; i < raw->size(); ++i) values[std::size_t(i)] = raw->at(i)->value;
    ui::smoothEma(values.data(), values.data(), values.size(), plot.smoothing());
    f.exact = f.exact && shown->size() == raw->size();
    for (int i = 0; f.exact && i < shown->size(); ++i)
      f.exact = std::bit_cast<quint64>(shown->at(i)->value) ==
                std::bit_cast<quint64>(values[std::size_t(i)]);
  }
  return f;
}

// Both axes fitted to every curve's points, as PlotsPanel::fitAxes does before each replot of a
// live run (QCPGraph's value range: every point read; CurveGraph's: off its pyramid).
void fitLikePlotsPanel(QCustomPlot& cp) {
  QCPRange keys, values;
  for (int g = 0; g < cp.graphCount(); ++g) {
    bool found = false;
    const QCPRange k = cp.graph(g)->getKeyRange(found);
    if (found)
      keys = g == 0 ? k : QCPRange(std::min(keys.lower, k.lower), std::max(keys.upper, k.upper));
    const QCPRange v = cp.graph(g)->getValueRange(found);
    if (found)
      values =
          g == 0 ? v : QCPRange(std::min(values.lower, v.lower), std::max(values.upper, v.upper));
  }
  cp.xAxis->setRange(keys);
  cp.yAxis->setRange(values.lower - 0.03 * values.size(), values.upper + 0.03 * values.size());
}

// appendOnly: only the live run's append and the pan, before and now (--append-only).
void replotFigures(bool appendOnly = false) {
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
    int next = per;
    if (appendOnly) {
      plot.setSmoothing(0.6);
      plot.finishSmoothing();
    } else {
      const auto [raw, rawMax] = timedReplots(plot, [](int) {});
      // Where a replot's time goes, in the GUI thread's own CPU time (the machine's load adds
      // its waits to the wall time above): every curve reduced again (as before the reduced
      // points were kept), its spans painted, and the rest of a replot (axes, grid, legend, the
      // buffers put on screen).
      {
        QCustomPlot* cp = plot.customPlot();
        plot.setReuseLines(false);
        std::vector<double> reduce, paint, empty, full;
        for (int rep = 0; rep < 15; ++rep) {
          double t = threadCpuMs();
          std::vector<QVector<QRectF>> spans;
          spans.reserve(std::size_t(cp->graphCount()));
          for (int g = 0; g < cp->graphCount(); ++g) {
            spans.push_back(ui::CurveGraph::columnSpans(
                static_cast<ui::CurveGraph*>(cp->graph(g))->reducedLines(), 1.0));
          }
          reduce.push_back(threadCpuMs() - t);
          QImage image(cp->size(), QImage::Format_ARGB32_Premultiplied);
          image.fill(Qt::white);
          QCPPainter painter(&image);
          painter.setPen(Qt::NoPen);
          t = threadCpuMs();
          for (int g = 0; g < cp->graphCount(); ++g) {
            painter.setBrush(cp->graph(g)->pen().color());
            painter.drawRects(spans[std::size_t(g)].constData(), int(spans[std::size_t(g)].size()));
          }
          paint.push_back(threadCpuMs() - t);
          painter.end();
          for (int g = 0; g < cp->graphCount(); ++g) cp->graph(g)->setVisible(false);
          t = threadCpuMs();
          cp->replot();
          empty.push_back(threadCpuMs() - t);
          for (int g = 0; g < cp->graphCount(); ++g) cp->graph(g)->setVisible(true);
          t = threadCpuMs();
          cp->replot();
          full.push_back(threadCpuMs() - t);
        }
        plot.setReuseLines(true);
        std::printf(
            "%d series x %d points: a replot's GUI-thread CPU (medians of 15, every curve reduced "
            "again): %.2f ms, of which reducing the points %.2f ms, painting the spans %.2f ms, "
            "the rest (axes, legend, buffers) %.2f ms\n",
            series, per, median(full), median(reduce), median(paint), median(empty));
      }
      // A pan by one pixel each replot: every curve reduced again (nothing to reuse).
      {
        const QCPRange range = plot.customPlot()->xAxis->range();
        const double pixel = range.size() / plot.customPlot()->axisRect()->width();
        const auto [pan, panMax] = timedReplots(plot, [&plot, range, pixel](int r) {
          plot.customPlot()->xAxis->setRange(range.lower + pixel * (r % 2),
                                             range.upper + pixel * (r % 2));
        });
        plot.customPlot()->xAxis->setRange(range);
        std::printf(
            "%d series x %d points: replot panned by a pixel, median %.2f ms, max %.2f ms (target "
            "< "
            "16 ms)\n",
            series, per, pan, panMax);
      }
      std::printf(
          "%d series x %d points: replot, nothing changed (each curve's reduced points reused), "
          "median %.2f ms, max %.2f ms (target < 16 ms)\n",
          series, per, raw, rawMax);
      // Smoothing on: every replot recomputes each series' EMA (the weight moves a little each
      // time, as while the slider is dragged) and draws the smoothed curve over the faint raw one.
      // (On the GUI thread, as before the background passes: the figure of the old path.)
      plot.setBackgroundSmoothing(false);
      const auto [smoothed, smoothedMax] =
          timedReplots(plot, [&plot](int r) { plot.setSmoothing(0.6 + 0.001 * (r % 2)); });
      plot.setBackgroundSmoothing(true);
      // Before: the same two curves per series as plain QCPGraphs (each 1M-point line stroked
      // with a cosmetic pen), with the EMA recomputed into the smoothed graphs' values each time.
      {
        auto peer = plainPeer(plot);
        std::vector<double> values;
        int r = 0;
        const double peerMs = fewMs(
            [&] {
              const double w = 0.6 + 0.001 * (r++ % 2);
              for (int g = 1; g < peer->graphCount(); g += 2) {
                const QCPGraphDataContainer& points = *peer->graph(g - 1)->data();
                values.resize(std::size_t(points.size()));
                for (int i = 0; i < points.size(); ++i)
                  values[std::size_t(i)] = points.at(i)->value;
                ui::smoothEma(values.data(), values.data(), values.size(), w);
                auto* to = &*peer->graph(g)->data()->begin();
                for (std::size_t i = 0; i < values.size(); ++i) to[i].value = values[i];
              }
              peer->replot();
            },
            10);
        std::printf(
            "%d series x %d points: smoothing + replot before (plain QCPGraph peer) %.2f ms, now "
            "%.2f ms: %.1fx faster\n",
            series, per, peerMs, smoothed, peerMs / smoothed);
      }
      std::printf(
          "%d series x %d points: smoothing + replot on the GUI thread median %.2f ms, max %.2f ms "
          "(target < 16 ms), %.2fx the raw replot, on %s\n",
          series, per, smoothed, smoothedMax, smoothed / raw, qPrintable(bench::cpuModel()));
      // The slider dragged: the EMA on the GUI thread at each tick (before) against the
      // background passes (now), in this one run.
      for (const bool background : {false, true}) {
        const double load = loadAverage();
        plot.setReuseLines(background);  // before: every curve reduced again at every replot
        const DragFigures d = dragSlider(plot, background);
        std::printf(
            "%d series x %d points: slider drag (30 ticks, one per 16 ms frame), %s: tick median "
            "%.2f ms (GUI-thread CPU %.2f ms), max %.2f ms (CPU %.2f ms); GUI thread busy at most "
            "%.2f ms at once; "
            "last weight drawn "
            "%.1f ms after the last tick; exact %s (load %.1f)\n",
            series, per,
            background ? "now (background passes, reduced points reused)"
                       : "before (EMA on the GUI thread, every curve reduced again)",
            d.tickMedian, d.tickCpu, d.tickMax, d.tickMaxCpu, d.longestBusy, d.settle,
            d.exact ? "yes" : "NO", load);
      }
      // Smoothing on, nothing changed (a pan, a repaint): the two curves drawn, no EMA.
      const auto [still, stillMax] = timedReplots(plot, [](int) {});
      std::printf(
          "%d series x %d points: smoothed replot, weight unchanged, median %.2f ms, max %.2f ms, "
          "%.2fx the raw replot\n",
          series, per, still, stillMax, still / raw);
      // A live run: 100 new steps per series before each replot, smoothing on (the EMA goes on
      // from its last point instead of starting again).
      const auto [live, liveMax] = timedReplots(plot, [&plot, &next, series](int) {
        QVector<double> xs(100);
        QVector<double> ys(100);
        for (int i = 0; i < 100; ++i) {
          xs[i] = next + i;
          ys[i] = 2.0 + 0.2 * std::sin((next + i) * 0.37);
        }
        next += 100;
        for (int s = 0; s < series; ++s) plot.appendPoints(QString("s%1").arg(s), xs, ys);
      });
      std::printf(
          "%d series x %d points: 100 points appended per series + smoothed replot, median %.2f "
          "ms, max %.2f ms\n",
          series, per, live, liveMax);
    }
    // The same append, and a pan, before (every curve reduced again from its first point,
    // walking 64-point blocks: CurvePlot::setIncrementalLines(false)) against now (the min/max
    // pyramid; with the axes unchanged, only the last pixel column on), in this one run: wall
    // time and the GUI thread's own CPU time, medians and worst of 20 (a 21st first).
    // Axes fixed: the x range ends 4000 steps past the last point, so the new points land in
    // the last columns; auto-ranged: both axes fitted to every curve, as PlotsPanel::fitAxes
    // does before every replot (x ends at the last point: every column moves a little).
    const QCPRange yRange = plot.customPlot()->yAxis->range();
    // The append alone, no replot: the raw points added and the smoothed ones smoothed on from
    // the EMA's last state (CurvePlot::finishSmoothing runs what a replot runs first). O(new):
    // the same for 1 x 1M as for one of 4 x 250k.
    {
      std::vector<double> cpu;
      for (int r = 0; r < 21; ++r) {
        QVector<double> xs(100);
        QVector<double> ys(100);
        for (int i = 0; i < 100; ++i) {
          xs[i] = next + i;
          ys[i] = 2.0 + 0.2 * std::sin((next + i) * 0.37);
        }
        next += 100;
        const double t = threadCpuMs();
        for (int s = 0; s < series; ++s) plot.appendPoints(QString("s%1").arg(s), xs, ys);
        plot.finishSmoothing();
        cpu.push_back(threadCpuMs() - t);
      }
      cpu.erase(cpu.begin());
      std::printf(
          "%d series x %d points: 100 points appended per series and smoothed on, no replot: "
          "GUI-thread CPU median %.3f ms, max %.3f ms (%.3f ms a series)\n",
          series, per, median(cpu), *std::max_element(cpu.begin(), cpu.end()),
          median(cpu) / series);
      plot.replot();
    }
    // Every curve (raw and smoothed) reduced from the start alone, GUI-thread CPU, median of 15:
    // the part of a pan or an auto-ranged append the pyramid changes.
    for (const bool incremental : {false, true}) {
      QCustomPlot* cp = plot.customPlot();
      plot.setIncrementalLines(incremental);
      plot.setReuseLines(false);
      std::vector<double> cpu;
      qsizetype lines = 0;
      for (int rep = 0; rep < 15; ++rep) {
        const double t = threadCpuMs();
        lines = 0;
        for (int g = 0; g < cp->graphCount(); ++g)
          lines += static_cast<ui::CurveGraph*>(cp->graph(g))->reducedLines().size();
        cpu.push_back(threadCpuMs() - t);
      }
      plot.setReuseLines(true);
      std::printf(
          "%d series x %d points, %d curves reduced from the start, %s: GUI-thread CPU median "
          "%.2f ms (%lld reduced points)\n",
          series, per, cp->graphCount(),
          incremental ? "now (pyramid, columns found by their keys)" : "before (64-point blocks)",
          median(cpu), static_cast<long long>(lines));
    }
    for (const char* what : {"append, axes fixed", "append, x auto-ranged", "pan by a pixel"}) {
      const bool autoRange = std::strcmp(what, "append, x auto-ranged") == 0;
      const bool pan = std::strcmp(what, "pan by a pixel") == 0;
      for (const bool incremental : {false, true}) {
        plot.setIncrementalLines(incremental);
        const double load = loadAverage();
        QCustomPlot* cp = plot.customPlot();
        cp->yAxis->setRange(yRange);
        if (!autoRange && !pan) cp->xAxis->setRange(0, next + 4000);
        plot.replot();
        const QCPRange range = cp->xAxis->range();
        const double pixel = range.size() / cp->axisRect()->width();
        std::vector<double> wall, cpu;
        for (int r = 0; r < 21; ++r) {
          QVector<double> xs(100);
          QVector<double> ys(100);
          if (!pan) {
            for (int i = 0; i < 100; ++i) {
              xs[i] = next + i;
              ys[i] = 2.0 + 0.2 * std::sin((next + i) * 0.37);
            }
          }
          QElapsedTimer timer;
          timer.start();
          const double cpu0 = threadCpuMs();
          if (pan) {
            cp->xAxis->setRange(range.lower + pixel * (r % 2), range.upper + pixel * (r % 2));
          } else {
            next += 100;
            for (int s = 0; s < series; ++s) plot.appendPoints(QString("s%1").arg(s), xs, ys);
            if (autoRange) fitLikePlotsPanel(*cp);
          }
          plot.replot();
          cpu.push_back(threadCpuMs() - cpu0);
          wall.push_back(double(timer.nsecsElapsed()) / 1e6);
        }
        wall.erase(wall.begin());
        cpu.erase(cpu.begin());
        std::printf(
            "%d series x %d points, smoothed (%d curves): %s, %s: wall median %.2f ms, max %.2f "
            "ms; GUI-thread CPU median %.2f ms, max %.2f ms (target < 16 ms; load %.1f)\n",
            series, per, 2 * series, what,
            incremental ? "now (pyramid, last column on)" : "before (reduced from the start)",
            median(wall), *std::max_element(wall.begin(), wall.end()), median(cpu),
            *std::max_element(cpu.begin(), cpu.end()), load);
      }
    }
  }
}

// A step's phases on a rank: rank 5 is slower from step 4000 on, and every 97th step is a spike.
spec::PhasesEvent benchPhases(qint64 step, int rank) {
  spec::PhasesEvent e;
  e.step = step;
  const double slow = rank == 5 && step >= 4000 ? 1.4 : 1.0;
  e.data = 0.002;
  e.forward = 0.080 * slow + 0.004 * std::sin(step * 0.13 + rank);
  e.backward = 2 * e.forward;
  e.optimizer = 0.015;
  e.comm_exposed = 0.030 + (step % 97 == 0 ? 0.2 : 0.0);
  e.other = 0.001;
  e.wall = e.data + e.forward + e.backward + e.optimizer + e.comm_exposed + e.other;
  return e;
}

// The median of 20 calls of `replot` after one to fill caches, in ms.
template <class F>
double medianMs(F&& replot) {
  replot();
  std::vector<double> ms;
  for (int r = 0; r < 20; ++r) {
    QElapsedTimer timer;
    timer.start();
    replot();
    ms.push_back(double(timer.nsecsElapsed()) / 1e6);
  }
  return median(ms);
}

void timelineFigures() {
  constexpr int kSteps = 10'000;
  constexpr int kRanks = 8;
  const QSize size(1200, 800);
  std::printf("\n== Timeline, %d steps x %d ranks, %dx%d, offscreen ==\n", kSteps, kRanks,
              size.width(), size.height());
  ui::TimelineView view;
  view.resize(size);
  ui::PhasesDelta delta;
  delta.runId = 1;
  delta.reset = true;
  for (int rank = 0; rank < kRanks; ++rank)
    for (qint64 step = 1; step <= kSteps; ++step)
      delta.points.append({rank, benchPhases(step, rank)});
  QElapsedTimer load;
  load.start();
  view.apply(delta);
  const double loadMs = double(load.nsecsElapsed()) / 1e6;
  QImage image(size, QImage::Format_ARGB32_Premultiplied);
  // A replot: the bars laid out again for the view (as after a zoom, pan or new step) and painted.
  const double fitted = medianMs([&] {
    view.fit();
    view.render(&image);
  });
  const auto fittedBars = static_cast<int>(view.bars(0).size());
  const double zoomed = medianMs([&] {
    view.setStepRange(5000.5, 5100.5);
    view.render(&image);
  });
  // The Plots panel's curve plot with as many points: one loss-like curve per rank (smooth: a
  // jagged 10,000-point series is stroked antialiased, which Qt's raster engine takes seconds
  // for; that is the curve plot's own matter, not this figure's).
  ui::CurvePlot plot;
  plot.resize(size);
  plot.show();
  for (int rank = 0; rank < kRanks; ++rank) {
    QVector<double> xs(kSteps);
    QVector<double> ys(kSteps);
    for (int i = 0; i < kSteps; ++i) {
      xs[i] = i + 1;
      ys[i] = 2.0 + rank + 3.0 / (1.0 + 1e-3 * i) + 0.05 * std::sin(i * 0.01);
    }
    plot.setSeries(QString("r%1").arg(rank), xs, ys);
  }
  plot.rescale();
  QCoreApplication::processEvents();
  const double curves = medianMs([&] { plot.replot(); });
  std::printf(
      "Timeline: apply %d points %.1f ms; replot median fitted %.2f ms (%d bars per "
      "lane: pixel columns), zoomed to 100 steps %.2f ms\n",
      kSteps * kRanks, loadMs, fitted, fittedBars, zoomed);
  std::printf("CurvePlot (Plots panel), %d series x %d points: replot median %.2f ms\n", kRanks,
              kSteps, curves);
  std::printf(
      "ratios: Timeline fitted / CurvePlot %.2f, zoomed / CurvePlot %.2f (target: "
      "fluid, < 16 ms)\n",
      fitted / curves, zoomed / curves);
}

// Medians of three opens of one run log, in ms (-1: not measured).
struct PaintFigures {
  double firstPaint = -1;
  double complete = -1;
};

Result<PaintFigures> firstPaintFigures(const QString& db, int trials, int steps);
Result<PaintFigures> serverFirstPaintFigures(const QString& server, int trials, int steps);
void printRatios(const PaintFigures& lite, const PaintFigures& pg);

// --pg without a server: this tool again, under with_postgres.py (which sets
// SHARDSCOPE_TEST_DB to the throwaway server it starts); its exit status.
int underThrowawayServer() {
  const QString script =
      QStringLiteral(SHARDSCOPE_SOURCE_DIR) + QStringLiteral("/tests/support/with_postgres.py");
  QStringList args{script};
  args += QCoreApplication::arguments();
  args[1] = QCoreApplication::applicationFilePath();
  std::printf("bench_dashboard: no --pg-server or SHARDSCOPE_TEST_DB: running under %s\n",
              qPrintable(script));
  const int rc = QProcess::execute(QStringLiteral("python3"), args);
  if (rc < 0) std::fprintf(stderr, "bench_dashboard: cannot run python3 %s\n", qPrintable(script));
  return rc < 0 ? 1 : rc;
}

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
  const QCommandLineOption timelineOnly("timeline-only", "Only the Timeline's figure.");
  const QCommandLineOption replotOnly("replot-only",
                                      "Only the 1M-point replot figures (raw and smoothed).");
  const QCommandLineOption appendOnly(
      "append-only", "Only a live run's append and a pan, before and now (wall and CPU).");
  const QCommandLineOption smoothingOnly(
      "smoothing-only", "Only the 1M-point replot figures, without the jagged curves' peer.");
  const QCommandLineOption unitViewOnly("unit-view-only", "Only the per-unit view's figure.");
  const QCommandLineOption samplesOnly("samples-only", "Only the Samples view's figure.");
  const QCommandLineOption probesOpt("probes", "Probes (rows) in the Samples view.", "N", "300");
  const QCommandLineOption columnsOpt("columns", "Evaluations (columns) in the Samples view.", "C",
                                      "40");
  const QCommandLineOption inspectOpt("inspect", "Only the Inspect data tab's figure, on EXP.",
                                      "EXP.toml");
  const QCommandLineOption pgOpt(
      "pg", "First paint on SQLite and on PostgreSQL, side by side (figure 1 only).");
  const QCommandLineOption pgServerOpt(
      "pg-server",
      "PostgreSQL server for --pg (default: $SHARDSCOPE_TEST_DB, else a throwaway one).", "URL");
  parser.addOptions({dbOpt, trialsOpt, stepsOpt, skipFirst, overlayOnly, timelineOnly, replotOnly,
                     smoothingOnly, appendOnly, unitViewOnly, samplesOnly, probesOpt, columnsOpt,
                     inspectOpt, pgOpt, pgServerOpt});
  parser.process(app);
  QTemporaryDir tmp;
  const int trials = parser.value(trialsOpt).toInt();
  const int steps = parser.value(stepsOpt).toInt();
  const QString db = parser.isSet(dbOpt) ? parser.value(dbOpt) : tmp.filePath("sweep.db");
  const bool pg = parser.isSet(pgOpt) || parser.isSet(pgServerOpt);
  const QString server = parser.isSet(pgServerOpt) ? parser.value(pgServerOpt)
                                                   : qEnvironmentVariable("SHARDSCOPE_TEST_DB");
  if (pg && server.isEmpty()) return underThrowawayServer();

  std::printf("CPU: %s, Qt %s, QPA %s\n", qPrintable(bench::cpuModel()), qVersion(),
              qPrintable(QGuiApplication::platformName()));
  if (pg) {
    auto lite = firstPaintFigures(db, trials, steps);
    auto onServer = lite ? serverFirstPaintFigures(server, trials, steps) : lite;
    if (!onServer) {
      std::fprintf(stderr, "bench_dashboard: %s\n", onServer.message().c_str());
      return 1;
    }
    printRatios(*lite, *onServer);
    return 0;
  }
  if (parser.isSet(inspectOpt)) return bench::inspectFigures(parser.value(inspectOpt)) ? 0 : 1;
  if (parser.isSet(timelineOnly)) {
    timelineFigures();
    return 0;
  }
  if (parser.isSet(unitViewOnly)) {
    bench::unitViewFigures();
    return 0;
  }
  const int probes = parser.value(probesOpt).toInt();
  const int columns = parser.value(columnsOpt).toInt();
  if (parser.isSet(samplesOnly)) {
    bench::samplesFigures(probes, columns);
    return 0;
  }
  if (parser.isSet(appendOnly)) {
    std::printf("CPU: %s, load average %.1f\n", qPrintable(bench::cpuModel()), loadAverage());
    replotFigures(true);
    return 0;
  }
  if (parser.isSet(smoothingOnly)) {
    std::printf("CPU: %s, load average %.1f\n", qPrintable(bench::cpuModel()), loadAverage());
    replotFigures();
    return 0;
  }
  if (parser.isSet(replotOnly)) {
    jaggedFigures();
    replotFigures();
    return 0;
  }
  if (!parser.isSet(overlayOnly)) {
    if (!parser.isSet(skipFirst)) {
      if (auto r = firstPaintFigures(db, trials, steps); !r) {
        std::fprintf(stderr, "bench_dashboard: %s\n", r.message().c_str());
        return 1;
      }
    }
    jaggedFigures();
    replotFigures();
    timelineFigures();
  }
  bench::overlayFigures(trials, steps);
  bench::unitViewFigures();
  bench::samplesFigures(probes, columns);
  return 0;
}

namespace {

// Opens `db` (a file or a URL) three times: the reader's queries, first paint, complete load.
Result<PaintFigures> paintFigures(const QString& db) {
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
    if (t.firstPaint < 0) return fail(backend::displaySpec(db).toStdString() + ": never painted");
    first.push_back(t.firstPaint);
    complete.push_back(t.complete);
  }
  std::printf(
      "first paint (table + Compare summaries): median %.0f ms of 3 (%.0f, %.0f, %.0f) "
      "(target < 1000 ms)\n",
      median(first), first[0], first[1], first[2]);
  std::printf("every curve loaded and painted: median %.0f ms of 3 (%.0f, %.0f, %.0f)\n",
              median(complete), complete[0], complete[1], complete[2]);
  return PaintFigures{median(first), median(complete)};
}

// Makes (or reuses) the big run log in the file `db` and measures it.
Result<PaintFigures> firstPaintFigures(const QString& db, int trials, int steps) {
  std::printf("== time to first paint: %d trials x %d steps (SQLite) ==\n", trials, steps);
  QElapsedTimer timer;
  timer.start();
  bool made = false;
  if (auto big = bench::ensureBigSweep(db, trials, steps, &made); !big) return big.error();
  if (made) {
    std::printf("made %s in %.1f s (%.0f MB)\n", qPrintable(db), timer.elapsed() / 1000.0,
                double(QFileInfo(db).size()) / 1e6);
  }
  return paintFigures(db);
}

// The same on the PostgreSQL server `server`, in a database of its own.
Result<PaintFigures> serverFirstPaintFigures(const QString& server, int trials, int steps) {
  std::printf("\n== time to first paint: %d trials x %d steps (PostgreSQL, %s) ==\n", trials, steps,
              qPrintable(backend::displaySpec(server)));
  QElapsedTimer timer;
  timer.start();
  bool made = false;
  QString spec;
  if (auto big = bench::ensureBigSweepOnServer(server, trials, steps, &spec, &made); !big)
    return big.error();
  if (made) {
    auto db = backend::Db::open(spec);
    if (!db) return db.error();
    auto size = db->queryText("SELECT pg_database_size(current_database())");
    if (!size) return size.error();
    std::printf("made %s in %.1f s (%.0f MB)\n", qPrintable(backend::displaySpec(spec)),
                timer.elapsed() / 1000.0, std::stod(*size) / 1e6);
  }
  return paintFigures(spec);
}

void printRatios(const PaintFigures& lite, const PaintFigures& pg) {
  std::printf("\n== SQLite against PostgreSQL (medians of 3, same sweep, same machine) ==\n");
  std::printf("%-40s %10s %12s %8s\n", "", "SQLite", "PostgreSQL", "PG/SQLite");
  std::printf("%-40s %7.0f ms %9.0f ms %8.2f\n", "first paint (target < 1000 ms)", lite.firstPaint,
              pg.firstPaint, pg.firstPaint / lite.firstPaint);
  std::printf("%-40s %7.0f ms %9.0f ms %8.2f\n", "every curve loaded and painted", lite.complete,
              pg.complete, pg.complete / lite.complete);
}

}  // namespace
