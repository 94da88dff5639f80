#include "backend/store/runreader.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QLoggingCategory>

#include <algorithm>
#include <limits>
#include <string>
#include <string_view>

#include "backend/store/storesql.h"
#include "spec/enum_names.h"

Q_LOGGING_CATEGORY(lcRunReader, "shardscope.backend.runreader")

namespace shardscope::backend {

QString rankFileName(RankFile file) { return file == RankFile::events ? "events" : "log"; }

namespace {

using spec::EnumName;

constexpr EnumName<Anomaly::Kind> kAnomalyKinds[] = {{Anomaly::Kind::gap, "gap"},
                                                     {Anomaly::Kind::repeat, "repeat"},
                                                     {Anomaly::Kind::malformed, "malformed"}};
constexpr EnumName<StudyStatus> kStudyStatuses[] = {{StudyStatus::running, "running"},
                                                    {StudyStatus::complete, "complete"},
                                                    {StudyStatus::stopped, "stopped"}};
constexpr EnumName<StudyKind> kStudyKinds[] = {{StudyKind::search, "search"},
                                               {StudyKind::autotune, "autotune"}};
constexpr EnumName<StudyControl> kStudyControls[] = {
    {StudyControl::run, "run"}, {StudyControl::pause, "pause"}, {StudyControl::stop, "stop"}};
constexpr EnumName<TrialRequest> kTrialRequests[] = {
    {TrialRequest::none, ""}, {TrialRequest::prune, "prune"}, {TrialRequest::stop, "stop"}};

template <class Names, class E>
QString nameOf(const Names& names, E value) {
  const std::string_view name = spec::name_of(names, value);
  return QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
}

template <class Names>
auto valueOf(const Names& names, const QString& name) {
  return spec::value_of(names, name.toStdString());
}

}  // namespace

QString anomalyKindName(Anomaly::Kind kind) { return nameOf(kAnomalyKinds, kind); }

QString studyStatusName(StudyStatus status) { return nameOf(kStudyStatuses, status); }
std::optional<StudyStatus> parseStudyStatus(const QString& name) {
  return valueOf(kStudyStatuses, name);
}

QString studyKindName(StudyKind kind) { return nameOf(kStudyKinds, kind); }
std::optional<StudyKind> parseStudyKind(const QString& name) { return valueOf(kStudyKinds, name); }

QString studyControlName(StudyControl control) { return nameOf(kStudyControls, control); }
std::optional<StudyControl> parseStudyControl(const QString& name) {
  return valueOf(kStudyControls, name);
}

QString trialRequestName(TrialRequest request) { return nameOf(kTrialRequests, request); }
std::optional<TrialRequest> parseTrialRequest(const QString& name) {
  return valueOf(kTrialRequests, name);
}

namespace {

QString text(const Statement& stmt, int column) {
  return QString::fromStdString(stmt.columnText(column));
}

std::optional<double> optionalReal(const Statement& stmt, int column) {
  if (stmt.columnIsNull(column)) return std::nullopt;
  return stmt.columnDouble(column);
}

QJsonObject jsonObject(const Statement& stmt, int column) {
  const std::string raw = stmt.columnText(column);
  return QJsonDocument::fromJson(QByteArray::fromStdString(raw)).object();
}

constexpr const char* kRunColumns =
    "SELECT id, experiment_id, name, status, run_dir, location, params, objective, error, "
    "created_at, started_at, ended_at, world_size, study_id, trial_number, objective_values, "
    "attempt, request, host, boot_id, archived_at FROM runs ";

// A JSON array of numbers as doubles (null: NaN); nullopt for SQL NULL.
std::optional<std::vector<double>> numberArray(const Statement& stmt, int column) {
  if (stmt.columnIsNull(column)) return std::nullopt;
  const QJsonArray array =
      QJsonDocument::fromJson(QByteArray::fromStdString(stmt.columnText(column))).array();
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(array.size()));
  for (const auto& v : array) {
    values.push_back(v.isDouble() ? v.toDouble() : std::numeric_limits<double>::quiet_NaN());
  }
  return values;
}

QStringList stringArray(const Statement& stmt, int column) {
  QStringList list;
  const QJsonArray array =
      QJsonDocument::fromJson(QByteArray::fromStdString(stmt.columnText(column))).array();
  for (const auto& v : array) list << v.toString();
  return list;
}

std::optional<qint64> optionalInt(const Statement& stmt, int column) {
  if (stmt.columnIsNull(column)) return std::nullopt;
  return stmt.columnInt64(column);
}

RunRecord runFromRow(const Statement& stmt) {
  RunRecord run;
  run.id = stmt.columnInt64(0);
  if (!stmt.columnIsNull(1)) run.experimentId = stmt.columnInt64(1);
  run.name = text(stmt, 2);
  const std::string status = stmt.columnText(3);
  // The CHECK constraint keeps this list closed; an unknown name would mean a newer schema.
  run.status = spec::parse_run_status(status).value_or(spec::RunStatus::failed);
  run.runDir = text(stmt, 4);
  run.location = jsonObject(stmt, 5);
  run.params = jsonObject(stmt, 6);
  run.objective = optionalReal(stmt, 7);
  run.error = text(stmt, 8);
  run.createdAt = stmt.columnDouble(9);
  run.startedAt = optionalReal(stmt, 10);
  run.endedAt = optionalReal(stmt, 11);
  run.worldSize = static_cast<int>(stmt.columnInt64(12));
  run.studyId = optionalInt(stmt, 13);
  run.trialNumber = optionalInt(stmt, 14);
  run.objectiveValues = numberArray(stmt, 15);
  run.attempt = static_cast<int>(stmt.columnInt64(16));
  run.request = parseTrialRequest(text(stmt, 17)).value_or(TrialRequest::none);
  run.host = text(stmt, 18);
  run.bootId = text(stmt, 19);
  run.archivedAt = optionalReal(stmt, 20);
  return run;
}

constexpr const char* kStudyColumns =
    "SELECT id, name, experiment_id, config, objectives, directions, sampler, seed, status, "
    "created_at, ended_at, state, control, sweep_pid, sweep_host, sweep_heartbeat, kind "
    "FROM studies ";

StudyRecord studyFromRow(const Statement& stmt) {
  StudyRecord study;
  study.id = stmt.columnInt64(0);
  study.name = text(stmt, 1);
  study.experimentId = optionalInt(stmt, 2);
  study.config = text(stmt, 3);
  study.objectives = stringArray(stmt, 4);
  study.directions = stringArray(stmt, 5);
  study.sampler = text(stmt, 6);
  study.seed = optionalInt(stmt, 7);
  // The CHECK constraint keeps the list closed.
  study.status = parseStudyStatus(text(stmt, 8)).value_or(StudyStatus::stopped);
  study.createdAt = stmt.columnDouble(9);
  study.endedAt = optionalReal(stmt, 10);
  study.state = jsonObject(stmt, 11);
  study.control = parseStudyControl(text(stmt, 12)).value_or(StudyControl::run);
  study.sweepPid = optionalInt(stmt, 13).value_or(0);
  study.sweepHost = text(stmt, 14);
  study.sweepHeartbeat = optionalReal(stmt, 15).value_or(0);
  // The CHECK constraint keeps the list closed.
  study.kind = parseStudyKind(text(stmt, 16)).value_or(StudyKind::search);
  return study;
}

// The rows of a run's current attempt (?1 is the run id): what a monitor reads on from. A retry
// bumps runs.attempt and starts from empty files; the earlier attempts' rows stay in the log.
constexpr std::string_view kCurrentAttempt = "attempt = (SELECT attempt FROM runs WHERE id = ?1)";

EventRow eventFromRow(const Statement& stmt) {
  EventRow row;
  row.id = stmt.columnInt64(0);
  row.runId = stmt.columnInt64(1);
  row.rank = static_cast<int>(stmt.columnInt64(2));
  row.seq = stmt.columnInt64(3);
  row.kind = text(stmt, 4);
  row.json = QByteArray::fromStdString(stmt.columnText(5));
  row.offset = stmt.columnInt64(6);
  row.attempt = static_cast<int>(stmt.columnInt64(7));
  return row;
}

Anomaly::Kind anomalyKind(const std::string& name) {
  if (name == "gap") return Anomaly::Kind::gap;
  if (name == "repeat") return Anomaly::Kind::repeat;
  return Anomaly::Kind::malformed;
}

Result<qint64> singleInt(Db& db, const std::string& sql, qint64 a, qint64 b = 0) {
  auto stmt = db.prepare(sql);
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, a); !r) return r.error();
  if (sql.find("?2") != std::string::npos) {
    if (auto r = stmt->bindInt64(2, b); !r) return r.error();
  }
  auto row = stmt->step();
  if (!row) return row.error();
  return *row ? stmt->columnInt64(0) : 0;
}

}  // namespace

