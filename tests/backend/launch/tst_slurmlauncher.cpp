// SlurmLauncher: the generated sbatch script field by field, then real 2-rank jobs on the Slurm
// fixture (one node on loopback): a job that completes, a graceful stop, a kill, a requeue that
// resumes with --resume auto, a controller outage mid-job (on a private cluster) that leaves the
// job running, and a submission over SSH through the sshd fixture.
#include <signal.h>
#include <sys/stat.h>

#include <QDeadlineTimer>
#include <QProcess>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>

#include "backend/launch/slurmlauncher.h"
#include "remotetest.h"
#include "tests/support/paths.h"
#include "tests/support/ranks.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;
using namespace remotetest;

using shardscope::testing::why;

using shardscope::testing::allExited;

namespace {}  // namespace

class TestSlurmLauncher : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;
  QMap<QString, QString> m_slurm;
  SlurmLauncherOptions m_options;

  LaunchRequest request(const QString& name, int steps, double stepS = 0.05) {
    LaunchRequest req;
    req.runName = name;
    req.localRunDir = m_tmp.filePath(name);
    // As the backend does (0700).
    if (!makeRunDir(req.localRunDir)) qWarning("cannot create %s", qPrintable(req.localRunDir));
    writeAll(req.localRunDir + "/trial.toml", "[train]\nmax_steps = 3\n");
    req.launch.kind = spec::LaunchKind::slurm;
    req.launch.nnodes = 1;
    req.launch.nproc_per_node = 2;
    req.launch.trainer = (testSourceDir() + "/fake_rank.sh").toStdString();
    req.launch.env = {{"FAKE_STEPS", std::to_string(steps)},
                      {"FAKE_STEP_S", std::to_string(stepS)}};
    req.launch.grace_s = 5;
    req.trainerArgs = {"train", "trial.toml"};
    return req;
  }

  std::unique_ptr<RunHandle> startOk(const LaunchRequest& req) {
    SlurmLauncher launcher(m_options);
    auto handle = launcher.start(req);
    if (!handle) qWarning("start failed: %s", handle.message().c_str());
    return handle ? std::move(handle).value() : nullptr;
  }

  QString jobState(const RunHandle& handle) {
    return static_cast<const SlurmRunHandle&>(handle).jobState();
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_tmp.isValid());
    m_slurm = fixtureEnv("slurm");
    m_options.commandEnv.insert("SLURM_CONF", m_slurm.value("SLURM_CONF"));
    m_options.pollIntervalMs = 300;
  }

  void scriptHasEveryField() {
    LaunchRequest req = request("script", 3);
    req.runName = "my run'; rm -rf $HOME";
    req.launch.nnodes = 2;
    req.launch.nproc_per_node = 3;
    req.launch.slurm_gpus_per_node = 4;
    req.launch.slurm_partition = "gpu";
    req.launch.slurm_account = "proj42";
    req.launch.slurm_time = "1-02:00:00";
    req.launch.slurm_extra = {"--exclusive", "--mem=0"};
    req.launch.grace_s = 90;
    req.launch.threads_per_rank = 6;
    req.launch.trainer = "/opt/my tools/shardtrain";
    req.launch.env = {{"HF_HOME", "/data/it's here"}};
    req.extraEnv.insert("SHARDSCOPE_RUN_ID", "7");
    req.trainerArgs = {"train", "trial.toml"};
    auto script = slurmBatchScript(req, "/runs/a b/$(x)");
    QVERIFY2(script, why(script).c_str());
    const QStringList lines = script->split('\n');
    for (const QString& expected :
         {QString("#!/bin/bash"), QString("#SBATCH --job-name=my_run___rm_-rf__HOME"),
          QString("#SBATCH --nodes=2"), QString("#SBATCH --ntasks-per-node=3"),
          QString("#SBATCH --gpus-per-node=4"), QString("#SBATCH --partition=gpu"),
          QString("#SBATCH --account=proj42"), QString("#SBATCH --time=1-02:00:00"),
          QString("#SBATCH --signal=TERM@90"), QString("#SBATCH --exclusive"),
          QString("#SBATCH --mem=0"), QString("cd '/runs/a b/$(x)' || exit 1"),
          QString("export OMP_NUM_THREADS='6'"), QString("export HF_HOME='/data/it'\\''s here'"),
          QString("export SHARDSCOPE_RUN_ID='7'"),
          QString("export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | "
                  "head -n 1)"),
          QString("export MASTER_PORT"),
          QString("if [ \"${SLURM_RESTART_COUNT:-0}\" -gt 0 ]; then set -- --resume auto; fi"),
          QString("srun --kill-on-bad-exit=1 --open-mode=append --output=events-rank-%t.jsonl "
                  "--error=rank-%t.log '/opt/my tools/shardtrain' 'train' 'trial.toml' "
                  "\"$@\"")}) {
      QVERIFY2(lines.contains(expected), qPrintable("missing line: " + expected + "\n" + *script));
    }
    // The run's rendezvous token is exported by this 0600 script, never put on srun's command
    // line; umask 077 makes srun's rank logs and event files owner-only.
    QVERIFY2(lines.contains("umask 077"), qPrintable(*script));
    const QRegularExpression token("^export SHARDSCOPE_RDZV_TOKEN='[0-9a-f]{64}'$");
    QVERIFY2(lines.filter(token).size() == 1, qPrintable(*script));
    QVERIFY(!lines.filter(QRegularExpression("^srun ")).first().contains("SHARDSCOPE_RDZV_TOKEN"));
    // Directives come before the first command, or sbatch ignores them.
    const auto firstCommand = lines.indexOf("set -u");
    for (int i = 0; i < lines.size(); ++i) {
      if (lines[i].startsWith("#SBATCH")) QVERIFY2(i < firstCommand, qPrintable(lines[i]));
    }
    QFile file(m_tmp.filePath("check.sh"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(script->toUtf8());
    file.close();
    int code = -1;
    const QByteArray syntax = run("bash", {"-n", file.fileName()}, &code);
    QVERIFY2(code == 0, syntax.constData());
    // No bash arrays: bash before 4.4 (RHEL/CentOS 7) calls an empty "${a[@]}" unbound under
    // set -u, and dash, which has none, parses the script only without them.
    QVERIFY2(!script->contains("[@]"), qPrintable(*script));
    const QByteArray posix = run("dash", {"-n", file.fileName()}, &code);
    QVERIFY2(code == 0, posix.constData());

    req.launch.slurm_gpus_per_node = 0;
    req.launch.slurm_partition.clear();
    auto plain = slurmBatchScript(req, "/r");
    QVERIFY(plain && !plain->contains("--gpus-per-node") && !plain->contains("--partition"));
    req.launch.slurm_extra = {"--mem=0\nrm -rf /"};
    auto bad = slurmBatchScript(req, "/r");
    QVERIFY(!bad);
    QVERIFY2(QString::fromStdString(bad.message()).contains("launch.slurm_extra"),
             bad.message().c_str());
    req.launch.slurm_extra.clear();
    req.launch.slurm_account = "a b";
    bad = slurmBatchScript(req, "/r");
    QVERIFY(!bad);
    QVERIFY2(QString::fromStdString(bad.message()).contains("launch.slurm_account"),
             bad.message().c_str());
  }

  void jobCompletesWithTwoRanks() {
    QVERIFY2(m_slurm.contains("SLURM_CONF"), "the Slurm fixture is not running (fixture slurm)");
    auto handle = startOk(request("complete", 3));
    QVERIFY(handle);
    const RunLocation loc = handle->location();
    QCOMPARE(loc.kind, QString("slurm"));
    QVERIFY(!loc.jobId.isEmpty());
    QCOMPARE(loc.worldSize, 2);
    QTRY_VERIFY_WITH_TIMEOUT(allExited(*handle), 60000);
    QCOMPARE(jobState(*handle), QString("COMPLETED"));
    QCOMPARE(handle->ranks().at(0).exitCode, 0);
    QString port;
    for (int rank = 0; rank < 2; ++rank) {
      const QByteArray events = readAll(loc.runDir + QString("/events-rank-%1.jsonl").arg(rank));
      QVERIFY2(events.contains("\"status\":\"complete\""), events.constData());
      auto through = handle->readEvents(rank, 0, 1 << 20);
      QVERIFY2(through, why(through).c_str());
      QCOMPARE(*through, events);
      const QString log =
          QString::fromUtf8(readAll(loc.runDir + QString("/rank-%1.log").arg(rank)));
      QVERIFY2(log.contains(QString("env SLURM_PROCID=%1\n").arg(rank)), qPrintable(log));
      QVERIFY2(log.contains("env SLURM_NTASKS=2\n"), qPrintable(log));
      QVERIFY2(log.contains("args: train trial.toml\n"), qPrintable(log));
      QVERIFY2(
          log.contains("env MASTER_ADDR=" + QString::fromUtf8(run("hostname", {"-s"})).trimmed()),
          qPrintable(log));
      const auto at = log.indexOf("env MASTER_PORT=");
      QVERIFY(at >= 0);
      const QString thisPort = log.mid(at + 16, log.indexOf('\n', at) - at - 16);
      if (rank == 0) port = thisPort;
      QCOMPARE(thisPort, port);
    }
    QVERIFY(QFile::exists(loc.runDir + "/job.sbatch"));
    // Owner-only (issue 29, item 7): the script (created 0600, it holds the run's token) and what
    // the job wrote under umask 077.
    for (const char* name :
         {"job.sbatch", "rank-0.log", "rank-1.log", "events-rank-0.jsonl", "events-rank-1.jsonl"}) {
      struct stat st {};
      QVERIFY2(::stat(qPrintable(loc.runDir + "/" + name), &st) == 0, name);
      QVERIFY2((st.st_mode & 0777) == 0600, name);
    }
  }

  void stopIsGracefulAndKillCancels() {
    auto handle = startOk(request("stop", 10000, 0.1));
    QVERIFY(handle);
    const QString runDir = handle->location().runDir;
    QTRY_VERIFY_WITH_TIMEOUT(readAll(runDir + "/events-rank-1.jsonl").contains("\"step\":2"),
                             60000);
    handle->stop();
    QTRY_VERIFY_WITH_TIMEOUT(allExited(*handle), 60000);
    QCOMPARE(jobState(*handle), QString("COMPLETED"));
    for (int rank = 0; rank < 2; ++rank) {
      const QByteArray events = readAll(runDir + QString("/events-rank-%1.jsonl").arg(rank));
      QVERIFY2(events.trimmed().split('\n').last().contains("\"status\":\"stopped\""),
               events.constData());
    }

    auto killed = startOk(request("kill", 10000, 0.1));
    QVERIFY(killed);
    const QString killDir = killed->location().runDir;
    QTRY_VERIFY_WITH_TIMEOUT(readAll(killDir + "/events-rank-1.jsonl").contains("\"step\":2"),
                             60000);
    killed->kill();
    QTRY_VERIFY_WITH_TIMEOUT(allExited(*killed), 60000);
    QCOMPARE(jobState(*killed), QString("CANCELLED"));
    QVERIFY(readAll(killDir + QString("/slurm-%1.out").arg(killed->location().jobId))
                .contains("CANCELLED"));
    for (int rank = 0; rank < 2; ++rank) {
      const QByteArray events = readAll(killDir + QString("/events-rank-%1.jsonl").arg(rank));
      QVERIFY2(!events.contains("\"complete\""), events.constData());
    }
  }

  void requeuedJobResumes() {
    auto handle = startOk(request("requeue", 10000, 0.1));
    QVERIFY(handle);
    const RunLocation loc = handle->location();
    QTRY_VERIFY_WITH_TIMEOUT(readAll(loc.runDir + "/events-rank-0.jsonl").contains("\"step\":1"),
                             60000);
    QProcess requeue;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("SLURM_CONF", m_slurm.value("SLURM_CONF"));
    requeue.setProcessEnvironment(env);
    requeue.start("scontrol", {"requeue", loc.jobId});
    QVERIFY(requeue.waitForFinished(30000));
    QVERIFY2(requeue.exitCode() == 0, requeue.readAllStandardError().constData());
    // Slurm holds a requeued job back for about two minutes (credential expiry); a test need
    // not wait for that: make it eligible now once it is pending again. The handle's polled
    // state can still say PENDING from before the job ran (a full run's log: PENDING,
    // COMPLETING, PENDING, no RUNNING); an update then lands before the requeue sets its hold
    // and the job waited 150 s. So the update is repeated while the job stays pending.
    QTRY_VERIFY_WITH_TIMEOUT(jobState(*handle) == "PENDING", 60000);
    const auto resumed = [&] {
      return readAll(loc.runDir + "/rank-0.log").contains("args: train trial.toml --resume auto\n");
    };
    QDeadlineTimer deadline(90000);
    while (!resumed() && !deadline.hasExpired()) {
      if (jobState(*handle) == "PENDING") {
        requeue.start("scontrol", {"update", "JobId=" + loc.jobId, "StartTime=now"});
        QVERIFY(requeue.waitForFinished(30000));
        QVERIFY2(requeue.exitCode() == 0, requeue.readAllStandardError().constData());
      }
      QTest::qWait(3000);
    }
    QVERIFY2(resumed(), qPrintable("job " + loc.jobId + " never restarted: " + jobState(*handle)));
    // The first attempt's lines are kept (append mode): both starts are in the file.
    QCOMPARE(readAll(loc.runDir + "/rank-0.log").count("args: train trial.toml"), 2);
    handle->kill();
    QTRY_VERIFY_WITH_TIMEOUT(allExited(*handle), 60000);
  }

  void controllerOutageLeavesTheJobRunning() {
    // A private cluster: stopping the shared fixture's controller would fail other tests' jobs.
    QTemporaryDir cluster;
    QVERIFY(cluster.isValid());
    const QString fixture = shardscope::testing::sourceDir() + "/tests/fixtures/slurm.sh";
    int code = -1;
    const QByteArray started = run(fixture, {"start", cluster.path()}, &code);
    QVERIFY2(code == 0, started.constData());
    const auto stopCluster = qScopeGuard([&] { run(fixture, {"stop", cluster.path()}); });
    SlurmLauncherOptions options = m_options;
    options.commandEnv.insert("SLURM_CONF", cluster.filePath("slurm.conf"));
    SlurmLauncher launcher(options);
    auto started_job = launcher.start(request("outage", 80, 0.1));
    QVERIFY2(started_job, why(started_job).c_str());
    RunHandle& handle = **started_job;
    const QString runDir = handle.location().runDir;
    QTRY_VERIFY_WITH_TIMEOUT(readAll(runDir + "/events-rank-0.jsonl").contains("\"step\":2"),
                             60000);
    QTRY_COMPARE_WITH_TIMEOUT(jobState(handle), QString("RUNNING"), 30000);

    // slurmctld goes away mid-job (a restart, a controller timeout): squeue and scontrol fail
    // with "Unable to contact slurm controller". That says nothing about the job.
    const qint64 ctld = readAll(cluster.filePath("slurmctld.pid")).trimmed().toLongLong();
    QVERIFY(ctld > 0);
    QCOMPARE(::kill(static_cast<pid_t>(ctld), SIGTERM), 0);
    QTRY_VERIFY_WITH_TIMEOUT(!QFile::exists(QString("/proc/%1").arg(ctld)), 30000);
    static_cast<SlurmRunHandle&>(handle).pollNow();
    QCOMPARE(jobState(handle), QString("RUNNING"));
    for (const RankState& rank : handle.ranks()) {
      QVERIFY2(rank.phase == RankState::Phase::running, "a failed squeue ended the job's ranks");
    }

    // Back up (it recovers its saved state): the job ends as it would have, COMPLETED.
    QProcess ctldAgain;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("SLURM_CONF", cluster.filePath("slurm.conf"));
    ctldAgain.setProcessEnvironment(env);
    ctldAgain.start("slurmctld", {});
    QVERIFY(ctldAgain.waitForFinished(30000));
    QCOMPARE(ctldAgain.exitCode(), 0);
    QTRY_VERIFY_WITH_TIMEOUT(allExited(handle), 120000);
    QCOMPARE(jobState(handle), QString("COMPLETED"));
    QCOMPARE(handle.ranks().at(0).exitCode, 0);
    for (int rank = 0; rank < 2; ++rank) {
      const QByteArray events = readAll(runDir + QString("/events-rank-%1.jsonl").arg(rank));
      QVERIFY2(events.contains("\"status\":\"complete\""), events.constData());
    }
  }

  void submitsOverSsh() {
    const QMap<QString, QString> sshd = fixtureEnv("sshd");
    QVERIFY2(sshd.contains("SSHD_PORT"), "the sshd fixture is not running (fixture sshd)");
    m_options.ssh.sshConfigPath = m_tmp.filePath("ssh_config");
    m_options.ssh.knownHostsPath = sshd.value("SSHD_KNOWN_HOSTS");
    QVERIFY(writeAll(m_options.ssh.sshConfigPath, sshConfigFor(sshd, {"login-node"})));
    LaunchRequest req = request("over-ssh", 3);
    req.launch.slurm_host = "login-node";
    req.launch.env["HF_TOKEN"] = "${SHARDSCOPE_TEST_SECRET}";  // resolved here, at launch
    qputenv("SHARDSCOPE_TEST_SECRET", "hf_s3cret");
    req.launch.remote_dir = m_tmp.filePath("remote").toStdString();
    auto handle = startOk(req);
    QVERIFY(handle);
    const RunLocation loc = handle->location();
    QCOMPARE(loc.host, QString("login-node"));
    QCOMPARE(loc.runDir, m_tmp.filePath("remote/over-ssh-r0"));
    QCOMPARE(readAll(loc.runDir + "/trial.toml"), readAll(req.localRunDir + "/trial.toml"));
    // The batch script exports launch.env (a token): it and trial.toml are the owner's only.
    for (const char* name : {"trial.toml", "job.sbatch"}) {
      struct stat st {};
      QVERIFY2(::stat(qPrintable(loc.runDir + "/" + name), &st) == 0, name);
      QCOMPARE(st.st_mode & 0777, mode_t{0600});
    }
    QVERIFY(readAll(loc.runDir + "/job.sbatch").contains("export HF_TOKEN='hf_s3cret'\n"));
    QTRY_VERIFY_WITH_TIMEOUT(allExited(*handle), 60000);
    QCOMPARE(jobState(*handle), QString("COMPLETED"));
    for (int rank = 0; rank < 2; ++rank) {
      QVERIFY(readAll(loc.runDir + QString("/rank-%1.log").arg(rank))
                  .contains("env HF_TOKEN=hf_s3cret\n"));
      auto through = handle->readEvents(rank, 5, 1 << 20);
      QVERIFY2(through, why(through).c_str());
      QCOMPARE(*through, readAll(loc.runDir + QString("/events-rank-%1.jsonl").arg(rank)).mid(5));
      QVERIFY(through->contains("\"status\":\"complete\""));
    }
    SlurmLauncher launcher(m_options);
    auto attached = launcher.attach(loc);
    QVERIFY2(attached, why(attached).c_str());
    QTRY_VERIFY_WITH_TIMEOUT(allExited(*attached.value()), 30000);

    // The retry (attempt 1) and a run of another run log with the same name and id: their own
    // folders, whose event files hold only their own job's lines. Named from the run name only,
    // the three jobs wrote one folder and the retry's files held the first job's lines first.
    LaunchRequest retry = req;
    retry.attempt = 1;
    LaunchRequest otherLog = req;
    otherLog.runLogToken = "ba9876543210";
    for (const auto& [next, leaf] : {std::pair{retry, QString("over-ssh-r0-attempt-1")},
                                     std::pair{otherLog, QString("over-ssh-r0-ba9876543210")}}) {
      auto again = startOk(next);
      QVERIFY(again);
      QCOMPARE(again->location().runDir, m_tmp.filePath("remote/" + leaf));
      QTRY_VERIFY_WITH_TIMEOUT(allExited(*again), 60000);
      for (int rank = 0; rank < 2; ++rank) {
        auto events = again->readEvents(rank, 0, 1 << 20);
        QVERIFY2(events, why(events).c_str());
        QCOMPARE(events->count("\"ev\":\"done\""), qsizetype{1});
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestSlurmLauncher)
#include "tst_slurmlauncher.moc"
