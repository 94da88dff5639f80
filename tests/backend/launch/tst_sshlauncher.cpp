// SshLauncher against the real sshd fixture on 127.0.0.1: multi-node start through two ssh config
// aliases, the torchrun environment, SFTP upload and reads from offsets, quoting against shell
// injection, graceful stop and kill, attach, an unknown host refused, and the Must-hold "sshd
// killed mid-run": the listener and every per-connection sshd are killed and restarted while the
// ranks run; the handle reconnects and no event is lost or duplicated.
#include <signal.h>
#include <sys/stat.h>

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QScopeGuard>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <cerrno>

#include "backend/launch/sshlauncher.h"
#include "remotetest.h"
#include "tests/support/paths.h"
#include "tests/support/ranks.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;
using namespace remotetest;

using shardscope::testing::why;

using shardscope::testing::allExited;

namespace {

bool groupAlive(qint64 pgid) { return ::kill(static_cast<pid_t>(-pgid), 0) == 0 || errno == EPERM; }

// Reads a rank's events file through the handle from `offset` until nothing new, in small
// chunks so that offsets are exercised.
QByteArray readRest(RunHandle& handle, int rank, qint64 offset) {
  QByteArray all;
  for (;;) {
    auto chunk = handle.readEvents(rank, offset + all.size(), 97);
    if (!chunk || chunk->isEmpty()) return all;
    all += *chunk;
  }
}

// Kills an sshd listener and every sshd process below it (the per-connection children and their
// privilege-separated children) with SIGKILL; returns how many processes it killed.
int killSshdTree(qint64 listener) {
  int killed = 0;
  for (qint64 pid : sshdTree(listener))
    killed += ::kill(static_cast<pid_t>(pid), SIGKILL) == 0 ? 1 : 0;
  return killed;
}

// Reads every rank's new bytes into `got`; returns false when a read failed (disconnected).
bool readNew(RunHandle& handle, QList<QByteArray>& got) {
  bool allOk = true;
  for (int rank = 0; rank < got.size(); ++rank) {
    for (;;) {
      auto chunk = handle.readEvents(rank, got[rank].size(), 300);
      if (!chunk) {
        allOk = false;
        break;
      }
      if (chunk->isEmpty()) break;
      got[rank] += *chunk;
    }
  }
  return allOk;
}

// True when the lines carry seq 0, 1, 2, ... without a gap or a repeat.
bool seqContiguous(const QByteArray& events) {
  int expected = 0;
  for (const QByteArray& line : events.split('\n')) {
    if (line.isEmpty()) continue;
    if (QJsonDocument::fromJson(line).object().value("seq").toInt(-1) != expected++) return false;
  }
  return expected > 0;
}

const QString kSshdScript = shardscope::testing::sourceDir() + "/tests/fixtures/sshd.sh";

}  // namespace

class TestSshLauncher : public QObject {
  Q_OBJECT

 private:
  QMap<QString, QString> m_sshd;
  QTemporaryDir m_tmp;
  SshLauncherOptions m_options;

  LaunchRequest request(const QString& name, int steps, double stepS = 0.05) {
    LaunchRequest req;
    req.runId = 1;
    req.runName = name;
    req.localRunDir = m_tmp.filePath("local-" + QString::number(qHash(name)));
    QDir().mkpath(req.localRunDir);
    writeAll(req.localRunDir + "/trial.toml", "[train]\nmax_steps = 3\n# " + name.toUtf8() + "\n");
    req.launch.kind = spec::LaunchKind::ssh;
    req.launch.nnodes = 2;
    req.launch.nproc_per_node = 1;
    req.launch.threads_per_rank = 3;
    req.launch.hosts = {"node-a", "node-b"};
    req.launch.remote_dir = m_tmp.filePath("remote").toStdString();
    req.launch.trainer = (testSourceDir() + "/fake_rank.sh").toStdString();
    req.launch.env = {{"FAKE_STEPS", std::to_string(steps)},
                      {"FAKE_STEP_S", std::to_string(stepS)},
                      {"SHARDSCOPE_TEST_VALUE", "a b 'c' $HOME"},
                      {"HF_TOKEN", "${SHARDSCOPE_TEST_SECRET}"}};
    req.launch.grace_s = 5;
    req.trainerArgs = {"train", "trial.toml"};
    return req;
  }

