// The PostgreSQL implementation of Db (db.h), over libpq. A run log on a server is shared by
// several processes on several machines: writes take the run log's write lock (an advisory lock
// held to the end of the transaction), so they take turns as SQLite's single writer does, and
// every commit is durable before it returns (each write transaction sets synchronous_commit = on,
// whatever the database or role default to). Sessions end a transaction left idle by a frozen
// client (idle_in_transaction_session_timeout) and give up a server that vanished (TCP
// keepalives, tcp_user_timeout), unless the URL sets its own values.
#pragma once

#include <QString>

#include <string>
#include <string_view>

#include "backend/store/db.h"
#include "spec/result.h"

namespace shardscope::backend {

/// Connects to `url` (postgresql://user[:password]@host[:port]/dbname[?options]). A server that
/// cannot be reached is reported with its host, its port and libpq's cause.
[[nodiscard]] Result<Db> openPostgres(const QString& url, OpenMode mode = {});

/// `sql` with SQLite's placeholders (`?N`, and bare `?` numbered on from the last) as
/// PostgreSQL's `$N`; string literals, quoted names and comments are left alone. Sets
/// `parameters` to the highest parameter number.
std::string toPostgresPlaceholders(std::string_view sql, int* parameters = nullptr);

}  // namespace shardscope::backend
