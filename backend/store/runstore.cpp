#include "backend/store/runstore.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLoggingCategory>
#include <QStandardPaths>
#include <QSysInfo>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "backend/store/runschema.h"
#include "backend/store/storesql.h"
#include "spec/events.h"

Q_LOGGING_CATEGORY(lcRunStore, "shardscope.backend.runstore")

namespace shardscope::backend {

namespace storesql {

std::string compactJson(const QJsonObject& object) {
  return QJsonDocument(object).toJson(QJsonDocument::Compact).toStdString();
}

Result<void> execute(Statement& stmt) {
  auto row = stmt.step();
  if (!row) return row.error();
  return ok();
}

Result<qint64> insertedId(Statement& stmt) {
  std::optional<qint64> id;
  for (;;) {
    auto row = stmt.step();
    if (!row) return row.error();
    if (!*row) break;
    const qint64 value = stmt.columnInt64(0);
    if (!id || value > *id) id = value;
  }
  stmt.reset();
  if (!id) return fail(stmt.sql() + ": inserted no row");
  return *id;
}

int changes(WriteContext& context) { return context.db().changes(); }

const char* resumePointSql(DbKind kind) {
  if (kind == DbKind::postgres) {
    return "SELECT (e.json::jsonb ->> 'step')::bigint, e.json::jsonb ->> 'path' FROM events e "
           "WHERE e.run_id = ?1 AND e.attempt = ?2 AND e.rank = 0 AND e.kind = 'ckpt' "
           "AND e.json::jsonb ->> 'kind' = 'sharded' AND NOT EXISTS (SELECT 1 FROM events x "
           "WHERE x.run_id = ?1 AND x.attempt = ?2 AND x.kind = 'error' "
           "AND x.json::jsonb ->> 'kind' IN ('oom', 'config')) "
           "ORDER BY (e.json::jsonb ->> 'step')::double precision DESC, e.file_offset DESC LIMIT 1";
  }
  return "SELECT json_extract(e.json, '$.step'), json_extract(e.json, '$.path') FROM events e "
         "WHERE e.run_id = ?1 AND e.attempt = ?2 AND e.rank = 0 AND e.kind = 'ckpt' "
         "AND json_extract(e.json, '$.kind') = 'sharded' AND NOT EXISTS (SELECT 1 FROM events x "
         "WHERE x.run_id = ?1 AND x.attempt = ?2 AND x.kind = 'error' "
         "AND json_extract(x.json, '$.kind') IN ('oom', 'config')) "
         "ORDER BY json_extract(e.json, '$.step') DESC, e.file_offset DESC LIMIT 1";
}

std::string metricInsertSql(DbKind kind, std::size_t rows) {
  std::string sql = kind == DbKind::postgres ? "INSERT" : "INSERT OR REPLACE";
  sql += " INTO metrics(run_id, step, key_id, value, rank, time) VALUES ";
  for (std::size_t i = 0; i < rows; ++i) sql += i == 0 ? "(?,?,?,?,?,?)" : ",(?,?,?,?,?,?)";
  if (kind == DbKind::postgres) {
    sql +=
        " ON CONFLICT (run_id, key_id, step, rank) DO UPDATE SET value = excluded.value, "
        "time = excluded.time";
  }
  return sql;
}

Result<void> insertParams(WriteContext& context, qint64 runId, const QJsonObject& params) {
  auto stmt = context.statement("INSERT INTO params(run_id, key, value) VALUES (?1,?2,?3)");
  if (!stmt) return stmt.error();
  Statement& insert = **stmt;
  for (auto it = params.begin(); it != params.end(); ++it) {
    insert.reset();
    // Each value as JSON text, so 1e-3 and "1e-3" stay apart.
    const QByteArray value =
        QJsonDocument(QJsonArray{it.value()}).toJson(QJsonDocument::Compact).mid(1).chopped(1);
    if (auto r = insert.bindInt64(1, runId); !r) return r;
    if (auto r = insert.bindText(2, it.key().toStdString()); !r) return r;
    if (auto r = insert.bindText(3, value.toStdString()); !r) return r;
    if (auto r = execute(insert); !r) return r;
  }
  return ok();
}

std::string leaseSql(DbKind kind) {
  return std::string("SELECT run_id, pid, host, token, heartbeat, boot_id, beat_mono, ") +
         (kind == DbKind::postgres ? "extract(epoch FROM clock_timestamp()) - heartbeat" : "NULL") +
         " FROM leases WHERE run_id = ?1";
}

LeaseRecord leaseFromRow(const Statement& row, const StoreClock& clock) {
  LeaseRecord lease{row.columnInt64(0), row.columnInt64(1),
                    QString::fromStdString(row.columnText(2)),
                    QString::fromStdString(row.columnText(3)), row.columnDouble(4)};
  lease.bootId = QString::fromStdString(row.columnText(5));
  const std::optional<double> beatMono =
      row.columnIsNull(6) ? std::nullopt : std::optional<double>(row.columnDouble(6));
  const std::optional<double> serverAge =
      row.columnIsNull(7) ? std::nullopt : std::optional<double>(row.columnDouble(7));
  lease.ageS = heartbeatAge(clock, serverAge, lease.bootId, beatMono, lease.heartbeat);
  return lease;
}

}  // namespace storesql

namespace {

using storesql::changes;
using storesql::compactJson;
using storesql::execute;
using storesql::insertedId;
using storesql::insertParams;
using storesql::metricInsertSql;

// Rows per multi-row INSERT: one statement step stores this many metric rows (6 values each).
constexpr std::size_t kMetricRowsPerInsert = 64;
// Rows per multi-row INSERT of events (7 values each).
constexpr std::size_t kEventRowsPerInsert = 32;

// A metric row with its interned key, in the order of the metrics table's primary key.
struct KeyedMetric {
  qint64 runId;
  qint64 keyId;
  qint64 step;
  int rank;
  const MetricRow* row;
  auto order() const { return std::tie(runId, keyId, step, rank); }
};

// Binds one metric row to the six parameters after `base`.
Result<void> bindMetric(Statement& insert, int base, const KeyedMetric& m) {
  if (auto r = insert.bindInt64(base + 1, m.runId); !r) return r;
  if (auto r = insert.bindInt64(base + 2, m.step); !r) return r;
  if (auto r = insert.bindInt64(base + 3, m.keyId); !r) return r;
  // NaN (a diverged loss) is stored as NULL, as the protocol writes it.
  const double value = m.row->value;
  if (auto r = value == value ? insert.bindDouble(base + 4, value) : insert.bindNull(base + 4); !r)
    return r;
  if (auto r = insert.bindInt64(base + 5, m.rank); !r) return r;
  return insert.bindDouble(base + 6, m.row->time);
}

Result<void> insertMetrics(WriteContext& context, const std::vector<MetricRow>& rows) {
  if (rows.empty()) return ok();
  // Callers interleave keys (loss, lr, ... of one step); inserted in primary-key order each row
  // lands beside the previous one in the B-tree, which halves the CPU time per row. The sort is
  // stable, so of two rows with the same key the later one still replaces the earlier.
  std::vector<KeyedMetric> sorted;
  sorted.reserve(rows.size());
  for (const MetricRow& row : rows) {
    auto keyId = context.metricKeyId(row.key);
    if (!keyId) return keyId.error();
    sorted.push_back({row.runId, *keyId, row.step, row.rank, &row});
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const KeyedMetric& a, const KeyedMetric& b) {
    return a.order() < b.order();
  });
  // Of rows with the same key only the last is stored (it would replace the others anyway); one
  // PostgreSQL statement may not name a key twice.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (kept > 0 && sorted[kept - 1].order() == sorted[i].order()) {
      sorted[kept - 1] = sorted[i];
    } else {
      sorted[kept++] = sorted[i];
    }
  }
  sorted.resize(kept);
  const DbKind kind = context.db().kind();
  static const std::string kManySql = metricInsertSql(DbKind::sqlite, kMetricRowsPerInsert);
  static const std::string kOneSql = metricInsertSql(DbKind::sqlite, 1);
  static const std::string kPgManySql = metricInsertSql(DbKind::postgres, kMetricRowsPerInsert);
  static const std::string kPgOneSql = metricInsertSql(DbKind::postgres, 1);
  const std::string& manySql = kind == DbKind::postgres ? kPgManySql : kManySql;
  const std::string& oneSql = kind == DbKind::postgres ? kPgOneSql : kOneSql;
  std::size_t at = 0;
  while (at < sorted.size()) {
    const std::size_t n = sorted.size() - at >= kMetricRowsPerInsert ? kMetricRowsPerInsert : 1;
    auto stmt = context.statement(n == 1 ? oneSql : manySql);
    if (!stmt) return stmt.error();
    Statement& insert = **stmt;
    for (std::size_t i = 0; i < n; ++i) {
      if (auto r = bindMetric(insert, int(i) * 6, sorted[at + i]); !r) return r;
    }
    if (auto r = execute(insert); !r) return r;
    at += n;
  }
  qint64 lastRun = -1;
  for (const MetricRow& row : rows) {
    if (row.runId != lastRun) context.changes().metricRuns.insert(row.runId);
    lastRun = row.runId;
  }
  return ok();
}

