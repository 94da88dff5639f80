// RunStore's writes of studies and trials (schema v3; the Study's ask/tell drives them).
#include <QJsonArray>
#include <QJsonDocument>
#include <QLoggingCategory>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backend/store/runstore.h"
#include "backend/store/storesql.h"
#include "spec/events.h"

Q_LOGGING_CATEGORY(lcRunStoreStudy, "shardscope.backend.runstore.study")

namespace shardscope::backend {

namespace {

using storesql::changes;
using storesql::compactJson;
using storesql::execute;
using storesql::insertedId;

std::string jsonText(const QJsonArray& array) {
  return QJsonDocument(array).toJson(QJsonDocument::Compact).toStdString();
}

// The study's fields that must hold before it is stored, with the field and the fix named.
Result<void> validateStudy(const NewStudy& study) {
  if (study.name.trimmed().isEmpty()) {
    return fail("search.name: a study needs a name (default: the experiment file's stem)");
  }
  if (study.objectives.isEmpty()) {
    return fail("search.objectives: study '" + study.name.toStdString() +
                "' names no objective: add one, e.g. objectives = {\"eval.loss\" = \"minimize\"}");
  }
  if (study.directions.size() != study.objectives.size()) {
    return fail("search.objectives: study '" + study.name.toStdString() + "' has " +
                std::to_string(study.objectives.size()) + " objectives but " +
                std::to_string(study.directions.size()) + " directions: give one per objective");
  }
  for (const QString& direction : study.directions) {
    if (direction != "minimize" && direction != "maximize") {
      return fail("search.objectives: direction '" + direction.toStdString() +
                  "' is neither \"minimize\" nor \"maximize\"");
    }
  }
  return ok();
}

Result<qint64> insertStudy(WriteContext& context, const NewStudy& study) {
  if (auto r = validateStudy(study); !r) return r.error();
  auto stmt = context.statement(
      "INSERT INTO studies(name, experiment_id, config, objectives, directions, sampler, seed, "
      "status, created_at, state, kind) VALUES (?1,?2,?3,?4,?5,?6,?7,'running',?8,?9,?10) "
      "RETURNING id");
  if (!stmt) return stmt.error();
  Statement& insert = **stmt;
  if (auto r = insert.bindText(1, study.name.toStdString()); !r) return r.error();
  if (auto r = study.experimentId ? insert.bindInt64(2, *study.experimentId) : insert.bindNull(2);
      !r)
    return r.error();
  if (auto r = insert.bindText(3, study.config.toStdString()); !r) return r.error();
  if (auto r = insert.bindText(4, jsonText(QJsonArray::fromStringList(study.objectives))); !r)
    return r.error();
  if (auto r = insert.bindText(5, jsonText(QJsonArray::fromStringList(study.directions))); !r)
    return r.error();
  if (auto r = insert.bindText(6, study.sampler.toStdString()); !r) return r.error();
  if (auto r = study.seed ? insert.bindInt64(7, *study.seed) : insert.bindNull(7); !r)
    return r.error();
  if (auto r = insert.bindDouble(8, spec::unix_time_now()); !r) return r.error();
  if (auto r = insert.bindText(9, compactJson(study.state)); !r) return r.error();
  if (auto r = insert.bindText(10, studyKindName(study.kind).toStdString()); !r) return r.error();
  auto inserted = insertedId(insert);
  if (!inserted) {
    if (inserted.message().find("UNIQUE") != std::string::npos) {
      return fail("study name '" + study.name.toStdString() +
                  "' is taken in the run log: choose another search.name, or resume that study");
    }
    return inserted.error();
  }
  context.changes().studies = true;
  return *inserted;
}

// The study's name and its next free trial number; fails when the study does not exist.
Result<std::pair<std::string, qint64>> studyForTrial(WriteContext& context, qint64 studyId) {
  auto stmt = context.statement(
      "SELECT s.name, (SELECT coalesce(max(trial_number) + 1, 0) FROM runs WHERE study_id = s.id) "
      "FROM studies s WHERE s.id = ?1");
  if (!stmt) return stmt.error();
  Statement& select = **stmt;
  if (auto r = select.bindInt64(1, studyId); !r) return r.error();
  auto row = select.step();
  if (!row) return row.error();
  if (!*row) return fail("study " + std::to_string(studyId) + " is not in the run log");
  std::pair<std::string, qint64> found{select.columnText(0), select.columnInt64(1)};
  select.reset();
  return found;
}

Result<TrialId> insertTrial(WriteContext& context, const NewTrial& trial,
                            spec::RunStatus status = spec::RunStatus::queued) {
  auto study = studyForTrial(context, trial.studyId);
  if (!study) return study.error();
  const qint64 number = trial.trialNumber.value_or(study->second);
  const std::string name =
      trial.name.isEmpty() ? study->first + "-" + std::to_string(number) : trial.name.toStdString();
  auto stmt = context.statement(
      "INSERT INTO runs(experiment_id, name, status, run_dir, params, created_at, world_size, "
      "study_id, trial_number, started_at) SELECT experiment_id, ?2, ?8, ?3, ?4, ?5, ?6, id, ?7, "
      "CASE WHEN ?8 = 'running' THEN ?5 END FROM studies WHERE id = ?1 RETURNING id");
  if (!stmt) return stmt.error();
  Statement& insert = **stmt;
  if (auto r = insert.bindInt64(1, trial.studyId); !r) return r.error();
  if (auto r = insert.bindText(2, name); !r) return r.error();
  if (auto r = insert.bindText(3, trial.runDir.toStdString()); !r) return r.error();
  if (auto r = insert.bindText(4, compactJson(trial.params)); !r) return r.error();
  if (auto r = insert.bindDouble(5, spec::unix_time_now()); !r) return r.error();
  if (auto r = insert.bindInt64(6, trial.worldSize); !r) return r.error();
  if (auto r = insert.bindInt64(7, number); !r) return r.error();
  if (auto r = insert.bindText(8, spec::to_string(status)); !r) return r.error();
  auto inserted = insertedId(insert);
  if (!inserted) {
    if (inserted.message().find("trial_number") != std::string::npos) {
      return fail("study '" + study->first + "' already has trial " + std::to_string(number) +
                  ": leave the number out to take the next free one");
    }
    if (inserted.message().find("runs.name") != std::string::npos) {
      return fail("run name '" + name + "' is taken in the run log: choose another name");
    }
    return inserted.error();
  }
  const qint64 runId = *inserted;
  if (auto r = storesql::insertParams(context, runId, trial.params); !r) return r.error();
  context.changes().runs = true;
  context.changes().studies = true;
  return TrialId{runId, number};
}

// Updates one row of `sql` (?1 = id, ?2 = a text value); fails naming `what` when none matched.
Result<void> updateOne(WriteContext& context, const char* sql, qint64 id, const std::string& value,
                       const std::string& what) {
  auto stmt = context.statement(sql);
  if (!stmt) return stmt.error();
  if (auto r = (*stmt)->bindInt64(1, id); !r) return r;
  if (auto r = (*stmt)->bindText(2, value); !r) return r;
  if (auto r = execute(**stmt); !r) return r;
  if (changes(context) == 0)
    return fail(what + " " + std::to_string(id) + " is not in the run log");
  return ok();
}

// Runs one statement with ?1 = `id` (and ?2 = `now` when it has one).
Result<void> runWithId(WriteContext& context, const char* sql, qint64 id, double now = 0) {
  auto stmt = context.statement(sql);
  if (!stmt) return stmt.error();
  if (auto r = (*stmt)->bindInt64(1, id); !r) return r;
  if (std::string(sql).find("?2") != std::string::npos) {
    if (auto r = (*stmt)->bindDouble(2, now); !r) return r;
  }
  return execute(**stmt);
}

// The step a retry of `runId` resumes at (the newest sharded checkpoint of its failed attempt), or
// -1 when it starts over.
Result<qint64> resumeStep(WriteContext& context, qint64 runId, int failedAttempt) {
  auto stmt = context.statement(storesql::resumePointSql(context.db().kind()));
  if (!stmt) return stmt.error();
  Statement& select = **stmt;
  if (auto r = select.bindInt64(1, runId); !r) return r.error();
  if (auto r = select.bindInt64(2, failedAttempt); !r) return r.error();
  auto row = select.step();
  if (!row) return row.error();
  const qint64 step = *row ? select.columnInt64(0) : -1;
  select.reset();
  return step;
}

// A retry's curve: resumed from a checkpoint at step k it continues the failed attempt's curve
// after k (the rows past k, which the retry computes again, go); started over, it is a fresh
// curve. Either way no pruner judges the retry by values it will not reach again. The pruner's
// rung records (Study's "search.rung", keyed by rung, not by step) go in both cases.
/// A run's attempt and status, and whether it is a study's trial: what a new attempt of it
/// (resumed or replanned) is decided on, inside the write that begins it.
struct AttemptState {
  int attempt = 0;
  std::string status;
  bool trial = false;
};

Result<AttemptState> attemptState(WriteContext& context, qint64 runId) {
  auto stmt =
      context.statement("SELECT attempt, status, study_id IS NOT NULL FROM runs WHERE id = ?1");
  if (!stmt) return stmt.error();
  Statement& select = **stmt;
  if (auto r = select.bindInt64(1, runId); !r) return r.error();
  auto row = select.step();
  if (!row) return row.error();
  if (!*row) {
    select.reset();
    return fail("run " + std::to_string(runId) + " is not in the run log");
  }
  AttemptState state{static_cast<int>(select.columnInt64(0)), select.columnText(1),
                     select.columnInt64(2) != 0};
  select.reset();
  return state;
}

Result<void> trimRetriedCurve(WriteContext& context, qint64 runId, int failedAttempt,
                              bool fromCheckpoint) {
  qint64 keepThrough = -1;
  if (fromCheckpoint) {
    auto step = resumeStep(context, runId, failedAttempt);
    if (!step) return step.error();
    keepThrough = *step;
  }
  auto stmt = context.statement(
      "DELETE FROM metrics WHERE run_id = ?1 AND (step > ?2 OR key_id = (SELECT id FROM "
      "metric_keys WHERE name = 'search.rung'))");
  if (!stmt) return stmt.error();
  if (auto r = (*stmt)->bindInt64(1, runId); !r) return r;
  if (auto r = (*stmt)->bindInt64(2, keepThrough); !r) return r;
  if (auto r = execute(**stmt); !r) return r;
  context.changes().metricRuns.insert(runId);
  return ok();
}

// The running trial of study `studyId` that holds `lease` (its asker's pid, host and the token of
// one ask): an earlier call of the same ask took it, and its answer was lost (the connection
// dropped after the COMMIT reached the server). nullopt when none does.
Result<std::optional<TrialId>> askedBefore(WriteContext& context, qint64 studyId,
                                           const LeaseRecord& lease) {
  auto stmt = context.statement(
      "SELECT r.id, r.trial_number FROM runs r JOIN leases l ON l.run_id = r.id WHERE "
      "r.study_id = ?1 AND r.status = 'running' AND l.token = ?2 AND l.pid = ?3 AND l.host = ?4 "
      "ORDER BY r.trial_number LIMIT 1");
  if (!stmt) return stmt.error();
  Statement& select = **stmt;
  if (auto r = select.bindInt64(1, studyId); !r) return r.error();
  if (auto r = select.bindText(2, lease.token.toStdString()); !r) return r.error();
  if (auto r = select.bindInt64(3, lease.pid); !r) return r.error();
  if (auto r = select.bindText(4, lease.host.toStdString()); !r) return r.error();
  auto row = select.step();
  if (!row) return row.error();
  std::optional<TrialId> found;
  if (*row) {
    found = TrialId{select.columnInt64(0), select.columnInt64(1)};
    qCInfo(lcRunStoreStudy,
           "study %lld trial %lld: taken by an earlier call of this ask, whose "
           "answer was lost; handed out again",
           static_cast<long long>(studyId), static_cast<long long>(found->number));
  }
  select.reset();
  return found;
}

// Writes the asker's `lease` on trial run `runId` (in the transaction that claims or starts it).
Result<void> writeAskLease(WriteContext& context, qint64 runId,
                           const std::optional<LeaseRecord>& lease, const StoreClock& clock) {
  if (!lease) return ok();
  LeaseRecord mine = *lease;
  mine.runId = runId;
  return storesql::writeLease(context, mine, clock);
}

Result<std::optional<TrialId>> claimOne(WriteContext& context, qint64 studyId, int maxAttempt,
                                        bool fromCheckpoint,
                                        const std::optional<LeaseRecord>& askLease,
                                        const StoreClock& clock) {
  if (askLease) {
    auto before = askedBefore(context, studyId, *askLease);
    if (!before || *before) return before;
  }
  // Enqueued trials first, then failed ones that have retries left; lowest number first.
  auto stmt = context.statement(
      "SELECT id, trial_number, status = 'failed', attempt FROM runs WHERE study_id = ?1 AND "
      "(status = 'queued' OR (status = 'failed' AND attempt < ?2)) "
      "ORDER BY status = 'failed', trial_number LIMIT 1");
  if (!stmt) return stmt.error();
  Statement& select = **stmt;
  if (auto r = select.bindInt64(1, studyId); !r) return r.error();
  if (auto r = select.bindInt64(2, maxAttempt); !r) return r.error();
  auto row = select.step();
  if (!row) return row.error();
  if (!*row) {
    select.reset();
    return std::optional<TrialId>();
  }
  const TrialId id{select.columnInt64(0), select.columnInt64(1)};
  const bool retry = select.columnInt64(2) != 0;
  const int failedAttempt = static_cast<int>(select.columnInt64(3));
  select.reset();
  const double now = spec::unix_time_now();
  if (retry) {
    if (auto r = runWithId(context,
                           "UPDATE runs SET status = 'running', attempt = attempt + 1, "
                           "objective = NULL, objective_values = NULL, started_at = ?2, "
                           "ended_at = NULL WHERE id = ?1",
                           id.runId, now);
        !r)
      return r.error();
    if (auto r = trimRetriedCurve(context, id.runId, failedAttempt, fromCheckpoint); !r)
      return r.error();
  } else if (auto r = runWithId(context,
                                "UPDATE runs SET status = 'running', started_at = ?2 WHERE id = ?1",
                                id.runId, now);
             !r) {
    return r.error();
  }
  if (auto r = writeAskLease(context, id.runId, askLease, clock); !r) return r.error();
  context.changes().runs = true;
  context.changes().studies = true;
  return std::optional<TrialId>(id);
}

Result<void> finishOne(WriteContext& context, qint64 runId, spec::RunStatus status,
                       const std::vector<double>& values, const QString& error) {
  QJsonArray array;
  for (const double v : values) array.append(std::isfinite(v) ? QJsonValue(v) : QJsonValue());
  auto stmt = context.statement(
      "UPDATE runs SET status = ?2, objective_values = ?3, objective = ?4, error = ?5, "
      "ended_at = ?6 WHERE id = ?1 AND status IN ('queued', 'running')");
  if (!stmt) return stmt.error();
  Statement& update = **stmt;
  if (auto r = update.bindInt64(1, runId); !r) return r;
  if (auto r = update.bindText(2, spec::to_string(status)); !r) return r;
  if (auto r = values.empty() ? update.bindNull(3) : update.bindText(3, jsonText(array)); !r)
    return r;
  if (auto r = !values.empty() && std::isfinite(values.front()) ? update.bindDouble(4, values[0])
                                                                : update.bindNull(4);
      !r)
    return r;
  if (auto r = update.bindText(5, error.toStdString()); !r) return r;
  if (auto r = update.bindDouble(6, spec::unix_time_now()); !r) return r;
  if (auto r = execute(update); !r) return r;
  if (changes(context) == 0) {
    return fail("run " + std::to_string(runId) +
                " is not a queued or running trial (it already ended, or is not in the run "
                "log): a trial is told once");
  }
  context.changes().runs = true;
  context.changes().studies = true;
  return ok();
}

// Stamps study `studyId` as fed by `pid` on `host` unless another live process's stamp is on it:
// true when the stamp is `pid`'s now.
Result<bool> takeSweepStamp(WriteContext& context, qint64 studyId, qint64 pid,
                            const QString& host) {
  auto read =
      context.statement("SELECT sweep_pid, sweep_host, sweep_heartbeat FROM studies WHERE id = ?1");
  if (!read) return read.error();
  Statement& current = **read;
  if (auto r = current.bindInt64(1, studyId); !r) return r.error();
  auto row = current.step();
  if (!row) return row.error();
  if (!*row) return fail("study " + std::to_string(studyId) + " is not in the run log");
  StudyRecord holder;
  holder.sweepPid = current.columnIsNull(0) ? 0 : current.columnInt64(0);
  holder.sweepHost = QString::fromStdString(current.columnText(1));
  holder.sweepHeartbeat = current.columnIsNull(2) ? 0 : current.columnDouble(2);
  current.reset();
  const bool mine = holder.sweepPid == pid && holder.sweepHost == host;
  // Another live process feeds the study: its stamp stays (no churn between feeders).
  if (!mine && RunStore::sweepAlive(holder, host, RunStore::kSweepStaleS)) return false;
  auto stmt = context.statement(
      "UPDATE studies SET sweep_pid = ?2, sweep_host = ?3, sweep_heartbeat = ?4 WHERE id = ?1");
  if (!stmt) return stmt.error();
  Statement& update = **stmt;
  if (auto r = update.bindInt64(1, studyId); !r) return r.error();
  if (auto r = update.bindInt64(2, pid); !r) return r.error();
  if (auto r = update.bindText(3, host.toStdString()); !r) return r.error();
  if (auto r = update.bindDouble(4, spec::unix_time_now()); !r) return r.error();
  if (auto r = execute(update); !r) return r.error();
  // Readers hear of a new feeder, not of each renewal.
  if (!mine) context.changes().studies = true;
  return true;
}

// Starts attempt `attempt` + 1 of run `runId` with `params` as its parameters (the row's and
// the params table's): running, error, objectives and end time cleared, the curve trimmed to the
// checkpoint the attempt resumes from (`keepCurve`) or emptied. The callers check the run's state.
Result<int> beginAttemptWithParams(WriteContext& context, qint64 runId, int attempt,
                                   const QJsonObject& params, bool keepCurve) {
  auto update = context.statement(
      "UPDATE runs SET status = 'running', attempt = attempt + 1, error = '', objective = NULL, "
      "objective_values = NULL, params = ?2, started_at = ?3, ended_at = NULL WHERE id = ?1");
  if (!update) return update.error();
  if (auto r = (*update)->bindInt64(1, runId); !r) return r.error();
  if (auto r = (*update)->bindText(2, storesql::compactJson(params)); !r) return r.error();
  if (auto r = (*update)->bindDouble(3, spec::unix_time_now()); !r) return r.error();
  if (auto r = execute(**update); !r) return r.error();
  if (auto r = runWithId(context, "DELETE FROM params WHERE run_id = ?1", runId); !r)
    return r.error();
  if (auto r = storesql::insertParams(context, runId, params); !r) return r.error();
  if (auto r = trimRetriedCurve(context, runId, attempt, keepCurve); !r) return r.error();
  context.changes().runs = true;
  return attempt + 1;
}

}  // namespace

RunStore::Pending<qint64> RunStore::createStudy(const NewStudy& study) {
  return submit<qint64>(1, [study](WriteContext& context) { return insertStudy(context, study); });
}

RunStore::Pending<void> RunStore::setStudyStatus(qint64 studyId, StudyStatus status) {
  return submit<void>(1, [studyId, status](WriteContext& context) -> Result<void> {
    // Only a final status keeps an end time; a resumed (running) study has none.
    auto stmt = context.statement(
        "UPDATE studies SET status = ?2, ended_at = CASE WHEN ?2 = 'running' THEN NULL "
        "ELSE coalesce(ended_at, ?3) END WHERE id = ?1");
    if (!stmt) return stmt.error();
    Statement& update = **stmt;
    if (auto r = update.bindInt64(1, studyId); !r) return r;
    if (auto r = update.bindText(2, studyStatusName(status).toStdString()); !r) return r;
    if (auto r = update.bindDouble(3, spec::unix_time_now()); !r) return r;
    if (auto r = execute(update); !r) return r;
    if (changes(context) == 0) {
      return fail("study " + std::to_string(studyId) + " is not in the run log");
    }
    context.changes().studies = true;
    return ok();
  });
}

RunStore::Pending<int> RunStore::beginResumedAttempt(qint64 runId) {
  return submit<int>(1, [runId](WriteContext& context) -> Result<int> {
    auto state = attemptState(context, runId);
    if (!state) return state.error();
    const auto& [attempt, status, trial] = *state;
    if (trial) {
      return fail("run " + std::to_string(runId) +
                  " is a trial of a sweep: its sweep retries it from its checkpoint "
                  "(search.retry_from_checkpoint)");
    }
    if (status != "stopped" && status != "failed" && status != "oom") {
      return fail("run " + std::to_string(runId) + " is " + status +
                  ": only a stopped, failed or oom run is resumed");
    }
    if (auto r = runWithId(context,
                           "UPDATE runs SET status = 'running', attempt = attempt + 1, error = '', "
                           "objective = NULL, started_at = ?2, ended_at = NULL WHERE id = ?1",
                           runId, spec::unix_time_now());
        !r)
      return r.error();
    if (auto r = trimRetriedCurve(context, runId, attempt, true); !r) return r.error();
    context.changes().runs = true;
    return attempt + 1;
  });
}

RunStore::Pending<int> RunStore::beginReplannedAttempt(qint64 runId, const QJsonObject& params) {
  return submit<int>(1, [runId, params](WriteContext& context) -> Result<int> {
    auto state = attemptState(context, runId);
    if (!state) return state.error();
    // The monitor may have recorded the attempt's end (oom) before its follower replans it.
    if (state->status != "running" && state->status != "oom") {
      return fail("run " + std::to_string(runId) + " is " + state->status +
                  ": only a run that ran out of memory is replanned");
    }
    // The plan starts over: an empty curve.
    auto next = beginAttemptWithParams(context, runId, state->attempt, params, false);
    if (next) context.changes().studies = true;
    return next;
  });
}

RunStore::Pending<int> RunStore::beginNextSegment(qint64 runId, const QJsonObject& params) {
  return submit<int>(1, [runId, params](WriteContext& context) -> Result<int> {
    auto state = attemptState(context, runId);
    if (!state) return state.error();
    const auto& [attempt, status, trial] = *state;
    if (trial) {
      return fail("run " + std::to_string(runId) +
                  " is a trial of a sweep: its segments are the study's trials");
    }
    if (status != "complete") {
      return fail("run " + std::to_string(runId) + " is " + status +
                  ": only a complete run goes on with its next segment");
    }
    // The curve goes on: it is kept up to the checkpoint the next segment resumes from.
    return beginAttemptWithParams(context, runId, attempt, params, true);
  });
}

RunStore::Pending<void> RunStore::setStudyControl(qint64 studyId, StudyControl control) {
  return submit<void>(1, [studyId, control](WriteContext& context) -> Result<void> {
    auto stmt =
        context.statement("UPDATE studies SET control = ?2 WHERE id = ?1 AND status = 'running'");
    if (!stmt) return stmt.error();
    Statement& update = **stmt;
    if (auto r = update.bindInt64(1, studyId); !r) return r;
    if (auto r = update.bindText(2, studyControlName(control).toStdString()); !r) return r;
    if (auto r = execute(update); !r) return r;
    if (changes(context) == 0) {
      return fail("study " + std::to_string(studyId) +
                  " is not a running study of the run log (it ended, or it is not there): "
                  "nothing to pause, resume or stop");
    }
    context.changes().studies = true;
    return ok();
  });
}

RunStore::Pending<void> RunStore::requestTrial(qint64 runId, TrialRequest request) {
  return submit<void>(1, [runId, request](WriteContext& context) -> Result<void> {
    // Clearing always works; a new request needs a trial that has not ended.
    auto stmt = context.statement(
        "UPDATE runs SET request = ?2 WHERE id = ?1 AND (?2 = '' OR (study_id IS NOT NULL AND "
        "status IN ('queued','running')))");
    if (!stmt) return stmt.error();
    Statement& update = **stmt;
    if (auto r = update.bindInt64(1, runId); !r) return r;
    if (auto r = update.bindText(2, trialRequestName(request).toStdString()); !r) return r;
    if (auto r = execute(update); !r) return r;
    if (changes(context) == 0) {
      return fail("run " + std::to_string(runId) +
                  " is not a running trial of a sweep; stop a run outside a sweep with "
                  "`shardscope-cli stop`");
    }
    context.changes().runs = true;
    return ok();
  });
}

RunStore::Pending<void> RunStore::stampSweep(qint64 studyId, qint64 pid, const QString& host) {
  return submit<void>(1, [studyId, pid, host](WriteContext& context) -> Result<void> {
    auto taken = takeSweepStamp(context, studyId, pid, host);
    if (!taken) return taken.error();
    return ok();
  });
}

RunStore::Pending<bool> RunStore::claimSweep(qint64 studyId, qint64 pid, const QString& host) {
  return submit<bool>(1, [studyId, pid, host](WriteContext& context) {
    return takeSweepStamp(context, studyId, pid, host);
  });
}

RunStore::Pending<bool> RunStore::handOverSweepStamp(qint64 studyId, qint64 fromPid, qint64 toPid,
                                                     const QString& host) {
  return submit<bool>(1, [=](WriteContext& context) -> Result<bool> {
    auto stmt = context.statement(
        "UPDATE studies SET sweep_pid = ?3, sweep_heartbeat = ?5 WHERE id = ?1 AND "
        "sweep_pid = ?2 AND sweep_host = ?4");
    if (!stmt) return stmt.error();
    Statement& update = **stmt;
    if (auto r = update.bindInt64(1, studyId); !r) return r.error();
    if (auto r = update.bindInt64(2, fromPid); !r) return r.error();
    if (auto r = update.bindInt64(3, toPid); !r) return r.error();
    if (auto r = update.bindText(4, host.toStdString()); !r) return r.error();
    if (auto r = update.bindDouble(5, spec::unix_time_now()); !r) return r.error();
    if (auto r = execute(update); !r) return r.error();
    const bool handed = changes(context) != 0;
    if (handed) context.changes().studies = true;
    return handed;
  });
}

RunStore::Pending<void> RunStore::clearSweepStamp(qint64 studyId, qint64 pid, const QString& host) {
  return submit<void>(1, [studyId, pid, host](WriteContext& context) -> Result<void> {
    auto stmt = context.statement(
        "UPDATE studies SET sweep_pid = NULL, sweep_heartbeat = NULL "
        "WHERE id = ?1 AND sweep_pid = ?2 AND sweep_host = ?3");
    if (!stmt) return stmt.error();
    Statement& update = **stmt;
    if (auto r = update.bindInt64(1, studyId); !r) return r;
    if (auto r = update.bindInt64(2, pid); !r) return r;
    if (auto r = update.bindText(3, host.toStdString()); !r) return r;
    if (auto r = execute(update); !r) return r;
    if (changes(context) > 0) context.changes().studies = true;
    return ok();
  });
}

bool RunStore::sweepAlive(const StudyRecord& study, const QString& host, double staleAfterS) {
  if (study.status != StudyStatus::running || study.sweepPid <= 0) return false;
  if (spec::unix_time_now() - study.sweepHeartbeat > staleAfterS) return false;
  return study.sweepHost != host || processAlive(study.sweepPid);
}

RunStore::Pending<void> RunStore::setStudyState(qint64 studyId, const QJsonObject& state) {
  return submit<void>(1, [studyId, state](WriteContext& context) -> Result<void> {
    auto r = updateOne(context, "UPDATE studies SET state = ?2 WHERE id = ?1", studyId,
                       compactJson(state), "study");
    if (r) context.changes().studies = true;
    return r;
  });
}

RunStore::Pending<TrialId> RunStore::createTrialRun(const NewTrial& trial) {
  return submit<TrialId>(1, [trial](WriteContext& context) { return insertTrial(context, trial); });
}

RunStore::Pending<void> RunStore::setRunDir(qint64 runId, const QString& runDir) {
  return submit<void>(1, [runId, runDir](WriteContext& context) {
    auto r = updateOne(context, "UPDATE runs SET run_dir = ?2 WHERE id = ?1", runId,
                       runDir.toStdString(), "run");
    if (r) context.changes().runs = true;
    return r;
  });
}

RunStore::Pending<void> RunStore::setRunObjectives(qint64 runId, std::vector<double> values) {
  return submit<void>(1, [runId, values = std::move(values)](WriteContext& context) {
    QJsonArray array;
    for (const double v : values) array.append(std::isfinite(v) ? QJsonValue(v) : QJsonValue());
    auto r = updateOne(context, "UPDATE runs SET objective_values = ?2 WHERE id = ?1", runId,
                       jsonText(array), "run");
    if (r) context.changes().runs = true;
    return r;
  });
}

RunStore::Pending<TrialId> RunStore::startTrialRun(const NewTrial& trial,
                                                   const std::optional<LeaseRecord>& askLease) {
  const StoreClock* clock = &this->clock();
  return submit<TrialId>(1, [trial, askLease, clock](WriteContext& context) -> Result<TrialId> {
    if (askLease) {
      auto before = askedBefore(context, trial.studyId, *askLease);
      if (!before) return before.error();
      if (*before) return **before;
    }
    auto id = insertTrial(context, trial, spec::RunStatus::running);
    if (!id) return id.error();
    if (auto r = writeAskLease(context, id->runId, askLease, *clock); !r) return r.error();
    return *id;
  });
}

RunStore::Pending<TrialStart> RunStore::startTrialRunWithin(
    const NewTrial& trial, qint64 maxTrials, const std::optional<LeaseRecord>& askLease) {
  const StoreClock* clock = &this->clock();
  return submit<TrialStart>(
      1, [trial, maxTrials, askLease, clock](WriteContext& context) -> Result<TrialStart> {
        TrialStart start;
        if (askLease) {  // before the count: the earlier call's trial may be the last number
          auto before = askedBefore(context, trial.studyId, *askLease);
          if (!before) return before.error();
          if (*before) {
            start.id = **before;
            start.again = true;
            return start;
          }
        }
        auto stmt = context.statement("SELECT count(*) FROM runs WHERE study_id = ?1");
        if (!stmt) return stmt.error();
        Statement& count = **stmt;
        if (auto r = count.bindInt64(1, trial.studyId); !r) return r.error();
        auto row = count.step();
        if (!row) return row.error();
        const qint64 taken = *row ? count.columnInt64(0) : 0;
        count.reset();
        if (taken >= maxTrials) {
          start.outcome = TrialStart::Outcome::Full;
          return start;
        }
        if (trial.trialNumber) {
          auto study = studyForTrial(context, trial.studyId);
          if (!study) return study.error();
          if (study->second != *trial.trialNumber) {
            start.outcome = TrialStart::Outcome::Stale;
            return start;
          }
        }
        auto id = insertTrial(context, trial, spec::RunStatus::running);
        if (!id) return id.error();
        if (auto r = writeAskLease(context, id->runId, askLease, *clock); !r) return r.error();
        start.id = *id;
        return start;
      });
}

RunStore::Pending<std::optional<TrialId>> RunStore::claimTrial(
    qint64 studyId, int maxAttempt, bool fromCheckpoint,
    const std::optional<LeaseRecord>& askLease) {
  const StoreClock* clock = &this->clock();
  return submit<std::optional<TrialId>>(
      1, [studyId, maxAttempt, fromCheckpoint, askLease, clock](WriteContext& context) {
        return claimOne(context, studyId, maxAttempt, fromCheckpoint, askLease, *clock);
      });
}

RunStore::Pending<void> RunStore::finishTrial(qint64 runId, spec::RunStatus status,
                                              std::vector<double> values, const QString& error) {
  return submit<void>(1, [runId, status, values = std::move(values), error](WriteContext& context) {
    return finishOne(context, runId, status, values, error);
  });
}

}  // namespace shardscope::backend
