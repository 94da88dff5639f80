// RunStore on real SQLite files, and (the tst_runstore_pg variant, SHARDSCOPE_TEST_DB) on a real
// PostgreSQL server, the same checks on both: schema and migrations (with the schema-1 and schema-2
// assets), ingest idempotence, repeated metric rows, readers during writes, coalesced
// notifications, a full disk, leases, and studies with their trials (schema 3).
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTest>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <thread>

#include "backend/store/pgdb.h"
#include "backend/store/runschema.h"
#include "backend/store/runstore.h"
#include "tests/support/paths.h"
#include "tests/support/refusedrows.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;
using shardscope::testing::onPostgres;

namespace {

// A chunk of `lines` fake step events of rank 0 starting at byte `offset`, each line 10 bytes.
FileChunk stepChunk(qint64 runId, qint64 offset, int lines) {
  FileChunk chunk;
  chunk.runId = runId;
  chunk.startOffset = offset;
  for (int i = 0; i < lines; ++i) {
    const qint64 at = offset + 10LL * i;
    chunk.events.push_back({0, runId, 0, at / 10, "step", "{\"x\":123}", at});
    chunk.metrics.push_back({runId, at / 10, "loss", 1.0 / (1 + at), 0, 0.0});
  }
  chunk.endOffset = offset + 10LL * lines;
  return chunk;
}

// This machine's clocks, with the wall clock `jumpS` ahead and, when `boot` is set, another boot.
class ShiftedClock final : public StoreClock {
 public:
  ShiftedClock(double jumpS, QString boot) : m_jumpS(jumpS), m_boot(std::move(boot)) {}
  double wallNow() const override { return StoreClock::wallNow() + m_jumpS; }
  QString bootId() const override { return m_boot.isEmpty() ? StoreClock::bootId() : m_boot; }

 private:
  double m_jumpS;
  QString m_boot;
};

qint64 countRows(Db& db, const std::string& sql) {
  auto text = db.queryText(sql);
  return text ? std::stoll(*text) : -1;
}

}  // namespace

class TestRunStore : public QObject {
  Q_OBJECT

  // A new run log for one test: a file in m_dir, or a database on the PostgreSQL test server.
  QString spec(const QString& name) { return shardscope::testing::storeSpec(m_dir.path(), name); }

 private slots:
  void createsFileAndFolderAtDefaultPath();
  void freshSchemaIsCurrent();
  void sweepControlAndTrialRequests();
  void migratesSchemaOneAsset();
  void migratesSchemaTwoAsset();
  void refusesNewerSchema();
  void unreachableServerIsNamed();
  void failedMigrationStepLeavesNoTrace();
  void autotuneMarkerBecomesStudyKind();
  void oddBytesInLinesNeverStopIngest();
  void refusedIngestTakesItsNewMetricKeysWithIt();
  void placeholdersBecomeDollarNumbers();
  void droppedServerConnectionIsOpenedAgain();
  void repeatedMetricRowReplacesNeverFails();
  void runsAndStatuses();
  void ingestIsIdempotent();
  void lastStepsAndDataVersion();
  void metricOfRunsReadsManyRunsAtOnce();
  void lastAndBestOfAMetric();
  void readersSeeWholeTransactionsDuringWrites();
  void notificationsCoalesce();
  void fullDiskIsClearAndFileStaysSound();
  void leases();
  void leaseSurvivesAClockJump();
  void schemaEightRecordsHostAndBoot();
  void schemaNineAddsTagsAndNotesKeepingRows();
  void schemaTenArchivesAndDeletesRuns();
  void schemaTenAssetOpensWithItsArchivedRun();
  void schemaElevenStoresVerdicts();
  void schemaElevenAssetOpensWithItsVerdicts();
  void schemaTwelveGroupsRuns();
  void schemaTwelveAssetOpensWithItsGroups();
  void tagsAndNotesOfRunsAndStudies();
  void badTagsAndNotesAreRefusedWhole();
  void studies();
  void studyRejectsBadObjectives();
  void trialsAndObjectives();
  void concurrentWritersGetDistinctTrialNumbers();
  void deletingStudyDeletesItsRuns();
  void claimAndFinishTrials();
  void askLeaseGoesWithTheTrial();

 private:
  QTemporaryDir m_dir;
};

void TestRunStore::createsFileAndFolderAtDefaultPath() {
  if (onPostgres()) QSKIP("the default run log is a SQLite file");
  const QByteArray old = qgetenv("XDG_DATA_HOME");
  qputenv("XDG_DATA_HOME", (m_dir.path() + "/xdg").toUtf8());
  const QString path = RunStore::defaultPath();
  if (old.isNull())
    qunsetenv("XDG_DATA_HOME");
  else
    qputenv("XDG_DATA_HOME", old);
  QCOMPARE(path, m_dir.path() + "/xdg/shardscope/runs.db");
  QVERIFY(!QFile::exists(path));
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  QVERIFY(QFile::exists(path));
}

void TestRunStore::freshSchemaIsCurrent() {
  auto store = RunStore::open(spec("fresh.db"));
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  auto version = runSchemaVersion(reader->db());
  VERIFY_OK(version);
  QCOMPARE(*version, kRunSchemaVersion);
  for (const char* table : {"experiments", "runs", "params", "metrics", "events", "log_lines",
                            "hosts", "leases", "read_offsets", "anomalies", "schema_version",
                            "studies", "tags", "run_tags", "study_tags"}) {
    auto exists = reader->db().hasTable(table);
    VERIFY_OK(exists);
    QVERIFY2(*exists, table);
  }
  if (!onPostgres()) {
    QCOMPARE(QString::fromStdString(*reader->db().queryText("PRAGMA journal_mode")), "wal");
  }
}

// The asset was written by schema 1 (store_crash_writer --make-asset 1); it must open through
// the migration path in every later version with its rows intact.
void TestRunStore::migratesSchemaOneAsset() {
  if (onPostgres()) QSKIP("the asset is a SQLite file (freshSchemaIsCurrent migrates 0 -> 7)");
  const QString asset = shardscope::testing::sourceDir() + "/tests/backend/store/assets/runs-v1.db";
  const QString path = m_dir.filePath("v1.db");
  QVERIFY(QFile::copy(asset, path));
  QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner);
  {
    auto db = Db::open(path);
    VERIFY_OK(db);
    QCOMPARE(*runSchemaVersion(*db), 1);
  }
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
  QCOMPARE(QString::fromStdString(*reader->integrityCheck()), "ok");
  auto runs = reader->listRuns();
  VERIFY_OK(runs);
  QCOMPARE(runs->size(), std::size_t(2));
  const RunRecord& oom = runs->at(0);
  QCOMPARE(oom.name, "demo-2");
  QCOMPARE(oom.status, spec::RunStatus::oom);
  QCOMPARE(oom.error, "rank 1: CUDA out of memory");
  const RunRecord& done = runs->at(1);
  QCOMPARE(done.objective.value_or(-1), 0.25);
  QCOMPARE(done.location.value("kind").toString(), "local");
  auto loss = reader->metric(done.id, "loss");
  VERIFY_OK(loss);
  QCOMPARE(loss->size(), std::size_t(2));
  QCOMPARE(loss->at(1).value, 1.25);
  QCOMPARE(*reader->offset(done.id, 0, RankFile::events), 97);
  auto lease = reader->lease(done.id);
  VERIFY_OK(lease);
  QVERIFY(lease->has_value());
  QCOMPARE((*lease)->host, "");  // a v1 lease has no host column: the v2 default
  auto hosts = reader->hosts();
  QCOMPARE(hosts->at(0).fingerprint, "SHA256:abc");
  // The v2 table works on the migrated file.
  FileChunk chunk = stepChunk(done.id, 97, 1);
  chunk.anomalies.push_back({done.id, 0, Anomaly::Kind::gap, 5, 97, "expected seq 2"});
  VERIFY_OK((*store)->ingest(chunk).get());
  QCOMPARE(reader->anomalies(done.id)->size(), std::size_t(1));
}

void TestRunStore::refusesNewerSchema() {
  const QString path = spec("newer.db");
  { VERIFY_OK(RunStore::open(path)); }
  {
    auto db = Db::open(path);
    VERIFY_OK(db);
    VERIFY_OK(db->exec("UPDATE schema_version SET version = 99"));
  }
  auto store = RunStore::open(path);
  QVERIFY(!store);
  QVERIFY2(store.message().find("schema 99") != std::string::npos, store.message().c_str());
  QVERIFY2(store.message().find("upgrade Shardscope") != std::string::npos,
           store.message().c_str());
}

// A PostgreSQL URL that cannot connect names the host, the port and the cause (no server needed:
// nothing listens on port 1).
void TestRunStore::unreachableServerIsNamed() {
  const int port = 1;  // tcpmux: privileged, and nothing serves it here
  const QString url = QString("postgresql://shard:secret@127.0.0.1:%1/runs").arg(port);
  auto store = RunStore::open(url);
  QVERIFY(!store);
  const std::string& message = store.message();
  QVERIFY2(message.find("host 127.0.0.1") != std::string::npos, message.c_str());
  QVERIFY2(message.find("port " + std::to_string(port)) != std::string::npos, message.c_str());
  QVERIFY2(message.find("refused") != std::string::npos, message.c_str());
  QVERIFY2(message.find("secret") == std::string::npos, message.c_str());  // no password shown
  auto reader = RunReader::open(url);
  QVERIFY(!reader);
  QVERIFY2(reader.message().find("port " + std::to_string(port)) != std::string::npos,
           reader.message().c_str());
}

// A migration step runs in one transaction: one that fails halfway (here: step 3 meets a table
// named `studies` it means to create, after it rebuilt metrics) leaves the run log exactly at
// the previous version, and migrating again once the obstacle is gone completes.
void TestRunStore::failedMigrationStepLeavesNoTrace() {
  const QString path = spec("halfway.db");
  auto db = Db::open(path);
  VERIFY_OK(db);
  VERIFY_OK(migrateRunSchema(*db, 2));
  VERIFY_OK(db->exec("CREATE TABLE studies(x INTEGER)"));
  auto failed = migrateRunSchema(*db);
  QVERIFY(!failed);
  QVERIFY2(failed.message().find("from schema 2 to 3") != std::string::npos,
           failed.message().c_str());
  QCOMPARE(*runSchemaVersion(*db), 2);
  // Still the v2 metrics table (a rowid `id` column), not step 3's rebuilt one.
  {
    auto v2 = db->prepare("SELECT count(id) FROM metrics");
    VERIFY_OK(v2);
    VERIFY_OK(v2->step());
  }
  QVERIFY(!*db->hasTable("metrics_v2"));
  VERIFY_OK(db->exec("DROP TABLE studies"));
  VERIFY_OK(migrateRunSchema(*db));
  QCOMPARE(*runSchemaVersion(*db), kRunSchemaVersion);
}

