// A real run log for the ui tests, written through RunStore's public API: a sweep of 8 trials
// (experiment "demo-sweep"; params lr, lora_rank, schedule; one pruned, one failed, one stopped
// by hand) with per-step metrics for 2 ranks, plus a running run outside any sweep ("live").
#pragma once

#include <QJsonObject>
#include <QTest>

#include <memory>
#include <vector>

#include "backend/store/runstore.h"

namespace shardscope::testing {

struct SweepFixture {
  std::unique_ptr<backend::RunStore> store;
  qint64 experimentId = 0;
  std::vector<qint64> trialIds;                   // creation order
  std::vector<std::optional<double>> objectives;  // per trial, creation order
  qint64 liveId = 0;
  static constexpr int kSteps = 40;
  static constexpr int kWorld = 2;
};

template <class T>
T waitOk(std::future<Result<T>> pending) {
  Result<T> result = pending.get();
  if (!result) qFatal("fixture: %s", result.message().c_str());
  return std::move(*result);
}

inline void waitOk(std::future<Result<void>> pending) {
  Result<void> result = pending.get();
  if (!result) qFatal("fixture: %s", result.message().c_str());
}

/// Metric rows of steps [from, to) of one run: train metrics on rank 0, memory on every rank,
/// eval.loss every 10 steps.
inline std::vector<backend::MetricRow> stepRows(qint64 runId, int from, int to, double scale) {
  std::vector<backend::MetricRow> rows;
  for (int s = from; s < to; ++s) {
    const double t = 1.7e9 + s;
    const double loss = scale * (2.0 / (1.0 + 0.1 * s)) + 0.1;
    rows.push_back({runId, s, "loss", loss, 0, t});
    rows.push_back({runId, s, "lr", 3e-4 * (1.0 - double(s) / 100.0), 0, t});
    rows.push_back({runId, s, "grad_norm", 1.0 / (1.0 + 0.05 * s), 0, t});
    rows.push_back({runId, s, "tokens_per_s", 1200.0 + 10.0 * (s % 7), 0, t});
    rows.push_back({runId, s, "mfu", 0.31 + 0.001 * (s % 5), 0, t});
    for (int r = 0; r < SweepFixture::kWorld; ++r) {
      rows.push_back({runId, s, "mem.allocated", (300.0 + 10 * r) * 1048576.0, r, t});
      rows.push_back({runId, s, "mem.reserved", (400.0 + 10 * r) * 1048576.0, r, t});
      rows.push_back({runId, s, "mem.peak", (450.0 + 10 * r + s) * 1048576.0, r, t});
    }
    if (s % 10 == 9) rows.push_back({runId, s, "eval.loss", loss + 0.05, 0, t});
  }
  return rows;
}

inline SweepFixture makeSweep(const QString& path) {
  SweepFixture f;
  auto store = backend::RunStore::open(path);
  if (!store) qFatal("fixture: %s", store.message().c_str());
  f.store = std::move(*store);
  backend::ExperimentRecord experiment;
  experiment.name = "demo-sweep";
  experiment.toml = "[search]\nobjective = \"eval.loss\"\n";
  f.experimentId = waitOk(f.store->createExperiment(experiment));
  const double lrs[] = {1e-4, 3e-4, 1e-3, 3e-5, 5e-4, 2e-4, 8e-4, 6e-5};
  const double scales[] = {1.0, 0.6, 0.9, 1.4, 0.5, 0.8, 1.1, 0.7};
  const char* schedules[] = {"cosine", "linear"};
  for (int i = 0; i < 8; ++i) {
    backend::NewRun run;
    run.experimentId = f.experimentId;
    run.name = QStringLiteral("sweep-%1").arg(i);
    run.runDir = QStringLiteral("/tmp/none/sweep-%1").arg(i);
    run.params =
        QJsonObject{{"lr", lrs[i]}, {"lora_rank", 4 << (i % 3)}, {"schedule", schedules[i % 2]}};
    run.worldSize = SweepFixture::kWorld;
    const qint64 id = waitOk(f.store->createRun(run));
    f.trialIds.push_back(id);
    waitOk(f.store->setRunStatus(id, spec::RunStatus::running));
    const bool pruned = i == 3;
    const bool failed = i == 6;
    const int steps = pruned ? 20 : failed ? 12 : SweepFixture::kSteps;
    waitOk(f.store->appendMetrics(stepRows(id, 0, steps, scales[i])));
    if (pruned) {
      waitOk(f.store->setRunStatus(id, spec::RunStatus::pruned));
      f.objectives.emplace_back();
    } else if (failed) {
      waitOk(f.store->setRunStatus(id, spec::RunStatus::failed, "rank 1 exited with signal 9"));
      f.objectives.emplace_back();
    } else {
      const double objective = scales[i] * (2.0 / (1.0 + 0.1 * 39)) + 0.15;
      waitOk(f.store->setRunStatus(id, spec::RunStatus::complete, {}, objective));
      f.objectives.emplace_back(objective);
    }
  }
  backend::NewRun live;
  live.name = "live";
  live.runDir = "/tmp/none/live";
  live.worldSize = SweepFixture::kWorld;
  f.liveId = waitOk(f.store->createRun(live));
  waitOk(f.store->setRunStatus(f.liveId, spec::RunStatus::running));
  waitOk(f.store->appendMetrics(stepRows(f.liveId, 0, 10, 1.0)));
  f.store->flush();
  return f;
}

}  // namespace shardscope::testing
