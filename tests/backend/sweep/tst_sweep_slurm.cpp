// `sweep` of a study whose [launch] is Slurm, on the real one-node Slurm fixture: each trial
// is its own job submitted through the Slurm launcher, at most search.concurrency of the sweep's
// jobs are queued or running at any time (squeue, polled while the sweep runs), every trial ends
// complete with its own objective (the fake trainer reports the train.lr it found in its
// trial.toml), and the trials' job ids are distinct.
// And a trial retried on Slurm, or over SSH, resumes from its failed attempt's checkpoint (the
// trial runner with crash_once_trainer.sh).
#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <set>

#include "backend/launch/launcher.h"
#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "backend/sweep/trialrunner.h"
#include "spec/events.h"
#include "tests/backend/launch/remotetest.h"
#include "tests/support/paths.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

const QString kCli = shardscope::testing::binaryDir() + "/bin/shardscope-cli";

// One rank: hello, then `done` whose objective is train.lr of the trial.toml in its working
// directory (the run directory), after a pause long enough for jobs to overlap.
// (Plain literals: moc misreads this script as a raw string.)
const char* kTrainer =
    "#!/bin/sh\n"
    "lr=$(awk -F' *= *' '/^\\[/ {sec = $0} sec == \"[train]\" && $1 == \"lr\" {split($2, v, \" "
    "\"); "
    "print v[1]}' "
    "trial.toml)\n"
    "echo \"{\\\"v\\\":1,\\\"ev\\\":\\\"hello\\\",\\\"rank\\\":0,\\\"seq\\\":0,\\\"t\\\":$(date "
    "+%s),\\\"world_size\\\":1}\"\n"
    "sleep 2\n"
    "echo \"{\\\"v\\\":1,\\\"ev\\\":\\\"done\\\",\\\"rank\\\":0,\\\"seq\\\":1,\\\"t\\\":$(date "
    "+%s),\\\"status\\\":\\\"complete\\\",\\\"objective\\\":$lr}\"\n";

}  // namespace

class TestSweepSlurm : public QObject {
  Q_OBJECT

