#include "backend/store/runschema.h"

#include <QLoggingCategory>

#include <array>
#include <string>
#include <string_view>

Q_LOGGING_CATEGORY(lcRunSchema, "shardscope.backend.runschema")

namespace shardscope::backend {

namespace {

// Version 1: the run log as first released. Times are unix seconds (REAL); JSON columns hold
// compact JSON text; metric names are interned in metric_keys so a metric row is five numbers.
// metrics, the hot table, has no foreign keys (two lookups per row would halve the ingest rate):
// the writer only stores ids it read or created, and a trigger deletes a run's rows with it.
constexpr std::string_view kVersion1 = R"sql(
CREATE TABLE schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version(version) VALUES (0);
CREATE TABLE experiments(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT '',
  toml TEXT NOT NULL DEFAULT '',
  created_at REAL NOT NULL);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  experiment_id INTEGER REFERENCES experiments(id) ON DELETE SET NULL,
  name TEXT NOT NULL UNIQUE,
  status TEXT NOT NULL CHECK(status IN ('queued','running','complete','stopped','pruned',
                                        'failed','oom','infeasible')),
  run_dir TEXT NOT NULL DEFAULT '',
  location TEXT NOT NULL DEFAULT '{}',
  params TEXT NOT NULL DEFAULT '{}',
  objective REAL,
  error TEXT NOT NULL DEFAULT '',
  created_at REAL NOT NULL,
  started_at REAL,
  ended_at REAL,
  world_size INTEGER NOT NULL DEFAULT 0);
CREATE INDEX runs_by_experiment ON runs(experiment_id);
CREATE TABLE params(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(run_id, key)) WITHOUT ROWID;
CREATE TABLE metric_keys(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE metrics(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL,
  step INTEGER NOT NULL,
  key_id INTEGER NOT NULL,
  value REAL,
  rank INTEGER NOT NULL,
  time REAL NOT NULL);
CREATE INDEX metrics_by_run_key ON metrics(run_id, key_id, step);
CREATE TRIGGER runs_delete_metrics AFTER DELETE ON runs BEGIN
  DELETE FROM metrics WHERE run_id = old.id;
END;
CREATE TABLE events(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  json TEXT NOT NULL,
  file_offset INTEGER NOT NULL,
  UNIQUE(run_id, rank, file_offset));
CREATE TABLE log_lines(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,
  file TEXT NOT NULL CHECK(file IN ('events','log')),
  file_offset INTEGER NOT NULL,
  text TEXT NOT NULL,
  UNIQUE(run_id, rank, file, file_offset));
CREATE TABLE hosts(
  alias TEXT PRIMARY KEY,
  hostname TEXT NOT NULL,
  port INTEGER NOT NULL DEFAULT 22,
  user TEXT NOT NULL DEFAULT '',
  fingerprint TEXT NOT NULL DEFAULT '',
  trusted_at REAL);
CREATE TABLE leases(
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  pid INTEGER NOT NULL,
  token TEXT NOT NULL,
  heartbeat REAL NOT NULL);
CREATE TABLE read_offsets(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,
  file TEXT NOT NULL CHECK(file IN ('events','log')),
  offset INTEGER NOT NULL,
  PRIMARY KEY(run_id, rank, file)) WITHOUT ROWID;
)sql";

// Version 2 (the live monitor): anomalies of the event streams (seq gaps and repeats, malformed
// lines), the host of a lease's pid (a pid is only checked for life on its own machine), and an
// index for "the last error event of a rank".
constexpr std::string_view kVersion2 = R"sql(
CREATE TABLE anomalies(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK(kind IN ('gap','repeat','malformed')),
  seq INTEGER NOT NULL,
  file_offset INTEGER NOT NULL,
  detail TEXT NOT NULL DEFAULT '');
CREATE INDEX anomalies_by_run ON anomalies(run_id, rank);
ALTER TABLE leases ADD COLUMN host TEXT NOT NULL DEFAULT '';
CREATE INDEX events_by_kind ON events(run_id, rank, kind, seq);
)sql";

