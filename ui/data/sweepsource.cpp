#include "ui/data/sweepsource.h"

#include <QMap>

#include <algorithm>

namespace shardscope::ui {

QList<qint64> ExperimentSweepSource::sweepIds(const std::vector<backend::RunRecord>& runs) const {
  QList<qint64> ids;
  for (const auto& run : runs) {
    if (run.experimentId && !ids.contains(*run.experimentId)) ids.append(*run.experimentId);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

qint64 ExperimentSweepSource::largest(const std::vector<backend::RunRecord>& runs) {
  QMap<qint64, int> counts;
  for (const auto& run : runs) {
    if (run.experimentId) ++counts[*run.experimentId];
  }
  qint64 best = -1;
  int bestCount = 0;
  for (auto it = counts.cbegin(); it != counts.cend(); ++it) {
    if (it.value() >= bestCount) {  // ids grow with time: >= prefers the newest on ties
      best = it.key();
      bestCount = it.value();
    }
  }
  return best;
}

QString ExperimentSweepSource::objectiveKey(const QStringList& keys) {
  if (keys.contains(QStringLiteral("eval.loss"))) return QStringLiteral("eval.loss");
  for (const QString& key : keys) {
    if (key.startsWith(QStringLiteral("eval."))) return key;
  }
  return QStringLiteral("loss");
}

Result<SweepData> ExperimentSweepSource::load(backend::RunReader& reader,
                                              const std::vector<backend::RunRecord>& runs,
                                              qint64 id) const {
  SweepData data;
  data.experimentId = id;
  data.experimentIds = sweepIds(runs);
  std::vector<const backend::RunRecord*> members;
  for (const auto& run : runs) {
    if (run.experimentId && *run.experimentId == id) members.push_back(&run);
  }
  // listRuns() is newest first; a history reads oldest first.
  std::sort(members.begin(), members.end(), [](const auto* a, const auto* b) {
    return a->createdAt != b->createdAt ? a->createdAt < b->createdAt : a->id < b->id;
  });
  QStringList keys;
  for (const auto* run : members) {
    auto runKeys = reader.metricKeys(run->id);
    if (!runKeys) return runKeys.error();
    for (const QString& key : *runKeys) {
      if (!keys.contains(key)) keys.append(key);
    }
  }
  data.objectiveKey = objectiveKey(keys);
  for (const auto* run : members) {
    SweepTrial trial{run->id,        run->name,      run->status, run->params,
                     run->objective, run->createdAt, {},          {}};
    auto points = reader.metric(run->id, data.objectiveKey);
    if (!points) return points.error();
    for (const auto& point : *points) {
      if (point.rank != 0) continue;
      trial.steps.append(double(point.step));
      trial.values.append(point.value);
    }
    data.trials.append(std::move(trial));
  }
  return data;
}

}  // namespace shardscope::ui
