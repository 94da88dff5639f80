// LocalLauncher and LocalRunHandle (backend/launch/locallauncher.cpp) and the RunLocation JSON
// (backend/launch/launcher.cpp), with real rank processes: the fake trainer
// (tests/tools/faketrainer) keeps the trainer contract and fails on request.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QProcess>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <csignal>
#include <functional>
#include <variant>

#include "backend/launch/locallauncher.h"
#include "backend/launch/localprocess.h"
#include "spec/events.h"
#include "tests/support/files.h"
#include "tests/support/paths.h"
#include "tests/support/ranks.h"

using namespace shardscope;
using namespace shardscope::backend;

using shardscope::testing::allExited;

namespace {

const QString kFake =
    shardscope::testing::envPath("SHARDSCOPE_TEST_FAKETRAINER", "the faketrainer executable");
constexpr int kDeadlineMs = 60000;  // generous: a wait, never an assertion on duration

/// Every parseable event of a file (garbage lines are skipped).
QList<spec::Event> eventsIn(const QString& path) {
  QFile file(path);
  QList<spec::Event> out;
  if (!file.open(QIODevice::ReadOnly)) return out;
  for (const QByteArray& line : file.readAll().split('\n')) {
    auto ev = spec::parse_event(std::string_view(line.constData(), line.size()));
    if (ev) out.append(*ev);
  }
  return out;
}

template <class T>
int countOf(const QList<spec::Event>& events) {
  int n = 0;
  for (const auto& e : events) n += std::holds_alternative<T>(e.body) ? 1 : 0;
  return n;
}

/// The status of the last `done` event, or "" when there is none.
QString doneStatus(const QString& path) {
  const auto events = eventsIn(path);
  if (events.isEmpty()) return {};
  const auto* done = std::get_if<spec::DoneEvent>(&events.last().body);
  return done ? QString::fromLatin1(spec::to_string(done->status).data()) : QString();
}

using shardscope::testing::readAll;

/// Live processes (not zombies) whose session is one of `sids`, read independently of the code
/// under test. A zombie is dead; this machine's init does not reap orphans, so zombies linger.
QList<qint64> liveInSessions(const QList<qint64>& sids) {
  QList<qint64> out;
  const QStringList entries = QDir(QStringLiteral("/proc")).entryList(QDir::Dirs);
  for (const QString& entry : entries) {
    bool isPid = false;
    const qint64 pid = entry.toLongLong(&isPid);
    if (!isPid) continue;
    const QByteArray stat = readAll(QStringLiteral("/proc/%1/stat").arg(pid));
    const qsizetype close = stat.lastIndexOf(')');
    if (close < 0) continue;
    const QList<QByteArray> f = stat.mid(close + 2).split(' ');
    if (f.size() < 4 || f[0] == "Z" || f[0] == "X") continue;
    if (sids.contains(f[3].toLongLong())) out.append(pid);
  }
  return out;
}

/// The highest `step` rank 0 reported so far.
qint64 lastStep(const QString& runDir) {
  qint64 step = 0;
  for (const auto& e : eventsIn(runDir + "/events-rank-0.jsonl")) {
    if (const auto* s = std::get_if<spec::StepEvent>(&e.body)) step = s->step;
  }
  return step;
}

}  // namespace