Result<RunReader> RunReader::open(const QString& path) {
  OpenMode mode;
  mode.readOnly = true;
  auto db = Db::open(path, mode);
  if (!db) return db.error();
  return RunReader(std::move(*db));
}

Result<std::vector<RunRecord>> RunReader::queryRuns(const std::string& where, qint64 id,
                                                    const QString& name) {
  auto stmt = m_db.prepare(std::string(kRunColumns) + where);
  if (!stmt) return stmt.error();
  if (where.find("?1") != std::string::npos) {
    auto bound = name.isNull() ? stmt->bindInt64(1, id) : stmt->bindText(1, name.toStdString());
    if (!bound) return bound.error();
  }
  std::vector<RunRecord> runs;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    runs.push_back(runFromRow(*stmt));
  }
  return runs;
}

Result<std::vector<RunRecord>> RunReader::listRuns() {
  return queryRuns("ORDER BY id DESC", 0, QString());
}

Result<std::optional<RunRecord>> RunReader::run(qint64 id) {
  auto runs = queryRuns("WHERE id = ?1", id, QString());
  if (!runs) return runs.error();
  if (runs->empty()) return std::optional<RunRecord>();
  return std::optional<RunRecord>(runs->front());
}

Result<std::optional<RunRecord>> RunReader::runByName(const QString& name) {
  auto runs = queryRuns("WHERE name = ?1", 0, name.isNull() ? QString("") : name);
  if (!runs) return runs.error();
  if (runs->empty()) return std::optional<RunRecord>();
  return std::optional<RunRecord>(runs->front());
}

