// Must hold, through the whole backend path: SshLauncher -> RunMonitor -> RunStore. A
// 2-node run of the fake trainer over a private sshd; mid-run the sshd listener and every
// per-connection sshd are killed with SIGKILL and kept down while the monitor's reads and the
// handle's reconnects fail and the ranks write on; then sshd restarts on the same port with the
// same host key. Checked on the rows of the real SQLite run log after the run ends `complete`:
// every rank's events table equals its events-rank-N.jsonl line for line (seq 0..n-1 once each),
// the metric rows equal what the step/mem events carry, no anomaly, and the ranks' processes are
// the same ones before, during and after the outage.
#include <signal.h>

#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <tuple>
#include <vector>

#include "backend/launch/sshlauncher.h"
#include "backend/monitor/runmonitor.h"
#include "backend/ssh/sshconfig.h"
#include "backend/ssh/sshsession.h"
#include "backend/store/runstore.h"
#include "remotetest.h"
#include "tests/support/paths.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;
using namespace remotetest;
using shardscope::testing::why;

namespace {

constexpr int kDeadlineMs = 60000;
constexpr int kSteps = 100;   // fake trainer steps: long enough to span the outage
constexpr int kStepMs = 150;  // wall time per step

// Log lines that show the outage was seen: the handle's failed reconnects and the monitor's
// failed reads. Counted by a message handler that then passes every message on to QTest's.
std::atomic<int> g_reconnectFailures{0};
std::atomic<int> g_monitorReadFailures{0};
// Per rank: how many polls in a row the monitor's reads failed, from its "reading again" line.
std::array<std::atomic<int>, 2> g_failedReadStreak{};
QtMessageHandler g_previousHandler = nullptr;

void countOutageMessages(QtMsgType type, const QMessageLogContext& context, const QString& text) {
  const QLatin1String category(context.category ? context.category : "");
  if (category == QLatin1String("shardscope.launch.ssh") && text.contains("reconnect to") &&
      text.contains("failed")) {
    ++g_reconnectFailures;
  }
  if (category == QLatin1String("shardscope.backend.runmonitor") && type == QtWarningMsg &&
      text.contains(" rank ")) {
    ++g_monitorReadFailures;
  }
  static const QRegularExpression again("rank (\\d): reading again after (\\d+) failed reads");
  if (const auto match = again.match(text); match.hasMatch() && match.captured(1).toInt() < 2) {
    g_failedReadStreak[std::size_t(match.captured(1).toInt())] = match.captured(2).toInt();
  }
  if (g_previousHandler) g_previousHandler(type, context, text);
}

/// True while `pid` is the same running (not zombie) process that started at `startTicks`.
bool sameProcessAlive(qint64 pid, qint64 startTicks) {
  const auto info = procInfo(pid);
  return info && info->startTicks == startTicks && info->state != 'Z' && info->state != 'X';
}

/// True when `pid` has exited (absent, or a zombie not yet reaped).
bool processGone(qint64 pid) {
  const auto info = procInfo(pid);
  return !info || info->state == 'Z' || info->state == 'X';
}

QList<QByteArray> linesOf(const QByteArray& text) {
  QList<QByteArray> lines = text.split('\n');
  if (!lines.isEmpty() && lines.last().isEmpty()) lines.removeLast();
  return lines;
}

// (key, step, rank, value, time), sorted: metric rows compared as sets.
using MetricTuple = std::tuple<QString, qint64, int, double, double>;

// What the run log must hold for one events file, read independently from the JSON lines with
// the keys the protocol names (docs/trainer.md "Event protocol v1").
void expectMetrics(const QList<QByteArray>& lines, std::vector<MetricTuple>& out) {
  for (const QByteArray& line : lines) {
    const QJsonObject ev = QJsonDocument::fromJson(line).object();
    const QString kind = ev.value("ev").toString();
    const qint64 step = ev.value("step").toInteger();
    const int rank = ev.value("rank").toInt();
    const double t = ev.value("t").toDouble();
    auto add = [&](const QString& key, const QJsonValue& value) {
      out.emplace_back(key, step, rank, value.toDouble(), t);
    };
    if (kind == "step") {
      for (const char* key : {"loss", "lr", "grad_norm", "tokens_per_s", "mfu"}) {
        add(key, ev.value(key));
      }
      const QJsonObject comm = ev.value("comm_bytes").toObject();
      add("comm.all_gather", comm.value("all_gather"));
      add("comm.reduce_scatter", comm.value("reduce_scatter"));
    } else if (kind == "mem") {
      for (const char* key : {"allocated", "reserved", "peak", "rss"}) {
        add(QString("mem.") + key, ev.value(key));
      }
    } else if (kind == "eval") {
      const QJsonObject metrics = ev.value("metrics").toObject();
      for (auto it = metrics.begin(); it != metrics.end(); ++it) add("eval." + it.key(), *it);
    }
  }
}

QMap<QString, QString> envFile(const QString& path) {
  QMap<QString, QString> env;
  for (const QByteArray& line : readAll(path).split('\n')) {
    const QList<QByteArray> kv = line.mid(7).split('=');  // "export K=V"
    if (line.startsWith("export ") && kv.size() == 2) env.insert(kv[0], kv[1]);
  }
  return env;
}

QString eventsPath(const QString& runDir, int rank) {
  return runDir + QString("/events-rank-%1.jsonl").arg(rank);
}

}  // namespace

