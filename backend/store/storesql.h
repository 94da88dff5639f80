// Write helpers shared by RunStore's job functions (runstore.cpp, runstore_study.cpp); internal
// to backend/store.
#pragma once

#include <QJsonObject>

#include <string>

#include "backend/store/storewriter.h"
#include "trainer/spec/result.h"

namespace shardscope::backend::storesql {

/// The object as compact JSON text.
std::string compactJson(const QJsonObject& object);
/// Steps a write statement to its end.
[[nodiscard]] Result<void> execute(Statement& stmt);
/// Rows changed by the last statement on the writer's connection.
int changes(WriteContext& context);
/// The newest sharded checkpoint of one attempt of a run (?1 run id, ?2 attempt): its step and its
/// path relative to that attempt's run directory, from rank 0's `ckpt` events (written only once
/// a checkpoint is complete). No row when the attempt wrote none, or when it ended in an `error`
/// of kind oom or config: resuming would only repeat that failure.
inline constexpr const char* kResumePointSql =
    "SELECT json_extract(e.json, '$.step'), json_extract(e.json, '$.path') FROM events e "
    "WHERE e.run_id = ?1 AND e.attempt = ?2 AND e.rank = 0 AND e.kind = 'ckpt' "
    "AND json_extract(e.json, '$.kind') = 'sharded' AND NOT EXISTS (SELECT 1 FROM events x "
    "WHERE x.run_id = ?1 AND x.attempt = ?2 AND x.kind = 'error' "
    "AND json_extract(x.json, '$.kind') IN ('oom', 'config')) "
    "ORDER BY json_extract(e.json, '$.step') DESC, e.file_offset DESC LIMIT 1";

/// Stores a run's parameters, one row per key, each value as JSON text.
[[nodiscard]] Result<void> insertParams(WriteContext& context, qint64 runId,
                                        const QJsonObject& params);

}  // namespace shardscope::backend::storesql
