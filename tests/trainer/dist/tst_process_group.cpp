// Toolchain proof 1: real shardtrain processes form a Gloo process group through a TCPStore on
// loopback (rank 0 listens on port 0 and publishes the port through a file) and check
// all-gather-into-tensor and reduce-scatter-tensor on fp32 and bf16 element by element; a rank
// that leaves or hangs makes the others fail within the timeout with a clear error event; the
// store listens on MASTER_ADDR only.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <set>

#include "spec/events.h"
#include "tests/support/paths.h"

using namespace shardscope::spec;

namespace {

const QString kShardtrain = shardscope::testing::binaryDir() + "/bin/shardtrain";

struct RankRun {
  int exitCode = -1;
  std::vector<Event> events;
  QString stderrText;
};

// Parses every stdout line as a strict protocol v1 event; a bad line fails the test.
std::vector<Event> parseEvents(const QByteArray& out) {
  std::vector<Event> events;
  for (const QByteArray& line : out.split('\n')) {
    if (line.trimmed().isEmpty()) continue;
    auto event = parse_event(line.toStdString());
    if (!event) qFatal("bad event line %s: %s", line.constData(), event.message().c_str());
    events.push_back(std::move(event).value());
  }
  return events;
}

QProcessEnvironment rankEnv(int rank, int world, const QString& portFile, int port = 0) {
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("RANK", QString::number(rank));
  env.insert("WORLD_SIZE", QString::number(world));
  env.insert("LOCAL_RANK", QString::number(rank));
  env.insert("LOCAL_WORLD_SIZE", QString::number(world));
  env.insert("MASTER_ADDR", "127.0.0.1");
  env.insert("MASTER_PORT", QString::number(port));
  env.insert("SHARDSCOPE_RDZV_FILE", portFile);
  return env;
}

// Starts one process per environment, waits (bounded) and collects what each wrote. Rank 0 gets
// `waitMs`; the others `othersWaitMs` more (a deliberately hung rank is killed after it).
std::vector<RankRun> runRanks(const std::vector<QProcessEnvironment>& envs, const QStringList& args,
                              int waitMs = 60000, int othersWaitMs = 60000) {
  std::vector<std::unique_ptr<QProcess>> procs;
  for (const auto& env : envs) {
    auto p = std::make_unique<QProcess>();
    p->setProcessEnvironment(env);
    p->start(kShardtrain, QStringList{"selftest"} + args);
    if (!p->waitForStarted()) qFatal("cannot start %s", qPrintable(kShardtrain));
    procs.push_back(std::move(p));
  }
  std::vector<RankRun> runs;
  for (auto& p : procs) {
    RankRun run;
    if (p->waitForFinished(p == procs.front() ? waitMs : othersWaitMs))
      run.exitCode = p->exitCode();
    else
      p->kill(), p->waitForFinished();
    run.events = parseEvents(p->readAllStandardOutput());
    run.stderrText = QString::fromUtf8(p->readAllStandardError());
    runs.push_back(std::move(run));
  }
  return runs;
}

template <class T>
std::vector<T> eventsOf(const RankRun& run) {
  std::vector<T> out;
  for (const auto& e : run.events) {
    if (auto* body = std::get_if<T>(&e.body)) out.push_back(*body);
  }
  return out;
}

// Local addresses ("0100007F:9C40", /proc/net/tcp's hex) of the sockets process `pid` listens on.
QStringList listeningAddresses(qint64 pid) {
  std::set<QString> inodes;
  const QDir fds(QString("/proc/%1/fd").arg(pid));
  for (const QString& fd : fds.entryList(QDir::NoDotAndDotDot | QDir::System)) {
    const QString target = QFileInfo(fds.filePath(fd)).symLinkTarget();
    const QString link = target.isEmpty() ? QFile::symLinkTarget(fds.filePath(fd)) : target;
    const auto at = link.indexOf("socket:[");
    if (at >= 0) inodes.insert(link.mid(at + 8).chopped(1));
  }
  QStringList out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    QFile file(table);
    if (!file.open(QIODevice::ReadOnly)) continue;
    for (const QByteArray& line : file.readAll().split('\n')) {
      const QStringList f = QString::fromLatin1(line).simplified().split(' ');
      if (f.size() > 9 && f[3] == "0A" && inodes.count(f[9])) out << f[1];  // 0A: LISTEN
    }
  }
  return out;
}

}  // namespace

class TestProcessGroup : public QObject {
  Q_OBJECT

