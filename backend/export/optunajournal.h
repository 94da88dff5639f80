// A study of the run log as an Optuna journal file (JournalStorage with JournalFileBackend, the
// format of optuna 5.0): `optuna.load_study(study_name=NAME,
// storage=JournalStorage(JournalFileBackend(FILE)))` sees the same trials, parameters with their
// distributions, values, states and intermediate values, and optuna-dashboard opens the file.
//
// Why a journal and not Optuna's SQLite storage: the journal is a log of JSON operations whose
// op codes and fields have been stable since Optuna 3.1 and are checked by no schema version,
// whereas the SQLite storage needs the exact alembic revision of the reader's Optuna (a file
// written for one version is refused or migrated by another).
#pragma once

#include <QString>

#include "backend/store/runreader.h"
#include "backend/sweep/study.h"
#include "spec/result.h"

namespace shardscope::backend {

/// What writeOptunaJournal() wrote, per Optuna state.
struct OptunaExport {
  int complete = 0;
  int pruned = 0;
  int fail = 0;  ///< failed, stopped, oom and infeasible trials
  int running = 0;
  int waiting = 0;  ///< queued (enqueued, not asked yet)
};

/// Writes `study` (with every trial `reader` knows, in trial-number order) to a new journal
/// file at `path`. States: complete -> COMPLETE, pruned -> PRUNED (with the last intermediate
/// value as its value, as Optuna's tell does), failed, stopped, oom and infeasible -> FAIL,
/// running -> RUNNING, queued -> WAITING. Every trial carries user attributes
/// `shardscope_status` (the run log's status), `shardscope_run` (the run's name),
/// `shardscope_trial_number` and, when it
/// failed, `shardscope_error`. `path` must not exist: appending to another journal would
/// merge two studies' operations.
[[nodiscard]] Result<OptunaExport> writeOptunaJournal(search::Study& study, RunReader& reader,
                                                      const QString& path);

}  // namespace shardscope::backend
