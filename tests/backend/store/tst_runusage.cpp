// Device-hours and cost (backend/store/runusage.h): exact hours of runs with known times, the
// current attempt's started_at..ended_at (set in the run log by SQL) plus an earlier attempt's
// hello..done from its events, on GPUs when rank 0's hello named a CUDA device; a running run's
// hours up to now; the price of a run's host (saved and read back through the dashboard's
// settings). tst_runusage_pg runs the same statements against a PostgreSQL server.
#include <QJsonArray>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "backend/monitor/eventstream.h"
#include "backend/store/runstore.h"
#include "backend/store/runusage.h"
#include "spec/events.h"
#include "tests/support/teststore.h"

using namespace shardscope;
using backend::RunRecord;

namespace {

template <class T>
T ok(std::future<Result<T>> pending) {
  auto r = pending.get();
  if (!r) qFatal("fixture: %s", r.message().c_str());
  return *r;
}

void ok(std::future<Result<void>> pending) {
  auto r = pending.get();
  if (!r) qFatal("fixture: %s", r.message().c_str());
}

// Rank 0's events of one attempt: hello (on `device`) at `start`, done at `end` (< 0: none).
void ingestAttempt(backend::RunStore& store, qint64 runId, int attempt, const char* device,
                   double start, double end) {
  spec::HelloEvent hello;
  hello.world_size = 2;
  hello.device = spec::DeviceSummary{device, 0, "test device", 1 << 30, ""};
  QByteArray bytes =
      QByteArray::fromStdString(spec::encode_event({{1, 0, 0, start}, hello})) + '\n';
  if (end >= 0) {
    spec::DoneEvent done;
    done.status = spec::DoneStatus::stopped;
    bytes += QByteArray::fromStdString(spec::encode_event({{1, 0, 1, end}, done})) + '\n';
  }
  backend::EventStream stream;
  backend::FileChunk chunk = backend::parseEventsChunk(runId, bytes, stream);
  chunk.attempt = attempt;
  if (auto r = store.ingest(chunk).get(); !r) qFatal("ingest: %s", r.message().c_str());
}

}  // namespace

class TestRunUsage : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    qputenv("XDG_CONFIG_HOME", m_dir.filePath("config").toUtf8());
  }

  void hoursOfKnownTimes() {
    RunRecord run;
    run.worldSize = 4;
    run.status = spec::RunStatus::complete;
    run.startedAt = 1000;
    run.endedAt = 1000 + 5400;
    QCOMPARE(backend::usageOf(run, true, {}, 99999).hours, 6.0);  // 4 ranks x 1.5 h
    QCOMPARE(backend::usageOf(run, true, {{0, 0, 1800}}, 99999).hours, 8.0);
    run.status = spec::RunStatus::running;
    run.endedAt.reset();
    QCOMPARE(backend::usageOf(run, false, {}, 1000 + 900).hours, 1.0);
    run.startedAt.reset();
    QCOMPARE(backend::usageOf(run, false, {}, 1000 + 900).hours, 0.0);
    // As the runs table and `ls` print them: a short CPU run is not "0.000".
    QCOMPARE(backend::hoursText(12.34), QString("12.3"));
    QCOMPARE(backend::hoursText(1.25), QString("1.250"));
    QCOMPARE(backend::hoursText(0.00031), QString("0.00031"));
    QCOMPARE(backend::hoursText(0), QString("0.000"));
  }

  // A resumed run on 2 GPU ranks: attempt 0 ran 30 min (its events), attempt 1 one hour (its
  // row): 2 x 1.5 h = 3 GPU-hours. A run without a hello ran 15 min on 1 rank: 0.25 CPU-hours.
  void storedRunsAttemptsAndDevice() {
    const QString spec = testing::storeSpec(m_dir.path(), "usage.db");
    auto opened = backend::RunStore::open(spec);
    QVERIFY2(opened, opened ? "" : opened.message().c_str());
    auto& store = **opened;
    const qint64 a = ok(store.createRun({std::nullopt, "a", m_dir.filePath("a"), {}, 2}));
    ok(store.setRunLocation(a, QJsonObject{{"kind", "local"}, {"run_dir", m_dir.filePath("a")}}));
    ok(store.setRunStatus(a, spec::RunStatus::running));
    ingestAttempt(store, a, 0, "cuda", 1000, 1000 + 1800);
    ok(store.setRunStatus(a, spec::RunStatus::stopped));
    QCOMPARE(ok(store.beginResumedAttempt(a)), 1);
    ingestAttempt(store, a, 1, "cuda", 5000, -1);
    ok(store.setRunStatus(a, spec::RunStatus::complete));
    const qint64 b = ok(store.createRun({std::nullopt, "b", m_dir.filePath("b"), {}, 1}));
    ok(store.setRunStatus(b, spec::RunStatus::failed, "x"));
    store.flush();
    auto db = backend::Db::open(spec);
    QVERIFY(db);
    QVERIFY(db->exec("UPDATE runs SET started_at = 5000, ended_at = 8600 WHERE name = 'a'"));
    QVERIFY(db->exec("UPDATE runs SET started_at = 100, ended_at = 1000 WHERE name = 'b'"));

    auto reader = backend::RunReader::open(spec);
    QVERIFY(reader);
    auto runs = reader->listRuns();
    QVERIFY(runs);
    auto usage = backend::runUsage(*reader, *runs, 1e9);
    QVERIFY2(usage, usage ? "" : usage.message().c_str());
    QCOMPARE(usage->value(a).hours, 3.0);
    QVERIFY(usage->value(a).gpu);
    QCOMPARE(usage->value(b).hours, 0.25);
    QVERIFY(!usage->value(b).gpu);
    for (const RunRecord& run : *runs) {
      if (run.id == a) QCOMPARE(backend::usageHost(run), QString("local"));
      if (run.id == b) QCOMPARE(backend::usageHost(run), QString());
    }
    // One run alone (`show RUN`) reads only that run, with the same figures.
    for (const RunRecord& run : *runs) {
      if (run.id != a) continue;
      auto one = backend::runUsage(*reader, {run}, 1e9);
      QVERIFY2(one, one ? "" : one.message().c_str());
      QCOMPARE(one->size(), 1);
      QCOMPARE(one->value(a).hours, 3.0);
      QVERIFY(one->value(a).gpu);
    }
    auto none = backend::runUsage(*reader, {}, 1e9);
    QVERIFY(none && none->isEmpty());
  }

  void pricesPerHost() {
    backend::saveHostPrices({{"local", 2.5}, {"gpu-box", 0}, {"cluster", 4}});
    const backend::HostPrices prices = backend::loadHostPrices();
    QCOMPARE(prices, (backend::HostPrices{{"local", 2.5}, {"cluster", 4}}));
    const backend::RunUsage usage{3.0, true};
    QCOMPARE(backend::usageCost(usage, "local", prices).value_or(-1), 7.5);
    QVERIFY(!backend::usageCost(usage, "gpu-box", prices).has_value());
    RunRecord ssh;
    ssh.location = QJsonObject{{"kind", "ssh"}, {"hosts", QJsonArray{"cluster", "other"}}};
    QCOMPARE(backend::usageHost(ssh), QString("cluster"));
  }
};

QTEST_GUILESS_MAIN(TestRunUsage)
#include "tst_runusage.moc"