  std::unique_ptr<RunHandle> startOk(const LaunchRequest& req,
                                     const SshLauncherOptions& options = {}) {
    SshLauncher launcher(options.knownHostsPath.isEmpty() ? m_options : options);
    auto handle = launcher.start(req);
    if (!handle) qWarning("start failed: %s", handle.message().c_str());
    return handle ? std::move(handle).value() : nullptr;
  }

 private slots:
  void initTestCase() {
    m_sshd = fixtureEnv("sshd");
    QVERIFY2(m_sshd.contains("SSHD_PORT"), "the sshd fixture is not running (CTest fixture sshd)");
    QVERIFY(m_tmp.isValid());
    const QString config = m_tmp.filePath("ssh_config");
    QVERIFY(writeAll(config, sshConfigFor(m_sshd, {"node-a", "node-b"})));
    m_options.sshConfigPath = config;
    m_options.knownHostsPath = m_sshd.value("SSHD_KNOWN_HOSTS");
    m_options.pollIntervalMs = 200;
    m_options.reconnectInitialMs = 100;
    m_options.reconnectMaxMs = 1000;
    qputenv("NCCL_DEBUG", "INFO");
    qputenv("GLOO_SOCKET_IFNAME", "lo");
    qputenv("SHARDSCOPE_TEST_SECRET", "hf_s3cret");
  }

  void twoNodesRunWithTheTorchrunEnvironment() {
    const LaunchRequest req = request("multi-node", 5);
    auto handle = startOk(req);
    QVERIFY(handle);
    const RunLocation loc = handle->location();
    QCOMPARE(loc.kind, QString("ssh"));
    QCOMPARE(loc.hosts, QStringList({"node-a", "node-b"}));
    QCOMPARE(loc.worldSize, 2);
    QCOMPARE(loc.pids.size(), 2);
    QCOMPARE(loc.runDir, m_tmp.filePath("remote/multi-node-r1"));
    QTRY_VERIFY_WITH_TIMEOUT(allExited(*handle), 30000);
    for (const RankState& rank : handle->ranks()) {
      QCOMPARE(rank.exitCode, 0);
      QCOMPARE(rank.signal, 0);
    }
    QCOMPARE(readAll(loc.runDir + "/trial.toml"), readAll(req.localRunDir + "/trial.toml"));
    // launch.env's values (a token) reach the ranks through a file only its owner reads; the
    // start script, a remote command line that `ps` shows everyone, carries none of them.
    for (const char* name : {"trial.toml", kSshEnvFile}) {
      struct stat st {};
      QVERIFY2(::stat(qPrintable(loc.runDir + "/" + name), &st) == 0, name);
      QCOMPARE(st.st_mode & 0777, mode_t{0600});
    }
    QVERIFY(readAll(loc.runDir + "/" + kSshEnvFile).contains("export HF_TOKEN='hf_s3cret'\n"));
    const std::string script =
        sshStartScript(loc.runDir.toStdString(), {0}, 0, 2, 1, req.launch.trainer, {"train"});
    QVERIFY2(script.find("hf_s3cret") == std::string::npos &&
                 script.find("SHARDSCOPE_TEST_VALUE") == std::string::npos,
             script.c_str());
    // The run's rendezvous token (issue 29, item 7) is in env.sh, not the start script; the remote
    // run directory is 0700 and the rank files the script creates (umask 077) 0600.
    const QByteArray envFile = readAll(loc.runDir + "/" + kSshEnvFile);
    const auto tokenAt = envFile.indexOf("export SHARDSCOPE_RDZV_TOKEN='");
    QVERIFY2(tokenAt >= 0, envFile.constData());
    const std::string token = envFile.mid(tokenAt + 30, 64).toStdString();
    QVERIFY(script.find(token) == std::string::npos);
    QVERIFY(script.rfind("umask 077\n", 0) == 0);
    {
      struct stat st {};
      QVERIFY(::stat(qPrintable(loc.runDir), &st) == 0);
      QCOMPARE(st.st_mode & 0777, mode_t{0700});
    }
    for (const char* name : {"rank-0.log", "rank-1.log", "events-rank-0.jsonl"}) {
      struct stat st {};
      QVERIFY2(::stat(qPrintable(loc.runDir + "/" + name), &st) == 0, name);
      QVERIFY2((st.st_mode & 0777) == 0600, name);
    }
    QString port;
    for (int rank = 0; rank < 2; ++rank) {
      const QByteArray onDisk = readAll(loc.runDir + QString("/events-rank-%1.jsonl").arg(rank));
      QVERIFY(onDisk.contains("\"ev\":\"done\""));
      QCOMPARE(readRest(*handle, rank, 0), onDisk);
      QCOMPARE(readRest(*handle, rank, 10), onDisk.mid(10));
      const QString log =
          QString::fromUtf8(readAll(loc.runDir + QString("/rank-%1.log").arg(rank)));
      QVERIFY2(log.contains("args: train trial.toml"), qPrintable(log));
      for (const QString& line :
           {QString("env MASTER_ADDR=127.0.0.1"), QString("env RANK=%1").arg(rank),
            QString("env WORLD_SIZE=2"), QString("env LOCAL_RANK=0"),
            QString("env LOCAL_WORLD_SIZE=1"), QString("env GROUP_RANK=%1").arg(rank),
            QString("env OMP_NUM_THREADS=3"), QString("env NCCL_DEBUG=INFO"),
            QString("env GLOO_SOCKET_IFNAME=lo"),
            QString("env SHARDSCOPE_TEST_VALUE=a b 'c' $HOME"),
            QString("env HF_TOKEN=hf_s3cret")}) {
        QVERIFY2(log.contains(line + "\n"), qPrintable(line + " missing in\n" + log));
      }
      const auto at = log.indexOf("env MASTER_PORT=");
      QVERIFY(at >= 0);
      const QString thisPort = log.mid(at + 16, log.indexOf('\n', at) - at - 16);
      if (rank == 0) port = thisPort;
      QCOMPARE(thisPort, port);  // one rendezvous port for the whole run
      QVERIFY(thisPort.toInt() >= 20000);
      auto logThrough = handle->readLog(rank, 0, 1 << 20);
      QVERIFY2(logThrough, why(logThrough).c_str());
      QCOMPARE(QString::fromUtf8(*logThrough), log);
    }
    auto beyond = handle->readEvents(5, 0, 10);
    QVERIFY(!beyond);
    QVERIFY2(QString::fromStdString(beyond.message()).contains("rank 5"), beyond.message().c_str());
  }

