// Helper of tst_runstore_crash (and maker of the schema assets): ingests an events file into a
// run log as fast as it can, the way the monitor does, and prints "committed ID" after each
// chunk's COMMIT returned, where ID is the chunk's last event row ("replayed OFFSET" for a chunk
// the run log already held). The test kills it with
// SIGKILL at random moments and checks that every printed id survived.
//
//   store_crash_writer DB EVENTS_FILE         ingest into runs crash-0, crash-1, ... until killed
//   store_crash_writer --survive N DB EVENTS  ingest N runs, riding out failures as the monitor
//                                             does (prints "failed MESSAGE", reads the stored
//                                             offset again and goes on from there), then "done"
//   store_crash_writer --make-asset V PATH    write a small run log of schema version V
#include <QCoreApplication>
#include <QFile>
#include <QThread>

#include <cstdio>
#include <deque>
#include <string>

#include "backend/store/runschema.h"
#include "backend/store/runstore.h"
#include "backend/store/sqlitedb.h"
#include "spec/events.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

constexpr int kLinesPerChunk = 200;
constexpr std::size_t kInFlight = 4;  // chunks queued before the oldest one is awaited
constexpr int kMaxRuns = 1000;        // a writer that is never killed still ends

int die(const std::string& message) {
  std::fprintf(stderr, "store_crash_writer: %s\n", message.c_str());
  return 1;
}

// The chunk of `data` from `offset`: up to kLinesPerChunk complete lines, parsed.
FileChunk makeChunk(qint64 runId, const QByteArray& data, qint64 offset) {
  FileChunk chunk;
  chunk.runId = runId;
  chunk.startOffset = offset;
  qint64 at = offset;
  for (int n = 0; n < kLinesPerChunk && at < data.size(); ++n) {
    const qint64 end = data.indexOf('\n', at);
    if (end < 0) break;
    const QByteArray line = data.mid(at, end - at);
    auto event = spec::parse_event(std::string_view(line.constData(), line.size()));
    if (event) {
      chunk.events.push_back(
          {0, runId, 0, event->env.seq, QString::fromUtf8(spec::kind_name(event->body)), line, at});
      if (const auto* step = std::get_if<spec::StepEvent>(&event->body)) {
        chunk.metrics.push_back({runId, step->step, "loss", step->loss, 0, event->env.t});
        chunk.metrics.push_back({runId, step->step, "lr", step->lr, 0, event->env.t});
      }
    } else {
      chunk.logs.push_back({runId, 0, RankFile::events, at, QString::fromUtf8(line)});
    }
    at = end + 1;
  }
  chunk.endOffset = at;
  return chunk;
}

// The first run crash-N (N < runs) whose file is not fully ingested (created when missing).
Result<std::pair<qint64, qint64>> nextRun(RunStore& store, RunReader& reader, qint64 fileSize,
                                          int runs) {
  for (int n = 0; n < runs; ++n) {
    const QString name = QString("crash-%1").arg(n);
    auto run = reader.runByName(name);
    if (!run) return run.error();
    qint64 runId = 0;
    if (*run) {
      runId = (*run)->id;
    } else {
      auto created = store.createRun({std::nullopt, name, "", {}, 1}).get();
      if (!created) return created.error();
      runId = *created;
    }
    auto offset = reader.offset(runId, 0, RankFile::events);
    if (!offset) return offset.error();
    if (*offset < fileSize) return std::make_pair(runId, *offset);
  }
  return fail("every run is complete");
}

// --survive: how many failures in a row (the server down) before the writer gives up.
constexpr int kMaxFailuresInARow = 600;

void sleepMs(int ms) { QThread::msleep(static_cast<unsigned long>(ms)); }

// Waits for the oldest chunk in flight and prints its receipt; false (and `error`) on a failure.
bool awaitOldest(std::deque<RunStore::Pending<IngestReceipt>>& inFlight, std::string& error) {
  auto receipt = inFlight.front().get();
  inFlight.pop_front();
  if (!receipt) {
    error = receipt.message();
    return false;
  }
  // A chunk the run log already holds is not written again (applied false, no id). On a server
  // that happens when the killed writer's last COMMIT landed after this writer read the stored
  // offset: the server finished it although its client was gone.
  if (receipt->applied) {
    std::printf("committed %lld\n", static_cast<long long>(receipt->lastEventId));
  } else {
    std::printf("replayed %lld\n", static_cast<long long>(receipt->offset));
  }
  std::fflush(stdout);
  return true;
}