// "INSERT INTO events(...) VALUES (?,?,?,?,?,?,?),..." for `rows` rows: one statement step (on
// PostgreSQL, one round trip to the server) stores that many events. Rows get their ids in
// VALUES order, so ids still grow in file order.
std::string eventInsertSql(std::size_t rows) {
  std::string sql =
      "INSERT INTO events(run_id, rank, seq, kind, json, file_offset, attempt) VALUES ";
  for (std::size_t i = 0; i < rows; ++i) sql += i == 0 ? "(?,?,?,?,?,?,?)" : ",(?,?,?,?,?,?,?)";
  return sql + " RETURNING id";
}

Result<void> bindEvent(Statement& insert, int base, int attempt, const EventRow& row) {
  if (auto r = insert.bindInt64(base + 1, row.runId); !r) return r;
  if (auto r = insert.bindInt64(base + 2, row.rank); !r) return r;
  if (auto r = insert.bindInt64(base + 3, row.seq); !r) return r;
  if (auto r = insert.bindText(base + 4, row.kind.toStdString()); !r) return r;
  if (auto r = insert.bindText(base + 5, std::string_view(row.json.constData(), row.json.size()));
      !r)
    return r;
  if (auto r = insert.bindInt64(base + 6, row.offset); !r) return r;
  return insert.bindInt64(base + 7, attempt);
}

