// The run log's schema and its forward migrations, for both stores: SQLite and PostgreSQL each
// run their own text of every step (their DDL differs; most of PostgreSQL's steps are SQLite's
// translated to its types), with the same version numbers and the same tables and columns. Version
// N is reached from N-1 by one list of statements; a database made by any released version opens
// through the same path (the assets under tests/backend/store/assets/ prove it). Never edit a
// released step: add the next one.
#pragma once

#include "backend/store/db.h"
#include "spec/result.h"

namespace shardscope::backend {

/// The version this build writes.
inline constexpr int kRunSchemaVersion = 12;

/// The version stored in `db` (0 for an empty file).
[[nodiscard]] Result<int> runSchemaVersion(Db& db);

/// Migrates `db` forward to `target` (default: kRunSchemaVersion) in one transaction per step.
/// A run log from a newer build is refused with a message that names both versions.
[[nodiscard]] Result<void> migrateRunSchema(Db& db, int target = kRunSchemaVersion);

}  // namespace shardscope::backend