  void quotedArgumentsDefeatInjection() {
    const QString marker = "/tmp/pwned-" + QString::number(QCoreApplication::applicationPid());
    const QString evil = "x'; touch " + marker + "; '$(touch " + marker + "-2)`touch " + marker +
                         "-3`\"; touch " + marker + "-4";
    LaunchRequest req = request(evil, 2);
    req.launch.remote_dir = m_tmp.filePath("remote dir/" + evil).toStdString();
    req.trainerArgs = {"train", evil};
    req.launch.env["SHARDSCOPE_TEST_EVIL"] = evil.toStdString();
    auto handle = startOk(req);
    QVERIFY(handle);
    QTRY_VERIFY_WITH_TIMEOUT(allExited(*handle), 30000);
    for (const char* suffix : {"", "-2", "-3", "-4"}) {
      QVERIFY2(!QFile::exists(marker + suffix), qPrintable(marker + suffix));
    }
    const QString runDir = handle->location().runDir;
    QCOMPARE(runDir, m_tmp.filePath("remote dir/" + evil) + "/" + remoteRunDirName(req));
    const QByteArray events = readAll(runDir + "/events-rank-1.jsonl");
    QVERIFY2(events.contains("\"status\":\"complete\""), events.constData());
    QCOMPARE(readRest(*handle, 1, 0), events);
    const QString log = QString::fromUtf8(readAll(runDir + "/rank-0.log"));
    QVERIFY2(log.contains("args: train " + evil + "\n"), qPrintable(log));
    QVERIFY2(log.contains("env SHARDSCOPE_TEST_EVIL=" + evil + "\n"), qPrintable(log));
  }

