// SweepSource: where the Compare panel's trials come from. Trials are grouped by the runs'
// experiment_id; when a study (schema v3) names that experiment, its name, objectives and the
// trial numbers come with them. A user's group of runs (schema 12, groupSweepId) is a sweep as
// well: its runs, of any experiments and studies, with no study. Runs in the worker thread, on its
// RunReader. load() reads summaries only (the run rows and the study rows, no metric scan), so the
// Compare panel paints at once; readCurves() then reads the trials' intermediate values, many runs
// a statement.
#pragma once

#include <QList>
#include <QStringList>

#include <vector>

#include "backend/store/runreader.h"
#include "spec/result.h"
#include "ui/data/runlogtypes.h"

namespace shardscope::ui {

class SweepSource {
 public:
  virtual ~SweepSource() = default;
  /// The sweeps that have runs, oldest first; `runs` is the reader's listRuns().
  virtual QList<qint64> sweepIds(const std::vector<backend::RunRecord>& runs) const = 0;
  /// The trials of sweep `id` (summaries: no curves), its study and every sweep's name.
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
  /// How many trials' metric keys decide the objective key (spread over the sweep): keys are
  /// the same across the trials of a sweep, and asking all 10,000 would cost a query each.
  static constexpr int kKeySample = 32;
};

/// One chunk per run of `runIds` (in that order) with the rank-0 points of `key` above the run's
/// step in `afterSteps` (-1 when absent), read in one statement: `reset` is set where the run had
/// no step yet. A run with no new point gets an empty chunk.
[[nodiscard]] Result<QVector<SeriesChunk>> readCurves(backend::RunReader& reader,
                                                      const QList<qint64>& runIds,
                                                      const QString& key,
                                                      const QHash<qint64, qint64>& afterSteps);

/// The lineage of a population-based training study (its state "pbt", read with the space its
/// stored experiment declares); none for another study.
std::optional<PbtData> pbtFromStudy(const backend::StudyRecord& study);

/// The autotune study `study` records (its state: backend::Autotuner's).
AutotuneData autotuneFromStudy(const backend::StudyRecord& study);

/// True when `study` is running but no process runs its sweep any more (its stamp is absent, or
/// names a dead pid on this machine): the dashboard offers to adopt it.
bool sweepProcessGone(const SweepStudy& study);

}  // namespace shardscope::ui
