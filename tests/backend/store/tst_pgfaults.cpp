// A dead client cannot hold the PostgreSQL run log's write lock, a vanished server is given up,
// and a server crash loses no acknowledged event (issue #29, item 4); the server's disk filling
// mid-ingest loses nothing and is retried with a backoff (item 8). Real faults on a real server:
// tests/support/with_postgres.py starts it (SHARDSCOPE_TEST_DB, SHARDSCOPE_TEST_PG_CTL) inside
// private network and mount namespaces (tests/support/private_network.sh), where the test may cut
// the loopback network and mount a tmpfs without touching the machine's.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <set>
#include <string>
#include <vector>

#include "backend/store/db.h"
#include "backend/store/runstore.h"
#include "spec/events.h"
#include "tests/backend/monitor/monitortest.h"
#include "tests/support/paths.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;
using shardscope::testing::why;

namespace {

QString tool(const char* name) { return testing::binaryDir() + "/tests/bin/" + name; }

// Reads `process`'s stdout until a line starting with `prefix` (true), or until it ends (false).
bool awaitLine(QProcess& process, const QByteArray& prefix, QByteArray* seen = nullptr,
               int lineTimeoutMs = 120000) {
  QByteArray all;
  for (;;) {
    while (process.canReadLine()) {
      const QByteArray line = process.readLine();
      all += line;
      if (seen) *seen += line;
      if (line.startsWith(prefix)) return true;
    }
    if (process.state() != QProcess::Running) return false;
    if (!process.waitForReadyRead(lineTimeoutMs)) return false;
  }
}

// Runs `admin` SQL on the test server's `postgres` database.
Result<void> onServer(const std::string& sql) {
  QString base = testing::testServer();
  while (base.endsWith('/')) base.chop(1);
  auto admin = Db::open(base + "/postgres");
  if (!admin) return admin.error();
  return admin->exec(sql);
}

std::string databaseOf(const QString& url) { return url.section('/', -1).toStdString(); }

// pg_ctl of the test cluster (SHARDSCOPE_TEST_PG_CTL) with `arguments`; its output on failure.
QString pgCtl(const QStringList& arguments) {
  const QString command = qEnvironmentVariable("SHARDSCOPE_TEST_PG_CTL");
  if (command.isEmpty()) return "SHARDSCOPE_TEST_PG_CTL is not set (run through with_postgres.py)";
  QProcess process;
  process.setProcessChannelMode(QProcess::MergedChannels);
  process.start("/bin/sh", QStringList{"-c", command + " \"$@\"", "sh"} + arguments);
  if (!process.waitForFinished(120000) || process.exitCode() != 0) {
    return "pg_ctl " + arguments.join(' ') + " failed: " + process.readAll();
  }
  return {};
}

// Runs `command` with /bin/sh; its output when it fails, else empty.
QString shell(const QString& command) {
  QProcess process;
  process.setProcessChannelMode(QProcess::MergedChannels);
  process.start("/bin/sh", {"-c", command});
  if (!process.waitForFinished(120000) || process.exitCode() != 0) {
    return "`" + command + "` failed: " + process.readAll();
  }
  return {};
}

QString netnsOf(const QString& pid) { return QFile::symLinkTarget("/proc/" + pid + "/ns/net"); }
QString mntnsOf(const QString& pid) { return QFile::symLinkTarget("/proc/" + pid + "/ns/mnt"); }

}  // namespace

class TestPgFaults : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void sessionSettingsHold();
  void urlKeepsItsOwnSettings();
  void stoppedWriterDoesNotHoldTheLock();
  void serverCrashLosesNoAcknowledgedEvent();
  void vanishedServerIsGivenUp();
  void serverDiskFullMidIngest();

 private:
  QTemporaryDir m_dir;
};

void TestPgFaults::initTestCase() {
  QVERIFY(m_dir.isValid());
  QVERIFY2(testing::onPostgres(),
           "tst_pgfaults needs a PostgreSQL server: run it as ctest -R tst_pgfaults_pg "
           "(tests/support/with_postgres.py)");
}

