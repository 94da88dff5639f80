// Two supervisors share one study through one run log: two `shardscope-cli sweep` processes, each
// in its own working directory with its own copy of the experiment and its own data folder (as
// two people's processes on two machines), run trials of one study at once. Together they record
// exactly n_trials trials with distinct numbers, every trial is told once with the value its
// program computed (no lost tell), no two trials got the same parameters (each sampler saw the
// other's trials, running and finished), and a reader in this process (what the dashboard's
// worker polls) sees the other processes' commits as they happen. tst_cli_shared_study_pg runs
// it against a PostgreSQL server (the team set-up); the plain variant on a SQLite file.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <map>
#include <set>
#include <utility>

#include "backend/store/runreader.h"
#include "tests/support/experiment.h"
#include "tests/support/files.h"
#include "tests/support/paths.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

namespace {

using shardscope::testing::writeText;

const QString kCli = shardscope::testing::binaryDir() + "/bin/shardscope-cli";

// The trial (tests/support/experiment.h): f(x, y) = (x-1)^2 + (y+2)^2 after 5 eval steps 0.02 s
// apart; "NUMBER f" goes to values.txt beside it.
constexpr int kTrialSteps = 5;
constexpr double kTrialSleepS = 0.02;

constexpr int kTrials = 12;

const char* kExperiment = R"([experiment]
name = "shared"

[search]
program = ["python3", "obj.py"]
sampler = "tpe"
seed = 3
n_trials = 12
concurrency = 2
pruner = {type = "none"}
objectives = {objective = "minimize"}

[search.space.x]
type = "float"
low = -5.0
high = 5.0

[search.space.y]
type = "float"
low = -5.0
high = 5.0
)";

}  // namespace

class TestCliSharedStudy : public QObject {
  Q_OBJECT

 private slots:
  void twoSupervisorsShareOneStudy() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString db = shardscope::testing::storeSpec(dir.path(), "shared.db");
    const QStringList homes = {dir.filePath("alice"), dir.filePath("bob")};
    for (const QString& home : homes) {
      QVERIFY(QDir().mkpath(home + "/data"));
      QVERIFY(shardscope::testing::writeQuadTrial(home, kTrialSteps, kTrialSleepS));
      QVERIFY(writeText(home + "/exp.toml", kExperiment));
    }
    QProcess create;
    create.start(kCli, {"--db", db, "study", "create", "exp", homes[0] + "/exp.toml"});
    QVERIFY(create.waitForFinished(60000));
    QVERIFY2(create.exitCode() == 0, create.readAllStandardError().constData());

    // The dashboard's view: a reader of its own, polling the run log's data version.
    auto reader = shardscope::backend::RunReader::open(db);
    VERIFY_OK(reader);
    auto version = reader->dataVersion();
    VERIFY_OK(version);
    const qint64 before = *version;

    QProcess sweeps[2];
    for (int i = 0; i < 2; ++i) {
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      env.insert("XDG_DATA_HOME", homes[i] + "/data");
      sweeps[i].setProcessEnvironment(env);
      sweeps[i].setWorkingDirectory(homes[i]);
      sweeps[i].start(kCli, {"--db", db, "sweep", homes[i] + "/exp.toml"});
      QVERIFY(sweeps[i].waitForStarted());
    }
    // While the sweeps run, the reader sees their commits: the version moves and trials appear.
    qint64 seenTrials = 0;
    bool versionMoved = false;
    while (sweeps[0].state() != QProcess::NotRunning || sweeps[1].state() != QProcess::NotRunning) {
      auto now = reader->dataVersion();
      VERIFY_OK(now);
      versionMoved = versionMoved || *now != before;
      auto studies = reader->listStudies();
      VERIFY_OK(studies);
      if (!studies->empty()) {
        auto trials = reader->trials(studies->front().id);
        VERIFY_OK(trials);
        seenTrials = std::max(seenTrials, qint64(trials->size()));
      }
      sweeps[0].waitForFinished(100);
      sweeps[1].waitForFinished(100);
    }
    for (QProcess& sweep : sweeps) {
      QVERIFY2(sweep.exitStatus() == QProcess::NormalExit && sweep.exitCode() == 0,
               sweep.readAllStandardError().constData());
    }
    QVERIFY(versionMoved);
    QVERIFY(seenTrials > 0);

    // Every trial once, each told the value its own program computed, wherever it ran.
    std::map<int, double> computed;
    int ranHere[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      for (const auto& [number, value] : shardscope::testing::quadTrialValues(homes[i])) {
        QVERIFY2(computed.emplace(number, value).second,
                 qPrintable(QString("trial %1 ran in both folders").arg(number)));
        ++ranHere[i];
      }
    }
    QCOMPARE(int(computed.size()), kTrials);
    QVERIFY2(ranHere[0] > 0 && ranHere[1] > 0, "one supervisor ran every trial");
    auto studies = reader->listStudies();
    VERIFY_OK(studies);
    QCOMPARE(studies->size(), std::size_t(1));
    auto trials = reader->trials(studies->front().id);
    VERIFY_OK(trials);
    QCOMPARE(int(trials->size()), kTrials);
    std::set<qint64> numbers;
    std::set<std::pair<double, double>> params;
    for (const auto& trial : *trials) {
      QVERIFY(trial.trialNumber);
      numbers.insert(*trial.trialNumber);
      QCOMPARE(trial.status, shardscope::spec::RunStatus::complete);
      QVERIFY(trial.objectiveValues && trial.objectiveValues->size() == 1);
      QCOMPARE(trial.objectiveValues->front(), computed.at(int(*trial.trialNumber)));
      params.insert({trial.params.value("x").toDouble(), trial.params.value("y").toDouble()});
    }
    QCOMPARE(int(numbers.size()), kTrials);
    QCOMPARE(*numbers.rbegin(), qint64(kTrials - 1));
    QCOMPARE(int(params.size()), kTrials);  // no sampler handed out another's draw again
  }
};

QTEST_GUILESS_MAIN(TestCliSharedStudy)
#include "tst_cli_shared_study.moc"