 private slots:
  void collectivesMatchElementByElement_data() {
    QTest::addColumn<int>("world");
    QTest::newRow("2 ranks") << 2;
    QTest::newRow("3 ranks") << 3;
    QTest::newRow("4 ranks") << 4;  // ranks 2 and 3 sum through a received buffer
  }
  void collectivesMatchElementByElement() {
    QFETCH(int, world);
    QTemporaryDir dir;
    std::vector<QProcessEnvironment> envs;
    for (int r = 0; r < world; ++r) envs.push_back(rankEnv(r, world, dir.filePath("port")));
    auto runs = runRanks(envs, {"--timeout-s", "30"});
    for (int r = 0; r < world; ++r) {
      const auto& run = runs[static_cast<std::size_t>(r)];
      QVERIFY2(run.exitCode == 0, qPrintable(run.stderrText));
      auto logs = eventsOf<LogEvent>(run);
      QCOMPARE(logs.size(), std::size_t{3});
      QVERIFY(
          QString::fromStdString(logs[0].message).contains("all_reduce and broadcast Float ok"));
      QVERIFY(QString::fromStdString(logs[1].message).contains("BFloat16 ok"));
      QVERIFY(QString::fromStdString(logs[2].message).startsWith("selftest: through gloo"));
      auto hello = eventsOf<HelloEvent>(run);
      QCOMPARE(hello.size(), std::size_t{1});
      QCOMPARE(hello[0].world_size, world);
      QCOMPARE(hello[0].versions.at("backend"), std::string("gloo"));
      auto done = eventsOf<DoneEvent>(run);
      QCOMPARE(done.size(), std::size_t{1});
      QCOMPARE(done[0].status, DoneStatus::complete);
      for (std::size_t i = 0; i < run.events.size(); ++i) {
        QCOMPARE(run.events[i].env.rank, r);
        QCOMPARE(run.events[i].env.seq, static_cast<std::int64_t>(i));
      }
    }
  }