Result<QStringList> RunReader::metricKeys(qint64 runId) {
  auto stmt = m_db.prepare(
      "SELECT name FROM metric_keys k WHERE EXISTS "
      "(SELECT 1 FROM metrics m WHERE m.run_id = ?1 AND m.key_id = k.id) ORDER BY name");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  QStringList keys;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    keys << text(*stmt, 0);
  }
  return keys;
}

Result<std::vector<MetricPoint>> RunReader::metric(qint64 runId, const QString& key,
                                                   qint64 afterStep) {
  auto stmt = m_db.prepare(
      "SELECT m.step, m.value, m.rank, m.time FROM metrics m JOIN metric_keys k ON k.id = "
      "m.key_id WHERE m.run_id = ?1 AND k.name = ?2 AND m.step > ?3 ORDER BY m.step, m.rank");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  if (auto r = stmt->bindText(2, key.toStdString()); !r) return r.error();
  if (auto r = stmt->bindInt64(3, afterStep); !r) return r.error();
  std::vector<MetricPoint> points;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    // A NULL value is a non-finite number the trainer wrote as null (a diverged loss).
    const double value =
        stmt->columnIsNull(1) ? std::numeric_limits<double>::quiet_NaN() : stmt->columnDouble(1);
    points.push_back({stmt->columnInt64(0), value, static_cast<int>(stmt->columnInt64(2)),
                      stmt->columnDouble(3)});
  }
  return points;
}

