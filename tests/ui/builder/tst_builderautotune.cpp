// The builder's Autotune, end to end as the dashboard wires it: the main window, the app's
// RunControl (app/shardscope/runcontrol.cpp, compiled in) starting `shardscope-cli autotune` in
// its own session, the real shardtrain on the tiny model (one local rank on CPU), and the window
// following the study the autotune records in the run log.
//   - an invalid experiment is refused at once, the message naming the field; nothing starts;
//   - an autotune runs to its end: the candidates appear while it runs, the winner is offered,
//     Open winner loads its file, and the Compare panel shows the same candidates;
//   - Stop ends a running autotune: its study ends stopped and the best so far is offered.
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QJsonArray>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include "app/shardscope/runcontrol.h"
#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "tests/support/experiment.h"
#include "tests/support/paths.h"
#include "ui/builder/buildercontroller.h"
#include "ui/builder/builderpanel.h"
#include "ui/compare/comparepanel.h"
#include "ui/data/runlog.h"
#include "ui/mainwindow.h"
#include "ui/widgets/candidatetable.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

const QString kCli =
    shardscope::testing::envPath("SHARDSCOPE_TEST_CLI", "the shardscope-cli executable");
const QString kShardtrain =
    shardscope::testing::envPath("SHARDSCOPE_TEST_SHARDTRAIN", "the shardtrain executable");
constexpr int kWaitMs = 180000;  // a whole autotune on a shared 2-core machine

// What app/shardscope/main.cpp wires between the window and the run control.
void wire(MainWindow& window, app::RunControl& control) {
  QObject::connect(&window, &MainWindow::autotuneRequested, &control, &app::RunControl::autotune);
  QObject::connect(&control, &app::RunControl::autotuneStarted, window.builderPanel(),
                   &BuilderPanel::autotuneStarted);
  QObject::connect(&control, &app::RunControl::autotuneFailed, window.builderPanel(),
                   &BuilderPanel::autotuneFailed);
  QObject::connect(&window, &MainWindow::sweepControlRequested, &control,
                   &app::RunControl::steerSweep);
}

std::optional<backend::StudyRecord> study(const QString& db, const QString& name) {
  auto reader = backend::RunReader::open(db);
  if (!reader) return std::nullopt;
  auto found = reader->studyByName(name);
  return found && *found ? std::optional(**found) : std::nullopt;
}

}  // namespace