class TestLocalLauncher : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_root;
  int m_runs = 0;
  QList<qint64> m_sessions;  // every rank this test case started, for cleanup()

  /// A run directory with trial.toml and a request for `world` fake ranks.
  LaunchRequest request(int world, const QStringList& fakeArgs = {}) {
    LaunchRequest req;
    req.runId = ++m_runs;
    req.runName = QStringLiteral("run-%1").arg(m_runs);
    req.localRunDir = m_root.filePath(req.runName);
    if (!makeRunDir(req.localRunDir)) qWarning("cannot create %s", qPrintable(req.localRunDir));
    QFile toml(req.localRunDir + "/trial.toml");
    if (toml.open(QIODevice::WriteOnly)) toml.write("[train]\nmax_steps = 10\n");
    req.launch.nproc_per_node = world;
    req.launch.trainer = kFake.toStdString();
    req.trainerArgs = QStringList{"train", "trial.toml"} + fakeArgs;
    return req;
  }

  std::unique_ptr<RunHandle> start(const LaunchRequest& req) {
    LocalLauncher launcher;
    auto handle = launcher.start(req);
    if (!handle) qWarning("start failed: %s", handle.message().c_str());
    if (handle) m_sessions += (*handle)->location().pids;
    return handle ? std::move(*handle) : nullptr;
  }

  static bool waitFinished(RunHandle* h) {
    auto* local = qobject_cast<LocalRunHandle*>(h);
    return QTest::qWaitFor([&] { return allExited(*h) && local->finished(); }, kDeadlineMs);
  }

 private slots:
  // A test that failed half-way must not leave its ranks running: they run for 100000 steps.
  void cleanup() {
    for (qint64 pid : liveInSessions(m_sessions)) ::kill(static_cast<pid_t>(pid), SIGKILL);
    m_sessions.clear();
    qputenv("SHARDSCOPE_LAUNCH_POLL", "0");
  }

  void initTestCase() {
    QVERIFY(m_root.isValid());
    QVERIFY2(QFileInfo(kFake).isExecutable(), qPrintable(kFake));
  }

  void twoRanksRunToTheEnd() {
    const LaunchRequest req = request(2, {"--steps", "5", "--step-ms", "20"});
    auto h = start(req);
    QVERIFY(h);
    QSignalSpy grew(h.get(), &RunHandle::filesGrew);
    QSignalSpy failed(h.get(), SIGNAL(rankFailed(int, QString)));
    QVERIFY(waitFinished(h.get()));
    for (const RankState& s : h->ranks()) {
      QCOMPARE(s.exitCode, 0);
      QCOMPARE(s.signal, 0);
      QVERIFY(s.host.isEmpty());
    }
    QCOMPARE(failed.count(), 0);
    QVERIFY(grew.count() >= 1);

    const QString dir = req.localRunDir;
    const auto rank0 = eventsIn(dir + "/events-rank-0.jsonl");
    const auto rank1 = eventsIn(dir + "/events-rank-1.jsonl");
    QCOMPARE(countOf<spec::HelloEvent>(rank0), 1);
    QCOMPARE(countOf<spec::StepEvent>(rank0), 5);
    QCOMPARE(countOf<spec::StepEvent>(rank1), 0);
    QCOMPARE(countOf<spec::MemEvent>(rank1), 5);
    QCOMPARE(doneStatus(dir + "/events-rank-0.jsonl"), QStringLiteral("complete"));
    QCOMPARE(doneStatus(dir + "/events-rank-1.jsonl"), QStringLiteral("complete"));
    QVERIFY(readAll(dir + "/rank-1.log")
                .contains(("cwd=" + QFileInfo(dir).absoluteFilePath()).toUtf8()));

    // readEvents/readLog are the files' bytes, from any offset.
    const QByteArray file0 = readAll(dir + "/events-rank-0.jsonl");
    auto whole = h->readEvents(0, 0, 1 << 20);
    QVERIFY(whole.ok());
    QCOMPARE(*whole, file0);
    auto tail = h->readEvents(0, 10, 7);
    QVERIFY(tail.ok());
    QCOMPARE(*tail, file0.mid(10, 7));
    auto past = h->readEvents(0, file0.size(), 100);
    QVERIFY(past.ok() && past->isEmpty());
    auto log = h->readLog(1, 0, 1 << 20);
    QVERIFY(log.ok());
    QCOMPARE(*log, readAll(dir + "/rank-1.log"));
    auto badRank = h->readEvents(2, 0, 10);
    QVERIFY(!badRank.ok());
    QVERIFY(QString::fromStdString(badRank.message()).contains("ranks 0..1"));

    const RunLocation loc = h->location();
    QCOMPARE(loc.kind, QStringLiteral("local"));
    QCOMPARE(loc.worldSize, 2);
    QCOMPARE(loc.pids.size(), 2);
    QCOMPARE(loc.startTicks.size(), 2);
    QCOMPARE(loc.runDir, QFileInfo(dir).absoluteFilePath());
  }

  // Must hold: kill -9 of one rank. The handle reports it with the signal, the other ranks get
  // SIGTERM (they stop gracefully), and every process of the run's sessions, including children
  // that ignore SIGTERM and the dead rank's orphan, is gone after the grace.
  void killNineOfOneRank_data() {
    QTest::addColumn<bool>("poll");
    QTest::newRow("pidfd") << false;
    QTest::newRow("polling") << true;  // kernels without pidfd
  }

  void killNineOfOneRank() {
    QFETCH(bool, poll);
    qputenv("SHARDSCOPE_LAUNCH_POLL", poll ? "1" : "0");
    LaunchRequest req = request(3, {"--steps", "100000", "--step-ms", "50", "--spawn-child"});
    req.launch.grace_s = 2;
    auto h = start(req);
    QVERIFY(h);
    QSignalSpy failed(h.get(), SIGNAL(rankFailed(int, QString)));
    QVERIFY(QTest::qWaitFor([&] { return lastStep(req.localRunDir) >= 2; }, kDeadlineMs));
    const QList<qint64> sessions = h->location().pids;
    QCOMPARE(liveInSessions(sessions).size(), 6);  // 3 ranks + 3 children

    QElapsedTimer clock;
    qint64 detectUs = -1;  // stamped when the handle reports, not when this test looks
    // A lambda, not a slot of this class: Qt Test would run such a slot as a test of its own.
    const QMetaObject::Connection stamp =
        connect(qobject_cast<LocalRunHandle*>(h.get()), &LocalRunHandle::rankFailed, this,
                [&] { detectUs = clock.nsecsElapsed() / 1000; });
    clock.start();
    QCOMPARE(::kill(static_cast<pid_t>(sessions[1]), SIGKILL), 0);
    QVERIFY(failed.wait(kDeadlineMs));  // a real event loop: the notifier fires at once
    disconnect(stamp);
    QCOMPARE(failed.first().at(0).toInt(), 1);
    QVERIFY2(failed.first().at(1).toString().contains("SIGKILL"),
             qPrintable(failed.first().at(1).toString()));
    QCOMPARE(h->ranks().at(1).phase, RankState::Phase::exited);
    QCOMPARE(h->ranks().at(1).signal, SIGKILL);
    QCOMPARE(h->ranks().at(1).exitCode, -1);

    QVERIFY(QTest::qWaitFor([&] { return liveInSessions(sessions).isEmpty(); }, kDeadlineMs));
    const qint64 goneMs = clock.elapsed();
    QVERIFY(waitFinished(h.get()));
    qputenv("SHARDSCOPE_LAUNCH_POLL", "0");
    qInfo(
        "kill -9 of rank 1 (%s): reported after %.1f ms; every process of the run gone after "
        "%lld ms (grace %d s)",
        poll ? "polling" : "pidfd", static_cast<double>(detectUs) / 1000.0,
        static_cast<long long>(goneMs), req.launch.grace_s);
    QCOMPARE(failed.count(), 1);  // the ranks the handle stopped are not new failures
    for (int r : {0, 2}) {
      QCOMPARE(h->ranks().at(r).exitCode, 0);
      QCOMPARE(doneStatus(req.localRunDir + QStringLiteral("/events-rank-%1.jsonl").arg(r)),
               QStringLiteral("stopped"));
    }
  }

  void concurrentRunsGetTheirOwnPorts() {
    const QStringList args{"--steps", "8", "--step-ms", "30"};
    const LaunchRequest a = request(2, args);
    const LaunchRequest b = request(2, args);
    auto ha = start(a);
    auto hb = start(b);
    QVERIFY(ha && hb);
    QVERIFY(waitFinished(ha.get()));
    QVERIFY(waitFinished(hb.get()));
    for (RunHandle* h : {ha.get(), hb.get()}) {
      for (const RankState& s : h->ranks()) QCOMPARE(s.exitCode, 0);
    }
    const int portA = readAll(LocalLauncher::portFile(a.localRunDir)).trimmed().toInt();
    const int portB = readAll(LocalLauncher::portFile(b.localRunDir)).trimmed().toInt();
    QVERIFY(portA > 0 && portB > 0);
    QVERIFY(portA != portB);
    // Every rank of a run met rank 0 on its run's port.
    for (const auto& [dir, port] : {std::pair{a.localRunDir, portA}, {b.localRunDir, portB}}) {
      for (int r = 0; r < 2; ++r) {
        const QByteArray log = readAll(dir + QStringLiteral("/rank-%1.log").arg(r));
        QVERIFY2(log.contains(QStringLiteral("listens on 127.0.0.1:%1").arg(port).toUtf8()),
                 log.constData());
      }
      QCOMPARE(doneStatus(dir + "/events-rank-1.jsonl"), QStringLiteral("complete"));
    }
    // Same seed, same curve: the fake trainer's losses are comparable across runs.
    const auto lossesA = eventsIn(a.localRunDir + "/events-rank-0.jsonl");
    const auto lossesB = eventsIn(b.localRunDir + "/events-rank-0.jsonl");
    QCOMPARE(std::get<spec::StepEvent>(lossesA[1].body).loss,
             std::get<spec::StepEvent>(lossesB[1].body).loss);
  }

  void stopIsGraceful() {
    const LaunchRequest req = request(2, {"--steps", "100000", "--step-ms", "50"});
    auto h = start(req);
    QVERIFY(h);
    QSignalSpy failed(h.get(), SIGNAL(rankFailed(int, QString)));
    QVERIFY(QTest::qWaitFor([&] { return lastStep(req.localRunDir) >= 1; }, kDeadlineMs));
    h->stop();
    QVERIFY(waitFinished(h.get()));
    for (int r = 0; r < 2; ++r) {
      QCOMPARE(h->ranks().at(r).exitCode, 0);
      QCOMPARE(h->ranks().at(r).signal, 0);
      QCOMPARE(doneStatus(req.localRunDir + QStringLiteral("/events-rank-%1.jsonl").arg(r)),
               QStringLiteral("stopped"));
    }
    QCOMPARE(failed.count(), 0);
  }

  void hungRankIsKilledAfterTheGrace() {
    LaunchRequest req = request(2, {"--steps", "100000", "--step-ms", "50"});
    req.launch.grace_s = 1;
    req.launch.env["SHARDSCOPE_FAKE_MODE"] = "hang --fail-step 2 --rank-only 1";
    auto h = start(req);
    QVERIFY(h);
    QSignalSpy failed(h.get(), SIGNAL(rankFailed(int, QString)));
    const QString log1 = req.localRunDir + "/rank-1.log";
    QVERIFY(QTest::qWaitFor([&] { return readAll(log1).contains("injected hang"); }, kDeadlineMs));
    h->stop();
    QVERIFY(waitFinished(h.get()));
    QCOMPARE(h->ranks().at(0).exitCode, 0);
    QCOMPARE(doneStatus(req.localRunDir + "/events-rank-0.jsonl"), QStringLiteral("stopped"));
    QCOMPARE(h->ranks().at(1).signal, SIGKILL);
    QCOMPARE(failed.count(), 0);
    QVERIFY(liveInSessions(h->location().pids).isEmpty());
  }

  void rankFailuresStopTheRun_data() {
    QTest::addColumn<QString>("mode");
    QTest::addColumn<int>("exitCode");
    QTest::addColumn<int>("signal");
    QTest::addColumn<QString>("reason");
    QTest::newRow("crash exit 3") << "crash --crash-how exit" << 3 << 0 << "exited with code 3";
    QTest::newRow("crash abort") << "crash --crash-how abort" << -1 << int(SIGABRT) << "SIGABRT";
    // The handle reports the exit code; oom comes from the trainer's error event (monitor).
    QTest::newRow("oom") << "oom" << 1 << 0 << "exited with code 1";
  }

  void rankFailuresStopTheRun() {
    QFETCH(QString, mode);
    QFETCH(int, exitCode);
    QFETCH(int, signal);
    QFETCH(QString, reason);
    LaunchRequest req = request(2, {"--steps", "100000", "--step-ms", "30"});
    req.launch.grace_s = 2;
    req.launch.env["SHARDSCOPE_FAKE_MODE"] = (mode + " --fail-step 3 --rank-only 1").toStdString();
    auto h = start(req);
    QVERIFY(h);
    QSignalSpy failed(h.get(), SIGNAL(rankFailed(int, QString)));
    QVERIFY(waitFinished(h.get()));
    QCOMPARE(failed.count(), 1);
    QCOMPARE(failed.first().at(0).toInt(), 1);
    QVERIFY2(failed.first().at(1).toString().contains(reason),
             qPrintable(failed.first().at(1).toString()));
    QCOMPARE(h->ranks().at(1).exitCode, exitCode);
    QCOMPARE(h->ranks().at(1).signal, signal);
    QCOMPARE(h->ranks().at(0).exitCode, 0);
    QCOMPARE(doneStatus(req.localRunDir + "/events-rank-0.jsonl"), QStringLiteral("stopped"));
    // The rank's last words are in its log.
    auto log = h->readLog(1, 0, 1 << 20);
    QVERIFY(log.ok());
    QVERIFY(log->contains("injected") || log->contains("out of memory"));
  }

  void attachFromANewLauncherSeesExits() {
    const LaunchRequest req = request(2, {"--steps", "100000", "--step-ms", "50"});
    QJsonObject stored;
    {
      auto first = start(req);
      QVERIFY(first);
      stored = first->location().toJson();
    }  // the first handle is gone; the ranks are not
    QVERIFY(QTest::qWaitFor([&] { return lastStep(req.localRunDir) >= 1; }, kDeadlineMs));
    const QByteArray text = QJsonDocument(stored).toJson();
    auto loc = RunLocation::fromJson(QJsonDocument::fromJson(text).object());
    QVERIFY2(loc.ok(), loc.ok() ? "" : loc.message().c_str());
    LocalLauncher other;
    auto h = other.attach(*loc);
    QVERIFY2(h.ok(), h.ok() ? "" : h.message().c_str());
    auto& handle = *h;
    for (const RankState& s : handle->ranks()) QCOMPARE(s.phase, RankState::Phase::running);
    QSignalSpy changed(handle.get(), &RunHandle::ranksChanged);
    QCOMPARE(::kill(static_cast<pid_t>(loc->pids[0]), SIGTERM), 0);
    QVERIFY(QTest::qWaitFor([&] { return handle->ranks().at(0).phase == RankState::Phase::exited; },
                            kDeadlineMs));
    QVERIFY(changed.count() >= 1);
    QCOMPARE(handle->ranks().at(0).exitCode, 0);  // still our child: its status is known
    handle->stop();
    QVERIFY(waitFinished(handle.get()));
    QCOMPARE(handle->ranks().at(1).exitCode, 0);
  }

  // Ranks this process did not start (a backend that restarted): exits are seen through /proc,
  // and a rank that ended without `done` stops the run.
  void attachToRanksOfAnotherProcess() {
    const LaunchRequest req = request(2);
    const QString dir = req.localRunDir;
    QString script;
    for (int r = 0; r < 2; ++r) {
      script += QStringLiteral(
                    "RANK=%1 WORLD_SIZE=2 MASTER_PORT=0 SHARDSCOPE_RDZV_FILE=%2/port "
                    "setsid %3 train trial.toml --steps 100000 --step-ms 50 %4 "
                    ">events-rank-%1.jsonl 2>rank-%1.log </dev/null & echo $!\n")
                    .arg(r)
                    .arg(dir, kFake,
                         r == 1 ? QStringLiteral("--mode no-done --fail-step 40") : QString());
    }
    QProcess sh;
    sh.setWorkingDirectory(dir);
    sh.start(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), script});
    QVERIFY(sh.waitForFinished(kDeadlineMs));
    const QList<QByteArray> pids = sh.readAllStandardOutput().trimmed().split('\n');
    QCOMPARE(pids.size(), 2);
    RunLocation loc;
    loc.kind = QStringLiteral("local");
    loc.runDir = dir;
    loc.worldSize = 2;
    for (const QByteArray& p : pids) {
      loc.pids << p.toLongLong();
      m_sessions << p.toLongLong();
      const QByteArray stat = readAll(QStringLiteral("/proc/%1/stat").arg(p.toLongLong()));
      loc.startTicks << stat.mid(stat.lastIndexOf(')') + 2).split(' ').value(19).toLongLong();
    }
    LocalLauncher launcher(2);
    auto h = launcher.attach(loc);
    QVERIFY(h.ok());
    auto& handle = *h;
    QSignalSpy failed(handle.get(), SIGNAL(rankFailed(int, QString)));
    QVERIFY(QTest::qWaitFor([&] { return failed.count() > 0; }, kDeadlineMs));
    QCOMPARE(failed.first().at(0).toInt(), 1);
    QVERIFY(failed.first().at(1).toString().contains("without a done event"));
    QCOMPARE(handle->ranks().at(1).exitCode, -1);  // not our child: the code is unknowable
    QVERIFY(waitFinished(handle.get()));
    QCOMPARE(doneStatus(dir + "/events-rank-0.jsonl"), QStringLiteral("stopped"));
  }

  void environmentReachesEveryRank() {
    LaunchRequest req = request(
        2, {"--steps", "1", "--step-ms", "1", "--print-env", "SHARDSCOPE_TEST_VAR,EXTRA_VAR"});
    req.launch.threads_per_rank = 3;
    req.launch.gpus = {4, 5, 6, 7};
    req.launch.env["SHARDSCOPE_TEST_VAR"] = "two words";
    req.extraEnv.insert(QStringLiteral("EXTRA_VAR"), QStringLiteral("from-backend"));
    auto h = start(req);
    QVERIFY(h);
    QVERIFY(waitFinished(h.get()));
    for (int r = 0; r < 2; ++r) {
      QCOMPARE(h->ranks().at(r).exitCode, 0);
      const QString log =
          QString::fromUtf8(readAll(req.localRunDir + QStringLiteral("/rank-%1.log").arg(r)));
      for (const QString& expected :
           {QStringLiteral("RANK=%1 ").arg(r), QStringLiteral("LOCAL_RANK=%1 ").arg(r),
            QStringLiteral("WORLD_SIZE=2 "), QStringLiteral("LOCAL_WORLD_SIZE=2 "),
            QStringLiteral("MASTER_ADDR=127.0.0.1 "), QStringLiteral("OMP_NUM_THREADS=3 "),
            QStringLiteral("CUDA_VISIBLE_DEVICES=%1 ").arg(r == 0 ? "4,5" : "6,7"),
            QStringLiteral("SHARDSCOPE_TEST_VAR=two words "),
            QStringLiteral("EXTRA_VAR=from-backend ")}) {
        QVERIFY2(log.contains(expected), qPrintable(expected + " not in: " + log));
      }
    }
  }

  // The rendezvous belongs to the run (issue 29, item 7): every rank of a run gets one fresh
  // SHARDSCOPE_RDZV_TOKEN in its environment, never on its command line, another run another;
  // the run directory is 0700 and every file the ranks and the launcher create in it 0600.
  void rendezvousTokenAndModes() {
    const QRegularExpression tokenIn(QStringLiteral("SHARDSCOPE_RDZV_TOKEN=([^ \\n]*)"));
    QStringList tokens;
    for (int run = 0; run < 2; ++run) {
      LaunchRequest req =
          request(2, {"--steps", "3", "--step-ms", "200", "--print-env", "SHARDSCOPE_RDZV_TOKEN"});
      auto h = start(req);
      QVERIFY(h);
      const qint64 pid = h->location().pids.at(0);
      const QByteArray cmdline = readAll(QStringLiteral("/proc/%1/cmdline").arg(pid));
      const QByteArray environ = readAll(QStringLiteral("/proc/%1/environ").arg(pid));
      QVERIFY(waitFinished(h.get()));
      QStringList mine;
      for (int r = 0; r < 2; ++r) {
        QCOMPARE(h->ranks().at(r).exitCode, 0);
        const QString log =
            QString::fromUtf8(readAll(req.localRunDir + QStringLiteral("/rank-%1.log").arg(r)));
        const auto m = tokenIn.match(log);
        QVERIFY2(m.hasMatch(), qPrintable(log));
        mine << m.captured(1);
      }
      QCOMPARE(mine[0], mine[1]);
      QVERIFY2(QRegularExpression(QStringLiteral("^[0-9a-f]{64}$")).match(mine[0]).hasMatch(),
               qPrintable(mine[0]));
      QVERIFY(environ.isEmpty() || environ.contains(mine[0].toUtf8()));
      QVERIFY2(!cmdline.isEmpty() && !cmdline.contains(mine[0].toUtf8()),
               "the token is on the command line (or the rank was gone before it was read)");
      tokens << mine[0];

      const auto mode = [](const QString& path) {
        struct stat st {};
        return ::stat(QFile::encodeName(path).constData(), &st) == 0 ? (st.st_mode & 07777)
                                                                     : 0xFFFF;
      };
      QCOMPARE(mode(req.localRunDir), 0700U);
      for (const QString& name :
           {QStringLiteral("rank-0.log"), QStringLiteral("rank-1.log"),
            QStringLiteral("events-rank-0.jsonl"), QStringLiteral("events-rank-1.jsonl"),
            QStringLiteral("rendezvous-port")}) {
        QVERIFY2(mode(req.localRunDir + "/" + name) == 0600U,
                 qPrintable(name + QStringLiteral(" has mode %1, want 600")
                                       .arg(mode(req.localRunDir + "/" + name), 0, 8)));
      }
    }
    QVERIFY2(tokens[0] != tokens[1], "two runs got the same token");
  }

  void badRequestsAreClearErrors_data() {
    QTest::addColumn<QString>("what");
    QTest::addColumn<QString>("expected");
    QTest::newRow("missing trainer") << "missing"
                                     << "launch.trainer: /nonexistent/shardtrain does not exist";
    QTest::newRow("not on PATH") << "path"
                                 << "launch.trainer: \"no-such-trainer-xyz\" is not on PATH";
    QTest::newRow("not executable") << "noexec"
                                    << "is not an executable file";
    QTest::newRow("bad format") << "badexec"
                                << "launch.trainer: cannot start";
    QTest::newRow("two nodes") << "nnodes"
                               << "launch.nnodes: the local launcher runs 1 node, got 2";
    QTest::newRow("uneven gpus") << "gpus"
                                 << "launch.gpus: 3 GPUs do not split evenly over 2 ranks";
    QTest::newRow("RANK in env") << "rank"
                                 << "launch.env: RANK is set by the launcher";
    QTest::newRow("threads in env")
        << "omp"
        << "launch.env: OMP_NUM_THREADS comes from launch.threads_per_rank";
    QTest::newRow("no run dir") << "dir"
                                << "does not exist; the backend creates it";
  }

  void badRequestsAreClearErrors() {
    QFETCH(QString, what);
    QFETCH(QString, expected);
    LaunchRequest req = request(2);
    const QString junk = req.localRunDir + "/junk";
    if (what == "missing") req.launch.trainer = "/nonexistent/shardtrain";
    if (what == "path") req.launch.trainer = "no-such-trainer-xyz";
    if (what == "noexec") req.launch.trainer = (req.localRunDir + "/trial.toml").toStdString();
    if (what == "badexec") {
      QFile f(junk);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(
          "\x7f"
          "ELF not really");
      f.close();
      f.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
      req.launch.trainer = junk.toStdString();
    }
    if (what == "nnodes") req.launch.nnodes = 2;
    if (what == "gpus") req.launch.gpus = {0, 1, 2};
    // insert_or_assign of std::string: GCC 12 at -O3 reports a false -Wrestrict on
    // operator=(const char*) here since request() creates the run directory through makeRunDir.
    if (what == "rank") req.launch.env.insert_or_assign("RANK", std::string("0"));
    if (what == "omp") req.launch.env.insert_or_assign("OMP_NUM_THREADS", std::string("8"));
    if (what == "dir") req.localRunDir = m_root.filePath("no-such-dir");
    LocalLauncher launcher;
    auto h = launcher.start(req);
    QVERIFY(!h.ok());
    QVERIFY2(QString::fromStdString(h.message()).contains(expected), h.message().c_str());
    // Nothing runs: no rank wrote anything (a failed exec leaves at most an empty file).
    QVERIFY(readAll(req.localRunDir + "/events-rank-0.jsonl").isEmpty());
    QVERIFY(readAll(req.localRunDir + "/events-rank-1.jsonl").isEmpty());
    QVERIFY(!QFileInfo::exists(req.localRunDir + "/rank-1.log"));
  }

  void garbageOnStdoutDoesNotFailTheRun() {
    const LaunchRequest req = request(1, {"--mode", "garbage", "--steps", "4", "--step-ms", "1"});
    auto h = start(req);
    QVERIFY(h);
    QVERIFY(waitFinished(h.get()));
    QCOMPARE(h->ranks().at(0).exitCode, 0);
    const QByteArray events = readAll(req.localRunDir + "/events-rank-0.jsonl");
    QVERIFY(events.contains("garbage: this line is not JSON"));
    QCOMPARE(doneStatus(req.localRunDir + "/events-rank-0.jsonl"), QStringLiteral("complete"));
  }

  void runLocationJsonRoundTrips() {
    RunLocation loc;
    loc.kind = QStringLiteral("ssh");
    loc.host = QStringLiteral("gpu-box");
    loc.hosts = {QStringLiteral("a"), QStringLiteral("b")};
    loc.runDir = QStringLiteral("/runs/x y");
    loc.jobId = QStringLiteral("17");
    loc.pids = {101, 102, 103, 104};
    loc.startTicks = {5000000001, 5000000002, 5000000003, 5000000004};
    loc.worldSize = 4;
    auto back = RunLocation::fromJson(loc.toJson());
    QVERIFY(back.ok());
    QCOMPARE(back->kind, loc.kind);
    QCOMPARE(back->host, loc.host);
    QCOMPARE(back->hosts, loc.hosts);
    QCOMPARE(back->runDir, loc.runDir);
    QCOMPARE(back->jobId, loc.jobId);
    QCOMPARE(back->pids, loc.pids);
    QCOMPARE(back->startTicks, loc.startTicks);
    QCOMPARE(back->worldSize, 4);
  }

  void runLocationJsonErrorsNameTheField_data() {
    QTest::addColumn<QByteArray>("json");
    QTest::addColumn<QString>("expected");
    QTest::newRow("kind") << QByteArray(R"({"kind":"cloud","run_dir":"/r","world_size":1})")
                          << "run location: kind: expected \"local\", \"ssh\", \"slurm\" or "
                             "\"program\", got \"cloud\"";
    QTest::newRow("run_dir") << QByteArray(R"({"kind":"slurm","world_size":1})")
                             << "run location: run_dir: missing or empty";
    QTest::newRow("world") << QByteArray(R"({"kind":"slurm","run_dir":"/r","world_size":1.5})")
                           << "run location: world_size: expected an integer, got a number";
    QTest::newRow("pids") << QByteArray(
                                 R"({"kind":"local","run_dir":"/r","world_size":2,"pids":[1,"2"]})")
                          << "run location: pids[1]: expected an integer, got a string";
    QTest::newRow("pid count")
        << QByteArray(R"({"kind":"local","run_dir":"/r","world_size":2,"pids":[1]})")
        << "run location: pids: a local run needs one pid per rank (2), got 1";
    QTest::newRow("ticks")
        << QByteArray(
               R"({"kind":"local","run_dir":"/r","world_size":1,"pids":[1],"start_ticks":[1,2]})")
        << "run location: start_ticks: expected one start time per pid (1), got 2";
  }

  void runLocationJsonErrorsNameTheField() {
    QFETCH(QByteArray, json);
    QFETCH(QString, expected);
    auto loc = RunLocation::fromJson(QJsonDocument::fromJson(json).object());
    QVERIFY(!loc.ok());
    QVERIFY2(QString::fromStdString(loc.message()).startsWith(expected), loc.message().c_str());
  }

  // The one spawnInSession also starts a run's supervisor or a sweep, detached: a child of init
  // in a session of its own, never of this process, with its environment and output as asked.
  void detachedSpawnIsNotOurChild() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    localproc::SpawnSpec spec;
    spec.program = QStringLiteral("/bin/sh");
    spec.args = {QStringLiteral("-c"), QStringLiteral("echo \"marker=$SHARDSCOPE_TEST_MARK\"; "
                                                      "echo to-stderr >&2; exec sleep 60")};
    spec.env = localproc::environmentWith({QStringLiteral("SHARDSCOPE_TEST_MARK=detached")});
    spec.stdoutPath = dir.filePath(QStringLiteral("out.log"));
    spec.stderrPath = spec.stdoutPath;
    spec.detached = true;
    auto spawned = localproc::spawnInSession(spec);
    QVERIFY2(spawned.ok(), spawned.ok() ? "" : spawned.message().c_str());
    const qint64 pid = spawned->pid;
    const auto cleanup = qScopeGuard([pid] { ::kill(pid_t(pid), SIGKILL); });
    QTRY_VERIFY_WITH_TIMEOUT(shardscope::testing::readAll(spec.stdoutPath).contains("to-stderr"),
                             kDeadlineMs);
    QVERIFY(shardscope::testing::readAll(spec.stdoutPath).contains("marker=detached"));
    const auto st = localproc::readProcStat(pid);
    QVERIFY(st.has_value());
    QVERIFY(st->ppid != ::getpid());
    QVERIFY(st->session != ::getsid(0));
    QCOMPARE(QFileInfo(spec.stdoutPath).permissions() & (QFile::ReadGroup | QFile::ReadOther),
             QFileDevice::Permissions());

    // A log folder that does not exist is an error naming the log, and nothing starts.
    spec.stdoutPath = dir.filePath(QStringLiteral("missing/out.log"));
    spec.stderrPath = spec.stdoutPath;
    auto refused = localproc::spawnInSession(spec);
    QVERIFY(!refused.ok());
    QVERIFY2(QString::fromStdString(refused.message()).contains(spec.stdoutPath),
             refused.message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestLocalLauncher)
#include "tst_locallauncher.moc"