Result<qint64> insertEvents(WriteContext& context, int attempt, const std::vector<EventRow>& rows) {
  static const std::string kManySql = eventInsertSql(kEventRowsPerInsert);
  static const std::string kOneSql = eventInsertSql(1);
  std::size_t at = 0;
  qint64 lastId = 0;
  while (at < rows.size()) {
    const std::size_t n = rows.size() - at >= kEventRowsPerInsert ? kEventRowsPerInsert : 1;
    auto stmt = context.statement(n == 1 ? kOneSql : kManySql);
    if (!stmt) return stmt.error();
    Statement& insert = **stmt;
    for (std::size_t i = 0; i < n; ++i) {
      if (auto r = bindEvent(insert, int(i) * 7, attempt, rows[at + i]); !r) return r.error();
      context.changes().eventRuns.insert(rows[at + i].runId);
    }
    auto id = insertedId(insert);
    if (!id) return id.error();
    lastId = *id;
    at += n;
  }
  // The id of the chunk's last event (ids grow in insert order).
  return lastId;
}

Result<void> insertLogs(WriteContext& context, int attempt, const std::vector<LogLine>& lines) {
  auto stmt = context.statement(
      "INSERT INTO log_lines(run_id, rank, file, file_offset, text, attempt) "
      "VALUES (?1,?2,?3,?4,?5,?6)");
  if (!stmt) return stmt.error();
  Statement& insert = **stmt;
  for (const LogLine& line : lines) {
    insert.reset();
    if (auto r = insert.bindInt64(1, line.runId); !r) return r;
    if (auto r = insert.bindInt64(2, line.rank); !r) return r;
    if (auto r = insert.bindText(3, rankFileName(line.file).toStdString()); !r) return r;
    if (auto r = insert.bindInt64(4, line.offset); !r) return r;
    if (auto r = insert.bindText(5, line.text.toStdString()); !r) return r;
    if (auto r = insert.bindInt64(6, attempt); !r) return r;
    if (auto r = execute(insert); !r) return r;
    context.changes().eventRuns.insert(line.runId);
  }
  return ok();
}