void TestPgFaults::sessionSettingsHold() {
  // A database whose default is asynchronous commit (an administrator's speed-up): the run log's
  // transactions still commit synchronously, and sessions end idle transactions.
  const QString url = testing::storeSpec(m_dir.path(), "settings");
  VERIFY_OK(onServer("ALTER DATABASE \"" + databaseOf(url) + "\" SET synchronous_commit = off"));
  auto db = Db::open(url);
  VERIFY_OK(db);
  auto timeout = db->queryText("SHOW idle_in_transaction_session_timeout");
  VERIFY_OK(timeout);
  QCOMPARE(QString::fromStdString(*timeout), "15s");
  auto txn = db->transaction();
  VERIFY_OK(txn);
  auto synchronous = db->queryText("SHOW synchronous_commit");
  VERIFY_OK(synchronous);
  QCOMPARE(QString::fromStdString(*synchronous), "on");
  VERIFY_OK(txn->commit());
}

void TestPgFaults::urlKeepsItsOwnSettings() {
  const QString url = testing::storeSpec(m_dir.path(), "own");
  auto db = Db::open(url + "?options=-c%20idle_in_transaction_session_timeout%3D2min");
  VERIFY_OK(db);
  auto timeout = db->queryText("SHOW idle_in_transaction_session_timeout");
  VERIFY_OK(timeout);
  QCOMPARE(QString::fromStdString(*timeout), "2min");
}

void TestPgFaults::stoppedWriterDoesNotHoldTheLock() {
  const QString url = testing::storeSpec(m_dir.path(), "stopped");
  {
    auto db = Db::open(url);
    VERIFY_OK(db);
    VERIFY_OK(db->exec("CREATE TABLE held(n INTEGER)"));
  }
  QProcess holder;
  holder.start(tool("pg_fault_client"), {"hold", url});
  QVERIFY2(holder.waitForStarted(), qPrintable(holder.errorString()));
  QVERIFY2(awaitLine(holder, "holding"), holder.readAllStandardError().constData());
  // Frozen inside its transaction: its TCP connection stays up, only the server's
  // idle_in_transaction_session_timeout can end it.
  QCOMPARE(::kill(static_cast<pid_t>(holder.processId()), SIGSTOP), 0);

  // Waits for the lock 4 times as long as the server lets an idle transaction live.
  auto db = Db::open(url, OpenMode{false, 60000});
  VERIFY_OK(db);
  auto txn = db->transaction();
  ::kill(static_cast<pid_t>(holder.processId()), SIGCONT);
  QVERIFY2(txn,
           qPrintable("a stopped writer held the write lock: " + QString::fromStdString(why(txn))));
  VERIFY_OK(db->exec("INSERT INTO held(n) VALUES (2)"));
  VERIFY_OK(txn->commit());

  // The stopped writer, woken, learns that its transaction is gone: nothing was acknowledged.
  holder.write("\n");
  QByteArray said;
  QVERIFY2(awaitLine(holder, "commit", &said), holder.readAllStandardError().constData());
  QVERIFY2(said.contains("commit failed"), said.constData());
  QVERIFY(holder.waitForFinished());
  auto rows = db->queryText("SELECT string_agg(n::text, ',' ORDER BY n) FROM held");
  VERIFY_OK(rows);
  QCOMPARE(QString::fromStdString(*rows), "2");
}

