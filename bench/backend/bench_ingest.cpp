// bench_ingest: how fast the run log takes metric rows (at 1, 100 and 1000 rows per call), the
// metrics table of schema 2 (rowid table + index) against schema 3 (one WITHOUT ROWID B-tree) on
// the same SQL path, how long listing 10k runs takes, and the peak RSS. Prints a table; not a test.
//   bench_ingest [FOLDER]   (default: a temporary folder; the files are removed afterwards)
// With SHARDSCOPE_TEST_DB set to a PostgreSQL server (postgresql://user@host:port, e.g. through
// tests/support/with_postgres.py), it first measures the same ingest on SQLite and on that server
// in one run, side by side (each PostgreSQL measure in a database of its own, dropped after):
//   python3 tests/support/with_postgres.py build/bin/bench_ingest
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>

#include <sys/resource.h>

#include <cstdio>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "backend/store/runschema.h"
#include "backend/store/runstore.h"
#include "backend/store/sqlitedb.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

constexpr qint64 kRowsPerRate = 1'000'000;
constexpr int kRunsToList = 10'000;

// User + system CPU seconds of the whole process (producer and writer threads).
double cpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Rows per wall second, and per CPU second (less sensitive to a loaded machine).
struct Rate {
  double wall = 0;
  double cpu = 0;
};

double peakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Rows per second when callers hand the store `batch` rows per appendMetrics call.
Result<Rate> ingestRate(const QString& path, int batch) {
  auto store = RunStore::open(path);
  if (!store) return store.error();
  auto run = (*store)->createRun({std::nullopt, QString("bench-%1").arg(batch), "", {}, 1}).get();
  if (!run) return run.error();
  const qint64 rows = batch == 1 ? kRowsPerRate / 10 : kRowsPerRate;
  const QString keys[] = {"loss", "lr", "grad_norm", "tokens_per_s"};
  std::vector<RunStore::Pending<void>> pending;
  pending.reserve(static_cast<std::size_t>(rows / batch));
  QElapsedTimer timer;
  timer.start();
  const double cpuStart = cpuSeconds();
  for (qint64 done = 0; done < rows; done += batch) {
    std::vector<MetricRow> chunk;
    chunk.reserve(static_cast<std::size_t>(batch));
    for (int i = 0; i < batch; ++i) {
      const qint64 n = done + i;
      chunk.push_back({*run, n / 4, keys[n % 4], 1.0 / double(n + 1), 0, 1.7e9});
    }
    pending.push_back((*store)->appendMetrics(std::move(chunk)));
  }
  for (auto& p : pending) {
    if (auto r = p.get(); !r) return r.error();
  }
  return Rate{double(rows) / (double(timer.nsecsElapsed()) / 1e9),
              double(rows) / (cpuSeconds() - cpuStart)};
}

// The metrics table of one schema, bare: rows bound into 64-row INSERTs in 1000-row
// transactions, as the writer does, without the store's queue (the table layout alone).
Result<Rate> layoutRate(const QString& path, int schema) {
  auto db = openSqlite(path);
  if (!db) return db.error();
  if (auto r = migrateRunSchema(*db, schema); !r) return r.error();
  if (auto r = db->exec("INSERT INTO runs(id, name, status, created_at) "
                        "VALUES (1, 'bench', 'running', 0)");
      !r)
    return r.error();
  std::string sql = schema >= 3 ? "INSERT OR REPLACE" : "INSERT";
  sql += " INTO metrics(run_id, step, key_id, value, rank, time) VALUES (?,?,?,?,?,?)";
  for (int i = 1; i < 64; ++i) sql += ",(?,?,?,?,?,?)";
  auto insert = db->prepare(sql);
  if (!insert) return insert.error();
  QElapsedTimer timer;
  timer.start();
  const double cpuStart = cpuSeconds();
  for (qint64 n = 0; n < kRowsPerRate;) {
    auto txn = db->transaction();
    if (!txn) return txn.error();
    for (int call = 0; call < 1000 / 64 + 1 && n < kRowsPerRate; ++call) {
      insert->reset();
      for (int i = 0; i < 64; ++i, ++n) {
        const int base = i * 6;
        if (!insert->bindInt64(base + 1, 1) || !insert->bindInt64(base + 2, n / 4) ||
            !insert->bindInt64(base + 3, n % 4 + 1) ||
            !insert->bindDouble(base + 4, 1.0 / (n + 1)) || !insert->bindInt64(base + 5, 0) ||
            !insert->bindDouble(base + 6, 1.7e9))
          return fail("bind failed");
      }
      if (auto r = insert->step(); !r) return r.error();
    }
    if (auto r = txn->commit(); !r) return r.error();
  }
  return Rate{double(kRowsPerRate) / (double(timer.nsecsElapsed()) / 1e9),
              double(kRowsPerRate) / (cpuSeconds() - cpuStart)};
}

