// A run log that refuses some rows as a server would (a constraint, a trigger), for the tests of
// what the store and the monitor do with a refusal that is not a full disk.
#pragma once

#include <QString>

#include "backend/store/db.h"

namespace shardscope::testing {

/// Adds a trigger to the run log `spec` (SQLite or PostgreSQL) that refuses every metrics row of
/// step 7 with "step 7 refused by the test".
inline Result<void> refuseMetricsOfStep7(const QString& spec) {
  auto db = backend::Db::open(spec);
  if (!db) return fail(db.message());
  return db->exec(
      db->isPostgres()
          ? "CREATE FUNCTION refuse_step7() RETURNS trigger AS $$ BEGIN IF NEW.step = 7 THEN "
            "RAISE EXCEPTION 'step 7 refused by the test'; END IF; RETURN NEW; END $$ "
            "LANGUAGE plpgsql; CREATE TRIGGER refuse_step7 BEFORE INSERT ON metrics FOR EACH "
            "ROW EXECUTE FUNCTION refuse_step7();"
          : "CREATE TRIGGER refuse_step7 BEFORE INSERT ON metrics WHEN NEW.step = 7 BEGIN "
            "SELECT RAISE(ABORT, 'step 7 refused by the test'); END;");
}

}  // namespace shardscope::testing