int ingestLoop(const QString& dbPath, const QString& eventsPath, int surviveRuns) {
  QFile file(eventsPath);
  if (!file.open(QIODevice::ReadOnly)) return die(eventsPath.toStdString() + ": cannot read");
  const QByteArray data = file.readAll();
  auto store = RunStore::open(dbPath);
  if (!store) return die(store.message());
  auto reader = (*store)->reader();
  if (!reader) return die(reader.message());
  std::printf("ready\n");
  std::fflush(stdout);
  std::deque<RunStore::Pending<IngestReceipt>> inFlight;
  int failuresInARow = 0;
  for (;;) {
    auto run = nextRun(**store, *reader, data.size(), surviveRuns > 0 ? surviveRuns : kMaxRuns);
    if (!run) {
      if (surviveRuns == 0 || run.message() == "every run is complete") break;
      if (++failuresInARow > kMaxFailuresInARow) return die(run.message());
      std::printf("failed %s\n", run.message().c_str());
      sleepMs(100);
      continue;
    }
    auto [runId, offset] = *run;
    bool failed = false;
    while (!failed && (offset < data.size() || !inFlight.empty())) {
      if (offset < data.size()) {
        FileChunk chunk = makeChunk(runId, data, offset);
        if (chunk.endOffset == offset) return die(eventsPath.toStdString() + ": no newline at end");
        offset = chunk.endOffset;
        inFlight.push_back((*store)->ingest(std::move(chunk)));
      }
      if (inFlight.size() >= kInFlight || offset >= data.size()) {
        std::string error;
        if (awaitOldest(inFlight, error)) {
          failuresInARow = 0;
          continue;
        }
        if (surviveRuns == 0) return die(error);
        // As the monitor after a refused chunk: what is still in flight finishes (each prints
        // what it did), and ingest goes on from the offset the run log holds.
        std::printf("failed %s\n", error.c_str());
        std::fflush(stdout);
        while (!inFlight.empty()) awaitOldest(inFlight, error);
        if (++failuresInARow > kMaxFailuresInARow) return die(error);
        sleepMs(100);
        failed = true;
      }
    }
  }
  std::printf("done\n");
  return 0;
}

// The rows of runs-v1.db (schema 1 and later): one of everything.
constexpr const char* kAssetRowsV1 = R"sql(
INSERT INTO experiments(id, name, source, toml, created_at) VALUES
  (1, 'demo', 'examples/demo.toml', '[train]\nlr = 0.001\n', 1760000000.0);
INSERT INTO runs(id, experiment_id, name, status, run_dir, location, params, objective, error,
                 created_at, started_at, ended_at, world_size) VALUES
  (1, 1, 'demo-1', 'complete', '/tmp/runs/demo-1', '{"kind":"local","worldSize":2}',
   '{"train.lr":0.001}', 0.25, '', 1760000000.0, 1760000001.0, 1760000060.0, 2),
  (2, 1, 'demo-2', 'oom', '/tmp/runs/demo-2', '{}', '{"train.lr":0.01}', NULL,
   'rank 1: CUDA out of memory', 1760000100.0, 1760000101.0, 1760000130.0, 2);
INSERT INTO params(run_id, key, value) VALUES (1, 'train.lr', '0.001'), (2, 'train.lr', '0.01');
INSERT INTO metric_keys(id, name) VALUES (1, 'loss'), (2, 'lr');
INSERT INTO metrics(run_id, step, key_id, value, rank, time) VALUES
  (1, 1, 1, 2.5, 0, 1760000002.0), (1, 2, 1, 1.25, 0, 1760000003.0),
  (1, 1, 2, 0.001, 0, 1760000002.0);
INSERT INTO events(run_id, rank, seq, kind, json, file_offset) VALUES
  (1, 0, 0, 'hello', '{"v":1,"ev":"hello","rank":0,"seq":0}', 0),
  (1, 0, 1, 'done', '{"v":1,"ev":"done","rank":0,"seq":1,"status":"complete"}', 40);
INSERT INTO log_lines(run_id, rank, file, file_offset, text) VALUES
  (2, 1, 'log', 0, 'CUDA out of memory. Tried to allocate 2.00 GiB');
INSERT INTO hosts(alias, hostname, port, user, fingerprint, trusted_at) VALUES
  ('gpu1', 'gpu1.example.org', 22, 'alice', 'SHA256:abc', 1760000000.0);
INSERT INTO leases(run_id, pid, token, heartbeat) VALUES (1, 4242, 'v1-token', 1760000050.0);
INSERT INTO read_offsets(run_id, rank, file, offset) VALUES (1, 0, 'events', 97);
)sql";

// Added in runs-v2.db (schema 2 and later): a live run with a leased host, anomalies, a NaN
// metric (NULL) and an exact duplicate of (run, key, step, rank), which schema 2 allowed: the
// v3 migration keeps the later row (value 0.75, time 1760000206.0).
constexpr const char* kAssetRowsV2 = R"sql(
INSERT INTO runs(id, experiment_id, name, status, run_dir, location, params, objective, error,
                 created_at, started_at, ended_at, world_size) VALUES
  (3, NULL, 'live-3', 'running', '/tmp/runs/live-3', '{"kind":"ssh","host":"gpu1"}',
   '{"train.lr":0.0003,"lora.r":16}', NULL, '', 1760000200.0, 1760000201.0, NULL, 2);