// Schema 7 gives a study's kind its own column. Before it, an autotune's record was the study whose
// sampler said "autotune": the migration turns that row into kind autotune with no sampler, and
// leaves a search's row a search with its sampler.
void TestRunStore::autotuneMarkerBecomesStudyKind() {
  const QString path = spec("kind.db");
  {
    auto db = Db::open(path);
    VERIFY_OK(db);
    VERIFY_OK(migrateRunSchema(*db, 6));
    VERIFY_OK(
        db->exec("INSERT INTO studies(name, sampler, created_at) VALUES "
                 "('tune', 'autotune', 1), ('sweep', 'tpe', 2)"));
  }
  auto store = RunStore::open(path);  // migrates to the current schema
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
  auto tune = reader->studyByName("tune");
  VERIFY_OK(tune);
  QVERIFY(tune->has_value());
  QVERIFY((*tune)->kind == StudyKind::autotune);
  QCOMPARE((*tune)->sampler, QString());
  auto sweep = reader->studyByName("sweep");
  VERIFY_OK(sweep);
  QVERIFY(sweep->has_value());
  QVERIFY((*sweep)->kind == StudyKind::search);
  QCOMPARE((*sweep)->sampler, QStringLiteral("tpe"));
  // A new study keeps the kind it is created with, and the column refuses any other name.
  NewStudy fresh;
  fresh.name = "tune-2";
  fresh.objectives = {"tokens_per_s"};
  fresh.directions = {"maximize"};
  fresh.kind = StudyKind::autotune;
  VERIFY_OK((*store)->createStudy(fresh).get());
  auto again = reader->studyByName("tune-2");
  VERIFY_OK(again);
  QVERIFY(again->has_value() && (*again)->kind == StudyKind::autotune);
  auto writer = Db::open(path);
  VERIFY_OK(writer);
  auto refused = writer->exec("UPDATE studies SET kind = 'other' WHERE name = 'tune'");
  QVERIFY(!refused);
  QVERIFY2(refused.message().find("kind") != std::string::npos ||
               refused.message().find("CHECK") != std::string::npos ||
               refused.message().find("check") != std::string::npos,
           refused.message().c_str());
}

// An ingest refused inside its savepoint (here by a trigger installed from outside) takes the
// metric names it interned with it. Before, the batch still committed them as known, and every
// later row of that metric pointed at a key that did not exist: the run's curve was empty.
void TestRunStore::refusedIngestTakesItsNewMetricKeysWithIt() {
  const QString path = spec("keys.db");
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto run = (*store)->createRun({std::nullopt, "keys", "", {}, 1}).get();
  VERIFY_OK(run);
  VERIFY_OK(shardscope::testing::refuseMetricsOfStep7(path));
  FileChunk refused = stepChunk(*run, 0, 1);
  refused.metrics.front().step = 7;  // the first row of "loss": its key is new
  auto first = (*store)->ingest(refused).get();
  QVERIFY(!first.ok());
  QVERIFY2(first.message().find("step 7 refused") != std::string::npos, first.message().c_str());
  VERIFY_OK((*store)->ingest(stepChunk(*run, 0, 2)).get());
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  auto loss = reader->metric(*run, "loss");
  VERIFY_OK(loss);
  QCOMPARE(loss->size(), std::size_t(2));
}

// A rank's file may hold a NUL byte or bytes that are not UTF-8 (a crashed writer's garbage): the
// chunk is stored all the same, so the monitor's ingest never stalls on it. (PostgreSQL text
// cannot hold them as they are; it keeps U+FFFD in their place.)
void TestRunStore::oddBytesInLinesNeverStopIngest() {
  auto store = RunStore::open(spec("odd.db"));
  VERIFY_OK(store);
  auto run = (*store)->createRun({std::nullopt, "odd", "", {}, 1}).get();
  VERIFY_OK(run);
  FileChunk chunk = stepChunk(*run, 0, 2);
  const QByteArray garbage("gar\0ba\xff\xfege", 10);
  chunk.logs.push_back({*run, 0, RankFile::events, 20, QString::fromUtf8(garbage)});
  chunk.events.push_back({0, *run, 0, 9, "note", QByteArray("{\"t\":\"\xff\"}"), 30});
  chunk.endOffset = 40;
  auto receipt = (*store)->ingest(chunk).get();
  VERIFY_OK(receipt);
  QVERIFY(receipt->applied);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  auto lines = reader->logLines(*run, 0);
  VERIFY_OK(lines);
  QCOMPARE(lines->size(), std::size_t(1));
  QVERIFY(lines->front().text.startsWith("gar"));
  QVERIFY(lines->front().text.endsWith("ge"));
  QCOMPARE(*reader->eventCount(*run, 0), 3);
  QCOMPARE(*reader->offset(*run, 0, RankFile::events), 40);
}

// Statements are written once with SQLite's placeholders; libpq gets $N, and nothing inside a
// literal, a quoted name or a comment is touched.
void TestRunStore::placeholdersBecomeDollarNumbers() {
  int n = 0;
  QCOMPARE(toPostgresPlaceholders("SELECT ?1, ?2 WHERE a = ?1", &n),
           std::string("SELECT $1, $2 WHERE a = $1"));
  QCOMPARE(n, 2);
  QCOMPARE(toPostgresPlaceholders("VALUES (?,?),(?,?)", &n), std::string("VALUES ($1,$2),($3,$4)"));
  QCOMPARE(n, 4);
  QCOMPARE(
      toPostgresPlaceholders("SELECT '?1 it''s ?', \"a?\" -- ?3\n/* ?4 */ FROM t WHERE x = ?2", &n),
      std::string("SELECT '?1 it''s ?', \"a?\" -- ?3\n/* ?4 */ FROM t WHERE x = $2"));
  QCOMPARE(n, 2);
}

// A server connection that drops between transactions (a restarted server, a network blip) is
// opened again by the next write and the next read: neither fails, nothing stays broken.
void TestRunStore::droppedServerConnectionIsOpenedAgain() {
  if (!onPostgres()) QSKIP("a SQLite file has no connection to lose");
  const QString path = spec("dropped.db");
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto reader = RunReader::open(path);
  VERIFY_OK(reader);
  auto first = (*store)->createRun({std::nullopt, "before", "", {}, 1}).get();
  VERIFY_OK(first);
  {
    auto admin = Db::open(path);
    VERIFY_OK(admin);
    VERIFY_OK(
        admin->exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                    "datname = current_database() AND pid <> pg_backend_pid()"));
  }
  auto after = (*store)->createRun({std::nullopt, "after", "", {}, 1}).get();
  VERIFY_OK(after);
  auto runs = reader->listRuns();  // the reader's connection was dropped too
  VERIFY_OK(runs);
  QCOMPARE(runs->size(), std::size_t(2));
  QVERIFY(!reader->db().exec("CREATE TABLE x(a INTEGER)"));  // and it is still read-only
}

void TestRunStore::runsAndStatuses() {
  auto store = RunStore::open(spec("runs.db"));
  VERIFY_OK(store);
  auto exp = (*store)->createExperiment({0, "demo", "demo.toml", "[train]\n", 0}).get();
  VERIFY_OK(exp);
  const QJsonObject params{{"train.lr", 0.001}, {"shard.strategy", "full_shard"}};
  auto id = (*store)->createRun({*exp, "trial-1", "/runs/trial-1", params, 2}).get();
  VERIFY_OK(id);
  auto dup = (*store)->createRun({*exp, "trial-1", "/runs/x", {}, 2}).get();
  QVERIFY(!dup);
  QVERIFY2(dup.message().find("'trial-1' is taken") != std::string::npos, dup.message().c_str());
  VERIFY_OK((*store)->setRunStatus(*id, spec::RunStatus::running).get());
  VERIFY_OK((*store)->setRunLocation(*id, QJsonObject{{"kind", "local"}}).get());
  VERIFY_OK((*store)->setRunStatus(*id, spec::RunStatus::failed, "rank 1 exited", 0.5).get());
  auto missing = (*store)->setRunStatus(*id + 100, spec::RunStatus::failed).get();
  QVERIFY(!missing);
  auto reader = (*store)->reader();
  auto run = reader->runByName("trial-1");
  VERIFY_OK(run);
  QVERIFY(run->has_value());
  const RunRecord& r = **run;
  QCOMPARE(r.status, spec::RunStatus::failed);
  QCOMPARE(r.error, "rank 1 exited");
  QCOMPARE(r.objective.value_or(-1), 0.5);
  QVERIFY(r.startedAt && r.endedAt && *r.endedAt >= *r.startedAt);
  QCOMPARE(r.params, params);
  QCOMPARE(r.location.value("kind").toString(), "local");
  QCOMPARE(r.experimentId.value_or(-1), *exp);
  QCOMPARE(countRows(reader->db(), "SELECT count(*) FROM params WHERE value = '0.001'"), 1);
  QCOMPARE(countRows(reader->db(), "SELECT count(*) FROM params WHERE value = '\"full_shard\"'"),
           1);
}

void TestRunStore::lastStepsAndDataVersion() {
  const QString path = spec("laststeps.db");
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto a = (*store)->createRun({std::nullopt, "a", "", {}, 2}).get();
  auto b = (*store)->createRun({std::nullopt, "b", "", {}, 1}).get();
  auto c = (*store)->createRun({std::nullopt, "c", "", {}, 1}).get();
  VERIFY_OK(a);
  VERIFY_OK(b);
  VERIFY_OK(c);
  std::vector<MetricRow> rows;
  for (qint64 step = 0; step < 5; ++step) {
    for (int rank = 0; rank < 2; ++rank) rows.push_back({*a, step, "loss", 1.0, rank, 0.0});
  }
  for (qint64 step = 0; step < 3; ++step) rows.push_back({*b, step, "loss", 1.0, 0, 0.0});
  rows.push_back({*c, 9, "lr", 1e-3, 0, 0.0});
  VERIFY_OK((*store)->appendMetrics(std::move(rows)).get());

  // A reader of its own, as the dashboard's worker thread has.
  auto reader = RunReader::open(path);
  VERIFY_OK(reader);
  auto before = reader->dataVersion();
  VERIFY_OK(before);
  auto steps = reader->lastSteps("loss");
  VERIFY_OK(steps);
  QCOMPARE(steps->size(), 2);  // c has no loss
  QCOMPARE(steps->value(*a), 4);
  QCOMPARE(steps->value(*b), 2);
  QVERIFY(reader->lastSteps("no_such_metric")->isEmpty());
  QCOMPARE(*reader->dataVersion(), *before);  // nothing committed meanwhile

  VERIFY_OK((*store)->appendMetrics({{*b, 7, "loss", 0.5, 0, 0.0}}).get());
  QVERIFY(*reader->dataVersion() != *before);  // the writer's commit is seen
  QCOMPARE(reader->lastSteps("loss")->value(*b), 7);
}