Result<void> insertAnomalies(WriteContext& context, int attempt,
                             const std::vector<Anomaly>& found) {
  auto stmt = context.statement(
      "INSERT INTO anomalies(run_id, rank, kind, seq, file_offset, detail, attempt) "
      "VALUES (?1,?2,?3,?4,?5,?6,?7)");
  if (!stmt) return stmt.error();
  Statement& insert = **stmt;
  for (const Anomaly& a : found) {
    insert.reset();
    if (auto r = insert.bindInt64(1, a.runId); !r) return r;
    if (auto r = insert.bindInt64(2, a.rank); !r) return r;
    if (auto r = insert.bindText(3, anomalyKindName(a.kind).toStdString()); !r) return r;
    if (auto r = insert.bindInt64(4, a.seq); !r) return r;
    if (auto r = insert.bindInt64(5, a.offset); !r) return r;
    if (auto r = insert.bindText(6, a.detail.toStdString()); !r) return r;
    if (auto r = insert.bindInt64(7, attempt); !r) return r;
    if (auto r = execute(insert); !r) return r;
  }
  return ok();
}

Result<qint64> storedOffset(WriteContext& context, const FileChunk& chunk) {
  auto stmt = context.statement(
      "SELECT \"offset\" FROM read_offsets WHERE run_id = ?1 AND rank = ?2 AND file = ?3 AND "
      "attempt = ?4");
  if (!stmt) return stmt.error();
  Statement& select = **stmt;
  if (auto r = select.bindInt64(4, chunk.attempt); !r) return r.error();
  if (auto r = select.bindInt64(1, chunk.runId); !r) return r.error();
  if (auto r = select.bindInt64(2, chunk.rank); !r) return r.error();
  if (auto r = select.bindText(3, rankFileName(chunk.file).toStdString()); !r) return r.error();
  auto row = select.step();
  if (!row) return row.error();
  const qint64 offset = *row ? select.columnInt64(0) : 0;
  select.reset();
  return offset;
}

Result<void> storeOffset(WriteContext& context, const FileChunk& chunk) {
  auto stmt = context.statement(
      "INSERT INTO read_offsets(run_id, rank, file, \"offset\", attempt) VALUES (?1,?2,?3,?4,?5) "
      "ON CONFLICT(run_id, attempt, rank, file) DO UPDATE SET \"offset\" = excluded.\"offset\"");
  if (!stmt) return stmt.error();
  Statement& upsert = **stmt;
  if (auto r = upsert.bindInt64(5, chunk.attempt); !r) return r;
  if (auto r = upsert.bindInt64(1, chunk.runId); !r) return r;
  if (auto r = upsert.bindInt64(2, chunk.rank); !r) return r;
  if (auto r = upsert.bindText(3, rankFileName(chunk.file).toStdString()); !r) return r;
  if (auto r = upsert.bindInt64(4, chunk.endOffset); !r) return r;
  return execute(upsert);
}

Result<IngestReceipt> ingestChunk(WriteContext& context, const FileChunk& chunk) {
  auto stored = storedOffset(context, chunk);
  if (!stored) return stored.error();
  if (chunk.noteOnly) {
    if (*stored != chunk.startOffset) return IngestReceipt{false, 0, *stored};
    if (auto r = insertAnomalies(context, chunk.attempt, chunk.anomalies); !r) return r.error();
    return IngestReceipt{true, 0, *stored};
  }
  if (chunk.endOffset <= *stored && chunk.startOffset <= *stored) {
    return IngestReceipt{false, 0, *stored};  // already stored: a replay after a crash
  }
  if (chunk.startOffset != *stored) {
    return fail("run " + std::to_string(chunk.runId) + " attempt " + std::to_string(chunk.attempt) +
                " rank " + std::to_string(chunk.rank) + " " +
                rankFileName(chunk.file).toStdString() + " file: the chunk starts at byte " +
                std::to_string(chunk.startOffset) + " but the run log has read up to byte " +
                std::to_string(*stored) + ": read the file again from the stored offset");
  }
  auto lastId = insertEvents(context, chunk.attempt, chunk.events);
  if (!lastId) return lastId.error();
  if (auto r = insertMetrics(context, chunk.metrics); !r) return r.error();
  if (auto r = insertLogs(context, chunk.attempt, chunk.logs); !r) return r.error();
  if (auto r = insertAnomalies(context, chunk.attempt, chunk.anomalies); !r) return r.error();
  if (auto r = storeOffset(context, chunk); !r) return r.error();
  return IngestReceipt{true, *lastId, chunk.endOffset};
}