  void launcherModeStartsTwoLocalRanks() {
    QProcess p;
    p.start(kShardtrain, {"selftest"});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 0);
    RankRun all;
    all.events = parseEvents(p.readAllStandardOutput());
    std::map<int, int> doneByRank;
    for (const auto& e : all.events) {
      if (std::holds_alternative<DoneEvent>(e.body)) ++doneByRank[e.env.rank];
    }
    QCOMPARE(doneByRank, (std::map<int, int>{{0, 1}, {1, 1}}));
  }

  void ranksSetTheCommunicationEnvironment() {
    // Both ranks on this host: NCCL and Gloo on loopback; a value the user set stays.
    QTemporaryDir dir;
    const QString port = dir.filePath("port");
    std::vector<QProcessEnvironment> envs{rankEnv(0, 2, port), rankEnv(1, 2, port)};
    for (auto& env : envs) {
      env.remove("NCCL_SOCKET_IFNAME");
      env.remove("GLOO_SOCKET_IFNAME");
      env.insert("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
    }
    auto runs = runRanks(envs, {});
    for (const auto& run : runs) {
      QCOMPARE(run.exitCode, 0);
      QString settings;
      for (const auto& log : eventsOf<LogEvent>(run)) {
        if (QString::fromStdString(log.message).contains("through gloo"))
          settings = QString::fromStdString(log.message);
      }
      QVERIFY2(settings.contains("NCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo"),
               qPrintable(settings));
      QVERIFY2(settings.contains("TORCH_NCCL_ASYNC_ERROR_HANDLING=1"), qPrintable(settings));
      QVERIFY2(settings.contains("TORCH_NCCL_DUMP_ON_TIMEOUT=0"), qPrintable(settings));
      QVERIFY2(run.stderrText.contains("sets NCCL_SOCKET_IFNAME=lo (every rank runs on this host)"),
               qPrintable(run.stderrText));
    }
  }

  void watchdogEndsARankStalledOutsideCollectives_data() {
    QTest::addColumn<bool>("stopPeer");
    QTest::newRow("peer stopped") << true;
    QTest::newRow("every peer alive") << false;
  }
  void watchdogEndsARankStalledOutsideCollectives() {
    // A CUDA rank can wait for a lost peer inside a CUDA call, where no collective's exception
    // reaches it: its heartbeat thread must end it (peer_lost naming the silent rank) once its
    // collectives stalled for the timeout and a peer stopped beating; a stalled rank whose
    // peers all beat (a slow step elsewhere) is left alone.
    QFETCH(bool, stopPeer);
    const QString probe = shardscope::testing::envPath("SHARDSCOPE_TEST_WATCHDOG_PROBE",
                                                       "the watchdog probe (tests/trainer/dist)");
    QTemporaryDir dir;
    std::vector<std::unique_ptr<QProcess>> procs;
    for (int rank = 0; rank < 2; ++rank) {
      auto env = rankEnv(rank, 2, dir.filePath("port"));
      env.insert("PROBE_TIMEOUT_S", "3");
      auto p = std::make_unique<QProcess>();
      p->setProcessEnvironment(env);
      p->start(probe, {});
      QVERIFY(p->waitForStarted());
      procs.push_back(std::move(p));
    }
    QString said[2];
    QElapsedTimer ready;
    ready.start();
    while (!(said[0].contains("ready 2") && said[1].contains("ready 2")) &&
           ready.elapsed() < 60000) {
      for (int rank = 0; rank < 2; ++rank) {
        procs[static_cast<std::size_t>(rank)]->waitForReadyRead(100);
        said[rank] +=
            QString::fromUtf8(procs[static_cast<std::size_t>(rank)]->readAllStandardError());
      }
    }
    QVERIFY2(said[0].contains("ready 2") && said[1].contains("ready 2"),
             qPrintable(said[0] + said[1]));
    const qint64 peer = procs[1]->processId();
    if (stopPeer) ::kill(static_cast<pid_t>(peer), SIGSTOP);
    QElapsedTimer waited;
    waited.start();
    // The timeout (3 s), then 5 s of silence, then the report: rank 0 ends within 30 s.
    const bool ended = procs[0]->waitForFinished(stopPeer ? 30000 : 12000);
    const qint64 seconds = waited.elapsed() / 1000;
    ::kill(static_cast<pid_t>(peer), SIGKILL);
    ::kill(static_cast<pid_t>(peer), SIGCONT);
    procs[1]->waitForFinished();
    if (!stopPeer) {
      QVERIFY2(!ended, "rank 0 ended although its peer kept beating");
      procs[0]->kill();
      procs[0]->waitForFinished();
      return;
    }
    QVERIFY2(ended, "rank 0 still waits 30 s after its peer stopped");
    QCOMPARE(procs[0]->exitCode(), 1);
    RankRun run;
    run.events = parseEvents(procs[0]->readAllStandardOutput());
    auto errors = eventsOf<ErrorEvent>(run);
    QCOMPARE(errors.size(), std::size_t{1});
    QCOMPARE(errors[0].kind, ErrorKind::peer_lost);
    const auto message = QString::fromStdString(errors[0].message);
    QVERIFY2(message.contains(QString("no heartbeat came from rank 1 (")) &&
                 message.contains(QString("pid %1)").arg(peer)),
             qPrintable(message));
    QVERIFY2(QString::fromStdString(errors[0].hint).contains("shard.timeout_s"),
             errors[0].hint.c_str());
    qInfo("rank 0 reported its stopped peer after %lld s: %s", seconds, qPrintable(message));
  }

  void noShortcutRunsOneRankThroughGloo_data() {
    QTest::addColumn<bool>("noShortcut");
    QTest::newRow("--no-shortcut") << true;
    QTest::newRow("shortcut") << false;
  }
  void noShortcutRunsOneRankThroughGloo() {
    // A world of one copies locally unless --no-shortcut: then every collective (all-gather,
    // reduce-scatter, all-reduce, broadcast, barrier) goes through the Gloo backend, which the
    // bytes counted show (the shortcut counts none). On a GPU the same mode makes NCCL's
    // communicator (bench/gpu/gpu_check.py, check nccl_one_gpu).
    QFETCH(bool, noShortcut);
    QProcess p;
    QStringList args{"selftest", "--world-size", "1"};
    if (noShortcut) args << "--no-shortcut";
    p.start(kShardtrain, args);
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 0);
    RankRun run;
    run.events = parseEvents(p.readAllStandardOutput());
    QCOMPARE(eventsOf<DoneEvent>(run).size(), std::size_t{1});
    QString through;
    int checked = 0;
    for (const auto& log : eventsOf<LogEvent>(run)) {
      const auto text = QString::fromStdString(log.message);
      if (text.contains("through gloo")) through = text;
      if (text.contains("all_reduce and broadcast")) ++checked;
    }
    QCOMPARE(checked, 2);  // fp32 and bf16
    QVERIFY2(through.startsWith("selftest: through gloo: "), qPrintable(through));
    const bool moved = !through.contains(": 0 bytes all-gathered, 0 reduce-scattered");
    QVERIFY2(moved == noShortcut, qPrintable(through));
  }

  void peerThatLeavesIsReported_data() {
    QTest::addColumn<QString>("mode");
    QTest::addColumn<QString>("cause");
    // A peer that exits is seen at the first collective, or, when it is gone before the survivor
    // finished connecting (a loaded machine), at the connection: both are its loss.
    QTest::newRow("exit") << "exit"
                          << "rank 0: (all_gather_into_tensor failed|Gloo could not connect to "
                             "its peers)";
    QTest::newRow("hang") << "hang"
                          << "Timed out";
  }
  void peerThatLeavesIsReported() {
    QFETCH(QString, mode);
    QFETCH(QString, cause);
    QTemporaryDir dir;
    const QString port = dir.filePath("port");
    auto runs =
        runRanks({rankEnv(0, 2, port), rankEnv(1, 2, port)},
                 {"--timeout-s", "5", "--fault-rank", "1", "--fault-mode", mode}, 30000, 2000);
    const RankRun& survivor = runs[0];
    QCOMPARE(survivor.exitCode, 1);
    auto errors = eventsOf<ErrorEvent>(survivor);
    QCOMPARE(errors.size(), std::size_t{1});
    QCOMPARE(errors[0].kind, ErrorKind::peer_lost);
    QVERIFY2(QString::fromStdString(errors[0].message).contains(QRegularExpression(cause)),
             errors[0].message.c_str());
    QVERIFY(!errors[0].hint.empty());
    QVERIFY(eventsOf<DoneEvent>(survivor).empty());
    QVERIFY(survivor.stderrText.contains("hint:"));
  }

  void storeListensOnMasterAddrOnly() {
    // c10d's TCPStore alone binds every interface: a local run's unauthenticated store was open
    // to the network. Rank 0 waits for a rank 1 that never comes while its sockets are read.
    QTemporaryDir dir;
    const QString portFile = dir.filePath("port");
    QProcess rank0;
    rank0.setProcessEnvironment(rankEnv(0, 2, portFile));
    rank0.start(kShardtrain, {"selftest", "--timeout-s", "30"});
    QVERIFY(rank0.waitForStarted());
    QTRY_VERIFY_WITH_TIMEOUT(QFileInfo(portFile).size() > 0, 30000);
    const QStringList listening = listeningAddresses(rank0.processId());
    rank0.kill();
    rank0.waitForFinished();
    QFile published(portFile);
    QVERIFY(published.open(QIODevice::ReadOnly));
    const int number = published.readAll().trimmed().toInt();
    QVERIFY(number > 0);
    const QString port = QString("%1").arg(number, 4, 16, QChar('0')).toUpper();
    QVERIFY2(!listening.isEmpty(), "rank 0 listens on nothing");
    for (const QString& local : listening) {
      if (!local.endsWith(":" + port)) continue;  // Gloo's own listeners, not the store
      QVERIFY2(local == "0100007F:" + port,
               qPrintable("the store listens on " + local + ", not on 127.0.0.1 only"));
    }
    QVERIFY2(listening.contains("0100007F:" + port), qPrintable(listening.join(' ')));
  }

  void worldSizeMismatchIsAConfigError() {
    QTemporaryDir dir;
    const QString port = dir.filePath("port");
    auto runs = runRanks({rankEnv(0, 2, port), rankEnv(1, 3, port)}, {"--timeout-s", "5"}, 30000);
    QCOMPARE(runs[0].exitCode, 2);
    auto errors = eventsOf<ErrorEvent>(runs[0]);
    QCOMPARE(errors.size(), std::size_t{1});
    QCOMPARE(errors[0].kind, ErrorKind::config);
    QVERIFY2(QString::fromStdString(errors[0].message)
                 .contains("WORLD_SIZE mismatch: rank 0 has 2, rank 1 has 3"),
             errors[0].message.c_str());
    QVERIFY(runs[1].exitCode != 0);  // rank 1 waits for a rank 2 that never comes
  }

  void takenPortIsAConfigError() {
    int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
    QVERIFY(fd >= 0);
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    QVERIFY(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    QVERIFY(::listen(fd, 1) == 0);
    socklen_t len = sizeof addr;
    QVERIFY(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    const int taken = ntohs(addr.sin6_port);
    QTemporaryDir dir;
    auto runs = runRanks({rankEnv(0, 2, dir.filePath("port"), taken)}, {"--timeout-s", "5"}, 30000);
    ::close(fd);
    QCOMPARE(runs[0].exitCode, 2);
    auto errors = eventsOf<ErrorEvent>(runs[0]);
    QCOMPARE(errors.size(), std::size_t{1});
    QVERIFY2(QString::fromStdString(errors[0].message).contains("the port is taken"),
             errors[0].message.c_str());
  }
};

QTEST_GUILESS_MAIN(TestProcessGroup)
#include "tst_process_group.moc"