// The sweep curves' read: one rank of one metric for many runs, each run's points in step order,
// only steps past afterStep, runs without the metric absent; more runs than one statement takes
// (500) come back whole.
void TestRunStore::metricOfRunsReadsManyRunsAtOnce() {
  const QString path = spec("manyruns.db");
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  QList<qint64> ids;
  std::vector<MetricRow> rows;
  for (int i = 0; i < 520; ++i) {
    auto run = (*store)->createRun({std::nullopt, QStringLiteral("r%1").arg(i), "", {}, 2}).get();
    VERIFY_OK(run);
    ids.append(*run);
    if (i == 7) continue;  // no loss at all
    for (qint64 step = 0; step < 3; ++step) {
      rows.push_back({*run, step, "loss", double(i) + 0.1 * double(step), 0, 0.0});
      rows.push_back({*run, step, "loss", -1.0, 1, 0.0});  // rank 1: never returned for rank 0
      rows.push_back({*run, step, "lr", 1e-3, 0, 0.0});
    }
  }
  VERIFY_OK((*store)->appendMetrics(std::move(rows)).get());
  auto reader = RunReader::open(path);
  VERIFY_OK(reader);

  auto all = reader->metricOfRuns(ids, "loss", 0);
  VERIFY_OK(all);
  QCOMPARE(all->size(), 519);
  QVERIFY(!all->contains(ids[7]));
  for (int i : {0, 499, 500, 519}) {
    const auto& points = all->value(ids[i]);
    QCOMPARE(points.size(), std::size_t(3));
    for (qint64 step = 0; step < 3; ++step) {
      QCOMPARE(points[std::size_t(step)].step, step);
      QCOMPARE(points[std::size_t(step)].rank, 0);
      QCOMPARE(points[std::size_t(step)].value, double(i) + 0.1 * double(step));
    }
  }
  auto later = reader->metricOfRuns({ids[1], ids[2]}, "loss", 1, 0);
  VERIFY_OK(later);
  QCOMPARE(later->value(ids[1]).size(), std::size_t(2));  // steps 1 and 2 of rank 1
  QCOMPARE(later->value(ids[1]).front().step, qint64(1));
  QCOMPARE(later->value(ids[1]).front().value, -1.0);
  QVERIFY(reader->metricOfRuns({}, "loss", 0)->isEmpty());
  QVERIFY(reader->metricOfRuns(ids, "no_such_metric", 0)->isEmpty());
}

void TestRunStore::ingestIsIdempotent() {
  auto store = RunStore::open(spec("ingest.db"));
  VERIFY_OK(store);
  auto run = (*store)->createRun({std::nullopt, "r", "", {}, 1}).get();
  VERIFY_OK(run);
  const FileChunk first = stepChunk(*run, 0, 50);
  auto applied = (*store)->ingest(first).get();
  VERIFY_OK(applied);
  QVERIFY(applied->applied);
  QCOMPARE(applied->offset, 500);
  QVERIFY(applied->lastEventId > 0);
  // A replay (a monitor that crashed before it saw the commit) stores nothing twice.
  auto replay = (*store)->ingest(first).get();
  VERIFY_OK(replay);
  QVERIFY(!replay->applied);
  QCOMPARE(replay->offset, 500);
  // A chunk that skips bytes (or overlaps) is refused, naming the stored offset.
  auto skip = (*store)->ingest(stepChunk(*run, 600, 5)).get();
  QVERIFY(!skip);
  QVERIFY2(skip.message().find("read up to byte 500") != std::string::npos, skip.message().c_str());
  auto overlap = (*store)->ingest(stepChunk(*run, 490, 5)).get();
  QVERIFY(!overlap);
  VERIFY_OK((*store)->ingest(stepChunk(*run, 500, 30)).get());
  auto reader = (*store)->reader();
  QCOMPARE(*reader->eventCount(*run, 0), 80);
  QCOMPARE(*reader->metricCount(*run), 80);
  QCOMPARE(*reader->offset(*run, 0, RankFile::events), 800);
  auto events = reader->events(*run, 0);
  VERIFY_OK(events);
  for (std::size_t i = 0; i < events->size(); ++i) QCOMPARE(events->at(i).offset, qint64(i) * 10);
  // The receipt names the first chunk's last event (its 50 rows go in as a multi-row insert and
  // single ones, each returning its ids).
  QCOMPARE(applied->lastEventId, events->at(49).id);
}

// A reader thread counts rows while the writer commits 1000-row jobs in batches: it never
// fails, never waits, and only ever sees whole jobs (a count divisible by 1000).
void TestRunStore::readersSeeWholeTransactionsDuringWrites() {
  auto store = RunStore::open(spec("readers.db"));
  VERIFY_OK(store);
  auto run = (*store)->createRun({std::nullopt, "r", "", {}, 1}).get();
  VERIFY_OK(run);
  std::atomic<bool> writing{true};
  std::string readerError;
  std::vector<qint64> seen;
  std::thread reader([&] {
    auto r = (*store)->reader();
    if (!r) {
      readerError = r.message();
      return;
    }
    while (writing.load()) {
      auto count = r->metricCount(*run);
      if (!count) {
        readerError = count.message();
        return;
      }
      seen.push_back(*count);
    }
  });
  constexpr int kJobs = 200;
  std::vector<RunStore::Pending<void>> pending;
  pending.reserve(kJobs);
  for (int job = 0; job < kJobs; ++job) {
    std::vector<MetricRow> rows;
    rows.reserve(1000);
    for (int i = 0; i < 1000; ++i) rows.push_back({*run, job * 1000 + i, "loss", 1.0, 0, 0.0});
    pending.push_back((*store)->appendMetrics(std::move(rows)));
  }
  for (auto& p : pending) VERIFY_OK(p.get());
  writing = false;
  reader.join();
  QVERIFY2(readerError.empty(), readerError.c_str());
  QVERIFY(!seen.empty());
  for (std::size_t i = 0; i < seen.size(); ++i) {
    QCOMPARE(seen[i] % 1000, 0);
    if (i > 0) QVERIFY(seen[i] >= seen[i - 1]);
  }
  QCOMPARE(*(*store)->reader()->metricCount(*run), kJobs * 1000);
}

// 300 commits while the event loop is busy become one signal of each kind per run.
void TestRunStore::notificationsCoalesce() {
  RunStore::Options options;
  options.flushIntervalMs = 0;  // every job its own transaction, as far as the writer can
  auto store = RunStore::open(spec("notify.db"), options);
  VERIFY_OK(store);
  auto a = (*store)->createRun({std::nullopt, "a", "", {}, 1}).get();
  auto b = (*store)->createRun({std::nullopt, "b", "", {}, 1}).get();
  VERIFY_OK(a);
  VERIFY_OK(b);
  QSignalSpy runs(store->get(), &RunStore::runsChanged);
  QSignalSpy metrics(store->get(), &RunStore::metricsAppended);
  QVERIFY(runs.wait(5000));  // the two createRun commits: one signal
  QCOMPARE(runs.count(), 1);
  runs.clear();
  for (int i = 0; i < 150; ++i) {
    VERIFY_OK((*store)->appendMetrics({{*a, i, "loss", 1.0, 0, 0.0}}).get());
    VERIFY_OK((*store)->appendMetrics({{*b, i, "loss", 1.0, 0, 0.0}}).get());
  }
  QVERIFY(metrics.wait(5000));
  QTest::qWait(3 * options.notifyIntervalMs);  // would let a second signal arrive
  QCOMPARE(metrics.count(), 2);
  QSet<qint64> announced{metrics.at(0).at(0).toLongLong(), metrics.at(1).at(0).toLongLong()};
  QCOMPARE(announced, (QSet<qint64>{*a, *b}));
  QCOMPARE(runs.count(), 0);  // metrics alone do not change the run list
}

void TestRunStore::fullDiskIsClearAndFileStaysSound() {
  if (onPostgres()) QSKIP("a full disk is simulated with SQLite's max_page_count");
  const QString path = m_dir.filePath("full.db");
  qint64 committed = 0;
  qint64 runId = 0;
  {
    RunStore::Options options;
    options.maxPageCount = 200;  // 200 pages of 4 KiB: fills after some thousands of rows
    auto store = RunStore::open(path, options);
    VERIFY_OK(store);
    auto run = (*store)->createRun({std::nullopt, "r", "", {}, 1}).get();
    VERIFY_OK(run);
    runId = *run;
    std::string error;
    for (int job = 0; job < 1000 && error.empty(); ++job) {
      std::vector<MetricRow> rows;
      rows.reserve(500);
      for (int i = 0; i < 500; ++i) rows.push_back({runId, job * 500 + i, "loss", 1.0, 0, 0.0});
      auto r = (*store)->appendMetrics(std::move(rows)).get();
      if (r)
        committed += 500;
      else
        error = r.message();
    }
    QVERIFY2(!error.empty(), "200 pages never filled up");
    QVERIFY2(error.find("full") != std::string::npos, error.c_str());
    QVERIFY2(error.find("free space") != std::string::npos, error.c_str());
    QVERIFY2(error.find(path.toStdString()) != std::string::npos, error.c_str());
  }
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(QString::fromStdString(*reader->integrityCheck()), "ok");
  QCOMPARE(*reader->metricCount(runId), committed);
  VERIFY_OK((*store)->appendMetrics({{runId, -1, "loss", 1.0, 0, 0.0}}).get());
  QCOMPARE(*reader->metricCount(runId), committed + 1);
}

void TestRunStore::leases() {
  auto store = RunStore::open(spec("lease.db"));
  VERIFY_OK(store);
  auto run = (*store)->createRun({std::nullopt, "r", "", {}, 1}).get();
  VERIFY_OK(run);
  const qint64 me = ::getpid();
  const LeaseRecord first{*run, me, "here", "first", 0};
  const LeaseRecord second{*run, me, "here", "second", 0};
  auto got = (*store)->acquireLease(first, 30).get();
  VERIFY_OK(got);
  QVERIFY(got->acquired && !got->tookOver);
  // A fresh, live holder keeps the run.
  auto refused = (*store)->acquireLease(second, 30).get();
  VERIFY_OK(refused);
  QVERIFY(!refused->acquired);
  QCOMPARE(refused->holder->token, "first");
  QCOMPARE(refused->holder->pid, me);
  auto renewed = (*store)->renewLease(first).get();
  VERIFY_OK(renewed);
  QVERIFY(*renewed);
  // A stale heartbeat is taken over (staleAfterS < 0: any heartbeat is stale).
  auto stale = (*store)->acquireLease(second, -1).get();
  VERIFY_OK(stale);
  QVERIFY(stale->acquired && stale->tookOver);
  auto lost = (*store)->renewLease(first).get();
  VERIFY_OK(lost);
  QVERIFY(!*lost);  // held by `second` now
  // A dead pid on this host is taken over at once, even with a fresh heartbeat.
  const LeaseRecord dead{*run, 999999999, "here", "dead", 0};
  VERIFY_OK((*store)->acquireLease(dead, -1).get());
  auto third = (*store)->acquireLease({*run, me, "here", "third", 0}, 30).get();
  VERIFY_OK(third);
  QVERIFY(third->acquired && third->tookOver);
  // ...but a pid on another host can only go stale.
  VERIFY_OK((*store)->acquireLease({*run, 999999999, "elsewhere", "remote", 0}, -1).get());
  auto fourth = (*store)->acquireLease({*run, me, "here", "fourth", 0}, 30).get();
  VERIFY_OK(fourth);
  QVERIFY(!fourth->acquired);
  VERIFY_OK((*store)->releaseLease({*run, 999999999, "elsewhere", "remote", 0}).get());
  QVERIFY(!(*store)->reader()->lease(*run)->has_value());
}

