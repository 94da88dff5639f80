#include "bench/ui/inspectbench.h"

#include <QElapsedTimer>
#include <QTimer>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench/ui/spin.h"
#include "spec/experiment.h"
#include "ui/builder/inspectpanel.h"

namespace shardscope::bench {

bool inspectFigures(const QString& experiment) {
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  auto exp = spec::load_experiment(experiment.toStdString(), {}, noPaths);
  if (!exp) {
    std::fprintf(stderr, "bench_dashboard: %s\n", exp.message().c_str());
    return false;
  }
  ui::InspectPanel panel;
  panel.resize(1400, 800);
  panel.show();
  panel.setExperiment(*exp);
  std::vector<double> gaps;
  QElapsedTimer sinceTick;
  QTimer tick;
  tick.setInterval(10);
  QObject::connect(&tick, &QTimer::timeout, [&] {
    gaps.push_back(double(sinceTick.nsecsElapsed()) / 1e6);
    sinceTick.restart();
  });
  QElapsedTimer wall;
  wall.start();
  sinceTick.start();
  tick.start();
  panel.inspect();
  constexpr int kMaxMs = 30 * 60 * 1000;
  if (!spinUntil([&] { return !panel.isBusy(); }, kMaxMs)) {
    std::fprintf(stderr, "bench_dashboard: the inspection took more than 30 minutes\n");
    return false;
  }
  const double seconds = double(wall.elapsed()) / 1000.0;
  tick.stop();
  std::sort(gaps.begin(), gaps.end());
  const double p99 = gaps.empty() ? 0 : gaps[std::size_t(double(gaps.size() - 1) * 0.99)];
  const double worst = gaps.empty() ? 0 : gaps.back();
  std::printf(
      "inspect data tab: %s in %.1f s; GUI ticks (10 ms timer) %zu, gap p99 %.1f ms, max "
      "%.1f ms\n",
      qPrintable(experiment), seconds, gaps.size(), p99, worst);
  std::printf("  %s\n", qPrintable(panel.statusText()));
  return true;
}

}  // namespace shardscope::bench