// Version 3 (ingest speed, studies of a search):
// - metrics becomes one WITHOUT ROWID B-tree keyed by (run_id, key_id, step, rank): a row is
//   stored once instead of in a table and an index, and a curve is one range of the key. An
//   exact duplicate of (run, key, step, rank), which schema 2 allowed (a rank that re-emitted a
//   step after a resume), keeps its latest row (highest v2 id): the copy runs in id order per key
//   with INSERT OR REPLACE, as the writer's own INSERT OR REPLACE does from now on.
// - studies (one search each) and, on runs, the study a trial belongs to, its trial number (unique
//   in the study), its objective values (JSON array, NULL until known) and its attempt (retries of
//   the same trial number re-queue the same run). Deleting a study deletes its runs (and, through
//   the trigger, their metrics).
constexpr std::string_view kVersion3 = R"sql(
DROP TRIGGER runs_delete_metrics;
DROP INDEX metrics_by_run_key;
ALTER TABLE metrics RENAME TO metrics_v2;
CREATE TABLE metrics(
  run_id INTEGER NOT NULL,
  key_id INTEGER NOT NULL,
  step INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  value REAL,
  time REAL NOT NULL,
  PRIMARY KEY(run_id, key_id, step, rank)) WITHOUT ROWID;
INSERT OR REPLACE INTO metrics(run_id, key_id, step, rank, value, time)
  SELECT run_id, key_id, step, rank, value, time FROM metrics_v2
  ORDER BY run_id, key_id, step, rank, id;
DROP TABLE metrics_v2;
CREATE TRIGGER runs_delete_metrics AFTER DELETE ON runs BEGIN
  DELETE FROM metrics WHERE run_id = old.id;
END;
CREATE TABLE studies(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  experiment_id INTEGER REFERENCES experiments(id) ON DELETE SET NULL,
  config TEXT NOT NULL DEFAULT '',
  directions TEXT NOT NULL DEFAULT '[]',
  objectives TEXT NOT NULL DEFAULT '[]',
  sampler TEXT NOT NULL DEFAULT '',
  seed INTEGER,
  status TEXT NOT NULL DEFAULT 'running' CHECK(status IN ('running','complete','stopped')),
  created_at REAL NOT NULL,
  ended_at REAL,
  state TEXT NOT NULL DEFAULT '{}');
ALTER TABLE runs ADD COLUMN study_id INTEGER REFERENCES studies(id) ON DELETE CASCADE;
ALTER TABLE runs ADD COLUMN trial_number INTEGER;
ALTER TABLE runs ADD COLUMN objective_values TEXT;
ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX runs_by_study_trial ON runs(study_id, trial_number);
)sql";

// Version 4 (retries): a retried trial keeps its run id but starts its ranks again in a fresh
// run directory, with files that count bytes and seq from 0. So events, log lines, anomalies and
// read offsets are kept per attempt (the run's attempt when they were read): the retry's monitor
// reads on from its own offsets while the earlier attempts' rows stay readable. events and
// log_lines are rebuilt because their uniqueness now includes the attempt. run_log holds a random
// token of this run log, which remote run directories carry, so two run logs that both have a run
// 1 named "exp-1" never share a remote folder.
constexpr std::string_view kVersion4 = R"sql(
CREATE TABLE run_log(token TEXT NOT NULL);
INSERT INTO run_log(token) VALUES (lower(hex(randomblob(6))));
CREATE TABLE events_v4(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL DEFAULT 0,
  rank INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  json TEXT NOT NULL,
  file_offset INTEGER NOT NULL,
  UNIQUE(run_id, attempt, rank, file_offset));
INSERT INTO events_v4(id, run_id, rank, seq, kind, json, file_offset)
  SELECT id, run_id, rank, seq, kind, json, file_offset FROM events;
DROP INDEX events_by_kind;
DROP TABLE events;
ALTER TABLE events_v4 RENAME TO events;
CREATE INDEX events_by_kind ON events(run_id, attempt, rank, kind, seq);
CREATE TABLE log_lines_v4(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL DEFAULT 0,
  rank INTEGER NOT NULL,
  file TEXT NOT NULL CHECK(file IN ('events','log')),
  file_offset INTEGER NOT NULL,
  text TEXT NOT NULL,
  UNIQUE(run_id, attempt, rank, file, file_offset));
INSERT INTO log_lines_v4(id, run_id, rank, file, file_offset, text)
  SELECT id, run_id, rank, file, file_offset, text FROM log_lines;
DROP TABLE log_lines;
ALTER TABLE log_lines_v4 RENAME TO log_lines;
CREATE TABLE read_offsets_v4(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL DEFAULT 0,
  rank INTEGER NOT NULL,
  file TEXT NOT NULL CHECK(file IN ('events','log')),
  offset INTEGER NOT NULL,
  PRIMARY KEY(run_id, attempt, rank, file)) WITHOUT ROWID;