// A forward jump of this machine's wall clock (a day: NTP after a long suspend, `date -s`) does not
// make a live holder look dead: its heartbeat's age is measured on the monotonic clock of its boot
// (SQLite) or by the server's clock (PostgreSQL). A holder of an earlier boot of this host is dead.
void TestRunStore::leaseSurvivesAClockJump() {
  const QString path = spec("jump.db");
  auto holderStore = RunStore::open(path);
  VERIFY_OK(holderStore);
  auto run = (*holderStore)->createRun({std::nullopt, "r", "", {}, 1}).get();
  VERIFY_OK(run);
  const qint64 me = ::getpid();
  const LeaseRecord holder{*run, me, "here", "holder", 0};
  auto held = (*holderStore)->acquireLease(holder, 30).get();
  VERIFY_OK(held);
  QVERIFY(held->acquired);

  const ShiftedClock jumped(86400, {});
  RunStore::Options options;
  options.clock = &jumped;
  auto jumpedStore = RunStore::open(path, options);
  VERIFY_OK(jumpedStore);
  auto taken = (*jumpedStore)->acquireLease({*run, me, "here", "jumped", 0}, 30).get();
  VERIFY_OK(taken);
  QVERIFY2(!taken->acquired, "a wall clock a day ahead took the lease of a live holder");
  auto reader = (*jumpedStore)->reader();
  VERIFY_OK(reader);
  auto lease = reader->lease(*run);
  VERIFY_OK(lease);
  QVERIFY(lease->has_value());
  QVERIFY2(RunStore::leaseHolderAlive(**lease, "here", 30, jumped),
           qPrintable(QString("the holder looks dead, its heartbeat %1 s old")
                          .arg((*lease)->ageS.value_or(-1))));
  // The holder's heartbeats go on as before.
  auto renewed = (*holderStore)->renewLease(holder).get();
  VERIFY_OK(renewed);
  QVERIFY(*renewed);

  // The same host after a reboot: the holder's boot is over, its lease is taken over at once.
  const ShiftedClock rebooted(0, "another-boot");
  options.clock = &rebooted;
  auto bootedStore = RunStore::open(path, options);
  VERIFY_OK(bootedStore);
  auto after = (*bootedStore)->acquireLease({*run, me, "here", "after-boot", 0}, 30).get();
  VERIFY_OK(after);
  QVERIFY(after->acquired && after->tookOver);
}

// Schema 8: a run records the host and boot that launched it (setRunLocation), a lease its
// holder's boot; rows written by schema 7 keep '' (an unknown host).
void TestRunStore::schemaEightRecordsHostAndBoot() {
  const QString path = spec("v8.db");
  {
    auto db = Db::open(path);
    VERIFY_OK(db);
    VERIFY_OK(migrateRunSchema(*db, 7));
    VERIFY_OK(
        db->exec("INSERT INTO runs(name, status, run_dir, location, params, created_at) "
                 "VALUES ('old', 'running', '', '{\"kind\":\"local\"}', '{}', 1)"));
    VERIFY_OK(
        db->exec("INSERT INTO leases(run_id, pid, host, token, heartbeat) "
                 "SELECT id, 4242, 'here', 'v7', 1 FROM runs WHERE name = 'old'"));
  }
  auto store = RunStore::open(path);  // migrates 7 -> 8
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
  auto old = reader->runByName("old");
  VERIFY_OK(old);
  QVERIFY(old->has_value());
  QCOMPARE((*old)->host, QString());
  QCOMPARE((*old)->bootId, QString());
  auto oldLease = reader->lease((*old)->id);
  VERIFY_OK(oldLease);
  QVERIFY(oldLease->has_value());
  QCOMPARE((*oldLease)->bootId, QString());
  QCOMPARE((*oldLease)->host, "here");

  auto fresh = (*store)->createRun({std::nullopt, "new", "", {}, 1}).get();
  VERIFY_OK(fresh);
  VERIFY_OK((*store)->setRunLocation(*fresh, QJsonObject{{"kind", "local"}}).get());
  VERIFY_OK((*store)->acquireLease({*fresh, ::getpid(), "here", "v8", 0}, 30).get());
  auto record = reader->run(*fresh);
  VERIFY_OK(record);
  QVERIFY(record->has_value());
  QCOMPARE((*record)->host, QSysInfo::machineHostName());
  QVERIFY(!StoreClock::system().bootId().isEmpty());
  QCOMPARE((*record)->bootId, StoreClock::system().bootId());
  auto lease = reader->lease(*fresh);
  VERIFY_OK(lease);
  QCOMPARE((*lease)->bootId, StoreClock::system().bootId());
}

// Schema 9: a run log of schema 8 opens with its runs and studies intact, gains the tag tables and
// an empty note on each run and study, and takes tags and notes at once.
void TestRunStore::schemaNineAddsTagsAndNotesKeepingRows() {
  const QString path = spec("v9.db");
  {
    auto db = Db::open(path);
    VERIFY_OK(db);
    VERIFY_OK(migrateRunSchema(*db, 8));
    VERIFY_OK(
        db->exec("INSERT INTO runs(name, status, run_dir, location, params, created_at, host) "
                 "VALUES ('old', 'complete', '/tmp/old', '{}', '{\"lr\":0.1}', 1, 'box')"));
    VERIFY_OK(db->exec("INSERT INTO studies(name, sampler, created_at) VALUES ('sw', 'tpe', 2)"));
    auto tags = db->hasTable("tags");
    VERIFY_OK(tags);
    QVERIFY(!*tags);
  }
  auto store = RunStore::open(path);  // migrates 8 -> 9
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
  auto old = reader->runByName("old");
  VERIFY_OK(old);
  QVERIFY(old->has_value());
  QCOMPARE((*old)->runDir, "/tmp/old");
  QCOMPARE((*old)->host, "box");
  QCOMPARE((*old)->status, spec::RunStatus::complete);
  auto note = reader->note(TagOwner::run, (*old)->id);
  VERIFY_OK(note);
  QCOMPARE(note->value_or("absent"), QString());
  auto sweep = reader->studyByName("sw");
  VERIFY_OK(sweep);
  QVERIFY(sweep->has_value());
  QCOMPARE((*sweep)->sampler, "tpe");
  auto known = reader->knownTags();
  VERIFY_OK(known);
  QVERIFY(known->empty());

  VERIFY_OK((*store)->editTags(TagOwner::run, (*old)->id, {"best"}, {}).get());
  VERIFY_OK((*store)->editTags(TagOwner::study, (*sweep)->id, {"best", "lr-scan"}, {}).get());
  VERIFY_OK((*store)->setNote(TagOwner::study, (*sweep)->id, "# Sweep\nlr *only*").get());
  QCOMPARE(*reader->tags(TagOwner::run, (*old)->id), QStringList{"best"});
  QCOMPARE(*reader->tags(TagOwner::study, (*sweep)->id), (QStringList{"best", "lr-scan"}));
  QCOMPARE(reader->note(TagOwner::study, (*sweep)->id)->value_or(""), "# Sweep\nlr *only*");
}

// Schema 10: a run log of schema 9 opens with its runs intact and none archived; archiving stamps
// and clears archived_at; deleting a run takes every row that names it (params, metrics through
// the trigger, events, log lines, anomalies, lease, offsets, tag links) and nothing of the other
// run; a running run is refused, naming the fix.
void TestRunStore::schemaTenArchivesAndDeletesRuns() {
  const QString path = spec("v10.db");
  {
    auto db = Db::open(path);
    VERIFY_OK(db);
    VERIFY_OK(migrateRunSchema(*db, 9));
    VERIFY_OK(
        db->exec("INSERT INTO runs(name, status, run_dir, location, params, created_at, host) "
                 "VALUES ('old', 'complete', '/tmp/old', '{}', '{}', 1, 'box')"));
  }
  auto store = RunStore::open(path);  // migrates 9 -> 10
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
  auto old = reader->runByName("old");
  VERIFY_OK(old);
  QVERIFY(old->has_value());
  QVERIFY(!(*old)->archivedAt.has_value());
  QCOMPARE((*old)->host, "box");

  auto keep = (*store)->createRun({std::nullopt, "keep", "", {}, 1}).get();
  auto gone = (*store)->createRun({std::nullopt, "gone", "", {{"lr", 0.1}}, 1}).get();
  VERIFY_OK(keep);
  VERIFY_OK(gone);
  for (const qint64 id : {*keep, *gone}) {
    VERIFY_OK((*store)->ingest(stepChunk(id, 0, 5)).get());
    VERIFY_OK((*store)->editTags(TagOwner::run, id, {"best"}, {}).get());
    VERIFY_OK((*store)->acquireLease({id, ::getpid(), "here", "t", 0}, 30).get());
  }
  VERIFY_OK((*store)->setArchived(*gone, true).get());
  QVERIFY((*reader->run(*gone))->archivedAt.has_value());
  VERIFY_OK((*store)->setArchived(*gone, false).get());
  QVERIFY(!(*reader->run(*gone))->archivedAt.has_value());
  VERIFY_OK((*store)->setArchived(*gone, true).get());
  QVERIFY(!(*store)->setArchived(9999, true).get());
  const std::string id = std::to_string(*gone);
  // The rows the delete must take exist before it.
  for (const char* table : {"params", "metrics", "events", "leases", "read_offsets", "run_tags"}) {
    QVERIFY2(countRows(reader->db(),
                       std::string("SELECT count(*) FROM ") + table + " WHERE run_id = " + id) > 0,
             table);
  }

  VERIFY_OK((*store)->setRunStatus(*gone, spec::RunStatus::running).get());
  auto refused = (*store)->deleteRun(*gone).get();
  QVERIFY(!refused);
  QVERIFY2(refused.message().find("is running: stop it first") != std::string::npos,
           refused.message().c_str());
  VERIFY_OK((*store)->setRunStatus(*gone, spec::RunStatus::stopped).get());
  VERIFY_OK((*store)->deleteRun(*gone).get());
  QVERIFY(!reader->run(*gone)->has_value());
  for (const char* table : {"params", "metrics", "events", "log_lines", "anomalies", "leases",
                            "read_offsets", "run_tags"}) {
    QCOMPARE(countRows(reader->db(),
                       std::string("SELECT count(*) FROM ") + table + " WHERE run_id = " + id),
             0);
  }
  // The other run keeps every row.
  QCOMPARE(*reader->metricCount(*keep), 5);
  QCOMPARE(*reader->eventCount(*keep, 0), 5);
  QCOMPARE(*reader->tags(TagOwner::run, *keep), QStringList{"best"});
  QVERIFY(reader->lease(*keep)->has_value());
  QVERIFY(!(*store)->deleteRun(*gone).get());  // already gone
}

// The asset written by schema 10 (store_crash_writer --make-asset 10, see assets/README.md) opens
// through every later version with its archived run still archived, and a delete of that run
// takes its rows (its log line, params) and leaves demo-1's metrics and tag.
void TestRunStore::schemaTenAssetOpensWithItsArchivedRun() {
  if (onPostgres()) QSKIP("the asset is a SQLite file (schemaTenArchivesAndDeletesRuns runs here)");
  const QString asset =
      shardscope::testing::sourceDir() + "/tests/backend/store/assets/runs-v10.db";
  const QString path = m_dir.filePath("v10-asset.db");
  QVERIFY(QFile::copy(asset, path));
  QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner);
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
  auto archived = reader->runByName("demo-2");
  VERIFY_OK(archived);
  QCOMPARE((*archived)->archivedAt.value_or(0), 1760000300.0);
  auto kept = reader->runByName("demo-1");
  VERIFY_OK(kept);
  QVERIFY(!(*kept)->archivedAt.has_value());
  VERIFY_OK((*store)->deleteRun((*archived)->id).get());
  QCOMPARE(countRows(reader->db(), "SELECT count(*) FROM log_lines WHERE run_id = 2"), 0);
  QCOMPARE(countRows(reader->db(), "SELECT count(*) FROM params WHERE run_id = 2"), 0);
  QCOMPARE(*reader->metricCount((*kept)->id), 3);
  QCOMPARE(*reader->tags(TagOwner::run, (*kept)->id), QStringList{"best"});
  QCOMPARE(QString::fromStdString(*reader->integrityCheck()), "ok");
}