Result<QHash<qint64, std::vector<MetricPoint>>> RunReader::metricOfRuns(const QList<qint64>& runIds,
                                                                        const QString& key,
                                                                        int rank,
                                                                        qint64 afterStep) {
  // Runs per statement: far below SQLite's 32,766 and PostgreSQL's 65,535 parameters.
  constexpr qsizetype kRunsPerStatement = 500;
  QHash<qint64, std::vector<MetricPoint>> out;
  for (qsizetype first = 0; first < runIds.size(); first += kRunsPerStatement) {
    const QList<qint64> part = runIds.mid(first, kRunsPerStatement);
    std::string sql =
        "SELECT m.run_id, m.step, m.value, m.time FROM metrics m JOIN metric_keys k ON k.id = "
        "m.key_id WHERE k.name = ?1 AND m.rank = ?2 AND m.step > ?3 AND m.run_id IN (";
    for (qsizetype i = 0; i < part.size(); ++i) {
      sql += (i == 0 ? "?" : ", ?") + std::to_string(i + 4);
    }
    sql += ") ORDER BY m.run_id, m.step";
    auto stmt = m_db.prepare(sql);
    if (!stmt) return stmt.error();
    if (auto r = stmt->bindText(1, key.toStdString()); !r) return r.error();
    if (auto r = stmt->bindInt64(2, rank); !r) return r.error();
    if (auto r = stmt->bindInt64(3, afterStep); !r) return r.error();
    for (qsizetype i = 0; i < part.size(); ++i) {
      if (auto r = stmt->bindInt64(static_cast<int>(i + 4), part[i]); !r) return r.error();
    }
    for (;;) {
      auto row = stmt->step();
      if (!row) return row.error();
      if (!*row) break;
      // A NULL value is a non-finite number the trainer wrote as null (a diverged loss).
      const double value =
          stmt->columnIsNull(2) ? std::numeric_limits<double>::quiet_NaN() : stmt->columnDouble(2);
      out[stmt->columnInt64(0)].push_back(
          {stmt->columnInt64(1), value, rank, stmt->columnDouble(3)});
    }
  }
  return out;
}

Result<QHash<qint64, RunFigures>> RunReader::runFigures(const QList<qint64>& runIds) {
  constexpr qsizetype kRunsPerStatement = 500;  // as metricOfRuns
  QHash<qint64, RunFigures> out;
  for (qsizetype first = 0; first < runIds.size(); first += kRunsPerStatement) {
    const QList<qint64> part = runIds.mid(first, kRunsPerStatement);
    std::string in = "(";
    for (qsizetype i = 0; i < part.size(); ++i)
      in += (i == 0 ? "?" : ", ?") + std::to_string(i + 4);
    in += ")";
    // Kind 0: rank 0's mfu per step, averaged per run. Kind 1: per rank the mean share of its
    // steps (the wall joined on the exposed time's run, step and rank: the metrics key), then
    // averaged per run over its ranks.
    std::string sql =
        "SELECT f.run_id, f.kind, avg(f.value) FROM ("
        "SELECT m.run_id AS run_id, 0 AS kind, m.value AS value FROM metrics m "
        "JOIN metric_keys k ON k.id = m.key_id WHERE k.name = ?1 AND m.rank = 0 "
        "AND m.value IS NOT NULL AND m.run_id IN ";
    sql += in;
    sql +=
        " UNION ALL "
        "SELECT e.run_id, 1, avg(e.value / w.value) FROM metrics e "
        "JOIN metric_keys ke ON ke.id = e.key_id JOIN metric_keys kw ON kw.name = ?3 "
        "JOIN metrics w ON w.run_id = e.run_id AND w.key_id = kw.id AND w.step = e.step "
        "AND w.rank = e.rank WHERE ke.name = ?2 AND e.value IS NOT NULL AND w.value > 0 "
        "AND e.run_id IN ";
    sql += in;
    sql += " GROUP BY e.run_id, e.rank) f GROUP BY f.run_id, f.kind";
    auto stmt = m_db.prepare(sql);
    if (!stmt) return stmt.error();
    if (auto r = stmt->bindText(1, "mfu"); !r) return r.error();
    if (auto r = stmt->bindText(2, "phase.comm_exposed"); !r) return r.error();
    if (auto r = stmt->bindText(3, "phase.wall"); !r) return r.error();
    for (qsizetype i = 0; i < part.size(); ++i) {
      if (auto r = stmt->bindInt64(static_cast<int>(i + 4), part[i]); !r) return r.error();
    }
    for (;;) {
      auto row = stmt->step();
      if (!row) return row.error();
      if (!*row) break;
      if (stmt->columnIsNull(2)) continue;
      RunFigures& figures = out[stmt->columnInt64(0)];
      (stmt->columnInt64(1) == 0 ? figures.mfu : figures.exposedShare) = stmt->columnDouble(2);
    }
  }
  return out;
}