// Rows per second through RunStore::ingest, as the monitor feeds it: chunks of 200 event lines
// (each with its step's two metric rows) and their new read offset, kChunksInFlight queued.
Result<Rate> chunkRate(const QString& spec) {
  constexpr int kChunks = 500;
  constexpr int kLines = 200;
  constexpr std::size_t kChunksInFlight = 4;
  auto store = RunStore::open(spec);
  if (!store) return store.error();
  auto run = (*store)->createRun({std::nullopt, "bench-chunks", "", {}, 1}).get();
  if (!run) return run.error();
  const QByteArray json = R"({"v":1,"ev":"step","rank":0,"seq":1,"t":1.7e9,"step":1,"loss":0.5})";
  std::deque<RunStore::Pending<IngestReceipt>> pending;
  QElapsedTimer timer;
  timer.start();
  const double cpuStart = cpuSeconds();
  qint64 offset = 0;
  qint64 rows = 0;
  for (int c = 0; c < kChunks; ++c) {
    FileChunk chunk;
    chunk.runId = *run;
    chunk.startOffset = offset;
    for (int i = 0; i < kLines; ++i) {
      const qint64 step = qint64(c) * kLines + i;
      chunk.events.push_back({0, *run, 0, step, "step", json, offset});
      chunk.metrics.push_back({*run, step, "loss", 1.0 / double(step + 1), 0, 1.7e9});
      chunk.metrics.push_back({*run, step, "lr", 1e-4, 0, 1.7e9});
      offset += json.size() + 1;
    }
    chunk.endOffset = offset;
    rows += qint64{3} * kLines;
    pending.push_back((*store)->ingest(std::move(chunk)));
    if (pending.size() > kChunksInFlight) {
      if (auto r = pending.front().get(); !r) return r.error();
      pending.pop_front();
    }
  }
  for (auto& p : pending) {
    if (auto r = p.get(); !r) return r.error();
  }
  return Rate{double(rows) / (double(timer.nsecsElapsed()) / 1e9),
              double(rows) / (cpuSeconds() - cpuStart)};
}

// SQLite and PostgreSQL in one run: the same measures, each on a fresh run log.
int compareStores(const QString& folder, const QString& server) {
  int databases = 0;
  auto freshPg = [&]() -> Result<QString> {
    auto admin = Db::open(server + "/postgres");
    if (!admin) return admin.error();
    const QString name =
        QString("bench_%1_%2").arg(QCoreApplication::applicationPid()).arg(databases++);
    if (auto r = admin->exec(("CREATE DATABASE " + name).toStdString()); !r) return r.error();
    return server + "/" + name;
  };
  std::printf("%-34s %14s %14s %14s %14s\n", "ingest (rows/s)", "SQLite wall", "SQLite CPU",
              "PostgreSQL wall", "PostgreSQL CPU");
  struct Measure {
    QString label;
    std::function<Result<Rate>(const QString&)> run;
  };
  const std::vector<Measure> measures = {
      {"metric rows, 1 per call", [](const QString& s) { return ingestRate(s, 1); }},
      {"metric rows, 100 per call", [](const QString& s) { return ingestRate(s, 100); }},
      {"metric rows, 1000 per call", [](const QString& s) { return ingestRate(s, 1000); }},
      {"ingest chunks (events+metrics)", [](const QString& s) { return chunkRate(s); }},
  };
  int i = 0;
  for (const Measure& m : measures) {
    auto lite = m.run(folder + QString("/compare-%1.db").arg(i++));
    auto pgSpec = freshPg();
    if (!pgSpec) {
      std::fprintf(stderr, "bench_ingest: %s\n", pgSpec.message().c_str());
      return 1;
    }
    auto pg = m.run(*pgSpec);
    if (!lite || !pg) {
      std::fprintf(stderr, "bench_ingest: %s\n", (!lite ? lite : pg).message().c_str());
      return 1;
    }
    std::printf("%-34s %14.0f %14.0f %14.0f %14.0f\n", qPrintable(m.label), lite->wall, lite->cpu,
                pg->wall, pg->cpu);
  }
  std::printf(
      "(CPU: this process's user+system seconds; the PostgreSQL server's own CPU is not "
      "counted)\n\n");
  return 0;
}