// Schema 11: a run log of schema 10 opens with its runs and no verdicts; a verdict is stored per
// (run, probe, step) with who and when, replaced by a later mark, cleared by nullopt; the counts
// and the good rate follow (none while nothing is marked); a mark on a run not in the run log, with
// no probe or a negative step is refused; deleting the run takes its verdicts.
void TestRunStore::schemaElevenStoresVerdicts() {
  const QString path = spec("v11.db");
  {
    auto db = Db::open(path);
    VERIFY_OK(db);
    VERIFY_OK(migrateRunSchema(*db, 10));
    VERIFY_OK(
        db->exec("INSERT INTO runs(name, status, run_dir, location, params, created_at) "
                 "VALUES ('old', 'complete', '/tmp/old', '{}', '{}', 1)"));
  }
  auto store = RunStore::open(path);  // migrates 10 -> 11
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
  auto old = reader->runByName("old");
  VERIFY_OK(old);
  QVERIFY(old->has_value());
  const qint64 id = (*old)->id;
  QVERIFY(reader->verdicts(id)->empty());
  QVERIFY(!reader->verdictCounts(id)->goodRate().has_value());

  VERIFY_OK((*store)->setVerdict(id, "cat", 10, Verdict::good, "alice").get());
  VERIFY_OK((*store)->setVerdict(id, "sum", 10, Verdict::bad, "alice").get());
  VERIFY_OK((*store)->setVerdict(id, "cat", 20, Verdict::bad, "alice").get());
  VERIFY_OK((*store)->setVerdict(id, "cat", 20, Verdict::good, "bob").get());  // replaces
  auto marks = reader->verdicts(id);
  VERIFY_OK(marks);
  QCOMPARE(marks->size(), std::size_t(3));
  QCOMPARE((*marks)[2].probe, "cat");
  QCOMPARE((*marks)[2].step, 20);
  QVERIFY((*marks)[2].verdict == Verdict::good);
  QCOMPARE((*marks)[2].who, "bob");
  QVERIFY((*marks)[2].markedAt > 1.7e9);
  auto counts = reader->verdictCounts(id);
  VERIFY_OK(counts);
  QCOMPARE(counts->good, 2);
  QCOMPARE(counts->bad, 1);
  QCOMPARE(counts->goodRate().value_or(-1), 2.0 / 3.0);
  VERIFY_OK((*store)->setVerdict(id, "sum", 10, std::nullopt, "alice").get());  // clears
  QCOMPARE(reader->verdictCounts(id)->goodRate().value_or(-1), 1.0);
  QCOMPARE(reader->verdictCounts()->value(id).good, 2);

  auto missing = (*store)->setVerdict(9999, "cat", 10, Verdict::good, "alice").get();
  QVERIFY(!missing);
  QVERIFY2(missing.message().find("run 9999 is not in the run log") != std::string::npos,
           missing.message().c_str());
  QVERIFY(!(*store)->setVerdict(id, "", 10, Verdict::good, "alice").get());
  QVERIFY(!(*store)->setVerdict(id, "cat", -1, Verdict::good, "alice").get());

  VERIFY_OK((*store)->deleteRun(id).get());
  QCOMPARE(
      countRows(reader->db(), "SELECT count(*) FROM verdicts WHERE run_id = " + std::to_string(id)),
      0);
}

// The asset written by schema 11 (store_crash_writer --make-asset 11, see assets/README.md) opens
// through every later version with demo-1's two verdicts (good on probe cat at step 2, bad on
// probe sum at step 2), which count as a good rate of 0.5.
void TestRunStore::schemaElevenAssetOpensWithItsVerdicts() {
  if (onPostgres()) QSKIP("the asset is a SQLite file (schemaElevenStoresVerdicts runs here)");
  const QString asset =
      shardscope::testing::sourceDir() + "/tests/backend/store/assets/runs-v11.db";
  const QString path = m_dir.filePath("v11-asset.db");
  QVERIFY(QFile::copy(asset, path));
  QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner);
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
  auto demo = reader->runByName("demo-1");
  VERIFY_OK(demo);
  auto marks = reader->verdicts((*demo)->id);
  VERIFY_OK(marks);
  QCOMPARE(marks->size(), std::size_t(2));
  QCOMPARE((*marks)[0].probe, "cat");
  QCOMPARE((*marks)[0].who, "alice");
  QCOMPARE(reader->verdictCounts((*demo)->id)->goodRate().value_or(-1), 0.5);
  QCOMPARE((*reader->runByName("demo-2"))->archivedAt.value_or(0), 1760000300.0);
}

// Schema 12: a run log of schema 11 opens with its runs and no groups; a group is created, filled,
// emptied, renamed and deleted, and a run can be in several; deleting a group leaves its runs,
// deleting a run takes it out of its groups; a bad or taken name, a missing group and a run not in
// the run log are refused with messages that name them, and a refused edit changes nothing.
void TestRunStore::schemaTwelveGroupsRuns() {
  const QString path = spec("v12.db");
  {
    auto db = Db::open(path);
    VERIFY_OK(db);
    VERIFY_OK(migrateRunSchema(*db, 11));
    VERIFY_OK(
        db->exec("INSERT INTO runs(name, status, run_dir, location, params, created_at) "
                 "VALUES ('old', 'complete', '/tmp/old', '{}', '{}', 1)"));
  }
  auto store = RunStore::open(path);  // migrates 11 -> 12
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
  QVERIFY(reader->groups()->empty());
  const qint64 old = (*reader->runByName("old"))->id;
  auto second = (*store)->createRun({std::nullopt, "new", "", {}, 1}).get();
  VERIFY_OK(second);

  auto made = (*store)->createGroup("baseline").get();
  VERIFY_OK(made);
  VERIFY_OK((*store)->editGroup("baseline", {old, *second}, {}).get());
  VERIFY_OK((*store)->editGroup("baseline", {old}, {}).get());  // already in: no error
  VERIFY_OK((*store)->editGroup("lr/1e-4", {old}, {}, RunStore::GroupMissing::create).get());
  auto groups = reader->groups();
  VERIFY_OK(groups);
  QCOMPARE(groups->size(), std::size_t(2));
  QCOMPARE((*groups)[0].name, "baseline");
  QCOMPARE((*groups)[0].id, *made);
  QCOMPARE((*groups)[0].runs, 2);
  QVERIFY((*groups)[0].createdAt > 1.7e9);
  QCOMPARE((*groups)[1].name, "lr/1e-4");
  QCOMPARE(*reader->groupRuns(*made), (std::vector<qint64>{old, *second}));
  QCOMPARE(reader->allGroups()->value(old), QStringList({"baseline", "lr/1e-4"}));
  QCOMPARE(reader->allGroups()->value(*second), QStringList({"baseline"}));

  VERIFY_OK((*store)->editGroup("baseline", {}, {*second}).get());
  QCOMPARE(*reader->groupRuns(*made), (std::vector<qint64>{old}));
  VERIFY_OK((*store)->renameGroup("baseline", "base").get());
  QVERIFY(!reader->group("baseline")->has_value());
  QCOMPARE((*reader->group("base"))->runs, 1);

  // Refusals name what is wrong and change nothing.
  auto taken = (*store)->createGroup("base").get();
  QVERIFY(!taken);
  QVERIFY2(taken.message().find("group 'base' already exists") != std::string::npos,
           taken.message().c_str());
  auto clash = (*store)->renameGroup("base", "lr/1e-4").get();
  QVERIFY2(!clash && clash.message().find("'lr/1e-4' already exists") != std::string::npos,
           clash.message().c_str());
  auto bad = (*store)->createGroup("-x").get();
  QVERIFY2(!bad && bad.message().find("group '-x' must start with a letter or a digit") !=
                       std::string::npos,
           bad.message().c_str());
  auto missing = (*store)->editGroup("nope", {old}, {}).get();
  QVERIFY2(!missing && missing.message().find("no group 'nope'") != std::string::npos,
           missing.message().c_str());
  QVERIFY(!reader->group("nope")->has_value());
  auto noRun = (*store)->editGroup("base", {*second, 9999}, {}).get();
  QVERIFY2(!noRun && noRun.message().find("run 9999 is not in the run log") != std::string::npos,
           noRun.message().c_str());
  QCOMPARE((*reader->group("base"))->runs, 1);  // the whole edit was refused

  // Deleting a group keeps its runs; deleting a run takes it out of its groups.
  VERIFY_OK((*store)->deleteGroup("base").get());
  QVERIFY(!reader->group("base")->has_value());
  QVERIFY(reader->runByName("old")->has_value());
  QVERIFY(!(*store)->deleteGroup("base").get());
  VERIFY_OK((*store)->deleteRun(old).get());
  QCOMPARE((*reader->group("lr/1e-4"))->runs, 0);
  QCOMPARE(countRows(reader->db(), "SELECT count(*) FROM run_group_members"), 0);
}

// The asset written by schema 12 (store_crash_writer --make-asset 12, see assets/README.md) opens
// through every later version with the group baseline (demo-1 and demo-2, one of them archived)
// and the empty group later.
void TestRunStore::schemaTwelveAssetOpensWithItsGroups() {
  if (onPostgres()) QSKIP("the asset is a SQLite file (schemaTwelveGroupsRuns runs here)");
  const QString asset =
      shardscope::testing::sourceDir() + "/tests/backend/store/assets/runs-v12.db";
  const QString path = m_dir.filePath("v12-asset.db");
  QVERIFY(QFile::copy(asset, path));
  QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner);
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
  auto groups = reader->groups();
  VERIFY_OK(groups);
  QCOMPARE(groups->size(), std::size_t(2));
  QCOMPARE((*groups)[0].name, "baseline");
  QCOMPARE((*groups)[0].runs, 2);
  QCOMPARE((*groups)[1].name, "later");
  QCOMPARE((*groups)[1].runs, 0);
  const qint64 demo1 = (*reader->runByName("demo-1"))->id;
  const qint64 demo2 = (*reader->runByName("demo-2"))->id;
  QCOMPARE(*reader->groupRuns((*groups)[0].id), (std::vector<qint64>{demo1, demo2}));
  QCOMPARE(reader->verdictCounts(demo1)->goodRate().value_or(-1), 0.5);
  QCOMPARE(QString::fromStdString(*reader->integrityCheck()), "ok");
}