Result<qint64> RunReader::metricCount(qint64 runId) {
  return singleInt(m_db, "SELECT count(*) FROM metrics WHERE run_id = ?1", runId);
}

Result<QHash<qint64, qint64>> RunReader::lastSteps(const QString& key) {
  // One seek per run into the (run, key, step, rank) key of metrics.
  auto stmt = m_db.prepare(
      "SELECT r.id, (SELECT max(m.step) FROM metrics m WHERE m.run_id = r.id AND m.key_id = k.id) "
      "FROM runs r, metric_keys k WHERE k.name = ?1");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindText(1, key.toStdString()); !r) return r.error();
  QHash<qint64, qint64> steps;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    if (!stmt->columnIsNull(1)) steps.insert(stmt->columnInt64(0), stmt->columnInt64(1));
  }
  return steps;
}

Result<QHash<qint64, MetricExtremes>> RunReader::lastAndBest(const QString& key, int rank) {
  // Two seeks per run into the (run, key, step, rank) key of metrics: the last step's value, and
  // the lowest value over the run's range of that key.
  auto stmt = m_db.prepare(
      "SELECT r.id, "
      "(SELECT m.value FROM metrics m WHERE m.run_id = r.id AND m.key_id = k.id AND m.rank = ?2 "
      "AND m.value IS NOT NULL ORDER BY m.step DESC LIMIT 1), "
      "(SELECT min(m.value) FROM metrics m WHERE m.run_id = r.id AND m.key_id = k.id "
      "AND m.rank = ?2) "
      "FROM runs r, metric_keys k WHERE k.name = ?1");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindText(1, key.toStdString()); !r) return r.error();
  if (auto r = stmt->bindInt64(2, rank); !r) return r.error();
  QHash<qint64, MetricExtremes> values;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    if (stmt->columnIsNull(1) || stmt->columnIsNull(2)) continue;
    values.insert(stmt->columnInt64(0), {stmt->columnDouble(1), stmt->columnDouble(2)});
  }
  return values;
}

Result<qint64> RunReader::dataVersion() {
  auto version = m_db.dataVersion();
  if (!version) return version.error();
  return *version;
}

Result<std::vector<EventRow>> RunReader::events(qint64 runId, int rank, qint64 afterId) {
  auto stmt = m_db.prepare(
      "SELECT id, run_id, rank, seq, kind, json, file_offset, attempt FROM events WHERE "
      "run_id = ?1 AND rank = ?2 AND id > ?3 ORDER BY attempt, file_offset");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  if (auto r = stmt->bindInt64(2, rank); !r) return r.error();
  if (auto r = stmt->bindInt64(3, afterId); !r) return r.error();
  std::vector<EventRow> rows;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    rows.push_back(eventFromRow(*stmt));
  }
  return rows;
}

Result<std::vector<EventRow>> RunReader::eventsOfKinds(qint64 runId, int rank,
                                                       const QStringList& kinds) {
  std::vector<EventRow> rows;
  if (kinds.isEmpty()) return rows;
  std::string sql =
      "SELECT id, run_id, rank, seq, kind, json, file_offset, attempt FROM events WHERE "
      "run_id = ?1 AND rank = ?2 AND kind IN (";
  for (qsizetype i = 0; i < kinds.size(); ++i) {
    sql += i == 0 ? "?" : ", ?";
    sql += std::to_string(i + 3);
  }
  sql += ") ORDER BY attempt, file_offset";
  auto stmt = m_db.prepare(sql);
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  if (auto r = stmt->bindInt64(2, rank); !r) return r.error();
  for (qsizetype i = 0; i < kinds.size(); ++i) {
    if (auto r = stmt->bindText(static_cast<int>(i + 3), kinds[i].toStdString()); !r)
      return r.error();
  }
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    rows.push_back(eventFromRow(*stmt));
  }
  return rows;
}

