// Tests backend/notifycommand.cpp and the [notify] hooks of backend/sweep/sweeploop.cpp: a sweep
// of real program trials (trial_program.py) on a real SQLite run log runs the experiment's
// on_end command once per trial, on_stall when a trial goes silent while its process lives, and
// on_sweep_end with the best trial before finish() returns; each gets the facts in SHARDSCOPE_*
// variables. A failing command is logged and the sweep goes on; a run name full of shell text is
// never run as shell. Every wait has a generous deadline; nothing asserts a duration.
#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

#include "backend/notifycommand.h"
#include "backend/sweep/sweeploop.h"
#include "tests/support/files.h"
#include "tests/support/paths.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

constexpr int kDeadlineMs = 120000;

// Records the SHARDSCOPE_* variables it was run with in DIR/<what>-<run id>.env, sorted.
constexpr const char* kRecorder =
    "env | grep '^SHARDSCOPE_' | sort > \"$1-$SHARDSCOPE_RUN_ID.env\"\n";

QMap<QString, QString> readEnv(const QString& path) {
  QMap<QString, QString> out;
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return out;
  for (const QString& line : QString::fromUtf8(file.readAll()).split('\n', Qt::SkipEmptyParts)) {
    const auto eq = line.indexOf('=');
    if (eq > 0) out.insert(line.left(eq), line.mid(eq + 1));
  }
  return out;
}

}  // namespace

class TestSweepNotify : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void endAndSweepEndCommandsGetTheFacts();
  void aFailingCommandIsLoggedAndTheSweepGoesOn();
  void aSilentTrialWhoseProcessLivesIsAStall();
  void aRunNameIsNeverShellText();
  void aCommandPastItsTimeIsKilledAndReported();

 private:
  /// A program-trial sweep in a folder of its own: `trials` trials of trial_program.py with
  /// `args`, one at a time, and `notify` as its [notify] table; returns the experiment's path.
  QString writeSweep(const QString& name, int trials, const QString& args, const QString& notify);
  /// Runs the sweep at `experiment` to its end; its outcome (empty on a failed finish).
  std::optional<SweepOutcome> runSweep(const QString& experiment,
                                       const std::function<void()>& whileRunning = {});

  QTemporaryDir m_dir;
  std::unique_ptr<RunStore> m_store;
};

void TestSweepNotify::initTestCase() {
  QVERIFY(m_dir.isValid());
  auto store = RunStore::open(shardscope::testing::storeSpec(m_dir.path(), "runs.db"));
  VERIFY_OK(store);
  m_store = std::move(*store);
}

QString TestSweepNotify::writeSweep(const QString& name, int trials, const QString& args,
                                    const QString& notify) {
  const QString dir = m_dir.filePath(name);
  if (!QDir().mkpath(dir)) return {};
  QFile::copy(shardscope::testing::sourceDir() + "/tests/backend/sweep/trial_program.py",
              dir + "/trial_program.py");
  if (!shardscope::testing::writeAll(dir + "/record.sh", kRecorder)) return {};
  const QString toml =
      QStringLiteral(
          "[experiment]\nname = \"%1\"\n\n[notify]\n%2\n[search]\nname = \"%1\"\n"
          "program = [\"python3\", \"trial_program.py\", %3]\nsampler = \"random\"\nseed = 3\n"
          "n_trials = %4\nconcurrency = 1\nobjectives = {objective = \"minimize\"}\n\n"
          "[search.space.x]\ntype = \"float\"\nlow = -5.0\nhigh = 5.0\n")
          .arg(name, notify, args)
          .arg(trials);
  const QString path = dir + "/sweep.toml";
  return shardscope::testing::writeAll(path, toml.toUtf8()) ? path : QString();
}

std::optional<SweepOutcome> TestSweepNotify::runSweep(const QString& experiment,
                                                      const std::function<void()>& whileRunning) {
  auto input = SweepLoop::readInput(experiment, {});
  if (!input) {
    qWarning("%s", input.message().c_str());
    return std::nullopt;
  }
  auto opened = SweepLoop::openStudy(*m_store, *input, {}, 0);
  if (!opened) {
    qWarning("%s", opened.message().c_str());
    return std::nullopt;
  }
  SweepLoop::Options options;
  options.runsRoot = QFileInfo(experiment).absolutePath() + "/runs";
  SweepLoop loop(*m_store, std::move(opened->study), *input, options);
  QSignalSpy done(&loop, &SweepLoop::ended);
  if (auto r = loop.start(); !r) {
    qWarning("%s", r.message().c_str());
    return std::nullopt;
  }
  if (whileRunning) whileRunning();
  if (done.isEmpty() && !done.wait(kDeadlineMs)) return std::nullopt;
  auto outcome = loop.finish();
  if (!outcome) {
    qWarning("%s", outcome.message().c_str());
    return std::nullopt;
  }
  return std::move(*outcome);
}