  // A retry of a run (same name and id, attempt 1) and a run of another run log with the same
  // name and id each get their own remote folder. The remote folder was named from the run name
  // only, so the second and third starts appended to the first one's event files (three `done`
  // lines in one file), and the retry's monitor read the failed attempt's lines as its own.
  void retryAndOtherRunLogGetTheirOwnFolders() {
    LaunchRequest first = request("same-name", 2);
    first.runLogToken = "0123456789ab";
    LaunchRequest retry = first;
    retry.attempt = 1;
    LaunchRequest otherLog = first;
    otherLog.runLogToken = "ba9876543210";
    QStringList dirs;
    for (const LaunchRequest& req : {first, retry, otherLog}) {
      auto handle = startOk(req);
      QVERIFY(handle);
      QTRY_VERIFY_WITH_TIMEOUT(allExited(*handle), 30000);
      dirs << handle->location().runDir;
      for (int rank = 0; rank < 2; ++rank) {
        const QByteArray events = readAll(dirs.last() + QString("/events-rank-%1.jsonl").arg(rank));
        QCOMPARE(events.count("\"ev\":\"done\""), qsizetype{1});
        QVERIFY2(events.startsWith("{\"v\":1,\"ev\":\"hello\""), events.constData());
      }
    }
    QCOMPARE(dirs[0], m_tmp.filePath("remote/same-name-r1-0123456789ab"));
    QCOMPARE(dirs[1], m_tmp.filePath("remote/same-name-r1-0123456789ab-attempt-1"));
    QCOMPARE(dirs[2], m_tmp.filePath("remote/same-name-r1-ba9876543210"));
  }

  void stopIsGracefulAndKillIsImmediate() {
    auto graceful = startOk(request("stop-me", 10000, 0.1));
    QVERIFY(graceful);
    auto killed = startOk(request("kill-me", 10000, 0.1));
    QVERIFY(killed);
    const QString stopDir = graceful->location().runDir;
    QTRY_VERIFY_WITH_TIMEOUT(readAll(stopDir + "/events-rank-1.jsonl").contains("\"step\":2"),
                             30000);
    graceful->stop();
    killed->kill();
    QTRY_VERIFY_WITH_TIMEOUT(allExited(*graceful) && allExited(*killed), 30000);
    for (int rank = 0; rank < 2; ++rank) {
      const RankState stopped = graceful->ranks().at(rank);
      QCOMPARE(stopped.exitCode, 0);
      const QByteArray events = readAll(stopDir + QString("/events-rank-%1.jsonl").arg(rank));
      QVERIFY2(events.trimmed().split('\n').last().contains("\"status\":\"stopped\""),
               events.constData());
      const RankState gone = killed->ranks().at(rank);
      QCOMPARE(gone.signal, SIGKILL);
      QVERIFY(!groupAlive(killed->location().pids.at(rank)));
      QVERIFY(!groupAlive(graceful->location().pids.at(rank)));
      QVERIFY(!readAll(killed->location().runDir + QString("/events-rank-%1.jsonl").arg(rank))
                   .contains("\"ev\":\"done\""));
    }
  }

  void attachFollowsARunThatOutlivedItsHandle() {
    auto first = startOk(request("reattach", 30, 0.1));
    QVERIFY(first);
    const RunLocation loc = first->location();
    first.reset();  // the backend forgets the run; the ranks keep running
    for (qint64 pid : loc.pids) QVERIFY(groupAlive(pid));
    SshLauncher launcher(m_options);
    auto attached = launcher.attach(loc);
    QVERIFY2(attached, why(attached).c_str());
    auto& handle = *attached.value();
    QCOMPARE(handle.location().pids, loc.pids);
    QTRY_VERIFY_WITH_TIMEOUT(allExited(handle), 30000);
    for (int rank = 0; rank < 2; ++rank) {
      QCOMPARE(handle.ranks().at(rank).exitCode, 0);
      QCOMPARE(readRest(handle, rank, 0),
               readAll(loc.runDir + QString("/events-rank-%1.jsonl").arg(rank)));
    }
    RunLocation wrongKind = loc;
    wrongKind.kind = "slurm";
    auto refused = launcher.attach(wrongKind);
    QVERIFY(!refused);
  }