Result<qint64> RunReader::eventCount(qint64 runId, int rank) {
  return singleInt(m_db,
                   "SELECT count(*) FROM events WHERE run_id = ?1 AND rank = ?2 AND " +
                       std::string(kCurrentAttempt),
                   runId, rank);
}

Result<qint64> RunReader::maxSeq(qint64 runId, int rank) {
  return singleInt(
      m_db,
      "SELECT coalesce(max(seq), -1) FROM events WHERE run_id = ?1 AND rank = ?2 AND " +
          std::string(kCurrentAttempt),
      runId, rank);
}

Result<std::optional<EventRow>> RunReader::lastEvent(qint64 runId, int rank, const QString& kind) {
  auto stmt = m_db.prepare(
      "SELECT id, run_id, rank, seq, kind, json, file_offset, attempt FROM events WHERE "
      "run_id = ?1 AND rank = ?2 AND kind = ?3 AND " +
      std::string(kCurrentAttempt) + " ORDER BY file_offset DESC LIMIT 1");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  if (auto r = stmt->bindInt64(2, rank); !r) return r.error();
  if (auto r = stmt->bindText(3, kind.toStdString()); !r) return r.error();
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return std::optional<EventRow>();
  return std::optional<EventRow>(eventFromRow(*stmt));
}

Result<std::vector<LogLine>> RunReader::logLines(qint64 runId, int rank, int limit) {
  // The last `limit` lines: newest first with LIMIT, then reversed into file order.
  auto stmt = m_db.prepare(
      "SELECT run_id, rank, file, file_offset, text FROM log_lines WHERE run_id = ?1 AND "
      "rank = ?2 AND " +
      std::string(kCurrentAttempt) + " ORDER BY id DESC LIMIT ?3");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  if (auto r = stmt->bindInt64(2, rank); !r) return r.error();
  if (auto r = stmt->bindInt64(3, limit > 0 ? limit : storesql::kNoLimit); !r) return r.error();
  std::vector<LogLine> lines;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    LogLine line;
    line.runId = stmt->columnInt64(0);
    line.rank = static_cast<int>(stmt->columnInt64(1));
    line.file = stmt->columnText(2) == "events" ? RankFile::events : RankFile::log;
    line.offset = stmt->columnInt64(3);
    line.text = text(*stmt, 4);
    lines.push_back(std::move(line));
  }
  std::reverse(lines.begin(), lines.end());
  return lines;
}

Result<std::vector<Anomaly>> RunReader::anomalies(qint64 runId, std::optional<int> attempt) {
  auto stmt = m_db.prepare(
      "SELECT run_id, rank, kind, seq, file_offset, detail FROM anomalies WHERE run_id = ?1 AND "
      "(?2 < 0 OR attempt = ?2) ORDER BY id");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  if (auto r = stmt->bindInt64(2, attempt.value_or(-1)); !r) return r.error();
  std::vector<Anomaly> found;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    Anomaly a;
    a.runId = stmt->columnInt64(0);
    a.rank = static_cast<int>(stmt->columnInt64(1));
    a.kind = anomalyKind(stmt->columnText(2));
    a.seq = stmt->columnInt64(3);
    a.offset = stmt->columnInt64(4);
    a.detail = text(*stmt, 5);
    found.push_back(std::move(a));
  }
  return found;
}

Result<qint64> RunReader::offset(qint64 runId, int rank, RankFile file) {
  auto stmt = m_db.prepare(
      "SELECT \"offset\" FROM read_offsets WHERE run_id = ?1 AND rank = ?2 AND file = ?3 AND " +
      std::string(kCurrentAttempt));
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  if (auto r = stmt->bindInt64(2, rank); !r) return r.error();
  if (auto r = stmt->bindText(3, rankFileName(file).toStdString()); !r) return r.error();
  auto row = stmt->step();
  if (!row) return row.error();
  return *row ? stmt->columnInt64(0) : 0;
}