// Two complete trials: on_end ran for each with its run's name, status and objective;
// on_sweep_end ran once, before finish() returned, naming the best trial and its run.
void TestSweepNotify::endAndSweepEndCommandsGetTheFacts() {
  const QString path =
      writeSweep(QStringLiteral("facts"), 2, QStringLiteral("\"--mode\", \"normal\""),
                 QStringLiteral("on_end = \"sh record.sh end\"\n"
                                "on_sweep_end = \"sh record.sh sweep\"\n"));
  QVERIFY(!path.isEmpty());
  const auto outcome = runSweep(path);
  QVERIFY(outcome);
  QCOMPARE(outcome->summary.counts.complete, 2);
  QVERIFY(outcome->summary.best);

  auto reader = m_store->reader();
  VERIFY_OK(reader);
  const QDir dir = QFileInfo(path).absoluteDir();
  for (const search::StudyTrial& trial : outcome->summary.trials) {
    auto run = reader->run(trial.runId);
    VERIFY_OK(run);
    QVERIFY(run->has_value());
    const auto env = readEnv(dir.filePath(QStringLiteral("end-%1.env").arg(trial.runId)));
    QCOMPARE(env.value("SHARDSCOPE_EVENT"), QStringLiteral("end"));
    QCOMPARE(env.value("SHARDSCOPE_RUN_NAME"), (*run)->name);
    QCOMPARE(env.value("SHARDSCOPE_RUN_STATUS"), QStringLiteral("complete"));
    QCOMPARE(env.value("SHARDSCOPE_RUN_DIR"), (*run)->runDir);
    QCOMPARE(env.value("SHARDSCOPE_STUDY"), QStringLiteral("facts"));
    QCOMPARE(env.value("SHARDSCOPE_OBJECTIVE").toDouble(), trial.trial.values.front());
  }
  const auto sweep = readEnv(dir.filePath(QStringLiteral("sweep-.env")));
  QCOMPARE(sweep.value("SHARDSCOPE_EVENT"), QStringLiteral("sweep_end"));
  QCOMPARE(sweep.value("SHARDSCOPE_STUDY"), QStringLiteral("facts"));
  QCOMPARE(sweep.value("SHARDSCOPE_SWEEP_STATUS"), QStringLiteral("complete"));
  const auto& best = *outcome->summary.best;
  QCOMPARE(sweep.value("SHARDSCOPE_BEST_TRIAL"), QString::number(best.trial.number));
  auto bestRun = reader->run(best.runId);
  VERIFY_OK(bestRun);
  QCOMPARE(sweep.value("SHARDSCOPE_BEST_RUN"), (*bestRun)->name);
  QCOMPARE(sweep.value("SHARDSCOPE_BEST_OBJECTIVE").toDouble(), best.trial.values.front());
}

// A trial that fails, an on_end command that exits 7 and an on_sweep_end that cannot be found:
// each command's failure is a warning naming its field, its line and its output, and the sweep
// still ends complete with every trial recorded.
void TestSweepNotify::aFailingCommandIsLoggedAndTheSweepGoesOn() {
  const QString path =
      writeSweep(QStringLiteral("failing"), 2, QStringLiteral("\"--mode\", \"exit3\""),
                 QStringLiteral("on_end = \"echo oops >&2; exit 7\"\n"
                                "on_sweep_end = \"/nonexistent/sweep-hook.sh\"\n"));
  QVERIFY(!path.isEmpty());
  for (int i = 0; i < 2; ++i) {
    QTest::ignoreMessage(QtWarningMsg,
                         QRegularExpression("^notify\\.on_end `echo oops >&2; exit 7` exited "
                                            "with status 7; its last output:\\noops$"));
  }
  QTest::ignoreMessage(
      QtWarningMsg,
      QRegularExpression("^notify\\.on_sweep_end `/nonexistent/sweep-hook\\.sh` exited with "
                         "status 127; its last output:\\n.*/nonexistent/sweep-hook\\.sh.*"));
  const auto outcome = runSweep(path);
  QVERIFY(outcome);
  QCOMPARE(outcome->summary.counts.failed, 2);
  QVERIFY(!outcome->stopped);
  auto reader = m_store->reader();
  VERIFY_OK(reader);
  auto study = reader->studyByName(QStringLiteral("failing"));
  VERIFY_OK(study);
  QCOMPARE(int((*study)->status), int(StudyStatus::complete));
}