void TestPgFaults::serverCrashLosesNoAcknowledgedEvent() {
  // A run's ingest (the monitor's writes, by store_crash_writer) while the server crashes and
  // comes back (pg_ctl restart -m immediate: no shutdown checkpoint, recovery from the WAL), on a
  // database that defaults to asynchronous commit. Every event the writer saw committed is there
  // afterwards, and the ingest finishes: each run's rows are exactly its file's lines.
  constexpr int kRuns = 6;
  constexpr int kSteps = 3000;
  const QString events = m_dir.filePath("events-rank-0.jsonl");
  {
    std::FILE* out = std::fopen(events.toUtf8().constData(), "w");
    QVERIFY(out);
    spec::EventWriter writer(0, out);
    writer.write(spec::HelloEvent{1, 1, "abc", {{"shardtrain", "0.1"}}, 1000, 10, 4096});
    for (int step = 1; step <= kSteps; ++step) {
      writer.write(spec::StepEvent{step, 2.0 / step, 1e-3, 0.5, 1000, 0.3, 4096, 4096});
    }
    writer.write(spec::DoneEvent{spec::DoneStatus::complete, {0.5}, false, kSteps});
    std::fclose(out);
  }
  const qint64 lines = kSteps + 2;
  const qint64 fileSize = QFileInfo(events).size();
  const QString url = testing::storeSpec(m_dir.path(), "crash");
  VERIFY_OK(onServer("ALTER DATABASE \"" + databaseOf(url) + "\" SET synchronous_commit = off"));

  QProcess writer;
  writer.start(tool("store_crash_writer"), {"--survive", QString::number(kRuns), url, events});
  QVERIFY2(writer.waitForStarted(), qPrintable(writer.errorString()));
  QByteArray said;
  QVERIFY2(awaitLine(writer, "committed", &said), writer.readAllStandardError().constData());
  for (int i = 0; i < 20; ++i) QVERIFY(awaitLine(writer, "committed", &said));
  const QString restarted = pgCtl({"-m", "immediate", "-w", "-t", "60", "restart"});
  QVERIFY2(restarted.isEmpty(), qPrintable(restarted));
  const bool done = awaitLine(writer, "done", &said);
  QVERIFY(writer.waitForFinished());
  QVERIFY2(done, qPrintable("the ingest did not finish after the restart: " + said.right(2000) +
                            writer.readAllStandardError()));

  std::vector<qint64> acknowledged;
  int failures = 0;
  for (const QByteArray& line : said.split('\n')) {
    if (line.startsWith("committed ")) acknowledged.push_back(line.mid(10).toLongLong());
    if (line.startsWith("failed ")) ++failures;
  }
  qInfo("%zu chunks acknowledged, %d failed writes while the server restarted", acknowledged.size(),
        failures);
  auto db = Db::open(url);
  VERIFY_OK(db);
  auto byId = db->prepare("SELECT count(*) FROM events WHERE id = ?1");
  VERIFY_OK(byId);
  for (const qint64 id : acknowledged) {
    byId->reset();
    VERIFY_OK(byId->bindInt64(1, id));
    auto row = byId->step();
    QVERIFY2(row && *row, row ? "no row" : why(row).c_str());
    QVERIFY2(byId->columnInt64(0) == 1,
             qPrintable(QString("acknowledged event id %1 was lost in the crash").arg(id)));
  }
  auto store = RunStore::open(url);
  VERIFY_OK(store);
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  auto runs = reader->listRuns();
  VERIFY_OK(runs);
  QCOMPARE(static_cast<int>(runs->size()), kRuns);
  for (const RunRecord& run : *runs) {
    auto offset = reader->offset(run.id, 0, RankFile::events);
    VERIFY_OK(offset);
    QCOMPARE(*offset, fileSize);
    auto count = reader->eventCount(run.id, 0);
    VERIFY_OK(count);
    QCOMPARE(*count, lines);
    auto metrics = reader->metricCount(run.id);
    VERIFY_OK(metrics);
    QCOMPARE(*metrics, 2 * qint64{kSteps});
  }
}