Result<std::optional<LeaseRecord>> currentLease(WriteContext& context, qint64 runId,
                                                const StoreClock& clock) {
  auto stmt = context.statement(storesql::leaseSql(context.db().kind()));
  if (!stmt) return stmt.error();
  Statement& select = **stmt;
  if (auto r = select.bindInt64(1, runId); !r) return r.error();
  auto row = select.step();
  if (!row) return row.error();
  if (!*row) return std::optional<LeaseRecord>();
  LeaseRecord holder = storesql::leaseFromRow(select, clock);
  select.reset();
  return std::optional<LeaseRecord>(holder);
}

// The heartbeat a write stamps: the server's clock on PostgreSQL, else this machine's (bound as
// ?N); the monotonic reading and the boot go beside it.
std::string beatNow(const Db& db, int parameter) {
  if (db.isPostgres()) return "extract(epoch FROM clock_timestamp())";
  std::string placeholder(1, '?');
  placeholder.append(std::to_string(parameter));
  return placeholder;
}

Result<LeaseOutcome> takeLease(WriteContext& context, const LeaseRecord& me, double staleAfterS,
                               const StoreClock& clock) {
  auto holder = currentLease(context, me.runId, clock);
  if (!holder) return holder.error();
  LeaseOutcome outcome;
  if (*holder && (*holder)->token != me.token) {
    if (RunStore::leaseHolderAlive(**holder, me.host, staleAfterS, clock)) {
      outcome.holder = **holder;
      return outcome;
    }
    outcome.tookOver = true;
  }
  if (auto r = storesql::writeLease(context, me, clock); !r) return r.error();
  outcome.acquired = true;
  return outcome;
}

}  // namespace

Result<void> storesql::writeLease(WriteContext& context, const LeaseRecord& lease,
                                  const StoreClock& clock) {
  auto stmt = context.statement(
      "INSERT INTO leases(run_id, pid, host, token, heartbeat, boot_id, beat_mono) VALUES "
      "(?1,?2,?3,?4," +
      beatNow(context.db(), 7) +
      ",?5,?6) ON CONFLICT(run_id) DO UPDATE SET pid = excluded.pid, host = excluded.host, "
      "token = excluded.token, heartbeat = excluded.heartbeat, boot_id = excluded.boot_id, "
      "beat_mono = excluded.beat_mono");
  if (!stmt) return stmt.error();
  Statement& upsert = **stmt;
  if (auto r = upsert.bindInt64(1, lease.runId); !r) return r;
  if (auto r = upsert.bindInt64(2, lease.pid); !r) return r;
  if (auto r = upsert.bindText(3, lease.host.toStdString()); !r) return r;
  if (auto r = upsert.bindText(4, lease.token.toStdString()); !r) return r;
  if (auto r = upsert.bindText(5, clock.bootId().toStdString()); !r) return r;
  if (auto r = upsert.bindDouble(6, clock.monotonicNow()); !r) return r;
  if (!context.db().isPostgres()) {  // the last parameter: PostgreSQL's statement has none
    if (auto r = upsert.bindDouble(7, clock.wallNow()); !r) return r;
  }
  if (auto r = execute(upsert); !r) return r;
  context.changes().runs = true;
  return ok();
}

bool RunStore::processAlive(qint64 pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  // A zombie has ended (its parent has not reaped it yet; an init that never reaps keeps it).
  QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
  if (!stat.open(QIODevice::ReadOnly)) return true;  // no procfs: kill() is all we know
  const QByteArray text = stat.read(4096);
  const qsizetype close = text.lastIndexOf(')');
  return close < 0 || text.size() <= close + 2 || text[close + 2] != 'Z';
}

bool RunStore::leaseHolderAlive(const LeaseRecord& holder, const QString& host, double staleAfterS,
                                const StoreClock& clock) {
  const bool here = holder.host == host;
  // A holder on this machine of an earlier boot is gone with that boot (its pid may be reused).
  const QString boot = clock.bootId();
  if (here && !holder.bootId.isEmpty() && !boot.isEmpty() && holder.bootId != boot) return false;
  const double age = holder.ageS ? *holder.ageS : clock.wallNow() - holder.heartbeat;
  if (age > staleAfterS) return false;
  return !here || holder.pid <= 0 || processAlive(holder.pid);
}

QString RunStore::defaultPath() {
  return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) +
         "/shardscope/runs.db";
}

Result<std::unique_ptr<RunStore>> RunStore::open(const QString& path) {
  return open(path, Options{});
}