INSERT INTO params(run_id, key, value) VALUES (3, 'train.lr', '0.0003'), (3, 'lora.r', '16');
INSERT INTO metric_keys(id, name) VALUES (3, 'mem.peak');
INSERT INTO metrics(run_id, step, key_id, value, rank, time) VALUES
  (3, 1, 1, 3.0, 0, 1760000202.0), (3, 2, 1, NULL, 0, 1760000203.0),
  (3, 3, 1, 0.5, 0, 1760000204.0), (3, 3, 1, 0.75, 0, 1760000206.0),
  (3, 1, 3, 1048576, 0, 1760000202.0), (3, 1, 3, 2097152, 1, 1760000202.0);
INSERT INTO events(run_id, rank, seq, kind, json, file_offset) VALUES
  (3, 0, 0, 'hello', '{"v":1,"ev":"hello","rank":0,"seq":0}', 0),
  (3, 0, 2, 'step', '{"v":1,"ev":"step","rank":0,"seq":2,"step":1}', 40),
  (3, 1, 0, 'error', '{"v":1,"ev":"error","rank":1,"seq":0,"kind":"io"}', 0);
INSERT INTO log_lines(run_id, rank, file, file_offset, text) VALUES
  (3, 0, 'events', 90, 'not json'), (3, 1, 'log', 0, 'rank 1 starting');
INSERT INTO anomalies(run_id, rank, kind, seq, file_offset, detail) VALUES
  (3, 0, 'gap', 2, 40, 'expected seq 1'), (3, 0, 'malformed', -1, 90, 'not JSON');
INSERT INTO leases(run_id, pid, host, token, heartbeat) VALUES
  (3, 4343, 'login1', 'v2-token', 1760000250.0);
INSERT INTO read_offsets(run_id, rank, file, offset) VALUES
  (3, 0, 'events', 99), (3, 1, 'events', 52), (3, 1, 'log', 16);
)sql";

// Added in runs-v10.db (schema 10 and later): demo-2 archived, and a tag on demo-1 (schema 9).
constexpr const char* kAssetRowsV10 = R"sql(
UPDATE runs SET archived_at = 1760000300.0 WHERE id = 2;
INSERT INTO tags(id, name, color) VALUES (1, 'best', '#3aa55d');
INSERT INTO run_tags(run_id, tag_id) VALUES (1, 1);
)sql";

// Added in runs-v11.db (schema 11 and later): two verdicts on demo-1's probe answers at step 2.
constexpr const char* kAssetRowsV11 = R"sql(
INSERT INTO verdicts(run_id, probe, step, verdict, who, marked_at) VALUES
  (1, 'cat', 2, 'good', 'alice', 1760000400.0),
  (1, 'sum', 2, 'bad', 'alice', 1760000401.0);
)sql";

// Added in runs-v12.db (schema 12 and later): the group baseline holding demo-1 and demo-2, and
// the empty group later.
constexpr const char* kAssetRowsV12 = R"sql(
INSERT INTO run_groups(id, name, created_at) VALUES
  (1, 'baseline', 1760000500.0), (2, 'later', 1760000501.0);
INSERT INTO run_group_members(group_id, run_id) VALUES (1, 1), (1, 2);
)sql";

// A run log of schema `version` with one of everything, for tests/backend/store/assets/. The v2
// rows hold a duplicate metric key that schema 3 and later refuse: only assets 2 carry them.
int makeAsset(int version, const QString& path) {
  QFile::remove(path);
  auto db = openSqlite(path);
  if (!db) return die(db.message());
  if (auto r = migrateRunSchema(*db, version); !r) return die(r.message());
  if (auto r = db->exec(kAssetRowsV1); !r) return die(r.message());
  if (version == 2) {
    if (auto r = db->exec(kAssetRowsV2); !r) return die(r.message());
  }
  if (version >= 10) {
    if (auto r = db->exec(kAssetRowsV10); !r) return die(r.message());
  }
  if (version >= 11) {
    if (auto r = db->exec(kAssetRowsV11); !r) return die(r.message());
  }
  if (version >= 12) {
    if (auto r = db->exec(kAssetRowsV12); !r) return die(r.message());
  }
  if (auto r = db->exec("PRAGMA wal_checkpoint(TRUNCATE)"); !r) return die(r.message());
  if (auto r = db->exec("VACUUM"); !r) return die(r.message());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  const QStringList args = app.arguments();
  if (args.size() == 4 && args[1] == "--make-asset") return makeAsset(args[2].toInt(), args[3]);
  if (args.size() == 3) return ingestLoop(args[1], args[2], 0);
  if (args.size() == 5 && args[1] == "--survive" && args[2].toInt() > 0) {
    return ingestLoop(args[3], args[4], args[2].toInt());
  }
  return die(
      "usage: store_crash_writer DB EVENTS_FILE | --survive RUNS DB EVENTS_FILE | --make-asset "
      "VERSION PATH");
}
