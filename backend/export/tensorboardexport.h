// A run of the run log as TensorBoard event files: one folder per rank with its scalars, and
// for a run with parameters (a sweep's trial, or `run --set` overrides) an HParams session in
// the top folder with the objective values as metrics, so TensorBoard's HParams tab compares
// trials exported side by side under one log directory.
#pragma once

#include <QString>
#include <QStringList>

#include <utility>
#include <vector>

#include "backend/store/runreader.h"
#include "backend/store/runrecords.h"
#include "backend/sweep/study.h"
#include "spec/result.h"

namespace shardscope::backend {

/// What exportRunToTensorBoard() wrote.
struct TensorBoardExport {
  QStringList files;  ///< event files, top folder first, then rank_0, rank_1, ...
  qint64 scalars = 0;
  bool hparams = false;  ///< an HParams session was written
};

/// The TensorBoard tag of a run-log metric key: dots become slashes ("eval.loss" ->
/// "eval/loss", "mem.peak" -> "mem/peak"), so TensorBoard groups them by their prefix.
QString tensorBoardTag(const QString& metricKey);

/// Writes `run`'s metrics into `dir`: `dir/rank_N/events.out.tfevents.*` per rank with scalars,
/// and `dir/events.out.tfevents.*` with the HParams session (parameters, start and end, status)
/// and, for a complete run, `objective/METRIC` scalars, when the run has parameters or objective
/// values. `dir` must not hold event files yet (the message says so, naming it).
[[nodiscard]] Result<TensorBoardExport> exportRunToTensorBoard(RunReader& reader,
                                                               const RunRecord& run,
                                                               const QString& dir);

/// What exportStudyToTensorBoard() wrote.
struct TensorBoardStudyExport {
  QString experimentFile;  ///< the event file with the HParams experiment, in the top folder
  std::vector<std::pair<QString, TensorBoardExport>> runs;  ///< per trial: its run's name
  qint64 scalars = 0;
};

/// Writes every trial of `study` with exportRunToTensorBoard() into `dir/RUN-NAME/`, and into
/// `dir` the HParams experiment: each search parameter with its domain (a float or int range, a
/// categorical's choices, a bool) and the objectives (`objective/METRIC`) as its metrics, so
/// TensorBoard's HParams tab lists the trials as sessions of one experiment.
[[nodiscard]] Result<TensorBoardStudyExport> exportStudyToTensorBoard(search::Study& study,
                                                                      RunReader& reader,
                                                                      const QString& dir);

}  // namespace shardscope::backend