INSERT INTO read_offsets_v4(run_id, rank, file, offset)
  SELECT run_id, rank, file, offset FROM read_offsets;
DROP TABLE read_offsets;
ALTER TABLE read_offsets_v4 RENAME TO read_offsets;
ALTER TABLE anomalies ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 5 (sweeps steered from any process): what a user asked of a running sweep and of
// its trials, written by the GUI or the CLI and carried out by the process that runs the sweep.
// studies.control: 'run' (ask for trials), 'pause' (ask for none; running trials go on) or
// 'stop' (stop the running trials and end). runs.request: '' or 'prune' / 'stop' for a trial
// that is running; its sweep clears it once done.
constexpr std::string_view kVersion5 = R"sql(
ALTER TABLE studies ADD COLUMN control TEXT NOT NULL DEFAULT 'run'
  CHECK(control IN ('run','pause','stop'));
ALTER TABLE runs ADD COLUMN request TEXT NOT NULL DEFAULT '' CHECK(request IN ('','prune','stop'));
)sql";

// Version 6 (a sweep whose process died is seen as such): the process that runs a study's sweep
// (`shardscope-cli sweep`) stamps its pid, host and a heartbeat on the study every few seconds
// and clears them when it exits; a running study whose stamp is absent, stale or names a dead
// pid on this machine has no sweep process, and the dashboard offers to adopt it (start the
// sweep again, which reattaches its running trials). Several processes feeding one study each
// stamp it; any fresh stamp means the study is fed.
constexpr std::string_view kVersion6 = R"sql(
ALTER TABLE studies ADD COLUMN sweep_pid INTEGER;
ALTER TABLE studies ADD COLUMN sweep_host TEXT NOT NULL DEFAULT '';
ALTER TABLE studies ADD COLUMN sweep_heartbeat REAL;
)sql";

// Version 7 (one list per name): what a study is has its own column. An autotune's record was a
// study whose sampler column said "autotune", a name no sampler has; it becomes kind 'autotune'
// with no sampler.
constexpr std::string_view kVersion7 = R"sql(
ALTER TABLE studies ADD COLUMN kind TEXT NOT NULL DEFAULT 'search'
  CHECK(kind IN ('search','autotune'));
UPDATE studies SET kind = 'autotune', sampler = '' WHERE sampler = 'autotune';
)sql";

// Version 8 (no adoption across hosts or clocks): a run records the machine and boot that
// launched it (RunLifecycle::adoptOrphans adopts only its own host's runs), and a lease its
// holder's boot and its heartbeat on that boot's monotonic clock (backend/store/storeclock.h),
// so a jump of the wall clock never makes a live holder look dead and a holder of an earlier
// boot is known dead. Rows written before keep '' and NULL: their host is unknown.
constexpr std::string_view kVersion8 = R"sql(
ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE leases ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE leases ADD COLUMN beat_mono REAL;
)sql";

// Version 9 (living with hundreds of runs): tags and notes. A tag is a name (unique in the run
// log) with a colour ('#rrggbb', or '' for the palette's pick by name); run_tags and study_tags
// attach it to runs and to studies (a sweep or an autotune), and go with either side's row. A note
// is free text (plain or Markdown) on a run or a study; '' when none.
constexpr std::string_view kVersion9 = R"sql(
CREATE TABLE tags(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  color TEXT NOT NULL DEFAULT '');
CREATE TABLE run_tags(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  tag_id INTEGER NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
  PRIMARY KEY(run_id, tag_id)) WITHOUT ROWID;
CREATE INDEX run_tags_by_tag ON run_tags(tag_id);
CREATE TABLE study_tags(
  study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
  tag_id INTEGER NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
  PRIMARY KEY(study_id, tag_id)) WITHOUT ROWID;
CREATE INDEX study_tags_by_tag ON study_tags(tag_id);
ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT '';
ALTER TABLE studies ADD COLUMN note TEXT NOT NULL DEFAULT '';
)sql";

// Version 10 (disk and clean-up): a run can be archived, hidden from the default listings but
// kept with its files and rows; archived_at is when (unix seconds), NULL while it is not.
constexpr std::string_view kVersion10 = R"sql(
ALTER TABLE runs ADD COLUMN archived_at REAL;
)sql";