  void unknownHostIsRefusedAndNothingStarts() {
    SshLauncherOptions options = m_options;
    options.knownHostsPath = m_tmp.filePath("empty_known_hosts");
    QVERIFY(writeAll(options.knownHostsPath, "# nobody trusted yet\n"));
    LaunchRequest req = request("untrusted", 2);
    SshLauncher launcher(options);
    auto handle = launcher.start(req);
    QVERIFY(!handle);
    const QString message = QString::fromStdString(handle.message());
    QVERIFY2(message.contains("not in known_hosts"), qPrintable(message));
    QVERIFY2(message.contains("shardscope-cli hosts trust node-a SHA256:"), qPrintable(message));
    QVERIFY(!QFile::exists(m_tmp.filePath("remote/untrusted")));
  }

  // Must hold: sshd killed mid-run (the listener and every per-connection child) and
  // restarted: the remote ranks kept running, the handle reconnects, no event lost or doubled.
  // A private sshd (same script as the fixture) so that no other test loses its server.
  // A private sshd in `dir` (the fixture's script) and options that reach it as own-a, own-b.
  bool startOwnSshd(const QString& dir, SshLauncherOptions& options) {
    int code = -1;
    const QByteArray started = run("bash", {kSshdScript, "start", dir}, &code);
    if (code != 0) {
      qWarning("sshd.sh start: %s", started.constData());
      return false;
    }
    QMap<QString, QString> own;
    for (const QByteArray& line : readAll(dir + "/env").split('\n')) {
      const QList<QByteArray> kv = line.mid(7).split('=');
      if (kv.size() == 2) own.insert(QString(kv[0]), QString(kv[1]));
    }
    options = m_options;
    options.sshConfigPath = dir + "/ssh_config_for_tests";
    options.knownHostsPath = own.value("SSHD_KNOWN_HOSTS");
    return writeAll(options.sshConfigPath, sshConfigFor(own, {"own-a", "own-b"}));
  }

  void sshdKilledMidRunLosesNoEvent() {
    const QString dir = m_tmp.filePath("own-sshd");
    const QString script = kSshdScript;
    int code = -1;
    SshLauncherOptions options;
    QVERIFY(startOwnSshd(dir, options));
    LaunchRequest req = request("sshd-killed", 60, 0.1);
    req.launch.hosts = {"own-a", "own-b"};
    auto handle = startOk(req, options);
    QVERIFY(handle);
    QSignalSpy connection(handle.get(), &RunHandle::connectionChanged);
    const QString runDir = handle->location().runDir;
    QList<QByteArray> got(2);
    QTRY_VERIFY_WITH_TIMEOUT((readNew(*handle, got), got[1].count('\n') >= 5), 30000);

    const qint64 listener = readAll(dir + "/sshd.pid").trimmed().toLongLong();
    QVERIFY(listener > 0);
    QVERIFY2(killSshdTree(listener) >= 3, "expected the listener and two connections' sshd");
    QTRY_VERIFY_WITH_TIMEOUT(!connection.isEmpty(), 30000);
    QCOMPARE(connection.first().at(0).toBool(), false);
    QVERIFY(!readNew(*handle, got));  // reads fail while the server is down ...
    for (qint64 pid : handle->location().pids) QVERIFY(groupAlive(pid));  // ... ranks run on
    const QByteArray restarted =
        run("/usr/sbin/sshd", {"-f", dir + "/sshd_config", "-E", dir + "/sshd.log"}, &code);
    QVERIFY2(code == 0, restarted.constData());
    QVERIFY2(!readAll(runDir + "/events-rank-1.jsonl").contains("\"ev\":\"done\""),
             "the run ended before the server came back: make it longer");
    QTRY_VERIFY_WITH_TIMEOUT(connection.last().at(0).toBool(), 30000);

    QTRY_VERIFY_WITH_TIMEOUT(allExited(*handle), 60000);
    QVERIFY(readNew(*handle, got));
    for (int rank = 0; rank < 2; ++rank) {
      const QByteArray onDisk = readAll(runDir + QString("/events-rank-%1.jsonl").arg(rank));
      QCOMPARE(got[rank], onDisk);
      QVERIFY2(seqContiguous(got[rank]), got[rank].constData());
      QVERIFY(onDisk.contains("\"status\":\"complete\""));
      QCOMPARE(handle->ranks().at(rank).exitCode, 0);
    }
    run("bash", {script, "stop", dir});
  }

