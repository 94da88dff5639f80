// Write helpers shared by RunStore's job functions (runstore.cpp, runstore_study.cpp), and the
// statements whose SQL differs between SQLite and PostgreSQL (the DML dialect; the DDL is in
// runschema.cpp); internal to backend/store.
#pragma once

#include <QJsonObject>

#include <limits>
#include <string>

#include "backend/store/runrecords.h"
#include "backend/store/storeclock.h"
#include "backend/store/storewriter.h"
#include "spec/result.h"

namespace shardscope::backend::storesql {

/// The object as compact JSON text.
std::string compactJson(const QJsonObject& object);
/// Steps a write statement to its end.
[[nodiscard]] Result<void> execute(Statement& stmt);
/// Steps an `INSERT ... RETURNING id` to its end and rewinds it: the largest id it returned (a
/// multi-row insert's last row, as ids grow in insert order). Fails when it inserted no row. The
/// id comes back with the insert itself, where asking for it afterwards would cost PostgreSQL a
/// second round trip (SQLite has RETURNING since 3.35).
[[nodiscard]] Result<qint64> insertedId(Statement& stmt);
/// Rows changed by the last statement on the writer's connection.
int changes(WriteContext& context);
/// The newest sharded checkpoint of one attempt of a run (?1 run id, ?2 attempt): its step and its
/// path relative to that attempt's run directory, from rank 0's `ckpt` events (written only once
/// a checkpoint is complete). No row when the attempt wrote none, or when it ended in an `error`
/// of kind oom or config: resuming would only repeat that failure. (SQLite's json_extract, or
/// PostgreSQL's jsonb ->>.)
const char* resumePointSql(DbKind kind);

/// "INSERT ... INTO metrics(run_id, step, key_id, value, rank, time) VALUES (?,?,?,?,?,?),..."
/// for `rows` rows, where a repeated (run, key, step, rank) replaces the stored row (the latest
/// value wins, as in the v3 migration) instead of failing the batch: SQLite's INSERT OR REPLACE,
/// PostgreSQL's ON CONFLICT DO UPDATE. PostgreSQL refuses one statement that names a key twice,
/// so callers pass rows whose keys are distinct.
std::string metricInsertSql(DbKind kind, std::size_t rows);

/// SELECT of one run's lease (?1 run id): its columns as leaseFromRow reads them, with its age
/// measured by the server on PostgreSQL (whose clock wrote the heartbeat; storeclock.h).
std::string leaseSql(DbKind kind);
/// The lease of a leaseSql row, its ageS measured by heartbeatAge (storeclock.h).
LeaseRecord leaseFromRow(const Statement& row, const StoreClock& clock);

/// Writes `lease` as run lease.runId's lease (replacing any other), its heartbeat now: the
/// server's clock on PostgreSQL, `clock`'s wall clock on SQLite, with `clock`'s boot and
/// monotonic reading beside it.
[[nodiscard]] Result<void> writeLease(WriteContext& context, const LeaseRecord& lease,
                                      const StoreClock& clock);

/// A LIMIT that means "no limit" (SQLite takes -1, PostgreSQL refuses a negative one).
inline constexpr qint64 kNoLimit = std::numeric_limits<qint64>::max();

/// Stores a run's parameters, one row per key, each value as JSON text.
[[nodiscard]] Result<void> insertParams(WriteContext& context, qint64 runId,
                                        const QJsonObject& params);

}  // namespace shardscope::backend::storesql