// Version 11 (human verdicts as data): a person's mark on one probe's answer (eval.probes) at one
// step of one run: 'good' or 'bad' (a cleared mark has no row), who marked it and when (unix
// seconds). A trial's good rate (good / marked) can be a search objective (probes.good_rate).
constexpr std::string_view kVersion11 = R"sql(
CREATE TABLE verdicts(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  probe TEXT NOT NULL,
  step INTEGER NOT NULL,
  verdict TEXT NOT NULL CHECK(verdict IN ('good','bad')),
  who TEXT NOT NULL DEFAULT '',
  marked_at REAL NOT NULL,
  PRIMARY KEY(run_id, probe, step)) WITHOUT ROWID;
)sql";

// Version 12 (groups): a user's named group of runs, beside sweeps (which are groups already). A
// run can be in several groups; run_group_members goes with either side's row, so deleting a
// group never deletes its runs, and deleting a run takes it out of its groups. created_at is unix
// seconds. ("groups" is a keyword of window frames on PostgreSQL, hence run_groups.)
constexpr std::string_view kVersion12 = R"sql(
CREATE TABLE run_groups(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_at REAL NOT NULL);
CREATE TABLE run_group_members(
  group_id INTEGER NOT NULL REFERENCES run_groups(id) ON DELETE CASCADE,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  PRIMARY KEY(group_id, run_id)) WITHOUT ROWID;
CREATE INDEX run_group_members_by_run ON run_group_members(run_id);
)sql";

// ------------------------------------------------------------------------------- PostgreSQL
// The same versions on a PostgreSQL server. Integers are BIGINT, times DOUBLE PRECISION, ids
// identity columns; JSON columns stay TEXT (queries cast to jsonb where they look inside).
// Most steps differ from SQLite's only in those types, and PostgreSQL's text of them is
// translated from SQLite's (postgresFromSqlite below); the steps written out here differ in more.
// "offset" and "user" are reserved words there, so they are quoted (SQLite accepts the quotes
// as well, and the shared statements use them). data_version (PostgreSQL only) counts commits:
// every write transaction bumps it, and readers poll it as SQLite's PRAGMA data_version.
constexpr std::string_view kPgVersion1 = R"sql(
CREATE TABLE schema_version(version BIGINT NOT NULL);
INSERT INTO schema_version(version) VALUES (0);
CREATE TABLE data_version(version BIGINT NOT NULL);
INSERT INTO data_version(version) VALUES (0);
CREATE TABLE experiments(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  name TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT '',
  toml TEXT NOT NULL DEFAULT '',
  created_at DOUBLE PRECISION NOT NULL);
CREATE TABLE runs(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  experiment_id BIGINT REFERENCES experiments(id) ON DELETE SET NULL,
  name TEXT NOT NULL UNIQUE,
  status TEXT NOT NULL CHECK(status IN ('queued','running','complete','stopped','pruned',
                                        'failed','oom','infeasible')),
  run_dir TEXT NOT NULL DEFAULT '',
  location TEXT NOT NULL DEFAULT '{}',
  params TEXT NOT NULL DEFAULT '{}',
  objective DOUBLE PRECISION,
  error TEXT NOT NULL DEFAULT '',
  created_at DOUBLE PRECISION NOT NULL,
  started_at DOUBLE PRECISION,
  ended_at DOUBLE PRECISION,
  world_size BIGINT NOT NULL DEFAULT 0);
CREATE INDEX runs_by_experiment ON runs(experiment_id);
CREATE TABLE params(
  run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(run_id, key));
CREATE TABLE metric_keys(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  name TEXT NOT NULL UNIQUE);
CREATE TABLE metrics(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  run_id BIGINT NOT NULL,
  step BIGINT NOT NULL,
  key_id BIGINT NOT NULL,
  value DOUBLE PRECISION,
  rank BIGINT NOT NULL,
  time DOUBLE PRECISION NOT NULL);
CREATE INDEX metrics_by_run_key ON metrics(run_id, key_id, step);
CREATE FUNCTION runs_delete_metrics() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM metrics WHERE run_id = OLD.id;
  RETURN OLD;
END $$;
CREATE TRIGGER runs_delete_metrics AFTER DELETE ON runs
  FOR EACH ROW EXECUTE FUNCTION runs_delete_metrics();
CREATE TABLE events(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank BIGINT NOT NULL,
  seq BIGINT NOT NULL,
  kind TEXT NOT NULL,
  json TEXT NOT NULL,
  file_offset BIGINT NOT NULL,
  CONSTRAINT events_unique UNIQUE(run_id, rank, file_offset));