  // A stop asked for while the hosts are unreachable is delivered once they are back (it
  // was dropped with a warning, and the run trained on to its end).
  void stopSentWhileDisconnectedIsDelivered() {
    const QString dir = m_tmp.filePath("own-sshd-stop");
    SshLauncherOptions options;
    QVERIFY(startOwnSshd(dir, options));
    const auto stopSshd = qScopeGuard([&] { run("bash", {kSshdScript, "stop", dir}); });
    LaunchRequest req = request("stop-while-down", 100000, 0.1);
    req.launch.hosts = {"own-a", "own-b"};
    auto handle = startOk(req, options);
    QVERIFY(handle);
    QSignalSpy connection(handle.get(), &RunHandle::connectionChanged);
    const QString runDir = handle->location().runDir;
    QTRY_VERIFY_WITH_TIMEOUT(readAll(runDir + "/events-rank-1.jsonl").contains("\"step\":3"),
                             30000);
    const qint64 listener = readAll(dir + "/sshd.pid").trimmed().toLongLong();
    QVERIFY(listener > 0 && killSshdTree(listener) >= 3);
    QTRY_VERIFY_WITH_TIMEOUT(!connection.isEmpty(), 30000);
    handle->stop();  // nobody to send it to now
    QTest::qWait(1000);
    for (qint64 pid : handle->location().pids) QVERIFY(groupAlive(pid));
    int code = -1;
    const QByteArray restarted =
        run("/usr/sbin/sshd", {"-f", dir + "/sshd_config", "-E", dir + "/sshd.log"}, &code);
    QVERIFY2(code == 0, restarted.constData());
    QTRY_VERIFY_WITH_TIMEOUT(allExited(*handle), 60000);
    for (int rank = 0; rank < 2; ++rank) {
      const QByteArray events = readAll(runDir + QString("/events-rank-%1.jsonl").arg(rank));
      QVERIFY2(events.trimmed().split('\n').last().contains("\"status\":\"stopped\""),
               events.right(300).constData());
      QCOMPARE(handle->ranks().at(rank).exitCode, 0);
    }
  }

  // After a host rebooted, the stored pids may be anyone's: attach sees the boot id
  // changed, reports the ranks gone and signals nothing (a live stand-in group survives stop).
  void rebootedHostIsNeverSignalled() {
    QProcess standIn;
    standIn.start("setsid", {"sleep", "120"});
    QVERIFY(standIn.waitForStarted());
    const qint64 pid = standIn.processId();
    QTRY_VERIFY_WITH_TIMEOUT(groupAlive(pid), 10000);  // setsid made it a group leader
    RunLocation loc;
    loc.kind = "ssh";
    loc.host = "node-a";
    loc.hosts = {"node-a"};
    loc.runDir = m_tmp.filePath("remote");
    loc.worldSize = 1;
    loc.pids = {pid};
    loc.bootIds = {"00000000-0000-0000-0000-000000000000"};  // booted since
    SshLauncherOptions options = m_options;
    options.graceS = 1;
    SshLauncher launcher(options);
    auto attached = launcher.attach(loc);
    QVERIFY2(attached, why(attached).c_str());
    RunHandle& handle = *attached.value();
    QTRY_VERIFY_WITH_TIMEOUT(allExited(handle), 10000);
    QCOMPARE(handle.ranks().at(0).signal, 9);
    handle.stop();
    handle.kill();
    QTest::qWait(2500);  // past the grace kill
    QVERIFY2(groupAlive(pid), "a process group that is not the run's was signalled");
    ::kill(static_cast<pid_t>(-pid), SIGKILL);
    standIn.waitForFinished();
  }

  void tooFewHostsIsAnError() {
    LaunchRequest req = request("few-hosts", 2);
    req.launch.hosts = {"node-a"};
    SshLauncher launcher(m_options);
    auto handle = launcher.start(req);
    QVERIFY(!handle);
    QVERIFY2(QString::fromStdString(handle.message()).contains("launch.hosts"),
             handle.message().c_str());
    req = request("bad-env", 2);
    const std::string badName = "BAD NAME";
    req.launch.env.emplace(badName, "x");
    handle = launcher.start(req);
    QVERIFY(!handle);
    QVERIFY2(QString::fromStdString(handle.message()).contains("launch.env: 'BAD NAME'"),
             handle.message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestSshLauncher)
#include "tst_sshlauncher.moc"