Result<std::unique_ptr<RunStore>> RunStore::open(const QString& path, const Options& options) {
  assertOffGuiThread("opening the run log for writing");
  const bool postgres = isPostgresSpec(path);
  const QString folder = postgres ? QString() : QFileInfo(path).absolutePath();
  if (!postgres && !QDir().mkpath(folder)) {
    return fail(folder.toStdString() +
                ": cannot create the run log's folder: check its permissions, or choose another "
                "file with --db");
  }
  auto db = Db::open(path);
  if (!db) return db.error();
  if (auto r = migrateRunSchema(*db); !r) return r.error();
  if (postgres) return std::unique_ptr<RunStore>(new RunStore(path, options, std::move(*db)));
  // A larger page cache (in KiB) keeps the metrics index in memory while ingesting.
  if (auto r = db->exec("PRAGMA cache_size=-32768"); !r) return r.error();
  if (options.maxPageCount > 0) {
    if (auto r = db->exec("PRAGMA max_page_count=" + std::to_string(options.maxPageCount)); !r)
      return r.error();
  }
  return std::unique_ptr<RunStore>(new RunStore(path, options, std::move(*db)));
}

RunStore::RunStore(QString path, const Options& options, Db writerDb)
    : m_path(std::move(path)), m_options(options) {
  m_notifyTimer.setSingleShot(true);
  m_notifyTimer.setInterval(options.notifyIntervalMs);
  connect(&m_notifyTimer, &QTimer::timeout, this, &RunStore::emitPending);
  StoreWriter::Options writerOptions;
  writerOptions.maxBatchRows = options.maxBatchRows;
  writerOptions.flushIntervalMs = options.flushIntervalMs;
  m_writer =
      std::make_unique<StoreWriter>(std::move(writerDb), writerOptions,
                                    [this](const ChangeSet& changes) { onCommitted(changes); });
}

RunStore::~RunStore() {
  m_writer.reset();  // commits what is queued; no commit hook runs after this line
}

Result<RunReader> RunStore::reader() const {
  auto reader = RunReader::open(m_path);
  if (reader) reader->setClock(clock());
  return reader;
}

void RunStore::flush() { m_writer->flush(); }

void RunStore::onCommitted(const ChangeSet& changes) {
  const std::lock_guard lock(m_changesMutex);
  m_pending.runs = m_pending.runs || changes.runs;
  m_pending.hosts = m_pending.hosts || changes.hosts;
  m_pending.studies = m_pending.studies || changes.studies;
  m_pending.metricRuns.unite(changes.metricRuns);
  m_pending.eventRuns.unite(changes.eventRuns);
  if (m_wakePosted) return;  // a signal is already on its way: these changes join it
  m_wakePosted = true;
  QMetaObject::invokeMethod(
      this,
      [this] {
        if (!m_notifyTimer.isActive()) m_notifyTimer.start();
      },
      Qt::QueuedConnection);
}

void RunStore::emitPending() {
  ChangeSet changes;
  {
    const std::lock_guard lock(m_changesMutex);
    changes = std::exchange(m_pending, {});
    m_wakePosted = false;
  }
  if (changes.runs) emit runsChanged();
  if (changes.hosts) emit hostsChanged();
  if (changes.studies) emit studiesChanged();
  for (const qint64 runId : std::as_const(changes.metricRuns)) emit metricsAppended(runId);
  for (const qint64 runId : std::as_const(changes.eventRuns)) emit eventsAppended(runId);
}

RunStore::Pending<qint64> RunStore::createExperiment(const ExperimentRecord& experiment) {
  return submit<qint64>(1, [experiment](WriteContext& context) -> Result<qint64> {
    auto stmt = context.statement(
        "INSERT INTO experiments(name, source, toml, created_at) VALUES (?1,?2,?3,?4) "
        "RETURNING id");
    if (!stmt) return stmt.error();
    Statement& insert = **stmt;
    if (auto r = insert.bindText(1, experiment.name.toStdString()); !r) return r.error();
    if (auto r = insert.bindText(2, experiment.source.toStdString()); !r) return r.error();
    if (auto r = insert.bindText(3, experiment.toml.toStdString()); !r) return r.error();
    if (auto r = insert.bindDouble(4, spec::unix_time_now()); !r) return r.error();
    return insertedId(insert);
  });
}