 private slots:
  void slurmTrialsAreJobsWithinConcurrency() {
    const QMap<QString, QString> slurm = remotetest::fixtureEnv("slurm");
    QVERIFY2(slurm.contains("SLURM_CONF"), "the Slurm fixture is not running (fixture slurm)");
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString trainer = dir.filePath("fake_trainer.sh");
    QVERIFY(remotetest::writeAll(trainer, kTrainer));
    QVERIFY(QFile::setPermissions(trainer, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
    QVERIFY(remotetest::writeAll(dir.filePath("train.jsonl"), "{\"input_ids\": [1, 2, 3, 4]}\n"));
    const QByteArray exp = R"([experiment]
name = "slurmsweep"
[model]
arch = "tiny"
tiny_hidden_size = 16
tiny_layers = 1
[data]
train_path = "TRAIN"
seq_len = 16
[train]
max_steps = 2
[launch]
kind = "slurm"
nproc_per_node = 1
trainer = "TRAINER"
device_memory_gib = 80
[search]
n_trials = 4
concurrency = 2
seed = 5
objectives = {objective = "minimize"}
[search.space."train.lr"]
type = "float"
low = 1e-4
high = 1e-2
log = true
)";
    QVERIFY(remotetest::writeAll(dir.filePath("exp.toml"),
                                 QByteArray(exp)
                                     .replace("TRAINER", trainer.toUtf8())
                                     .replace("TRAIN", dir.filePath("train.jsonl").toUtf8())));
    const QString db = dir.filePath("runs.db");

    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("SLURM_CONF", slurm.value("SLURM_CONF"));
    QProcess sweep;
    sweep.setProcessEnvironment(env);
    sweep.start(kCli, {"--db", db, "sweep", dir.filePath("exp.toml")});
    QVERIFY(sweep.waitForStarted());
    // The sweep's jobs queued or running, seen by Slurm itself while the sweep runs.
    int mostJobs = 0;
    QProcess squeue;
    squeue.setProcessEnvironment(env);
    const QDeadlineTimer deadline(200000);
    while (!sweep.waitForFinished(300)) {
      if (deadline.hasExpired()) {
        sweep.kill();
        QFAIL("the sweep did not end within 200 s");
      }
      squeue.start("squeue", {"-h", "-o", "%j"});
      if (!squeue.waitForFinished(10000)) continue;
      const QStringList names = QString::fromUtf8(squeue.readAllStandardOutput()).split('\n');
      mostJobs = std::max(
          mostJobs, int(std::count_if(names.begin(), names.end(),
                                      [](const QString& n) { return n.startsWith("exp-"); })));
    }
    const QByteArray out = sweep.readAllStandardOutput();
    QVERIFY2(sweep.exitStatus() == QProcess::NormalExit && sweep.exitCode() == 0,
             (out + sweep.readAllStandardError()).constData());
    QVERIFY2(out.contains("study exp: 4 trials, 2 at once"), out.constData());
    QVERIFY2(mostJobs >= 1, "squeue never showed one of the sweep's jobs");
    QVERIFY2(mostJobs <= 2, qPrintable(QStringLiteral("%1 jobs at once").arg(mostJobs)));

    auto store = RunStore::open(db);
    VERIFY_OK(store);
    auto reader = (*store)->reader();
    VERIFY_OK(reader);
    auto study = reader->studyByName("exp");
    VERIFY_OK(study);
    QVERIFY(study->has_value());
    auto runs = reader->trials((*study)->id);
    VERIFY_OK(runs);
    QCOMPARE(int(runs->size()), 4);
    std::set<QString> jobIds;
    for (const RunRecord& run : *runs) {
      QVERIFY2(run.status == spec::RunStatus::complete, qPrintable(run.error));
      auto location = RunLocation::fromJson(run.location);
      VERIFY_OK(location);
      QCOMPARE(location->kind, QStringLiteral("slurm"));
      QVERIFY(!location->jobId.isEmpty());
      jobIds.insert(location->jobId);
      QVERIFY(run.objectiveValues && run.objectiveValues->size() == 1);
      const double lr = run.params.value("train.lr").toDouble();
      QVERIFY(lr >= 1e-4 && lr <= 1e-2);
      QCOMPARE(run.objectiveValues->front(), lr);  // its own objective, from its trial.toml
    }
    QCOMPARE(int(jobIds.size()), 4);  // one job per trial
  }

 private:
  // A trial that dies after its step-2 checkpoint (crash_once_trainer.sh) on the launcher that
  // `launch` (the [launch] table's body) names is retried as a new job or ranks in a new folder,
  // started with `--resume <failed attempt's folder>/ckpt/step-000002` (search.
  // retry_from_checkpoint, on by default); its curve goes on at step 3. Before, the retry started
  // at step 1 and its claim had deleted the failed attempt's curve.
  void retryResumesFromTheCheckpoint(const QTemporaryDir& dir, const QByteArray& launch,
                                     const QString& kind) {
    QVERIFY(remotetest::writeAll(dir.filePath("train.jsonl"), "{\"input_ids\": [1, 2, 3, 4]}\n"));
    const QByteArray exp = R"([experiment]
name = "slurmretry"
[model]
arch = "tiny"
tiny_hidden_size = 16
tiny_layers = 1
[data]
train_path = "TRAIN"
seq_len = 16
[launch]
@LAUNCH@nproc_per_node = 1
trainer = "TRAINER"
env = {CRASH_ONCE_MARKER = "@MARK@"}
[search]
objectives = {objective = "minimize"}
[search.space."train.lr"]
type = "float"
low = 1e-4
high = 1e-2
)";
    const QString path = dir.filePath("exp.toml");
    const QByteArray trainer =
        (shardscope::testing::sourceDir() + "/tests/backend/sweep/crash_once_trainer.sh").toUtf8();
    QVERIFY(remotetest::writeAll(path, QByteArray(exp)
                                           .replace("TRAINER", trainer)
                                           .replace("TRAIN", dir.filePath("train.jsonl").toUtf8())
                                           .replace("@MARK@", dir.filePath("crashed").toUtf8())
                                           .replace("@LAUNCH@", launch)));
    auto parsed = spec::load_experiment(path.toStdString());
    VERIFY_OK(parsed);
    auto space = search::parse_search_space(parsed->search.toml, path.toStdString());
    VERIFY_OK(space);
    auto store = RunStore::open(dir.filePath("runs.db"));
    VERIFY_OK(store);
    NewStudy study;
    study.name = "slurmretry";
    study.objectives = {"objective"};
    study.directions = {"minimize"};
    auto studyId = (*store)->createStudy(study).get();
    VERIFY_OK(studyId);
    TrialRunner::Options options;
    options.studyId = *studyId;
    options.runsRoot = dir.filePath("runs");
    TrialRunner runner(**store, path, *space, options);
    QSignalSpy finished(&runner, &TrialRunner::trialFinished);
    const search::TrialParams params{{"train.lr", 1e-3}};
    auto runId = runner.start(0, params);
    VERIFY_OK(runId);
    QVERIFY(finished.wait(120000));
    QCOMPARE(int(finished.takeFirst().at(0).value<TrialOutcome>().state),
             int(search::TrialState::Failed));
    auto reader = (*store)->reader();
    VERIFY_OK(reader);
    auto failedLocation = RunLocation::fromJson((*reader->run(*runId))->location);
    VERIFY_OK(failedLocation);
    const QString failedDir = failedLocation->runDir;  // remote for ssh

    auto claimed = (*store)->claimTrial(*studyId, 1, space->retry_from_checkpoint).get();
    VERIFY_OK(claimed);
    QVERIFY(claimed->has_value());
    VERIFY_OK(runner.start(0, params, *runId));
    QVERIFY(finished.wait(120000));
    const auto retried = finished.takeFirst().at(0).value<TrialOutcome>();
    QVERIFY2(retried.state == search::TrialState::Complete, qPrintable(retried.error));
    checkResumed(*reader, *runId, failedDir, kind);
  }