// Tags added, removed and listed for runs and studies; colours by default from the palette and
// set by name; notes set and cleared; a deleted run takes its tag links with it.
void TestRunStore::tagsAndNotesOfRunsAndStudies() {
  const QString path = spec("tags.db");
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto a = (*store)->createRun({std::nullopt, "a", "", {}, 1}).get();
  auto b = (*store)->createRun({std::nullopt, "b", "", {}, 1}).get();
  VERIFY_OK(a);
  VERIFY_OK(b);
  auto study =
      (*store)->createStudy({"s", std::nullopt, "", {"loss"}, {"minimize"}, "tpe", 1, {}}).get();
  VERIFY_OK(study);
  QSignalSpy runsChanged(store->get(), &RunStore::runsChanged);

  VERIFY_OK((*store)->editTags(TagOwner::run, *a, {"best", "draft"}, {}).get());
  VERIFY_OK((*store)->editTags(TagOwner::run, *b, {"draft"}, {}).get());
  // Adding a tag twice and removing one the run lacks change nothing and fail nothing.
  VERIFY_OK((*store)->editTags(TagOwner::run, *b, {"draft"}, {"best"}).get());
  VERIFY_OK((*store)->editTags(TagOwner::study, *study, {"sweep1"}, {}).get());
  QVERIFY(runsChanged.wait(5000) || !runsChanged.isEmpty());

  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*reader->tags(TagOwner::run, *a), (QStringList{"best", "draft"}));
  QCOMPARE(*reader->tags(TagOwner::run, *b), QStringList{"draft"});
  auto all = reader->allTags(TagOwner::run);
  VERIFY_OK(all);
  QCOMPARE(all->size(), 2);
  QCOMPARE(all->value(*a), (QStringList{"best", "draft"}));
  auto known = reader->knownTags();
  VERIFY_OK(known);
  QCOMPARE(known->size(), std::size_t{3});
  QCOMPARE(known->at(0).name, "best");
  QCOMPARE(known->at(0).runs, 1);
  QCOMPARE(known->at(0).color, defaultTagColor("best"));
  QCOMPARE(known->at(1).name, "draft");
  QCOMPARE(known->at(1).runs, 2);
  QCOMPARE(known->at(2).name, "sweep1");
  QCOMPARE(known->at(2).studies, 1);
  QCOMPARE(known->at(2).runs, 0);

  // Removal; the tag stays known (its colour kept) with no run.
  VERIFY_OK((*store)->editTags(TagOwner::run, *a, {}, {"best"}).get());
  QCOMPARE(*reader->tags(TagOwner::run, *a), QStringList{"draft"});
  VERIFY_OK((*store)->setTagColor("best", "#AA0011").get());
  VERIFY_OK((*store)->setTagColor("fresh", "#00ff00").get());
  known = reader->knownTags();
  VERIFY_OK(known);
  QCOMPARE(known->size(), std::size_t{4});
  QCOMPARE(known->at(0).color, "#aa0011");
  QCOMPARE(known->at(0).runs, 0);
  QCOMPARE(known->at(2).name, "fresh");
  QCOMPARE(known->at(2).color, "#00ff00");

  // Notes: set, replaced, cleared; a study's apart from a run's.
  VERIFY_OK((*store)->setNote(TagOwner::run, *a, "lr too high?\n\n* try 1e-4").get());
  QCOMPARE(reader->note(TagOwner::run, *a)->value_or(""), "lr too high?\n\n* try 1e-4");
  QCOMPARE(reader->note(TagOwner::run, *b)->value_or("x"), QString());
  auto notes = reader->allNotes(TagOwner::run);
  VERIFY_OK(notes);
  QCOMPARE(notes->size(), 1);
  QCOMPARE(notes->value(*a), "lr too high?\n\n* try 1e-4");
  VERIFY_OK((*store)->setNote(TagOwner::run, *a, "").get());
  QVERIFY(reader->allNotes(TagOwner::run)->isEmpty());
  QCOMPARE(reader->note(TagOwner::run, *a)->value_or("x"), QString());
  QVERIFY(!reader->note(TagOwner::run, 9999)->has_value());

  // A deleted run takes its links; the tag stays.
  auto db = Db::open(path);
  VERIFY_OK(db);
  VERIFY_OK(db->exec("DELETE FROM runs WHERE name = 'b'"));
  QCOMPARE(countRows(*db, "SELECT count(*) FROM run_tags"), 1);
  QCOMPARE(countRows(*db, "SELECT count(*) FROM tags WHERE name = 'draft'"), 1);
}

// A bad name anywhere in one edit refuses the whole edit (no tag of it is stored), with the name
// and the rule in the message; a missing run, a bad colour and an over-long note are named.
void TestRunStore::badTagsAndNotesAreRefusedWhole() {
  auto store = RunStore::open(spec("badtags.db"));
  VERIFY_OK(store);
  auto run = (*store)->createRun({std::nullopt, "r", "", {}, 1}).get();
  VERIFY_OK(run);
  auto bad = (*store)->editTags(TagOwner::run, *run, {"good", "has space"}, {}).get();
  QVERIFY(!bad);
  QVERIFY2(bad.message().find("'has space'") != std::string::npos, bad.message().c_str());
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QVERIFY(reader->tags(TagOwner::run, *run)->isEmpty());
  QVERIFY(reader->knownTags()->empty());
  for (const QString& name : {QString("-lead"), QString("a:b"), QString(""), QString(65, 'x')}) {
    QVERIFY2(!checkTagName(name), qPrintable(name));
  }
  for (const QString& name :
       {QString("best"), QString("lr/1e-4"), QString("v1.2_x"), QString::fromUtf8("été")}) {
    QVERIFY2(checkTagName(name), qPrintable(name));
  }
  auto missing = (*store)->editTags(TagOwner::run, 4242, {"best"}, {}).get();
  QVERIFY(!missing);
  QVERIFY2(missing.message().find("run 4242 is not in the run log") != std::string::npos,
           missing.message().c_str());
  auto missingStudy = (*store)->setNote(TagOwner::study, 77, "x").get();
  QVERIFY(!missingStudy);
  QVERIFY2(missingStudy.message().find("study 77") != std::string::npos,
           missingStudy.message().c_str());
  auto colour = (*store)->setTagColor("best", "red").get();
  QVERIFY(!colour);
  QVERIFY2(colour.message().find("#rrggbb") != std::string::npos, colour.message().c_str());
  auto longNote = (*store)->setNote(TagOwner::run, *run, QString(kNoteMaxBytes + 1, 'n')).get();
  QVERIFY(!longNote);
  QVERIFY2(longNote.message().find("at most") != std::string::npos, longNote.message().c_str());
}

// The runs filter's last and best values: the value at the highest step (not the last written),
// the lowest value, rank 0 only, runs without the metric absent.
void TestRunStore::lastAndBestOfAMetric() {
  auto store = RunStore::open(spec("extremes.db"));
  VERIFY_OK(store);
  auto a = (*store)->createRun({std::nullopt, "a", "", {}, 1}).get();
  auto b = (*store)->createRun({std::nullopt, "b", "", {}, 1}).get();
  auto c = (*store)->createRun({std::nullopt, "c", "", {}, 1}).get();
  VERIFY_OK(a);
  VERIFY_OK(b);
  VERIFY_OK(c);
  VERIFY_OK((*store)
                ->appendMetrics({{*a, 3, "loss", 1.5, 0, 0.0},
                                 {*a, 1, "loss", 2.0, 0, 0.0},
                                 {*a, 2, "loss", 1.2, 0, 0.0},
                                 {*a, 4, "loss", 0.1, 1, 0.0},
                                 {*b, 1, "loss", 3.0, 0, 0.0},
                                 {*c, 1, "acc", 0.5, 0, 0.0}})
                .get());
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  auto values = reader->lastAndBest("loss");
  VERIFY_OK(values);
  QCOMPARE(values->size(), 2);
  QCOMPARE(values->value(*a).last, 1.5);
  QCOMPARE(values->value(*a).lowest, 1.2);
  QCOMPARE(values->value(*b).last, 3.0);
  QCOMPARE(values->value(*b).lowest, 3.0);
  QVERIFY(!values->contains(*c));
  auto none = reader->lastAndBest("nothing");
  VERIFY_OK(none);
  QVERIFY(none->isEmpty());
}

// The asset was written by schema 2 (store_crash_writer --make-asset 2, see assets/README.md): it
// opens through the v2 -> v3 -> v4 migrations with every row, and the duplicate metric row is
// reduced to the later one.
void TestRunStore::migratesSchemaTwoAsset() {
  if (onPostgres()) QSKIP("the asset is a SQLite file (freshSchemaIsCurrent migrates 0 -> 7)");
  const QString asset = shardscope::testing::sourceDir() + "/tests/backend/store/assets/runs-v2.db";
  const QString path = m_dir.filePath("v2.db");
  QVERIFY(QFile::copy(asset, path));
  QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner);
  {
    auto db = Db::open(path);
    VERIFY_OK(db);
    QCOMPARE(*runSchemaVersion(*db), 2);
    QCOMPARE(countRows(*db, "SELECT count(*) FROM metrics"), 9);
  }
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE(*runSchemaVersion(reader->db()), kRunSchemaVersion);
  QCOMPARE(QString::fromStdString(*reader->integrityCheck()), "ok");
  // v4: the rows of old runs belong to their first attempt; the file got its own token.
  QCOMPARE(countRows(reader->db(), "SELECT count(*) FROM events WHERE attempt <> 0"), 0);
  QCOMPARE(countRows(reader->db(), "SELECT count(*) FROM read_offsets WHERE attempt <> 0"), 0);
  auto token = reader->runLogToken();
  VERIFY_OK(token);
  QVERIFY2(QRegularExpression("^[0-9a-f]{12}$").match(*token).hasMatch(), qPrintable(*token));
  // One B-tree: no rowid, no second index.
  QVERIFY(!reader->db().prepare("SELECT rowid FROM metrics"));
  QCOMPARE(countRows(reader->db(),
                     "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                     "tbl_name = 'metrics'"),
           0);
  QCOMPARE(countRows(reader->db(), "SELECT count(*) FROM metrics"), 8);
  auto runs = reader->listRuns();
  VERIFY_OK(runs);
  QCOMPARE(runs->size(), std::size_t(3));
  const RunRecord& live = runs->at(0);
  QCOMPARE(live.name, "live-3");
  QCOMPARE(live.status, spec::RunStatus::running);
  QCOMPARE(live.params.value("lora.r").toInt(), 16);
  QVERIFY(!live.studyId && !live.trialNumber && !live.objectiveValues);
  QCOMPARE(live.attempt, 0);
  auto loss = reader->metric(live.id, "loss");
  VERIFY_OK(loss);
  QCOMPARE(loss->size(), std::size_t(3));
  QVERIFY(std::isnan(loss->at(1).value));  // stored as NULL
  QCOMPARE(loss->at(2).value, 0.75);       // the later of the two step-3 rows
  QCOMPARE(loss->at(2).time, 1760000206.0);
  auto peak = reader->metric(live.id, "mem.peak");
  QCOMPARE(peak->size(), std::size_t(2));
  QCOMPARE(peak->at(1).rank, 1);
  QCOMPARE(*reader->metricKeys(live.id), (QStringList{"loss", "mem.peak"}));
  QCOMPARE(reader->metric(runs->at(2).id, "loss")->size(), std::size_t(2));
  QCOMPARE(*reader->eventCount(live.id, 0), 2);
  QCOMPARE((*reader->lastEvent(live.id, 1, "error"))->seq, 0);
  QCOMPARE(reader->logLines(live.id, 0)->at(0).file, RankFile::events);
  QCOMPARE(reader->anomalies(live.id)->size(), std::size_t(2));
  QCOMPARE(*reader->offset(live.id, 1, RankFile::log), 16);
  QCOMPARE((*reader->lease(live.id))->host, "login1");
  QCOMPARE(reader->hosts()->size(), std::size_t(1));
  // The migrated file takes new rows, and a run's delete still takes its metrics (the trigger).
  VERIFY_OK((*store)->ingest(stepChunk(live.id, 99, 3)).get());
  QCOMPARE(*reader->metricCount(live.id), 5 + 3);
  auto db = Db::open(path);
  VERIFY_OK(db->exec("DELETE FROM runs WHERE name = 'demo-1'"));
  QCOMPARE(countRows(*db, "SELECT count(*) FROM metrics"), 8);
}

