#include "bench/ui/overlaybench.h"

#include <qcustomplot.h>

#include <QCoreApplication>
#include <QElapsedTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "bench/ui/spin.h"
#include "ui/compare/compareplots.h"
#include "ui/compare/triallines.h"
#include "ui/compare/trialoverlay.h"
#include "ui/widgets/densitylines.h"

namespace shardscope::bench {

namespace {

constexpr int kEvalEvery = 50;    // an evaluation every 50 steps
constexpr int kPrunedEvery = 20;  // every 20th trial pruned at a third of the steps

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, std::size_t(std::lround(p * double(v.size() - 1))))];
}

double timeMs(const std::function<void()>& f) {
  QElapsedTimer timer;
  timer.start();
  f();
  return double(timer.nsecsElapsed()) / 1e6;
}

struct Sweep {
  ui::SweepData data;
  QHash<qint64, QVector<QPointF>> train;
};

// Loss curves that fall towards a floor set by the trial, with noise; eval curves above them.
Sweep makeSweep(int trials, int steps) {
  Sweep s;
  s.data.experimentId = 1;
  s.data.objectiveKey = QStringLiteral("eval.loss");
  s.data.trials.reserve(trials);
  std::uint32_t seed = 12345;
  const auto noise = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return double(seed >> 8) / double(1u << 24) - 0.5;
  };
  for (int t = 0; t < trials; ++t) {
    ui::SweepTrial trial;
    trial.runId = t + 1;
    trial.name = QStringLiteral("trial-%1").arg(t);
    const bool pruned = t % kPrunedEvery == kPrunedEvery - 1;
    trial.status = pruned ? spec::RunStatus::pruned : spec::RunStatus::complete;
    const double floor = 0.4 + 1.5 * double((t * 7919) % trials) / trials;
    const int n = pruned ? steps / 3 : steps;
    QVector<QPointF> curve;
    curve.reserve(n);
    for (int i = 0; i < n; ++i) {
      curve.append(QPointF(i, floor + 4.0 / (1.0 + 0.02 * i) + 0.05 * noise()));
      if (i % kEvalEvery == kEvalEvery - 1) {
        trial.steps.append(i);
        trial.values.append(floor + 0.1 + 3.0 / (1.0 + 0.02 * i));
      }
    }
    if (!pruned) trial.objective = trial.values.isEmpty() ? floor : trial.values.last();
    s.train.insert(trial.runId, curve);
    s.data.trials.append(std::move(trial));
  }
  return s;
}