  // The retry of run `runId` ran on `kind` in a folder of its own, was given the failed attempt's
  // step-2 checkpoint in `failedDir`, and wrote steps 3..5 after the kept 1..2.
  static void checkResumed(RunReader& reader, qint64 runId, const QString& failedDir,
                           const QString& kind) {
    auto run = reader.run(runId);
    VERIFY_OK(run);
    auto location = RunLocation::fromJson((*run)->location);
    VERIFY_OK(location);
    QCOMPARE(location->kind, kind);
    QVERIFY(location->runDir != failedDir);
    const QString resumeFrom = failedDir + "/ckpt/step-000002";
    auto logs = reader.logLines(runId, 0);
    VERIFY_OK(logs);
    QStringList texts;
    for (const LogLine& line : *logs) texts << line.text;
    QVERIFY2(texts.contains("args: train trial.toml --resume " + resumeFrom),
             qPrintable(texts.join(" | ")));
    auto curve = reader.metric(runId, "loss");
    VERIFY_OK(curve);
    QList<qint64> steps;
    for (const auto& point : *curve) steps << point.step;
    QCOMPARE(steps, (QList<qint64>{1, 2, 3, 4, 5}));
    auto events = reader.events(runId, 0);
    VERIFY_OK(events);
    QList<qint64> retrySteps;
    for (const EventRow& row : *events) {
      if (row.attempt != 1 || row.kind != QLatin1String("step")) continue;
      auto event =
          spec::parse_event(std::string_view(row.json.constData(), size_t(row.json.size())));
      VERIFY_OK(event);
      retrySteps << std::get<spec::StepEvent>(event->body).step;
    }
    QCOMPARE(retrySteps, (QList<qint64>{3, 4, 5}));  // the retry went on after step 2
  }

 private slots:
  void retriedSlurmTrialResumesFromItsCheckpoint() {
    const QMap<QString, QString> slurm = remotetest::fixtureEnv("slurm");
    QVERIFY2(slurm.contains("SLURM_CONF"), "the Slurm fixture is not running (fixture slurm)");
    qputenv("SLURM_CONF", slurm.value("SLURM_CONF").toUtf8());
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    retryResumesFromTheCheckpoint(dir, "kind = \"slurm\"\ndevice_memory_gib = 80\n",
                                  QStringLiteral("slurm"));
  }

  // The same over SSH (the loopback sshd as host "node1"): the failed attempt's folder is remote.
  void retriedSshTrialResumesFromItsCheckpoint() {
    const QMap<QString, QString> sshd = remotetest::fixtureEnv("sshd");
    QVERIFY2(sshd.contains("SSHD_PORT"), "the sshd fixture is not running (fixture sshd)");
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString home = dir.filePath("home");
    QVERIFY(QDir().mkpath(home + "/.ssh"));
    QVERIFY(remotetest::writeAll(home + "/.ssh/config", remotetest::sshConfigFor(sshd, {"node1"})));
    QVERIFY(QFile::copy(sshd.value("SSHD_KNOWN_HOSTS"), home + "/.ssh/known_hosts"));
    const QByteArray oldHome = qgetenv("HOME");
    qputenv("HOME", home.toUtf8());  // the launcher reads ~/.ssh/config and ~/.ssh/known_hosts
    retryResumesFromTheCheckpoint(dir,
                                  "kind = \"ssh\"\nhosts = [\"node1\"]\nremote_dir = \"" +
                                      dir.filePath("remote").toUtf8() + "\"\n",
                                  QStringLiteral("ssh"));
    qputenv("HOME", oldHome);
  }
};

QTEST_GUILESS_MAIN(TestSweepSlurm)
#include "tst_sweep_slurm.moc"