class TestSshOutageRows : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;
  QString m_sshdDir;
  QString m_sshdScript = shardscope::testing::sourceDir() + "/tests/fixtures/sshd.sh";
  SshLauncherOptions m_options;

  qint64 storedEvents(RunReader& reader, qint64 runId, int rank) {
    auto count = reader.eventCount(runId, rank);
    return count ? *count : -1;
  }

  // Starts the run's two ranks (one per alias, both on this machine's private sshd).
  std::unique_ptr<RunHandle> launch(qint64 runId, const QString& name) {
    LaunchRequest req;
    req.runId = runId;
    req.runName = name;
    req.localRunDir = m_tmp.filePath("local");
    QDir().mkpath(req.localRunDir);
    writeAll(req.localRunDir + "/trial.toml", "[train]\nmax_steps = 100\n");
    req.launch.kind = spec::LaunchKind::ssh;
    req.launch.nnodes = 2;
    req.launch.nproc_per_node = 1;
    req.launch.hosts = {"own-a", "own-b"};
    req.launch.remote_dir = m_tmp.filePath("remote").toStdString();
    req.launch.trainer =
        shardscope::testing::envPath("SHARDSCOPE_TEST_FAKETRAINER", "the faketrainer executable")
            .toStdString();
    req.launch.grace_s = 5;
    req.trainerArgs = {"train",     "trial.toml",
                       "--steps",   QString::number(kSteps),
                       "--step-ms", QString::number(kStepMs)};
    SshLauncher launcher(m_options);
    auto handle = launcher.start(req);
    if (!handle) qWarning("start failed: %s", handle.message().c_str());
    return handle ? std::move(handle).value() : nullptr;
  }

  // Kills the private sshd's listener and every sshd below it; returns the pids it killed.
  QList<qint64> killSshd() {
    const qint64 listener = readAll(m_sshdDir + "/sshd.pid").trimmed().toLongLong();
    if (listener <= 0) return {};
    const QList<qint64> tree = sshdTree(listener);
    QList<qint64> killed;
    for (qint64 pid : tree) {
      if (::kill(static_cast<pid_t>(pid), SIGKILL) == 0) killed.append(pid);
    }
    return killed;
  }

  void restartSshd() {
    int code = -1;
    const QByteArray out = run(
        "/usr/sbin/sshd", {"-f", m_sshdDir + "/sshd_config", "-E", m_sshdDir + "/sshd.log"}, &code);
    QVERIFY2(code == 0, out.constData());
  }

  // The ranks' process groups seen over a fresh connection through the restarted server.
  void checkGroupsOverSecondConnection(const QList<qint64>& pids) {
    auto config = SshConfig::load(m_options.sshConfigPath.toStdString());
    QVERIFY2(config, why(config).c_str());
    const SshTarget target = config->target("own-b", m_options.knownHostsPath.toStdString());
    // sshd forks into the background before it listens: the first attempts may be refused.
    std::optional<SshSession> session;
    std::string lastError;
    auto connect = [&] {
      auto attempt = SshSession::create(target);
      Result<void> opened = attempt ? attempt->open() : Result<void>(attempt.error());
      if (opened) session.emplace(std::move(attempt).value());
      lastError = why(opened);
      return session.has_value();
    };
    QTRY_VERIFY2_WITH_TIMEOUT(connect(), lastError.c_str(), kDeadlineMs);
    std::string script;
    for (qint64 pid : pids) script += "kill -0 -" + std::to_string(pid) + " && ";
    auto probe = session->exec(script + "echo all-alive", 15000);
    QVERIFY2(probe, why(probe).c_str());
    QCOMPARE(QByteArray::fromStdString(probe->out).trimmed(), QByteArray("all-alive"));
  }

  // Every row of one rank against its files: events, offsets, log lines.
  void checkRankRows(RunReader& reader, qint64 runId, int rank, const QString& runDir) {
    const QByteArray events = readAll(eventsPath(runDir, rank));
    const QList<QByteArray> lines = linesOf(events);
    QVERIFY(lines.size() > kSteps);
    auto rows = reader.events(runId, rank);
    QVERIFY2(rows, why(rows).c_str());
    QCOMPARE(qsizetype(rows->size()), lines.size());
    qint64 offset = 0;
    for (qsizetype i = 0; i < lines.size(); ++i) {
      const EventRow& row = (*rows)[std::size_t(i)];
      const QJsonObject ev = QJsonDocument::fromJson(lines[i]).object();
      QCOMPARE(ev.value("seq").toInteger(-1), qint64(i));  // the file itself is gap-free
      QCOMPARE(row.seq, qint64(i));
      QCOMPARE(row.json, lines[i]);
      QCOMPARE(row.kind, ev.value("ev").toString());
      QCOMPARE(row.offset, offset);
      QCOMPARE(row.rank, rank);
      offset += lines[i].size() + 1;
    }
    QCOMPARE(lines.last().contains("\"status\":\"complete\""), true);
    auto count = reader.eventCount(runId, rank);
    auto maxSeq = reader.maxSeq(runId, rank);
    QVERIFY(count && maxSeq);
    QCOMPARE(*count, qint64(lines.size()));
    QCOMPARE(*maxSeq, qint64(lines.size() - 1));
    auto eventsOffset = reader.offset(runId, rank, RankFile::events);
    QVERIFY2(eventsOffset, why(eventsOffset).c_str());
    QCOMPARE(*eventsOffset, qint64(events.size()));

    const QByteArray log = readAll(runDir + QString("/rank-%1.log").arg(rank));
    auto logRows = reader.logLines(runId, rank);
    QVERIFY2(logRows, why(logRows).c_str());
    QStringList stored;
    for (const LogLine& line : *logRows) stored << line.text;
    QStringList onDisk;
    for (const QByteArray& line : linesOf(log)) onDisk << QString::fromUtf8(line);
    QCOMPARE(stored, onDisk);
  }

  void checkMetricRows(RunReader& reader, qint64 runId, const QString& runDir) {
    std::vector<MetricTuple> expected;
    for (int rank = 0; rank < 2; ++rank) {
      expectMetrics(linesOf(readAll(eventsPath(runDir, rank))), expected);
    }
    auto keys = reader.metricKeys(runId);
    QVERIFY2(keys, why(keys).c_str());
    std::vector<MetricTuple> stored;
    for (const QString& key : *keys) {
      auto points = reader.metric(runId, key);
      QVERIFY2(points, why(points).c_str());
      for (const MetricPoint& p : *points)
        stored.emplace_back(key, p.step, p.rank, p.value, p.time);
    }
    std::sort(expected.begin(), expected.end());
    std::sort(stored.begin(), stored.end());
    QCOMPARE(expected.size(), std::size_t(kSteps * (7 + 4 + 4)));  // step + mem on both ranks
    QCOMPARE(stored.size(), expected.size());
    for (std::size_t i = 0; i < stored.size(); ++i) {
      QVERIFY2(stored[i] == expected[i],
               qPrintable(QString("metric row %1: stored %2 step %3 rank %4 = %5, expected %6 "
                                  "step %7 rank %8 = %9")
                              .arg(i)
                              .arg(std::get<0>(stored[i]))
                              .arg(std::get<1>(stored[i]))
                              .arg(std::get<2>(stored[i]))
                              .arg(std::get<3>(stored[i]))
                              .arg(std::get<0>(expected[i]))
                              .arg(std::get<1>(expected[i]))
                              .arg(std::get<2>(expected[i]))
                              .arg(std::get<3>(expected[i]))));
    }
    auto total = reader.metricCount(runId);
    QVERIFY2(total, why(total).c_str());
    QCOMPARE(*total, qint64(expected.size()));
  }

  // What the outage helpers share.
  struct Outage {
    RunReader& reader;
    qint64 runId;
    const RunLocation& loc;
    QSignalSpy& connection;
    QList<qint64> startTicks;  // the ranks' processes before the outage
  };

  void checkSameRanks(const Outage& outage, const char* when) {
    for (int rank = 0; rank < 2; ++rank) {
      QVERIFY2(sameProcessAlive(outage.loc.pids[rank], outage.startTicks[rank]),
               qPrintable(QString("rank %1's process is gone or replaced %2").arg(rank).arg(when)));
    }
  }

  // Kills sshd and keeps it down until both connections are seen lost, reconnects have failed,
  // the monitor's reads have failed, and the ranks have written lines the run log lacks.
  void takeSshdDown(Outage& outage) {
    for (qint64 pid : outage.loc.pids) {
      const auto info = procInfo(pid);
      QVERIFY2(info, "a rank's process is not in /proc before the outage");
      outage.startTicks.append(info->startTicks);
    }
    const int reconnectsBefore = g_reconnectFailures;
    const int readsBefore = g_monitorReadFailures;
    const QList<qint64> killed = killSshd();
    QVERIFY2(killed.size() >= 3, "expected the listener and both connections' sshd processes");
    for (qint64 pid : killed) QTRY_VERIFY_WITH_TIMEOUT(processGone(pid), kDeadlineMs);
    QTRY_VERIFY_WITH_TIMEOUT(outage.connection.count() >= 2, kDeadlineMs);
    for (const QList<QVariant>& change : outage.connection) QCOMPARE(change.at(0).toBool(), false);
    QTRY_VERIFY_WITH_TIMEOUT(g_reconnectFailures > reconnectsBefore + 1, kDeadlineMs);
    QTRY_VERIFY_WITH_TIMEOUT(g_monitorReadFailures > readsBefore, kDeadlineMs);
    for (int rank = 0; rank < 2; ++rank) {
      QTRY_VERIFY_WITH_TIMEOUT(linesOf(readAll(eventsPath(outage.loc.runDir, rank))).size() >=
                                   storedEvents(outage.reader, outage.runId, rank) + 5,
                               kDeadlineMs);
    }
    checkSameRanks(outage, "while sshd was down");
  }

  // Restarts sshd (same port, same host key), checks the ranks at once (from /proc and over a
  // fresh connection, before the run can end), then waits until both nodes are reconnected.
  void bringSshdBack(Outage& outage) {
    restartSshd();
    if (QTest::currentTestFailed()) return;
    QVERIFY2(!readAll(eventsPath(outage.loc.runDir, 0)).contains("\"ev\":\"done\""),
             "the run ended before sshd came back: make it longer (kSteps)");
    checkSameRanks(outage, "after sshd came back");
    checkGroupsOverSecondConnection(outage.loc.pids);
    if (QTest::currentTestFailed()) return;
    QTRY_VERIFY_WITH_TIMEOUT(outage.connection.count() >= 4, kDeadlineMs);
    for (int i = 2; i < outage.connection.count(); ++i) {
      QCOMPARE(outage.connection.at(i).at(0).toBool(), true);
    }
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_tmp.isValid());
    m_sshdDir = m_tmp.filePath("sshd");
    int code = -1;
    const QByteArray started = run("bash", {m_sshdScript, "start", m_sshdDir}, &code);
    QVERIFY2(code == 0, started.constData());
    const QMap<QString, QString> sshd = envFile(m_sshdDir + "/env");
    QVERIFY2(sshd.contains("SSHD_PORT"), "sshd.sh wrote no SSHD_PORT");
    m_options.sshConfigPath = m_tmp.filePath("ssh_config");
    m_options.knownHostsPath = sshd.value("SSHD_KNOWN_HOSTS");
    m_options.pollIntervalMs = 200;
    m_options.reconnectInitialMs = 200;
    m_options.reconnectMaxMs = 1000;
    QVERIFY(writeAll(m_options.sshConfigPath, sshConfigFor(sshd, {"own-a", "own-b"})));
    QLoggingCategory::setFilterRules(
        "shardscope.launch.ssh.info=true\n"
        "shardscope.backend.runmonitor.info=true");
    g_previousHandler = qInstallMessageHandler(countOutageMessages);
  }

  void cleanupTestCase() {
    qInstallMessageHandler(g_previousHandler);
    run("bash", {m_sshdScript, "stop", m_sshdDir});
  }

  // sshd killed mid-run (listener and every per-connection child) and restarted: the ranks
  // kept running, the launcher reattached, and the run log holds every line exactly once.
  void sshdKilledMidRunLosesAndDoublesNoRow() {
    QElapsedTimer clock;
    clock.start();
    auto store = RunStore::open(m_tmp.filePath("runs.db"));
    QVERIFY2(store, why(store).c_str());
    NewRun newRun;
    newRun.name = "sshd-outage";
    newRun.worldSize = 2;
    auto runId = (*store)->createRun(newRun).get();
    QVERIFY2(runId, why(runId).c_str());
    auto handle = launch(*runId, newRun.name);
    QVERIFY(handle);
    const RunLocation loc = handle->location();
    VERIFY_OK((*store)->setRunLocation(*runId, loc.toJson()).get());
    QSignalSpy connection(handle.get(), &RunHandle::connectionChanged);
    RunMonitor::Options monitorOptions;
    monitorOptions.pollMs = 100;
    RunMonitor monitor(**store, *runId, *handle, monitorOptions);
    QSignalSpy finished(&monitor, &RunMonitor::finished);
    VERIFY_OK(monitor.start());
    auto reader = (*store)->reader();
    QVERIFY2(reader, why(reader).c_str());
    QTRY_VERIFY_WITH_TIMEOUT(storedEvents(*reader, *runId, 1) >= 5, kDeadlineMs);
    const qint64 killedAt = clock.elapsed();

    Outage outage{*reader, *runId, loc, connection, {}};
    takeSshdDown(outage);
    if (QTest::currentTestFailed()) return;
    QCOMPARE(monitor.isFinished(), false);
    const qint64 restartedAt = clock.elapsed();
    bringSshdBack(outage);
    if (QTest::currentTestFailed()) return;
    const qint64 reattachedAt = clock.elapsed();

    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), kDeadlineMs);
    QCOMPARE(finished.first().at(0).value<spec::RunStatus>(), spec::RunStatus::complete);
    QCOMPARE(monitor.malformedLines(), 0);
    for (int rank = 0; rank < 2; ++rank) {
      QVERIFY2(g_failedReadStreak[std::size_t(rank)] >= 2,
               "the monitor's reads did not fail across polls");
    }
    checkRunRows(*reader, *runId, loc.runDir);
    qInfo(
        "figures: sshd down %lld ms (killed at %lld ms), both nodes reconnected %lld ms after the "
        "restart (after the second-connection check), "
        "run ended at %lld ms; %d failed reconnects; monitor reads failed %d and %d polls in a "
        "row (rank 0, 1)",
        static_cast<long long>(restartedAt - killedAt), static_cast<long long>(killedAt),
        static_cast<long long>(reattachedAt - restartedAt), static_cast<long long>(clock.elapsed()),
        g_reconnectFailures.load(), g_failedReadStreak[0].load(), g_failedReadStreak[1].load());
  }

 private:
  void checkRunRows(RunReader& reader, qint64 runId, const QString& runDir) {
    auto record = reader.run(runId);
    QVERIFY2(record && *record, why(record).c_str());
    QCOMPARE((*record)->status, spec::RunStatus::complete);
    QCOMPARE((*record)->error, QString());
    for (int rank = 0; rank < 2; ++rank) {
      checkRankRows(reader, runId, rank, runDir);
      if (QTest::currentTestFailed()) return;
    }
    checkMetricRows(reader, runId, runDir);
    auto anomalies = reader.anomalies(runId);
    QVERIFY2(anomalies, why(anomalies).c_str());
    for (const Anomaly& anomaly : *anomalies) qWarning() << "anomaly:" << anomaly.detail;
    QCOMPARE(anomalies->size(), std::size_t(0));
  }
};

QTEST_GUILESS_MAIN(TestSshOutageRows)
#include "tst_ssh_outage_rows.moc"