RunStore::Pending<qint64> RunStore::createRun(const NewRun& run) {
  return submit<qint64>(1, [run](WriteContext& context) -> Result<qint64> {
    auto stmt = context.statement(
        "INSERT INTO runs(experiment_id, name, status, run_dir, params, created_at, world_size) "
        "VALUES (?1, ?2, 'queued', ?3, ?4, ?5, ?6) RETURNING id");
    if (!stmt) return stmt.error();
    Statement& insert = **stmt;
    auto id = run.experimentId ? insert.bindInt64(1, *run.experimentId) : insert.bindNull(1);
    if (!id) return id.error();
    if (auto r = insert.bindText(2, run.name.toStdString()); !r) return r.error();
    if (auto r = insert.bindText(3, run.runDir.toStdString()); !r) return r.error();
    if (auto r = insert.bindText(4, compactJson(run.params)); !r) return r.error();
    if (auto r = insert.bindDouble(5, spec::unix_time_now()); !r) return r.error();
    if (auto r = insert.bindInt64(6, run.worldSize); !r) return r.error();
    auto inserted = insertedId(insert);
    if (!inserted) {
      if (inserted.message().find("UNIQUE") != std::string::npos) {
        return fail("run name '" + run.name.toStdString() +
                    "' is taken in the run log: choose another name");
      }
      return inserted.error();
    }
    const qint64 runId = *inserted;
    if (auto r = insertParams(context, runId, run.params); !r) return r.error();
    context.changes().runs = true;
    return runId;
  });
}

RunStore::Pending<void> RunStore::setRunLocation(qint64 runId, const QJsonObject& location) {
  const QString host = QSysInfo::machineHostName();
  const QString boot = clock().bootId();
  return submit<void>(1, [runId, location, host, boot](WriteContext& context) -> Result<void> {
    auto stmt =
        context.statement("UPDATE runs SET location = ?2, host = ?3, boot_id = ?4 WHERE id = ?1");
    if (!stmt) return stmt.error();
    if (auto r = (*stmt)->bindInt64(1, runId); !r) return r;
    if (auto r = (*stmt)->bindText(2, compactJson(location)); !r) return r;
    if (auto r = (*stmt)->bindText(3, host.toStdString()); !r) return r;
    if (auto r = (*stmt)->bindText(4, boot.toStdString()); !r) return r;
    if (auto r = execute(**stmt); !r) return r;
    if (changes(context) == 0)
      return fail("run " + std::to_string(runId) + " is not in the run log");
    context.changes().runs = true;
    return ok();
  });
}

RunStore::Pending<void> RunStore::setRunStatus(qint64 runId, spec::RunStatus status,
                                               const QString& error,
                                               std::optional<double> objective) {
  return submit<void>(1, [=](WriteContext& context) -> Result<void> {
    auto stmt = context.statement(
        "UPDATE runs SET status = ?2, error = ?3, objective = coalesce(?4, objective), "
        "started_at = CASE WHEN ?5 <> 0 THEN coalesce(started_at, ?7) ELSE started_at END, "
        "ended_at = CASE WHEN ?6 <> 0 THEN coalesce(ended_at, ?7) ELSE ended_at END WHERE id = ?1");
    if (!stmt) return stmt.error();
    Statement& update = **stmt;
    const bool final = spec::is_final(status);
    if (auto r = update.bindInt64(1, runId); !r) return r;
    if (auto r = update.bindText(2, spec::to_string(status)); !r) return r;
    if (auto r = update.bindText(3, error.toStdString()); !r) return r;
    if (auto r = objective ? update.bindDouble(4, *objective) : update.bindNull(4); !r) return r;
    if (auto r = update.bindInt64(5, status == spec::RunStatus::running || final); !r) return r;
    if (auto r = update.bindInt64(6, final); !r) return r;
    if (auto r = update.bindDouble(7, spec::unix_time_now()); !r) return r;
    if (auto r = execute(update); !r) return r;
    if (changes(context) == 0)
      return fail("run " + std::to_string(runId) + " is not in the run log");
    context.changes().runs = true;
    return ok();
  });
}

RunStore::Pending<void> RunStore::appendMetrics(std::vector<MetricRow> rows) {
  const std::size_t count = rows.size();
  return submit<void>(
      count,
      [rows = std::move(rows)](WriteContext& context) { return insertMetrics(context, rows); },
      false);
}