Result<std::optional<ResumePoint>> RunReader::resumePoint(qint64 runId, int attempt) {
  auto stmt = m_db.prepare(storesql::resumePointSql(m_db.kind()));
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  if (auto r = stmt->bindInt64(2, attempt); !r) return r.error();
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return std::optional<ResumePoint>();
  return std::optional<ResumePoint>(ResumePoint{stmt->columnInt64(0), text(*stmt, 1)});
}

Result<QString> RunReader::runLogToken() {
  auto token = m_db.queryText("SELECT token FROM run_log");
  if (!token) return token.error();
  return QString::fromStdString(*token);
}

Result<std::optional<LeaseRecord>> RunReader::lease(qint64 runId) {
  auto stmt = m_db.prepare(storesql::leaseSql(m_db.kind()));
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return std::optional<LeaseRecord>();
  return std::optional<LeaseRecord>(storesql::leaseFromRow(*stmt, *m_clock));
}

Result<std::vector<HostRecord>> RunReader::hosts() {
  auto stmt = m_db.prepare(
      "SELECT alias, hostname, port, \"user\", fingerprint, trusted_at FROM hosts ORDER BY alias");
  if (!stmt) return stmt.error();
  std::vector<HostRecord> hosts;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    hosts.push_back({text(*stmt, 0), text(*stmt, 1), static_cast<int>(stmt->columnInt64(2)),
                     text(*stmt, 3), text(*stmt, 4), optionalReal(*stmt, 5)});
  }
  return hosts;
}

Result<std::vector<StudyRecord>> RunReader::queryStudies(const std::string& where, qint64 id,
                                                         const QString& name) {
  auto stmt = m_db.prepare(std::string(kStudyColumns) + where);
  if (!stmt) return stmt.error();
  if (where.find("?1") != std::string::npos) {
    auto bound = name.isNull() ? stmt->bindInt64(1, id) : stmt->bindText(1, name.toStdString());
    if (!bound) return bound.error();
  }
  std::vector<StudyRecord> studies;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    studies.push_back(studyFromRow(*stmt));
  }
  return studies;
}

Result<std::optional<ExperimentRecord>> RunReader::experiment(qint64 id) {
  auto stmt =
      m_db.prepare("SELECT id, name, source, toml, created_at FROM experiments WHERE id = ?1");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, id); !r) return r.error();
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return std::optional<ExperimentRecord>();
  return std::optional<ExperimentRecord>(ExperimentRecord{
      stmt->columnInt64(0), text(*stmt, 1), text(*stmt, 2), text(*stmt, 3), stmt->columnDouble(4)});
}

Result<std::vector<StudyRecord>> RunReader::listStudies() {
  return queryStudies("ORDER BY id DESC", 0, QString());
}

Result<std::optional<StudyRecord>> RunReader::study(qint64 id) {
  auto studies = queryStudies("WHERE id = ?1", id, QString());
  if (!studies) return studies.error();
  if (studies->empty()) return std::optional<StudyRecord>();
  return std::optional<StudyRecord>(studies->front());
}

Result<std::optional<StudyRecord>> RunReader::studyByName(const QString& name) {
  auto studies = queryStudies("WHERE name = ?1", 0, name.isNull() ? QString("") : name);
  if (!studies) return studies.error();
  if (studies->empty()) return std::optional<StudyRecord>();
  return std::optional<StudyRecord>(studies->front());
}

Result<std::vector<RunRecord>> RunReader::requestedTrials(qint64 studyId) {
  return queryRuns("WHERE study_id = ?1 AND request != '' ORDER BY trial_number", studyId,
                   QString());
}

Result<std::vector<RunRecord>> RunReader::trials(qint64 studyId) {
  return queryRuns("WHERE study_id = ?1 ORDER BY trial_number", studyId, QString());
}

Result<std::string> RunReader::integrityCheck() { return m_db.integrityCheck(); }

}  // namespace shardscope::backend
