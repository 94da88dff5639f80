#include "bench/ui/unitviewbench.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QImage>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "backend/monitor/unittrace.h"
#include "ui/timeline/unitview.h"
#include "ui/widgets/curveplot.h"

namespace shardscope::bench {
namespace {

using backend::UnitSpan;
using backend::UnitSpanKind;

constexpr int kLayers = 28;
constexpr int kRanks = 8;

// One rank's step as FULL_SHARD with prefetch runs it: each layer's gather issued one unit ahead
// of its compute, a reduce-scatter after each backward; rank 5 computes 20% slower.
backend::UnitTraceRank rankStep(int rank) {
  backend::UnitTraceRank r;
  r.rank = rank;
  const double slow = rank == 5 ? 1.2 : 1.0;
  const double fwd = 2.0 * slow;  // ms per layer
  const double gather = 1.4;      // ms per all-gather
  const qint64 bytes = 3 * 1024 * 1024 * 17 / 10;
  double t = 0;
  auto add = [&r](UnitSpanKind kind, const QString& unit, const char* phase, double start,
                  double end, double waitFrom, qint64 b) {
    r.spans.push_back(UnitSpan{kind, unit, phase, 0, start, end, waitFrom, b});
  };
  add(UnitSpanKind::allGather, "root", "forward", 0, 0.6, 0.1, bytes / 2);
  add(UnitSpanKind::forward, "root", "forward", 0.6, 0.9, -1, 0);
  t = 0.9;
  for (int l = 0; l < kLayers; ++l) {
    const QString unit = QStringLiteral("layers.%1").arg(l);
    const double issued = std::max(0.0, t - fwd);
    const double done = issued + gather + 0.05 * std::sin(l + rank);
    add(UnitSpanKind::allGather, unit, "forward", issued, std::max(done, t), t, bytes);
    t = std::max(done, t);
    add(UnitSpanKind::forward, unit, "forward", t, t + fwd, -1, 0);
    t += fwd;
  }
  add(UnitSpanKind::forward, "root", "forward", t, t + 1.5, -1, 0);
  add(UnitSpanKind::backward, "root", "backward", t + 1.5, t + 4.5, -1, 0);
  t += 4.5;
  for (int l = kLayers - 1; l >= 0; --l) {
    const QString unit = QStringLiteral("layers.%1").arg(l);
    const double issued = std::max(0.0, t - 2 * fwd);
    add(UnitSpanKind::allGather, unit, "backward", issued, std::max(issued + gather, t), t, bytes);
    add(UnitSpanKind::backward, unit, "backward", t, t + 2 * fwd, -1, 0);
    t += 2 * fwd;
    add(UnitSpanKind::reduceScatter, unit, "backward", t, t + 2.1, t + 1.9, 2 * bytes);
  }
  add(UnitSpanKind::backward, "root", "backward", t, t + 0.4, -1, 0);
  add(UnitSpanKind::reduceScatter, "root", "backward", t + 0.4, t + 1.2, t + 1.0, bytes);
  return r;
}

template <class F>
double medianMs(F&& replot) {
  replot();  // fills caches
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    QElapsedTimer timer;
    timer.start();
    replot();
    ms.push_back(double(timer.nsecsElapsed()) / 1e6);
  }
  std::nth_element(ms.begin(), ms.begin() + 10, ms.end());
  return ms[10];
}

}  // namespace

void unitViewFigures() {
  const QSize size(1200, 800);
  backend::UnitTraceStep step;
  step.step = 100;
  step.units.append("root");
  for (int l = 0; l < kLayers; ++l) step.units.append(QStringLiteral("layers.%1").arg(l));
  for (int rank = 0; rank < kRanks; ++rank) step.ranks[rank] = rankStep(rank);
  std::printf("\n== per-unit view: one step of %d layers x %d ranks, %dx%d, offscreen ==\n",
              kLayers, kRanks, size.width(), size.height());
  ui::UnitView view;
  view.resize(size);
  QImage image(size, QImage::Format_ARGB32_Premultiplied);
  // A replot: the bars laid out again for the view (as after a zoom or pan) and painted.
  const double fitted = medianMs([&] {
    view.showStep(step);
    view.render(&image);
  });
  const double end = step.end();
  const double zoomed = medianMs([&] {
    view.setTimeRange(0.45 * end, 0.55 * end);
    view.render(&image);
  });
  ui::CurvePlot plot;  // the Plots panel's plot: 8 series x 10,000 points
  plot.resize(size);
  plot.show();
  for (int rank = 0; rank < kRanks; ++rank) {
    QVector<double> xs(10'000);
    QVector<double> ys(10'000);
    for (int i = 0; i < 10'000; ++i) {
      xs[i] = i + 1;
      ys[i] = 3.0 / (1.0 + 1e-3 * i) + 0.05 * rank;  // a loss curve per rank
    }
    plot.setSeries(QString("r%1").arg(rank), xs, ys);
  }
  plot.rescale();
  QCoreApplication::processEvents();
  const double curves = medianMs([&] { plot.replot(); });
  std::printf("UnitView: %d bars; replot median whole step %.2f ms, a tenth of it %.2f ms\n",
              static_cast<int>(view.bars().size()), fitted, zoomed);
  std::printf("CurvePlot (Plots panel), %d series x 10000 points: replot median %.2f ms\n", kRanks,
              curves);
  std::printf(
      "ratios: UnitView whole / CurvePlot %.3f, tenth / CurvePlot %.3f (target: fluid, "
      "< 16 ms)\n",
      fitted / curves, zoomed / curves);
}

}  // namespace shardscope::bench
