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
/// Stores a run's parameters, one row per key, each value as JSON text.
[[nodiscard]] Result<void> insertParams(WriteContext& context, qint64 runId,
                                        const QJsonObject& params);

}  // namespace shardscope::backend::storesql