CREATE TABLE log_lines(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank BIGINT NOT NULL,
  file TEXT NOT NULL CHECK(file IN ('events','log')),
  file_offset BIGINT NOT NULL,
  text TEXT NOT NULL,
  CONSTRAINT log_lines_unique UNIQUE(run_id, rank, file, file_offset));
CREATE TABLE hosts(
  alias TEXT PRIMARY KEY,
  hostname TEXT NOT NULL,
  port BIGINT NOT NULL DEFAULT 22,
  "user" TEXT NOT NULL DEFAULT '',
  fingerprint TEXT NOT NULL DEFAULT '',
  trusted_at DOUBLE PRECISION);
CREATE TABLE leases(
  run_id BIGINT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  pid BIGINT NOT NULL,
  token TEXT NOT NULL,
  heartbeat DOUBLE PRECISION NOT NULL);
CREATE TABLE read_offsets(
  run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank BIGINT NOT NULL,
  file TEXT NOT NULL CHECK(file IN ('events','log')),
  "offset" BIGINT NOT NULL,
  CONSTRAINT read_offsets_key PRIMARY KEY(run_id, rank, file));
)sql";

// As SQLite's step 3: metrics keyed by (run_id, key_id, step, rank), the latest of duplicates
// kept; studies; the trial columns of runs.
constexpr std::string_view kPgVersion3 = R"sql(
DROP INDEX metrics_by_run_key;
ALTER TABLE metrics RENAME TO metrics_v2;
CREATE TABLE metrics(
  run_id BIGINT NOT NULL,
  key_id BIGINT NOT NULL,
  step BIGINT NOT NULL,
  rank BIGINT NOT NULL,
  value DOUBLE PRECISION,
  time DOUBLE PRECISION NOT NULL,
  PRIMARY KEY(run_id, key_id, step, rank));
INSERT INTO metrics(run_id, key_id, step, rank, value, time)
  SELECT DISTINCT ON (run_id, key_id, step, rank) run_id, key_id, step, rank, value, time
  FROM metrics_v2 ORDER BY run_id, key_id, step, rank, id DESC;
DROP TABLE metrics_v2;
CREATE TABLE studies(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  experiment_id BIGINT REFERENCES experiments(id) ON DELETE SET NULL,
  config TEXT NOT NULL DEFAULT '',
  directions TEXT NOT NULL DEFAULT '[]',
  objectives TEXT NOT NULL DEFAULT '[]',
  sampler TEXT NOT NULL DEFAULT '',
  seed BIGINT,
  status TEXT NOT NULL DEFAULT 'running' CHECK(status IN ('running','complete','stopped')),
  created_at DOUBLE PRECISION NOT NULL,
  ended_at DOUBLE PRECISION,
  state TEXT NOT NULL DEFAULT '{}');
ALTER TABLE runs ADD COLUMN study_id BIGINT REFERENCES studies(id) ON DELETE CASCADE;
ALTER TABLE runs ADD COLUMN trial_number BIGINT;
ALTER TABLE runs ADD COLUMN objective_values TEXT;
ALTER TABLE runs ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX runs_by_study_trial ON runs(study_id, trial_number);
)sql";

// As SQLite's step 4: rows per attempt, and the run log's token.
constexpr std::string_view kPgVersion4 = R"sql(
CREATE TABLE run_log(token TEXT NOT NULL);
INSERT INTO run_log(token)
  VALUES (substr(md5(random()::text || clock_timestamp()::text), 1, 12));
ALTER TABLE events ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0;
ALTER TABLE events DROP CONSTRAINT events_unique;
ALTER TABLE events ADD CONSTRAINT events_unique UNIQUE(run_id, attempt, rank, file_offset);
DROP INDEX events_by_kind;
CREATE INDEX events_by_kind ON events(run_id, attempt, rank, kind, seq);
ALTER TABLE log_lines ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0;
ALTER TABLE log_lines DROP CONSTRAINT log_lines_unique;
ALTER TABLE log_lines ADD CONSTRAINT log_lines_unique
  UNIQUE(run_id, attempt, rank, file, file_offset);
ALTER TABLE read_offsets ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0;
ALTER TABLE read_offsets DROP CONSTRAINT read_offsets_key;
ALTER TABLE read_offsets ADD CONSTRAINT read_offsets_key PRIMARY KEY(run_id, attempt, rank, file);
ALTER TABLE anomalies ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0;
)sql";