void figuresAt(const Sweep& sweep, QSize size, qint64 bestRun, qsizetype points) {
  QCustomPlot plot;
  ui::compare::setupPlot(&plot, QStringLiteral("Train and eval curves of every trial"));
  plot.resize(size);
  plot.show();
  spinUntil([&] { return plot.viewport().size() == size; }, 5000);
  ui::compare::TrialOverlay overlay;
  const double first = timeMs([&] {
    overlay = ui::compare::drawTrialOverlay(&plot, sweep.data, sweep.train, bestRun, {}, {});
  });
  const QRect rect = plot.axisRect()->rect();
  std::printf("  %dx%d plot (axis rect %dx%d), %lld points in %d lines:\n", size.width(),
              size.height(), rect.width(), rect.height(), static_cast<long long>(points),
              overlay.density->lineCount());
  std::printf("    first paint (overlay built from the curves, rasterised, painted): %.0f ms\n",
              first);
  std::vector<double> still, pan;
  still.reserve(200);
  pan.reserve(200);
  for (int r = 0; r < 200; ++r) still.push_back(timeMs([&] { plot.replot(); }));
  const QCPRange keys = plot.xAxis->range();
  for (int r = 0; r < 200; ++r) {
    const double shift = (r % 20 - 10) * 0.01 * keys.size();
    plot.xAxis->setRange(keys.lower + shift, keys.upper + shift);
    pan.push_back(timeMs([&] { plot.replot(); }));
  }
  std::printf("    replot, view unchanged: p50 %.2f ms, p99 %.2f ms (200 replots; target <= 16)\n",
              percentile(still, 0.5), percentile(still, 0.99));
  // The plot's own cost (axes, grid, legend, the best trial's graphs) without the density.
  plot.xAxis->setRange(keys);
  overlay.density->setVisible(false);
  std::vector<double> bare;
  bare.reserve(200);
  for (int r = 0; r < 200; ++r) bare.push_back(timeMs([&] { plot.replot(); }));
  overlay.density->setVisible(true);
  std::printf("    the same replot without the density: p50 %.2f ms, p99 %.2f ms\n",
              percentile(bare, 0.5), percentile(bare, 0.99));
  std::printf("    replot while panning (image moved): p50 %.2f ms, p99 %.2f ms (200 pans)\n",
              percentile(pan, 0.5), percentile(pan, 0.99));
  // Rasterising the exact image of a still view, alone (a data change does this in its replot).
  std::vector<double> raster;
  raster.reserve(5);
  for (int r = 0; r < 5; ++r) {
    overlay.density->setPoints(0, {}, {}, false);  // same points, new generation: rasterise
    raster.push_back(timeMs([&] { plot.replot(); }));
  }
  std::printf(
      "    exact rasterisation (after a pan once still, or new data): median %.0f ms of 5\n",
      percentile(raster, 0.5));
}

// The peer: every curve as one TrialLines (per-pixel-column reduction, strokes every line).
void peerAt(const Sweep& sweep, QSize size) {
  QCustomPlot plot;
  ui::compare::setupPlot(&plot, QStringLiteral("peer"));
  plot.setNotAntialiasedElements(QCP::aePlottables);
  plot.resize(size);
  plot.show();
  spinUntil([&] { return plot.viewport().size() == size; }, 5000);
  auto* lines = new ui::compare::TrialLines(plot.xAxis, plot.yAxis);
  for (const ui::SweepTrial& trial : sweep.data.trials) {
    ui::compare::TrialLines::Line line;
    for (const QPointF& p : sweep.train.value(trial.runId)) {
      line.xs.append(p.x());
      line.ys.append(p.y());
    }
    line.pen = QPen(QColor(0x2c, 0x6f, 0xbb, 80), 0);
    lines->addLine(std::move(line));
    ui::compare::TrialLines::Line eval;
    eval.xs = trial.steps;
    eval.ys = trial.values;
    eval.pen = QPen(QColor(0xe0, 0x7b, 0x1a, 80), 0);
    lines->addLine(std::move(eval));
  }
  plot.rescaleAxes();
  plot.replot();
  std::vector<double> ms;
  ms.reserve(5);
  for (int r = 0; r < 5; ++r) ms.push_back(timeMs([&] { plot.replot(); }));
  std::printf("    peer, the same curves as one TrialLines: replot median %.0f ms of 5\n",
              percentile(ms, 0.5));
}

}  // namespace

void overlayFigures(int trials, int steps) {
  std::printf("\n== overlay of every trial (train + eval), %d trials x %d steps ==\n", trials,
              steps);
  QElapsedTimer timer;
  timer.start();
  const Sweep sweep = makeSweep(trials, steps);
  qsizetype points = 0;
  for (const ui::SweepTrial& trial : sweep.data.trials)
    points += trial.steps.size() + sweep.train.value(trial.runId).size();
  std::printf("  made the curves in %.1f s\n", double(timer.elapsed()) / 1000.0);
  const int best = ui::compare::bestTrial(sweep.data, true);
  const qint64 bestRun = best < 0 ? -1 : sweep.data.trials[best].runId;
  for (const QSize size : {QSize(390, 330), QSize(1200, 800)}) {
    figuresAt(sweep, size, bestRun, points);
    peerAt(sweep, size);
  }
}

}  // namespace shardscope::bench