RunStore::Pending<IngestReceipt> RunStore::ingest(FileChunk chunk) {
  const std::size_t rows =
      chunk.events.size() + chunk.metrics.size() + chunk.logs.size() + chunk.anomalies.size();
  return submit<IngestReceipt>(
      rows,
      [chunk = std::move(chunk)](WriteContext& context) { return ingestChunk(context, chunk); },
      false);
}

RunStore::Pending<void> RunStore::saveHost(const HostRecord& host) {
  return submit<void>(1, [host](WriteContext& context) -> Result<void> {
    auto stmt = context.statement(
        "INSERT INTO hosts(alias, hostname, port, \"user\") VALUES (?1,?2,?3,?4) "
        "ON CONFLICT(alias) DO UPDATE SET hostname = excluded.hostname, port = excluded.port, "
        "\"user\" = excluded.\"user\"");
    if (!stmt) return stmt.error();
    Statement& upsert = **stmt;
    if (auto r = upsert.bindText(1, host.alias.toStdString()); !r) return r;
    if (auto r = upsert.bindText(2, host.hostname.toStdString()); !r) return r;
    if (auto r = upsert.bindInt64(3, host.port); !r) return r;
    if (auto r = upsert.bindText(4, host.user.toStdString()); !r) return r;
    if (auto r = execute(upsert); !r) return r;
    context.changes().hosts = true;
    return ok();
  });
}

RunStore::Pending<void> RunStore::trustHost(const QString& alias, const QString& fingerprint) {
  return submit<void>(1, [alias, fingerprint](WriteContext& context) -> Result<void> {
    auto stmt =
        context.statement("UPDATE hosts SET fingerprint = ?2, trusted_at = ?3 WHERE alias = ?1");
    if (!stmt) return stmt.error();
    Statement& update = **stmt;
    if (auto r = update.bindText(1, alias.toStdString()); !r) return r;
    if (auto r = update.bindText(2, fingerprint.toStdString()); !r) return r;
    if (auto r = update.bindDouble(3, spec::unix_time_now()); !r) return r;
    if (auto r = execute(update); !r) return r;
    if (changes(context) == 0) {
      return fail("host '" + alias.toStdString() + "' is not known: add it first (hosts add)");
    }
    context.changes().hosts = true;
    return ok();
  });
}

RunStore::Pending<LeaseOutcome> RunStore::acquireLease(const LeaseRecord& me, double staleAfterS) {
  const StoreClock* clock = &this->clock();
  return submit<LeaseOutcome>(1, [me, staleAfterS, clock](WriteContext& context) {
    return takeLease(context, me, staleAfterS, *clock);
  });
}

RunStore::Pending<bool> RunStore::renewLease(const LeaseRecord& me) {
  const StoreClock* clock = &this->clock();
  return submit<bool>(1, [me, clock](WriteContext& context) -> Result<bool> {
    auto stmt =
        context.statement("UPDATE leases SET heartbeat = " + beatNow(context.db(), 5) +
                          ", boot_id = ?3, beat_mono = ?4 WHERE run_id = ?1 AND token = ?2");
    if (!stmt) return stmt.error();
    Statement& update = **stmt;
    if (auto r = update.bindInt64(1, me.runId); !r) return r.error();
    if (auto r = update.bindText(2, me.token.toStdString()); !r) return r.error();
    if (auto r = update.bindText(3, clock->bootId().toStdString()); !r) return r.error();
    if (auto r = update.bindDouble(4, clock->monotonicNow()); !r) return r.error();
    if (!context.db().isPostgres()) {  // the last parameter: PostgreSQL's statement has none
      if (auto r = update.bindDouble(5, clock->wallNow()); !r) return r.error();
    }
    if (auto r = execute(update); !r) return r.error();
    return changes(context) != 0;
  });
}

RunStore::Pending<void> RunStore::releaseLease(const LeaseRecord& me) {
  return submit<void>(1, [me](WriteContext& context) -> Result<void> {
    auto stmt = context.statement("DELETE FROM leases WHERE run_id = ?1 AND token = ?2");
    if (!stmt) return stmt.error();
    if (auto r = (*stmt)->bindInt64(1, me.runId); !r) return r;
    if (auto r = (*stmt)->bindText(2, me.token.toStdString()); !r) return r;
    if (auto r = execute(**stmt); !r) return r;
    context.changes().runs = true;
    return ok();
  });
}

}  // namespace shardscope::backend