// Seconds to list every run after kRunsToList were created.
Result<double> listTime(const QString& path) {
  auto store = RunStore::open(path);
  if (!store) return store.error();
  std::vector<RunStore::Pending<qint64>> pending;
  for (int i = 0; i < kRunsToList; ++i) {
    const QJsonObject params{{"train.lr", 1e-4 * i}, {"lora.rank", 8}};
    pending.push_back(
        (*store)->createRun({std::nullopt, QString("run-%1").arg(i), "/runs/x", params, 2}));
  }
  for (auto& p : pending) {
    if (auto r = p.get(); !r) return r.error();
  }
  auto reader = (*store)->reader();
  if (!reader) return reader.error();
  QElapsedTimer timer;
  timer.start();
  auto runs = reader->listRuns();
  if (!runs) return runs.error();
  if (runs->size() != std::size_t(kRunsToList)) return fail("listed a wrong number of runs");
  return double(timer.nsecsElapsed()) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  QTemporaryDir temp;
  const QString folder = app.arguments().size() > 1 ? app.arguments().at(1) : temp.path();
  const QString server = qEnvironmentVariable("SHARDSCOPE_TEST_DB");
  if (!server.isEmpty()) {
    if (const int rc = compareStores(folder, server); rc != 0) return rc;
  }
  std::printf("%-34s %14s %14s\n", "measure", "value", "per CPU s");
  for (const int batch : {1, 100, 1000}) {
    auto rate = ingestRate(folder + QString("/ingest-%1.db").arg(batch), batch);
    if (!rate) {
      std::fprintf(stderr, "bench_ingest: %s\n", rate.message().c_str());
      return 1;
    }
    std::printf("%-34s %14.0f %14.0f\n",
                qPrintable(QString("metric rows/s, %1 per call").arg(batch)), rate->wall,
                rate->cpu);
  }
  Rate layouts[2];
  for (const int schema : {2, 3}) {
    auto rate = layoutRate(folder + QString("/layout-%1.db").arg(schema), schema);
    if (!rate) {
      std::fprintf(stderr, "bench_ingest: %s\n", rate.message().c_str());
      return 1;
    }
    layouts[schema - 2] = *rate;
    std::printf("%-34s %14.0f %14.0f\n",
                qPrintable(QString("metrics table v%1, bare rows/s").arg(schema)), rate->wall,
                rate->cpu);
  }
  std::printf("%-34s %14.2f %14.2f\n", "v3 / v2 bare table", layouts[1].wall / layouts[0].wall,
              layouts[1].cpu / layouts[0].cpu);
  auto list = listTime(folder + "/list.db");
  if (!list) {
    std::fprintf(stderr, "bench_ingest: %s\n", list.message().c_str());
    return 1;
  }
  std::printf("%-34s %14.1f\n", "list 10k runs, ms", *list * 1000);
  std::printf("%-34s %14.1f\n", "peak RSS, MiB", peakRssMiB());
  return 0;
}
