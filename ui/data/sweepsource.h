// SweepSource: where the Compare panel's trials come from. Today trials are grouped by the runs'
// experiment_id (ExperimentSweepSource); when the store gains study tables, a StudySweepSource
// replaces it behind the same two calls. Runs in the worker thread, on its RunReader.
#pragma once

#include <QList>
#include <QStringList>

#include <vector>

#include "backend/store/runreader.h"
#include "trainer/spec/result.h"
#include "ui/data/runlogtypes.h"

namespace shardscope::ui {

class SweepSource {
 public:
  virtual ~SweepSource() = default;
  /// The sweeps that have runs, oldest first; `runs` is the reader's listRuns().
  virtual QList<qint64> sweepIds(const std::vector<backend::RunRecord>& runs) const = 0;
  /// The trials of sweep `id` with their intermediate values.
  [[nodiscard]] virtual Result<SweepData> load(backend::RunReader& reader,
                                               const std::vector<backend::RunRecord>& runs,
                                               qint64 id) const = 0;
};

/// Groups the runs that share an experiment_id.
class ExperimentSweepSource final : public SweepSource {
 public:
  QList<qint64> sweepIds(const std::vector<backend::RunRecord>& runs) const override;
  [[nodiscard]] Result<SweepData> load(backend::RunReader& reader,
                                       const std::vector<backend::RunRecord>& runs,
                                       qint64 id) const override;
  /// The sweep with the most runs (ties: the newest); -1 when no run has an experiment.
  static qint64 largest(const std::vector<backend::RunRecord>& runs);
  /// The metric read as intermediate values: eval.loss, else another eval.*, else loss.
  static QString objectiveKey(const QStringList& keys);
};

}  // namespace shardscope::ui
