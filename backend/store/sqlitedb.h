// The SQLite implementation of Db (db.h): a thin RAII layer over the SQLite C API (not QtSql: the
// run store's writer binds prepared statements at hundreds of thousands of rows a second). Every
// database is in WAL mode, so one writer and any number of readers, each on its own connection,
// never block each other.
#pragma once

#include <QString>

#include "backend/store/db.h"
#include "spec/result.h"

namespace shardscope::backend {

/// Earlier name of Db (the SQLite connection); Db::open still opens a path as a SQLite file.
using SqliteDb = Db;

/// Opens (read-write: creates) the SQLite file at `path`, in WAL mode with synchronous=NORMAL and
/// foreign keys on; errors name the path.
[[nodiscard]] Result<Db> openSqlite(const QString& path, OpenMode mode = {});

}  // namespace shardscope::backend
