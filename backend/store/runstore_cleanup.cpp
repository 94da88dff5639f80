// RunStore's clean-up writes (schema v10): archiving a run and deleting one with its rows. A run's
// rows in other tables go with it: the foreign keys' ON DELETE CASCADE (params, events, log lines,
// anomalies, leases, read offsets, tag links) and the runs_delete_metrics trigger (metrics, which
// carry no foreign key). The SQL is the same text on SQLite and PostgreSQL.
#include <optional>
#include <string>

#include "backend/store/runstore.h"
#include "backend/store/storesql.h"

namespace shardscope::backend {

namespace {

using storesql::changes;
using storesql::execute;

// The run's status as stored, or nullopt when no row has that id.
Result<std::optional<std::string>> storedStatus(WriteContext& context, qint64 runId) {
  auto stmt = context.statement("SELECT status FROM runs WHERE id = ?1");
  if (!stmt) return stmt.error();
  if (auto r = (*stmt)->bindInt64(1, runId); !r) return r.error();
  auto row = (*stmt)->step();
  if (!row) {
    (*stmt)->reset();
    return row.error();
  }
  std::optional<std::string> status;
  if (*row) status = (*stmt)->columnText(0);
  (*stmt)->reset();
  return status;
}

}  // namespace

RunStore::Pending<void> RunStore::setArchived(qint64 runId, bool archived) {
  const double now = clock().wallNow();
  return submit<void>(1, [runId, archived, now](WriteContext& context) -> Result<void> {
    auto stmt = context.statement(archived ? "UPDATE runs SET archived_at = ?2 WHERE id = ?1"
                                           : "UPDATE runs SET archived_at = NULL WHERE id = ?1");
    if (!stmt) return stmt.error();
    if (auto r = (*stmt)->bindInt64(1, runId); !r) return r;
    if (archived) {
      if (auto r = (*stmt)->bindDouble(2, now); !r) return r;
    }
    if (auto r = execute(**stmt); !r) return r;
    if (changes(context) == 0) {
      return fail("run " + std::to_string(runId) + " is not in the run log");
    }
    context.changes().runs = true;
    return ok();
  });
}

RunStore::Pending<void> RunStore::deleteRun(qint64 runId) {
  return submit<void>(1, [runId](WriteContext& context) -> Result<void> {
    // Checked inside the write transaction: a run that started since the caller looked is kept.
    auto status = storedStatus(context, runId);
    if (!status) return status.error();
    if (!status->has_value()) {
      return fail("run " + std::to_string(runId) + " is not in the run log");
    }
    if (**status == "running") {
      return fail("run " + std::to_string(runId) +
                  " is running: stop it first (shardscope-cli stop RUN), then delete it");
    }
    auto stmt = context.statement("DELETE FROM runs WHERE id = ?1");
    if (!stmt) return stmt.error();
    if (auto r = (*stmt)->bindInt64(1, runId); !r) return r;
    if (auto r = execute(**stmt); !r) return r;
    context.changes().runs = true;
    return ok();
  });
}

}  // namespace shardscope::backend