class TestBuilderAutotune : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  QString m_db;
  std::unique_ptr<MainWindow> m_window;
  std::unique_ptr<app::RunControl> m_control;

  BuilderPanel* builder() { return m_window->builderPanel(); }

  QString writeExperiment(const QString& name) {
    shardscope::testing::TinyExperiment e;
    e.name = name;
    e.trainer = kShardtrain;
    e.ranks = 1;
    e.launch = "kind = \"local\"\nthreads_per_rank = 1\n";
    e.tables = "[shard]\ndevice = \"cpu\"\n";
    return shardscope::testing::writeExperiment(m_dir.path(), e);
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);  // QSettings in a test location
    QVERIFY(m_dir.isValid());
    m_db = m_dir.filePath("runs.db");
    {
      auto store = backend::RunStore::open(m_db);
      QVERIFY2(store.ok(), store.ok() ? "" : store.message().c_str());
    }
    m_window = std::make_unique<MainWindow>(nullptr, 50);
    m_window->resize(1600, 1000);
    m_window->show();
    m_window->openRunLog(m_db);
    backend::RunLifecycle::Settings settings;
    settings.dbPath = m_db;
    settings.runsRoot = backend::RunLifecycle::runsRootFor(m_db);
    settings.supervisor = kCli;
    m_control = std::make_unique<app::RunControl>(settings, 5);
    wire(*m_window, *m_control);
  }

  // An autotune runs in its own session: one a failed test left running is stopped.
  void cleanup() {
    if (builder()->isAutotuning()) {
      QProcess::execute(kCli, {"--db", m_db, "study", "stop", builder()->autotuneStudy()});
    }
  }

  void cleanupTestCase() {
    m_control.reset();
    m_window.reset();
  }

  // A value the form takes but validation refuses: Autotune says which field, starts nothing.
  void invalidExperimentIsRefusedNamingTheField() {
    const QString path = writeExperiment(QStringLiteral("bad"));
    QVERIFY(m_window->openExperiment(path).ok());
    BuilderController* controller = builder()->controller();
    QVERIFY(controller->setField(QStringLiteral("train.batch_size"), QStringLiteral("0")));
    QSignalSpy asked(m_window.get(), &MainWindow::autotuneRequested);
    QTest::mouseClick(builder()->autotuneButton(), Qt::LeftButton);
    const QString said = builder()->autotuneStatus()->text();
    QVERIFY2(said.contains(QStringLiteral("train.batch_size")), qPrintable(said));
    QVERIFY(builder()->autotuneStatus()->styleSheet().contains(QStringLiteral("color")));
    QCOMPARE(asked.count(), 0);
    QVERIFY(!builder()->isAutotuning());
    QVERIFY(builder()->autotuneButton()->isEnabled());
  }

  void autotuneRunsToItsEndAndOffersTheWinner() {
    const QString path = writeExperiment(QStringLiteral("tiny"));
    QVERIFY(m_window->openExperiment(path).ok());
    builder()->autotuneSteps()->setValue(2);
    builder()->autotuneWarmup()->setValue(1);
    // Every record the window received while it ran: the candidates arrive as they settle.
    QList<int> settledWhileRunning;
    QMetaObject::Connection seen =
        connect(&m_window->runLog(), &RunLog::autotuneLoaded, this, [&](const AutotuneData& a) {
          if (a.running && a.name == builder()->autotuneStudy())
            settledWhileRunning.append(int(a.candidates.size()));
        });
    QTest::mouseClick(builder()->autotuneButton(), Qt::LeftButton);
    QVERIFY(builder()->isAutotuning());
    QVERIFY(!builder()->autotuneButton()->isEnabled());
    const QString name = builder()->autotuneStudy();
    QVERIFY(name.startsWith(QStringLiteral("tiny-autotune-")));
    QTRY_VERIFY_WITH_TIMEOUT(!builder()->isAutotuning(), kWaitMs);
    disconnect(seen);
    const QString said = builder()->autotuneStatus()->text();
    QVERIFY2(said.contains(QStringLiteral("complete: the winner is #")), qPrintable(said));
    QVERIFY2(
        std::any_of(settledWhileRunning.begin(), settledWhileRunning.end(),
                    [&](int n) { return n > 0 && n < builder()->autotuneTable()->rowCount(); }),
        "no candidate was shown before the autotune ended");

    // The record: complete, every candidate in the table, the winner's row highlighted.
    const auto record = study(m_db, name);
    QVERIFY(record.has_value());
    QCOMPARE(record->status, backend::StudyStatus::complete);
    CandidateTable* table = builder()->autotuneTable();
    const int winner = record->state["winner"].toInt(-1);
    QVERIFY(winner >= 0);
    QCOMPARE(table->rowCount(), int(record->state["candidates"].toArray().size()));
    const int winnerRow = table->rowOf(winner);
    QVERIFY(table->isWinnerRow(winnerRow));
    QVERIFY(table->statusText(winnerRow).contains(QStringLiteral("winner")));

    // Kept for people to look at: the builder's Autotune tab at the end.
    const QString artifacts = shardscope::testing::binaryDir() + "/tests/artifacts";
    QVERIFY(QDir().mkpath(artifacts));
    m_window->dock(QStringLiteral("builder"))->raise();
    QVERIFY(builder()->grab().save(artifacts + "/builder-autotune.png"));

    // The winner's file is offered and loads into the builder with the winner's settings.
    const QString winnerFile = builder()->autotuneWinnerFile();
    QCOMPARE(winnerFile, m_dir.filePath("tiny.autotuned.toml"));
    QVERIFY(QFile::exists(winnerFile));
    QVERIFY(said.contains(winnerFile));
    QCOMPARE(builder()->winnerPathEdit()->text(), winnerFile);
    QVERIFY(builder()->openWinnerButton()->isEnabled());
    QTest::mouseClick(builder()->openWinnerButton(), Qt::LeftButton);
    BuilderController* controller = builder()->controller();
    QCOMPARE(controller->filePath(), winnerFile);
    for (const QString& field :
         {QStringLiteral("train.micro_batch_size"), QStringLiteral("shard.strategy"),
          QStringLiteral("shard.activation_checkpointing")}) {
      QString shown = table->settingText(winnerRow, field);
      if (shown == QLatin1String("on")) shown = QStringLiteral("true");
      if (shown == QLatin1String("off")) shown = QStringLiteral("false");
      QString value = controller->fieldText(field);
      value.remove(QLatin1Char('"'));
      QCOMPARE(value, shown);
    }
    QVERIFY(controller->fieldText(QStringLiteral("train.max_steps")) == QStringLiteral("10"));

    // The Compare panel shows the same candidates, the same winner.
    ComparePanel* compare = m_window->comparePanel();
    compare->showSweep(record->experimentId.value_or(-1));
    QTRY_VERIFY_WITH_TIMEOUT(compare->sweep().autotune.has_value() &&
                                 compare->sweep().study.name == name &&
                                 compare->candidateTable()->rowCount() == table->rowCount(),
                             kWaitMs);
    QVERIFY(compare->candidateTable()->isWinnerRow(compare->candidateTable()->rowOf(winner)));
    m_window->dock(QStringLiteral("compare"))->raise();
    QVERIFY(compare->grab().save(artifacts + "/compare-autotune.png"));
  }

  void stopEndsARunningAutotune() {
    const QString path = writeExperiment(QStringLiteral("long"));
    QVERIFY(m_window->openExperiment(path).ok());
    // Long candidates: the search is still running when the first one has settled.
    builder()->autotuneSteps()->setValue(3000);
    builder()->autotuneWarmup()->setValue(1);
    QTest::mouseClick(builder()->autotuneButton(), Qt::LeftButton);
    QVERIFY(builder()->isAutotuning());
    QTRY_VERIFY_WITH_TIMEOUT(
        builder()->autotuneTable()->rowCount() >= 1 && builder()->stopAutotuneButton()->isEnabled(),
        kWaitMs);
    QTest::mouseClick(builder()->stopAutotuneButton(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!builder()->isAutotuning(), kWaitMs);
    const auto record = study(m_db, builder()->autotuneStudy());
    QVERIFY(record.has_value());
    QCOMPARE(record->status, backend::StudyStatus::stopped);
    QVERIFY(record->state["stopped"].toBool());
    const QString said = builder()->autotuneStatus()->text();
    QVERIFY2(said.contains(QStringLiteral("stopped")), qPrintable(said));
    QStringList statuses;
    for (const QJsonValue& c : record->state["candidates"].toArray())
      statuses << c.toObject()["status"].toString();
    qInfo("candidates when stopped: %s", qPrintable(statuses.join(", ")));
    // The candidate the stop ended (if one was running then) is stopped, never a failure.
    QVERIFY2(!statuses.contains(QStringLiteral("failed")), qPrintable(statuses.join(", ")));
    // The first candidate was measured before the stop: it is the best so far, and offered.
    QVERIFY(record->state["winner"].isDouble());
    QVERIFY2(said.contains(QStringLiteral("best so far")), qPrintable(said));
    QVERIFY(builder()->openWinnerButton()->isEnabled());
  }
};

QTEST_MAIN(TestBuilderAutotune)
#include "tst_builderautotune.moc"