void TestPgFaults::vanishedServerIsGivenUp() {
  // Cutting the loopback network is only safe in a namespace of our own.
  QVERIFY2(netnsOf("self") != netnsOf("1"),
           "tst_pgfaults cuts the network: run it in its own network namespace, as ctest does "
           "(tests/support/private_network.sh)");
  const QString url = testing::storeSpec(m_dir.path(), "vanish");
  QProcess client;
  client.start(tool("pg_fault_client"), {"query", url});
  QVERIFY2(client.waitForStarted(), qPrintable(client.errorString()));
  QVERIFY2(awaitLine(client, "connected"), client.readAllStandardError().constData());
  // From now on the loopback device holds every packet (a queue shaped to a byte per second,
  // whose tokens one large datagram has spent for the next hours): nothing is dropped, so no
  // error reaches the client's TCP, nothing answers either, as when the server's host lost its
  // power or the network between broke. (The server's Unix socket still works for pg_ctl.)
  for (const QString& command :
       {QString("tc qdisc add dev lo root handle 1: htb default 1"),
        QString("tc class add dev lo parent 1: classid 1:1 htb rate 8bit ceil 8bit burst 1b "
                "cburst 1b")}) {
    QProcess tc;
    tc.setProcessChannelMode(QProcess::MergedChannels);
    tc.start("/bin/sh", {"-c", command});
    QVERIFY2(tc.waitForFinished() && tc.exitCode() == 0, tc.readAll().constData());
  }
  {
    const int spend = ::socket(AF_INET, SOCK_DGRAM, 0);
    QVERIFY(spend >= 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const QByteArray datagram(60000, 'x');
    const auto sent = ::sendto(spend, datagram.constData(), datagram.size(), 0,
                               reinterpret_cast<const sockaddr*>(&to), sizeof to);
    ::close(spend);
    QCOMPARE(sent, static_cast<ssize_t>(datagram.size()));
  }
  client.write("\n");
  QByteArray said;
  // Without TCP timeouts the query waits for the kernel's retries, a quarter of an hour.
  const bool first = awaitLine(client, "first", &said, 120000);
  const bool second = first && awaitLine(client, "second", &said, 120000);
  client.kill();
  client.waitForFinished();
  QProcess untc;
  untc.start("tc", {"qdisc", "del", "dev", "lo", "root"});
  untc.waitForFinished();
  qInfo("the client said: %s", said.constData());
  QVERIFY2(first, "a query to a vanished server still waited after 120 s");
  QVERIFY2(second, "reconnecting to a vanished server still waited after 120 s");
  QVERIFY2(said.contains("first: failed") && said.contains("timed out"), said.constData());
  QVERIFY2(said.contains("second: failed"), said.constData());
}

void TestPgFaults::serverDiskFullMidIngest() {
  // The run log's database lives in a tablespace on a small tmpfs. A real monitor (the
  // monitor_follower process) follows a real two-rank run into it; mid-run a filler file takes
  // every byte left, so each chunk the server stores fails with "No space left on device"; the
  // ranks finish while it lasts; then the filler is deleted. The ingest resumes by itself: every
  // line of the rank files is exactly one row, the run completes, the follower said why it could
  // not store (naming the run log and the full disk) and retried with a backoff, not every poll.
  QVERIFY2(mntnsOf("self") != mntnsOf("1"),
           "tst_pgfaults mounts a tmpfs: run it in namespaces of its own, as ctest does "
           "(tests/support/private_network.sh)");
  QTemporaryDir mount;
  QVERIFY(mount.isValid());
  const QString point = mount.path();
  const QString mounted = shell("mount -t tmpfs -o size=40m shardscope-diskfull '" + point + "'");
  QVERIFY2(mounted.isEmpty(),
           qPrintable("cannot mount a tmpfs for the server's full disk (the test needs root, as in "
                      "CI): " +
                      mounted));
  struct Unmount {
    QString point;
    ~Unmount() { shell("umount -l '" + point + "'"); }
  } unmount{point};
  const QString space = point + "/tablespace";
  QVERIFY(QDir().mkpath(space));
  if (::geteuid() == 0) {  // the server runs as `postgres` then (with_postgres.py)
    const QString owned = shell("chown postgres: '" + space + "'");
    QVERIFY2(owned.isEmpty(), qPrintable(owned));
  }
  VERIFY_OK(onServer("CREATE TABLESPACE diskfull LOCATION '" + space.toStdString() + "'"));
  const QString url = testing::storeSpec(m_dir.path(), "diskfull");
  VERIFY_OK(onServer("ALTER DATABASE \"" + databaseOf(url) + "\" SET TABLESPACE diskfull"));
  auto store = RunStore::open(url);
  VERIFY_OK(store);
  QTemporaryDir runDir;
  QVERIFY(runDir.isValid());
  auto runId = (*store)->createRun({std::nullopt, "diskfull", runDir.path(), {}, 2}).get();
  VERIFY_OK(runId);

  constexpr int kSteps = 600;
  std::vector<std::unique_ptr<QProcess>> ranks;
  QStringList followerArgs{url, QString::number(*runId), runDir.path()};
  for (int rank = 0; rank < 2; ++rank) {
    auto process = std::make_unique<QProcess>();
    process->setStandardOutputFile(runDir.filePath(QString("events-rank-%1.jsonl").arg(rank)),
                                   QIODevice::Append);
    process->setStandardErrorFile(runDir.filePath(QString("rank-%1.log").arg(rank)),
                                  QIODevice::Append);
    process->start(tool("fake_rank"),
                   {QString::number(rank), "normal", QString::number(kSteps), "10"});
    QVERIFY2(process->waitForStarted(), qPrintable(process->errorString()));
    followerArgs << QString::number(process->processId());
    ranks.push_back(std::move(process));
  }
  QProcess follower;
  follower.start(tool("monitor_follower"), followerArgs);
  QVERIFY2(follower.waitForStarted(), qPrintable(follower.errorString()));
  QVERIFY2(awaitLine(follower, "following"), follower.readAllStandardError().constData());
  auto reader = (*store)->reader();
  VERIFY_OK(reader);
  // fake_rank: hello, a mem event per step (rank 0 also a step event), done.
  constexpr qint64 kEvents = 2 * (kSteps + 2) + kSteps;
  const QString eventsStored = QString("SELECT count(*) FROM events WHERE run_id = %1").arg(*runId);
  QTRY_VERIFY_WITH_TIMEOUT(monitortest::queryInt(*reader, eventsStored) >= 200, 60000);

  // The disk fills: the filler takes every byte the tmpfs has left.
  const QString fillerPath = point + "/filler";
  {
    QFile filler(fillerPath);
    QVERIFY(filler.open(QIODevice::WriteOnly));
    const QByteArray block(1 << 16, 'f');
    while (filler.write(block) == block.size() && filler.flush()) {
    }
  }
  QElapsedTimer full;
  full.start();
  // It lasts until both ranks have ended and the follower said why it cannot store.
  QByteArray said;
  for (auto& rank : ranks) QVERIFY(rank->waitForFinished(120000));
  QTRY_VERIFY_WITH_TIMEOUT((said += follower.readAllStandardError()).contains("No space left"),
                           60000);
  QVERIFY2(monitortest::queryInt(*reader, eventsStored) < kEvents,
           "the whole run was stored before the disk filled: the test proves nothing");
  QVERIFY2(QFile::remove(fillerPath), "cannot delete the filler");
  const qint64 fullMs = full.elapsed();

  QVERIFY2(follower.waitForFinished(120000), "the ingest did not finish after space was freed");
  said += follower.readAllStandardError();
  const QByteArray out = follower.readAllStandardOutput();
  QVERIFY2(follower.exitStatus() == QProcess::NormalExit && follower.exitCode() == 0,
           (out + said).constData());
  QVERIFY2(out.contains("finished complete"), (out + said.right(3000)).constData());
  const QString differs = monitortest::rowsEqualLines(*reader, runDir.path(), *runId, 2);
  QVERIFY2(differs.isEmpty(), qPrintable(differs));
  // Nothing was set aside as a line the run log refused for good: a full disk passes.
  auto anomalies = reader->anomalies(*runId);
  VERIFY_OK(anomalies);
  for (const Anomaly& anomaly : *anomalies) {
    QVERIFY2(anomaly.kind != Anomaly::Kind::malformed, qPrintable(QString("rank %1 byte %2: %3")
                                                                      .arg(anomaly.rank)
                                                                      .arg(anomaly.offset)
                                                                      .arg(anomaly.detail)));
  }
  QCOMPARE(monitortest::queryInt(*reader, eventsStored), kEvents);
  QCOMPARE(reader->metric(*runId, "loss")->size(), std::size_t(kSteps));
  // Retried with a backoff, not on every 50 ms poll: each refused try says which it was
  // ("try N"); from monitor_follower's 50 ms polls, doubling up to its 2 s, a try every poll
  // would be fullMs / 50.
  qint64 tries = 0;
  static const QRegularExpression tryNumber(R"(\(try (\d+);)");
  for (auto match = tryNumber.globalMatch(QString::fromUtf8(said)); match.hasNext();)
    tries = std::max(tries, match.next().captured(1).toLongLong());
  const qint64 bound = 8 + fullMs / 2000 + 2;
  qInfo("disk full for %lld ms: %lld tries refused (at most %lld allowed)",
        static_cast<long long>(fullMs), static_cast<long long>(tries),
        static_cast<long long>(bound));
  QVERIFY2(tries >= 2, said.constData());
  QVERIFY2(
      tries <= bound,
      qPrintable(QString("%1 refused tries in %2 ms: a busy retry loop").arg(tries).arg(fullMs)));
  // The warning names the run log (its database) and the cause, in words a user acts on.
  const QByteArray warning = said.left(said.indexOf("No space left") + 400);
  QVERIFY2(warning.contains(QByteArray::fromStdString(databaseOf(url))), said.constData());
  QVERIFY2(said.contains("disk that holds the run log") && said.contains("is full"),
           said.constData());
}

QTEST_GUILESS_MAIN(TestPgFaults)
#include "tst_pgfaults.moc"