// kSteps[i] takes a database from version i to i + 1.
constexpr std::array<std::string_view, kRunSchemaVersion> kSteps = {
    kVersion1, kVersion2, kVersion3, kVersion4,  kVersion5,  kVersion6,
    kVersion7, kVersion8, kVersion9, kVersion10, kVersion11, kVersion12};
// PostgreSQL's own text of step i, or empty where it is SQLite's translated.
constexpr std::array<std::string_view, kRunSchemaVersion> kPgSteps = {
    kPgVersion1, {}, kPgVersion3, kPgVersion4, {}, {}, {}, {}, {}, {}, {}, {}};

constexpr bool isWordChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

// SQLite's DDL in PostgreSQL's types, word by word: INTEGER becomes BIGINT (an INTEGER PRIMARY
// KEY, SQLite's rowid, an identity column), REAL becomes DOUBLE PRECISION, and WITHOUT ROWID
// (a storage choice PostgreSQL does not have) goes. Everything else is copied as it stands.
// Released steps go through it: a change here must leave their text as it was.
std::string postgresFromSqlite(std::string_view sql) {
  std::string out;
  std::size_t i = 0;
  while (i < sql.size()) {
    if (!isWordChar(sql[i])) {
      out += sql[i++];
      continue;
    }
    std::size_t end = i;
    while (end < sql.size() && isWordChar(sql[end])) ++end;
    const std::string_view word = sql.substr(i, end - i);
    const std::string_view rest = sql.substr(end);
    if (word == "INTEGER") {
      out +=
          rest.starts_with(" PRIMARY KEY") ? "BIGINT GENERATED BY DEFAULT AS IDENTITY" : "BIGINT";
    } else if (word == "REAL") {
      out += "DOUBLE PRECISION";
    } else if (word == "WITHOUT" && rest.starts_with(" ROWID")) {
      if (out.ends_with(' ')) out.pop_back();
      end += std::string_view(" ROWID").size();
    } else {
      out += word;
    }
    i = end;
  }
  return out;
}

std::string stepSql(const Db& db, int from) {
  const auto i = static_cast<std::size_t>(from);
  if (db.kind() != DbKind::postgres) return std::string(kSteps[i]);
  return kPgSteps[i].empty() ? postgresFromSqlite(kSteps[i]) : std::string(kPgSteps[i]);
}

Result<void> runStep(Db& db, int from) {
  // A transaction holds the write lock: a second process migrating at the same time waits, then
  // finds the step done.
  auto txn = db.transaction();
  if (!txn) return txn.error();
  // Re-read inside the write lock: another process may have migrated meanwhile.
  auto current = runSchemaVersion(db);
  if (!current) return current.error();
  if (*current != from) return ok();
  if (auto r = db.exec(stepSql(db, from)); !r) {
    return fail(r.message() + " (migrating the run log from schema " + std::to_string(from) +
                " to " + std::to_string(from + 1) + ")");
  }
  if (auto r = db.exec("UPDATE schema_version SET version = " + std::to_string(from + 1)); !r) {
    return r;
  }
  if (auto r = txn->commit(); !r) return r;
  qCInfo(lcRunSchema, "%s: schema %d -> %d", qPrintable(db.path()), from, from + 1);
  return ok();
}

}  // namespace

Result<int> runSchemaVersion(Db& db) {
  auto exists = db.hasTable("schema_version");
  if (!exists) return exists.error();
  if (!*exists) return 0;
  auto text = db.queryText("SELECT version FROM schema_version");
  if (!text) return text.error();
  return std::stoi(*text);
}

Result<void> migrateRunSchema(Db& db, int target) {
  if (target < 1 || target > kRunSchemaVersion) {
    return fail("run log schema " + std::to_string(target) + " does not exist (1.." +
                std::to_string(kRunSchemaVersion) + ")");
  }
  for (;;) {
    auto version = runSchemaVersion(db);
    if (!version) return version.error();
    if (*version > kRunSchemaVersion) {
      return fail(db.path().toStdString() + ": the run log has schema " + std::to_string(*version) +
                  " but this Shardscope reads up to " + std::to_string(kRunSchemaVersion) +
                  ": upgrade Shardscope, or choose another " +
                  (db.isPostgres() ? "database" : "file") + " with --db");
    }
    if (*version >= target) return ok();
    if (auto r = runStep(db, *version); !r) return r;
  }
}

}  // namespace shardscope::backend