// A rank that re-emits steps (a resume) sends (run, key, step, rank) again: the batch never
// fails, the latest value wins, and no row is stored twice.
void TestRunStore::repeatedMetricRowReplacesNeverFails() {
  auto store = RunStore::open(spec("repeat.db"));
  VERIFY_OK(store);
  auto run = (*store)->createRun({std::nullopt, "r", "", {}, 1}).get();
  VERIFY_OK(run);
  VERIFY_OK((*store)
                ->appendMetrics({{*run, 1, "loss", 2.0, 0, 1.0},
                                 {*run, 2, "loss", 1.5, 0, 2.0},
                                 {*run, 1, "loss", 2.5, 0, 3.0}})
                .get());
  std::vector<MetricRow> many;
  many.reserve(200);
  for (int i = 0; i < 200; ++i) many.push_back({*run, i % 3, "loss", double(i), 0, 4.0});
  VERIFY_OK((*store)->appendMetrics(std::move(many)).get());  // more than one multi-row insert
  auto reader = (*store)->reader();
  auto loss = reader->metric(*run, "loss");
  VERIFY_OK(loss);
  QCOMPARE(loss->size(), std::size_t(3));
  QCOMPARE(loss->at(0).value, 198.0);
  QCOMPARE(loss->at(1).value, 199.0);
  QCOMPARE(loss->at(2).value, 197.0);
  QCOMPARE(*reader->metricCount(*run), 3);
}

void TestRunStore::studies() {
  auto store = RunStore::open(spec("studies.db"));
  VERIFY_OK(store);
  auto exp = (*store)->createExperiment({0, "sweep", "sweep.toml", "[search]\n", 0}).get();
  VERIFY_OK(exp);
  QSignalSpy changed(store->get(), &RunStore::studiesChanged);
  NewStudy study{"sweep",
                 *exp,
                 "[search]\nsampler = \"tpe\"\n",
                 {"eval.loss", "eval.accuracy"},
                 {"minimize", "maximize"},
                 "tpe",
                 42,
                 QJsonObject{{"startup", 10}}};
  auto id = (*store)->createStudy(study).get();
  VERIFY_OK(id);
  QVERIFY(changed.wait(5000));
  auto taken = (*store)->createStudy(study).get();
  QVERIFY(!taken);
  QVERIFY2(taken.message().find("'sweep' is taken") != std::string::npos, taken.message().c_str());
  VERIFY_OK(
      (*store)
          ->createStudy(
              {"other", std::nullopt, "", {"objective"}, {"minimize"}, "random", std::nullopt, {}})
          .get());
  auto reader = (*store)->reader();
  auto byName = reader->studyByName("sweep");
  VERIFY_OK(byName);
  QVERIFY(byName->has_value());
  const StudyRecord& s = **byName;
  QCOMPARE(s.id, *id);
  QCOMPARE(s.experimentId.value_or(-1), *exp);
  QCOMPARE(s.config, study.config);
  QCOMPARE(s.objectives, study.objectives);
  QCOMPARE(s.directions, study.directions);
  QCOMPARE(s.sampler, "tpe");
  QCOMPARE(s.seed.value_or(-1), 42);
  QCOMPARE(s.status, StudyStatus::running);
  QVERIFY(s.createdAt > 0 && !s.endedAt);
  QCOMPARE(s.state.value("startup").toInt(), 10);
  QVERIFY(!(*reader->studyByName("missing")).has_value());
  auto all = reader->listStudies();
  VERIFY_OK(all);
  QCOMPARE(all->size(), std::size_t(2));
  QCOMPARE(all->at(0).name, "other");  // newest first
  QVERIFY(!all->at(0).seed);
  VERIFY_OK((*store)->setStudyState(*id, QJsonObject{{"pending", QJsonArray{3, 4}}}).get());
  VERIFY_OK((*store)->setStudyStatus(*id, StudyStatus::stopped).get());
  auto stopped = reader->study(*id);
  VERIFY_OK(stopped);
  QCOMPARE((*stopped)->status, StudyStatus::stopped);
  QVERIFY((*stopped)->endedAt.has_value());
  QCOMPARE((*stopped)->state.value("pending").toArray().size(), 2);
  QVERIFY(!(*stopped)->state.contains("startup"));
  VERIFY_OK((*store)->setStudyStatus(*id, StudyStatus::running).get());  // resumed
  QVERIFY(!(*reader->study(*id))->endedAt);
  auto missing = (*store)->setStudyStatus(*id + 100, StudyStatus::complete).get();
  QVERIFY(!missing);
  QVERIFY2(missing.message().find("not in the run log") != std::string::npos,
           missing.message().c_str());
}

void TestRunStore::studyRejectsBadObjectives() {
  auto store = RunStore::open(spec("badstudy.db"));
  VERIFY_OK(store);
  auto mismatch =
      (*store)->createStudy({"a", std::nullopt, "", {"eval.loss"}, {}, "tpe", 1, {}}).get();
  QVERIFY(!mismatch);
  QVERIFY2(mismatch.message().find("search.objectives") != std::string::npos,
           mismatch.message().c_str());
  auto bad =
      (*store)->createStudy({"b", std::nullopt, "", {"eval.loss"}, {"lower"}, "tpe", 1, {}}).get();
  QVERIFY(!bad);
  QVERIFY2(bad.message().find("'lower'") != std::string::npos, bad.message().c_str());
  auto none = (*store)->createStudy({"c", std::nullopt, "", {}, {}, "tpe", 1, {}}).get();
  QVERIFY(!none);
  QVERIFY((*store)->reader()->listStudies()->empty());
}

// Schema v5: what a user asks of a running sweep (studies.control) and of one running trial
// (runs.request) is stored for the sweep's process to read; an ended trial takes no request.
void TestRunStore::sweepControlAndTrialRequests() {
  auto store = RunStore::open(spec("control.db"));
  VERIFY_OK(store);
  auto study =
      (*store)
          ->createStudy({"ctl", std::nullopt, "", {"eval.loss"}, {"minimize"}, "tpe", 1, {}})
          .get();
  VERIFY_OK(study);
  auto t0 = (*store)->createTrialRun({*study, std::nullopt, "", "", {}, 1}).get();
  auto t1 = (*store)->createTrialRun({*study, std::nullopt, "", "", {}, 1}).get();
  VERIFY_OK(t0);
  VERIFY_OK(t1);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  QCOMPARE((*reader->study(*study))->control, StudyControl::run);
  VERIFY_OK((*store)->setStudyControl(*study, StudyControl::pause).get());
  QCOMPARE((*reader->study(*study))->control, StudyControl::pause);
  QVERIFY(!(*store)->setStudyControl(*study + 7, StudyControl::stop).get());

  VERIFY_OK((*store)->setRunStatus(t0->runId, spec::RunStatus::running).get());
  VERIFY_OK((*store)->requestTrial(t0->runId, TrialRequest::prune).get());
  VERIFY_OK((*store)->setRunStatus(t1->runId, spec::RunStatus::complete).get());
  auto ended = (*store)->requestTrial(t1->runId, TrialRequest::stop).get();
  QVERIFY(!ended);
  QVERIFY2(ended.message().find("not a running trial") != std::string::npos,
           ended.message().c_str());
  auto requested = reader->requestedTrials(*study);
  VERIFY_OK(requested);
  QCOMPARE(requested->size(), std::size_t(1));
  QCOMPARE(requested->front().id, t0->runId);
  QCOMPARE(requested->front().request, TrialRequest::prune);
  VERIFY_OK((*store)->requestTrial(t0->runId, TrialRequest::none).get());
  QVERIFY(reader->requestedTrials(*study)->empty());
}

void TestRunStore::trialsAndObjectives() {
  auto store = RunStore::open(spec("trials.db"));
  VERIFY_OK(store);
  auto study = (*store)
                   ->createStudy({"lr",
                                  std::nullopt,
                                  "",
                                  {"eval.loss", "eval.accuracy"},
                                  {"minimize", "maximize"},
                                  "tpe",
                                  7,
                                  {}})
                   .get();
  VERIFY_OK(study);
  const QJsonObject p0{{"train.lr", 0.001}};
  auto t0 = (*store)->createTrialRun({*study, std::nullopt, "", "/runs/lr-0", p0, 2}).get();
  VERIFY_OK(t0);
  QCOMPARE(t0->number, 0);
  auto t1 = (*store)->createTrialRun({*study, std::nullopt, "", "", {{"train.lr", 0.01}}, 2}).get();
  VERIFY_OK(t1);
  QCOMPARE(t1->number, 1);
  auto t5 = (*store)->createTrialRun({*study, 5, "lr-five", "", {{"train.lr", 0.1}}, 2}).get();
  VERIFY_OK(t5);
  auto again = (*store)->createTrialRun({*study, 5, "lr-again", "", {}, 2}).get();
  QVERIFY(!again);
  QVERIFY2(again.message().find("already has trial 5") != std::string::npos,
           again.message().c_str());
  auto next = (*store)->createTrialRun({*study, std::nullopt, "", "", {}, 2}).get();
  VERIFY_OK(next);
  QCOMPARE(next->number, 6);  // after the highest number, never a reused one
  auto noStudy = (*store)->createTrialRun({*study + 9, std::nullopt, "", "", {}, 2}).get();
  QVERIFY(!noStudy);
  QVERIFY2(noStudy.message().find("not in the run log") != std::string::npos,
           noStudy.message().c_str());
  VERIFY_OK((*store)->setRunStatus(t0->runId, spec::RunStatus::complete).get());
  VERIFY_OK((*store)->setRunObjectives(t0->runId, {0.25, 0.9}).get());
  VERIFY_OK((*store)->setRunObjectives(t1->runId, {std::nan(""), 0.5}).get());
  QVERIFY(!(*store)->setRunObjectives(t0->runId + 100, {1.0}).get());
  auto reader = (*store)->reader();
  auto trials = reader->trials(*study);
  VERIFY_OK(trials);
  QCOMPARE(trials->size(), std::size_t(4));
  const RunRecord& first = trials->at(0);
  QCOMPARE(first.name, "lr-0");
  QCOMPARE(first.runDir, "/runs/lr-0");
  QCOMPARE(first.studyId.value_or(-1), *study);
  QCOMPARE(first.trialNumber.value_or(-1), 0);
  QCOMPARE(first.status, spec::RunStatus::complete);
  QCOMPARE(first.params, p0);
  QCOMPARE(first.objectiveValues.value_or(std::vector<double>{}), (std::vector<double>{0.25, 0.9}));
  QCOMPARE(first.attempt, 0);
  QCOMPARE(first.worldSize, 2);
  QVERIFY(std::isnan(trials->at(1).objectiveValues->at(0)));  // stored as null
  QCOMPARE(trials->at(1).objectiveValues->at(1), 0.5);
  QCOMPARE(trials->at(2).name, "lr-five");
  QCOMPARE(trials->at(2).status, spec::RunStatus::queued);
  QVERIFY(!trials->at(2).objectiveValues);  // not known yet
  QCOMPARE(countRows(reader->db(), "SELECT count(*) FROM params WHERE key = 'train.lr'"), 3);
  QCOMPARE(reader->listRuns()->size(), std::size_t(4));  // trials are runs
}