// A trial that wrote one event and then nothing while its process lives: on_stall runs once,
// with status running and the minutes of silence; released, the trial completes and on_end
// follows.
void TestSweepNotify::aSilentTrialWhoseProcessLivesIsAStall() {
  const QString name = QStringLiteral("stall");
  const QString meet = m_dir.filePath(name);
  const QString path =
      writeSweep(name, 1, QStringLiteral("\"--mode\", \"stall\", \"--meet\", \"%1\"").arg(meet),
                 QStringLiteral("on_stall = \"sh record.sh stall\"\n"
                                "on_end = \"sh record.sh end\"\nstall_after_min = 0.005\n"));
  QVERIFY(!path.isEmpty());
  QString stallFile;
  const auto outcome = runSweep(path, [&] {
    const QDir dir(meet);
    QTRY_VERIFY_WITH_TIMEOUT(!dir.entryList({QStringLiteral("stall-*.env")}, QDir::Files).isEmpty(),
                             kDeadlineMs);
    stallFile = dir.filePath(dir.entryList({QStringLiteral("stall-*.env")}, QDir::Files).front());
    QVERIFY(shardscope::testing::writeAll(dir.filePath(QStringLiteral("release")), ""));
  });
  QVERIFY(outcome);
  QCOMPARE(outcome->summary.counts.complete, 1);
  const auto stall = readEnv(stallFile);
  QCOMPARE(stall.value("SHARDSCOPE_EVENT"), QStringLiteral("stall"));
  QCOMPARE(stall.value("SHARDSCOPE_RUN_STATUS"), QStringLiteral("running"));
  QVERIFY(stall.value("SHARDSCOPE_STALLED_MIN").toDouble() > 0);
  const QString runId = stall.value("SHARDSCOPE_RUN_ID");
  QCOMPARE(runId, QString::number(outcome->summary.trials.front().runId));
  QCOMPARE(QDir(meet).entryList({QStringLiteral("stall-*.env")}, QDir::Files).size(), 1);
  const auto end = readEnv(QDir(meet).filePath("end-" + runId + ".env"));
  QCOMPARE(end.value("SHARDSCOPE_RUN_STATUS"), QStringLiteral("complete"));
}

// The facts are variables, never text of the command line: a name made of shell syntax
// reaches the command as those characters and runs nothing.
void TestSweepNotify::aRunNameIsNeverShellText() {
  const QString dir = m_dir.filePath(QStringLiteral("quoting"));
  QVERIFY(QDir().mkpath(dir));
  spec::NotifySection section;
  section.on_end = "printf '%s' \"$SHARDSCOPE_RUN_NAME\" > name.txt";
  NotifyCommands commands(section, {dir, 60000});
  QSignalSpy ran(&commands, &NotifyCommands::ran);
  NotifyFacts facts;
  facts.runName = QStringLiteral("x$(touch pwned)`touch pwned2`;touch pwned3 'q\" \\");
  QVERIFY(commands.run(NotifyEvent::end, facts));
  QVERIFY(!commands.run(NotifyEvent::stall, facts));  // none set: nothing runs
  QVERIFY(ran.wait(kDeadlineMs));
  QCOMPARE(ran.at(0).at(1).toBool(), true);
  QFile name(dir + "/name.txt");
  QVERIFY(name.open(QIODevice::ReadOnly));
  QCOMPARE(QString::fromUtf8(name.readAll()), facts.runName);
  for (const char* file : {"pwned", "pwned2", "pwned3"}) QVERIFY(!QFile::exists(dir + "/" + file));
}

// A command that outlives its time is killed and reported; waitForAll returns once it is gone.
void TestSweepNotify::aCommandPastItsTimeIsKilledAndReported() {
  spec::NotifySection section;
  section.on_sweep_end = "sleep 600";
  NotifyCommands commands(section, {m_dir.path(), 300});
  QSignalSpy ran(&commands, &NotifyCommands::ran);
  QTest::ignoreMessage(QtWarningMsg,
                       "notify.on_sweep_end `sleep 600` ran over 0.3 s and was killed");
  QVERIFY(commands.run(NotifyEvent::sweepEnd, {}));
  commands.waitForAll();
  QCOMPARE(ran.count(), 1);
  QCOMPARE(ran.at(0).at(1).toBool(), false);
}

QTEST_GUILESS_MAIN(TestSweepNotify)
#include "tst_sweepnotify.moc"