// Two writers (two processes' stores) asking for trials at once get distinct numbers: the next
// number is taken inside each writer's BEGIN IMMEDIATE transaction.
void TestRunStore::concurrentWritersGetDistinctTrialNumbers() {
  const QString path = spec("concurrent.db");
  auto a = RunStore::open(path);
  VERIFY_OK(a);
  auto b = RunStore::open(path);
  VERIFY_OK(b);
  auto study =
      (*a)->createStudy({"race", std::nullopt, "", {"objective"}, {"minimize"}, "random", 1, {}})
          .get();
  VERIFY_OK(study);
  constexpr int kEach = 40;
  std::vector<RunStore::Pending<TrialId>> pending;
  for (int i = 0; i < kEach; ++i) {
    pending.push_back((*a)->createTrialRun({*study, std::nullopt, "", "", {}, 1}));
    pending.push_back((*b)->createTrialRun({*study, std::nullopt, "", "", {}, 1}));
  }
  QSet<qint64> numbers;
  for (auto& p : pending) {
    auto id = p.get();
    VERIFY_OK(id);
    numbers.insert(id->number);
  }
  QCOMPARE(numbers.size(), 2 * kEach);
  QCOMPARE(*std::max_element(numbers.begin(), numbers.end()), 2 * kEach - 1);
}

// Deleting a study deletes its trials, their params and (through the trigger) their metrics;
// other runs stay.
void TestRunStore::deletingStudyDeletesItsRuns() {
  const QString path = spec("cascade.db");
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto study =
      (*store)
          ->createStudy({"gone", std::nullopt, "", {"objective"}, {"minimize"}, "tpe", 1, {}})
          .get();
  VERIFY_OK(study);
  auto trial = (*store)->createTrialRun({*study, std::nullopt, "", "", {{"x", 1}}, 1}).get();
  VERIFY_OK(trial);
  auto other = (*store)->createRun({std::nullopt, "kept", "", {{"x", 2}}, 1}).get();
  VERIFY_OK(other);
  VERIFY_OK((*store)
                ->appendMetrics(
                    {{trial->runId, 1, "loss", 1.0, 0, 0.0}, {*other, 1, "loss", 2.0, 0, 0.0}})
                .get());
  auto db = Db::open(path);
  VERIFY_OK(db);
  VERIFY_OK(db->exec("DELETE FROM studies WHERE name = 'gone'"));
  QCOMPARE(countRows(*db, "SELECT count(*) FROM runs"), 1);
  QCOMPARE(countRows(*db, "SELECT count(*) FROM params"), 1);
  QCOMPARE(countRows(*db, "SELECT count(*) FROM metrics"), 1);
  QCOMPARE(countRows(*db, "SELECT count(*) FROM metrics WHERE run_id = " + std::to_string(*other)),
           1);
}

// startTrialRun, claimTrial (enqueued first, then failed ones with attempts left) and
// finishTrial (once only) of the Study's ask/tell.
void TestRunStore::claimAndFinishTrials() {
  auto store = RunStore::open(spec("claim.db"));
  VERIFY_OK(store);
  auto study =
      (*store)
          ->createStudy({"claim", std::nullopt, "", {"objective"}, {"minimize"}, "tpe", 1, {}})
          .get();
  VERIFY_OK(study);
  auto asked = (*store)->startTrialRun({*study, std::nullopt, "", "", {{"x", 1}}, 1}).get();
  VERIFY_OK(asked);
  auto queued = (*store)->createTrialRun({*study, std::nullopt, "", "", {{"x", 2}}, 1}).get();
  VERIFY_OK(queued);
  auto reader = (*store)->reader();
  QCOMPARE((*reader->run(asked->runId))->status, spec::RunStatus::running);
  QVERIFY((*reader->run(asked->runId))->startedAt);
  // The queued (enqueued) trial is claimed once; the asked one is not claimable.
  auto claim = (*store)->claimTrial(*study, 1).get();
  VERIFY_OK(claim);
  QVERIFY(*claim);
  QCOMPARE((*claim)->number, queued->number);
  QVERIFY(!*(*store)->claimTrial(*study, 1).get());
  // A failed trial comes back (attempt + 1, values and metrics cleared) until the limit.
  VERIFY_OK((*store)->appendMetrics({{asked->runId, 1, "objective", 3.0, 0, 0.0}}).get());
  VERIFY_OK((*store)->finishTrial(asked->runId, spec::RunStatus::failed, {3.0}, "boom").get());
  auto twice = (*store)->finishTrial(asked->runId, spec::RunStatus::complete, {1.0}).get();
  QVERIFY(!twice);
  QVERIFY2(twice.message().find("told once") != std::string::npos, twice.message().c_str());
  auto retry = (*store)->claimTrial(*study, 1).get();
  VERIFY_OK(retry);
  QCOMPARE((*retry)->runId, asked->runId);
  const RunRecord run = **reader->run(asked->runId);
  QCOMPARE(run.status, spec::RunStatus::running);
  QCOMPARE(run.attempt, 1);
  QVERIFY(!run.objectiveValues);
  QVERIFY(!run.endedAt);
  QCOMPARE(run.error, "boom");  // why the last attempt failed stays visible
  QCOMPARE(*reader->metricCount(asked->runId), 0);
  VERIFY_OK((*store)->finishTrial(asked->runId, spec::RunStatus::failed, {}, "again").get());
  QVERIFY(!*(*store)->claimTrial(*study, 1).get());  // attempt 1 is the limit
  VERIFY_OK((*store)->finishTrial(queued->runId, spec::RunStatus::complete, {0.5}).get());
  const RunRecord done = **reader->run(queued->runId);
  QCOMPARE(done.status, spec::RunStatus::complete);
  QCOMPARE(done.objective.value_or(-1), 0.5);
  QCOMPARE(done.objectiveValues.value_or(std::vector<double>{}), std::vector<double>{0.5});
  QVERIFY(done.endedAt);
}

// A claimed or started trial and its asker's lease are one transaction: a lease the run log
// refuses leaves the trial as it was (queued, or not there), never running without a lease. A
// call made again with the same lease (its answer was lost) gets the trial the first call took,
// not a second one. On the old store the lease was a separate write after the claim.
void TestRunStore::askLeaseGoesWithTheTrial() {
  const QString path = spec("asklease.db");
  auto store = RunStore::open(path);
  VERIFY_OK(store);
  auto study =
      (*store)
          ->createStudy({"lease", std::nullopt, "", {"objective"}, {"minimize"}, "tpe", 1, {}})
          .get();
  VERIFY_OK(study);
  auto first = (*store)->createTrialRun({*study, std::nullopt, "", "", {{"x", 1}}, 1}).get();
  VERIFY_OK(first);
  auto second = (*store)->createTrialRun({*study, std::nullopt, "", "", {{"x", 2}}, 1}).get();
  VERIFY_OK(second);
  {
    // A real refusal of the lease's insert, by the database itself.
    auto db = Db::open(path);
    VERIFY_OK(db);
    VERIFY_OK(onPostgres()
                  ? db->exec("CREATE FUNCTION refuse_lease() RETURNS trigger LANGUAGE plpgsql AS "
                             "$$ BEGIN IF NEW.token = 'study-ask:refused' THEN RAISE EXCEPTION "
                             "'lease refused'; END IF; RETURN NEW; END $$; CREATE TRIGGER "
                             "refuse_lease BEFORE INSERT ON leases FOR EACH ROW EXECUTE FUNCTION "
                             "refuse_lease()")
                  : db->exec("CREATE TRIGGER refuse_lease BEFORE INSERT ON leases WHEN NEW.token "
                             "= 'study-ask:refused' BEGIN SELECT RAISE(ABORT, 'lease refused'); "
                             "END"));
  }
  const auto lease = [](const char* token) {
    return LeaseRecord{0, 4242, "asker-host", QString::fromLatin1(token), 0};
  };
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  const auto trials = [&] { return int(reader->trials(*study)->size()); };

  auto refused = (*store)->claimTrial(*study, 1, false, lease("study-ask:refused")).get();
  QVERIFY(!refused);
  QVERIFY2(refused.message().find("lease refused") != std::string::npos, refused.message().c_str());
  QCOMPARE((*reader->run(first->runId))->status, spec::RunStatus::queued);  // rolled back
  QVERIFY(!*reader->lease(first->runId));
  backend::NewTrial fresh{*study, std::nullopt, "", "", {{"x", 3}}, 1};
  QVERIFY(!(*store)->startTrialRunWithin(fresh, 10, lease("study-ask:refused")).get());
  QVERIFY(!(*store)->startTrialRun(fresh, lease("study-ask:refused")).get());
  QCOMPARE(trials(), 2);  // no trial started without its lease

  // The claim writes the lease; the same call again returns the same trial.
  auto claimed = (*store)->claimTrial(*study, 1, false, lease("study-ask:one")).get();
  VERIFY_OK(claimed);
  QVERIFY(*claimed);
  QCOMPARE((*claimed)->runId, first->runId);
  QCOMPARE((*reader->run(first->runId))->status, spec::RunStatus::running);
  auto held = reader->lease(first->runId);
  VERIFY_OK(held);
  QVERIFY(*held);
  QCOMPARE((*held)->token, "study-ask:one");
  QCOMPARE((*held)->pid, qint64(4242));
  QCOMPARE((*held)->host, "asker-host");
  auto again = (*store)->claimTrial(*study, 1, false, lease("study-ask:one")).get();
  VERIFY_OK(again);
  QVERIFY(*again);
  QCOMPARE((*again)->runId, first->runId);
  QCOMPARE((*reader->run(second->runId))->status, spec::RunStatus::queued);
  // Another ask (another token) takes the next trial; a lease of another pid or host is not
  // this asker's.
  auto next = (*store)->claimTrial(*study, 1, false, lease("study-ask:two")).get();
  VERIFY_OK(next);
  QCOMPARE((*next)->runId, second->runId);
  LeaseRecord elsewhere = lease("study-ask:one");
  elsewhere.host = "another-host";
  QVERIFY(!*(*store)->claimTrial(*study, 1, false, elsewhere).get());

  // A started trial likewise, counted once against n_trials.
  auto started = (*store)->startTrialRunWithin(fresh, 3, lease("study-ask:three")).get();
  VERIFY_OK(started);
  QCOMPARE(started->outcome, TrialStart::Outcome::Started);
  QVERIFY(!started->again);
  QCOMPARE((*reader->lease(started->id.runId))->token, "study-ask:three");
  fresh.params = {{"x", 4}};  // a retry samples again; the first call's trial comes back
  auto startedAgain = (*store)->startTrialRunWithin(fresh, 3, lease("study-ask:three")).get();
  VERIFY_OK(startedAgain);
  QCOMPARE(startedAgain->outcome, TrialStart::Outcome::Started);
  QVERIFY(startedAgain->again);
  QCOMPARE(startedAgain->id.runId, started->id.runId);
  QCOMPARE(trials(), 3);
  auto plain = (*store)->startTrialRun(fresh, lease("study-ask:four")).get();
  VERIFY_OK(plain);
  auto plainAgain = (*store)->startTrialRun(fresh, lease("study-ask:four")).get();
  VERIFY_OK(plainAgain);
  QCOMPARE(plainAgain->runId, plain->runId);
  QCOMPARE(trials(), 4);
  // Once the trial ended, its token finds nothing: a new ask of that token would take another.
  VERIFY_OK((*store)->finishTrial(plain->runId, spec::RunStatus::complete, {1.0}).get());
  QCOMPARE((*store)->startTrialRunWithin(fresh, 4, lease("study-ask:four")).get()->outcome,
           TrialStart::Outcome::Full);
}

QTEST_GUILESS_MAIN(TestRunStore)
#include "tst_runstore.moc"
