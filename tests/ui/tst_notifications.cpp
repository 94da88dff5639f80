// Desktop notifications (ui/notifier.h) from the real main window, on a real X server and a
// private session bus (dbus-run-session, tests/ui/xvfb_run.sh): the test registers its own
// org.freedesktop.Notifications service on that bus (a second connection, so every call goes
// through the bus daemon), a real `shardscope-cli sweep` runs one program trial that fails, and
// the service receives "Run NAME failed" and then the sweep's end. Emitting the service's
// ActionInvoked for the run's notification selects the run in the window. A kind switched off in
// the Settings dialog is not sent; a followed run that goes silent is told as stalled. Every wait
// has a generous deadline; nothing asserts a duration.
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QDBusConnection>
#include <QDBusConnectionInterface>
#include <QDialogButtonBox>
#include <QProcess>
#include <QPushButton>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include "backend/store/runreader.h"
#include "tests/support/files.h"
#include "tests/support/paths.h"
#include "ui/mainwindow.h"
#include "ui/notifier.h"
#include "ui/runs/runspanel.h"
#include "ui/settingsdialog.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

constexpr int kWaitMs = 60000;
const QString kService = QStringLiteral("org.freedesktop.Notifications");
const QString kPath = QStringLiteral("/org/freedesktop/Notifications");

// A trial that reports one value, then fails (exit 3, no `done`) once RELEASE exists.
constexpr const char* kTrial = R"(import json, os, sys, time
release = sys.argv[1]
print(json.dumps({"ev": "eval", "step": 1, "metrics": {"objective": 1.0}}), flush=True)
while not os.path.exists(release):
    time.sleep(0.05)
print("trial gives up", file=sys.stderr, flush=True)
sys.exit(3)
)";

}  // namespace

/// The freedesktop notification service as a desktop runs it, reduced to what the dashboard
/// calls; it records every notification it is sent.
class NotificationService : public QObject {
  Q_OBJECT
  Q_CLASSINFO("D-Bus Interface", "org.freedesktop.Notifications")

 public:
  struct Shown {
    uint id = 0;
    QString app, summary, body;
    QStringList actions;
  };
  QList<Shown> shown;

 public slots:
  uint Notify(const QString& app, uint /*replaces*/, const QString& /*icon*/,
              const QString& summary, const QString& body, const QStringList& actions,
              const QVariantMap& /*hints*/, int /*timeout*/) {
    shown.append({uint(shown.size() + 1), app, summary, body, actions});
    return shown.back().id;
  }
  QStringList GetCapabilities() { return {QStringLiteral("actions"), QStringLiteral("body")}; }
  void CloseNotification(uint id) { emit NotificationClosed(id, 3); }

 signals:
  void ActionInvoked(uint id, const QString& key);
  void NotificationClosed(uint id, uint reason);
};

class TestNotifications : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  QString m_db;
  NotificationService m_service;
  std::unique_ptr<MainWindow> m_window;

  /// Writes sweep NAME (one failing trial that waits for DIR/NAME.release) and starts it.
  std::unique_ptr<QProcess> startSweep(const QString& name);
  /// The runs of the run log, newest first.
  std::vector<backend::RunRecord> runs();
  /// The notifications whose summary is `summary`.
  QList<NotificationService::Shown> shownAs(const QString& summary) const;

 private slots:
  void initTestCase();
  void aFailedTrialIsNotifiedAndItsClickSelectsTheRun();
  void aKindSwitchedOffInSettingsIsNotSent();
  void aSilentRunIsNotifiedAsStalled();
  void cleanupTestCase();
};

void TestNotifications::initTestCase() {
  QStandardPaths::setTestModeEnabled(true);
  QVERIFY(m_dir.isValid());
  // The service on a connection of its own: the window's calls cross the bus daemon.
  QDBusConnection bus =
      QDBusConnection::connectToBus(QDBusConnection::SessionBus, QStringLiteral("service"));
  QVERIFY2(bus.isConnected(), "no session bus: run this test under dbus-run-session");
  QVERIFY(bus.registerObject(kPath, &m_service,
                             QDBusConnection::ExportAllSlots | QDBusConnection::ExportAllSignals));
  QVERIFY(bus.registerService(kService));
  m_db = m_dir.filePath(QStringLiteral("runs.db"));
  m_window = std::make_unique<MainWindow>(nullptr, 50);
  NotifySettings settings;  // the defaults, whatever an earlier run saved
  m_window->notifier()->setSettings(settings);
  m_window->show();
  QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
}

std::unique_ptr<QProcess> TestNotifications::startSweep(const QString& name) {
  const QString trial = m_dir.filePath(QStringLiteral("trial.py"));
  if (!testing::writeAll(trial, kTrial)) return {};
  const QString toml =
      QStringLiteral(
          "[experiment]\nname = \"%1\"\n\n[search]\nname = \"%1\"\n"
          "program = [\"python3\", \"%2\", \"%3\"]\nsampler = \"random\"\nseed = 1\n"
          "n_trials = 1\nobjectives = {objective = \"minimize\"}\n\n"
          "[search.space.x]\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n")
          .arg(name, trial, m_dir.filePath(name + ".release"));
  const QString path = m_dir.filePath(name + ".toml");
  if (!testing::writeAll(path, toml.toUtf8())) return {};
  auto sweep = std::make_unique<QProcess>();
  sweep->setProcessChannelMode(QProcess::ForwardedChannels);
  sweep->start(testing::binaryDir() + "/bin/shardscope-cli",
               {"--db", m_db, "sweep", path, "--max-retries", "0"});
  return sweep->waitForStarted() ? std::move(sweep) : nullptr;
}

std::vector<backend::RunRecord> TestNotifications::runs() {
  auto reader = backend::RunReader::open(m_db);
  if (!reader) return {};
  auto list = reader->listRuns();
  return list ? *list : std::vector<backend::RunRecord>{};
}

QList<NotificationService::Shown> TestNotifications::shownAs(const QString& summary) const {
  QList<NotificationService::Shown> out;
  for (const auto& n : m_service.shown) {
    if (n.summary == summary) out.append(n);
  }
  return out;
}

// The run is running when the window first reads it (history, not news); it fails: the service
// is told its name and status, with a "default" action; then the sweep's end. The click selects
// the run.
void TestNotifications::aFailedTrialIsNotifiedAndItsClickSelectsTheRun() {
  auto sweep = startSweep(QStringLiteral("first"));
  QVERIFY(sweep);
  QTRY_VERIFY_WITH_TIMEOUT(runs().size() == 1 && runs().front().status == spec::RunStatus::running,
                           kWaitMs);
  const backend::RunRecord run = runs().front();
  m_window->openRunLog(m_db);
  QTRY_VERIFY_WITH_TIMEOUT(m_window->runCount() == 1, kWaitMs);
  QVERIFY(m_service.shown.isEmpty());  // a run seen running is no news

  QVERIFY(testing::writeAll(m_dir.filePath("first.release"), ""));
  const QString title = QStringLiteral("Run %1 failed").arg(run.name);
  QTRY_COMPARE_WITH_TIMEOUT(shownAs(title).size(), 1, kWaitMs);
  const auto failed = shownAs(title).front();
  QCOMPARE(failed.app, QStringLiteral("Shardscope"));
  QVERIFY2(failed.body.startsWith(QStringLiteral("Run %1: failed").arg(run.name)),
           qPrintable(failed.body));
  QVERIFY(failed.actions.contains(QStringLiteral("default")));
  QTRY_COMPARE_WITH_TIMEOUT(shownAs(QStringLiteral("Sweep first ended")).size(), 1, kWaitMs);
  QVERIFY(shownAs(QStringLiteral("Sweep first ended")).front().body.contains("no trial completed"));
  QTRY_COMPARE_WITH_TIMEOUT(sweep->state(), QProcess::NotRunning, kWaitMs);

  RunsPanel* panel = m_window->runsPanel();
  panel->selectRuns({});
  QTRY_VERIFY_WITH_TIMEOUT(panel->selectedRunIds().isEmpty(), kWaitMs);
  emit m_service.ActionInvoked(failed.id, QStringLiteral("default"));
  QTRY_COMPARE_WITH_TIMEOUT(panel->selectedRunIds(), QList<qint64>{run.id}, kWaitMs);
}

// Run ends switched off in File > Settings… (the dialog, accepted): the next failed trial sends
// no notification of its end, and its sweep's end still comes.
void TestNotifications::aKindSwitchedOffInSettingsIsNotSent() {
  QTimer::singleShot(0, this, [] {
    auto* dialog = qobject_cast<SettingsDialog*>(QApplication::activeModalWidget());
    QVERIFY(dialog != nullptr);
    auto* onEnd = dialog->findChild<QCheckBox*>(QStringLiteral("notifyOnEnd"));
    QVERIFY(onEnd != nullptr && onEnd->isChecked());
    onEnd->click();
    dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok)->click();
  });
  m_window->findChild<QAction*>(QStringLiteral("settingsAction"))->trigger();
  QVERIFY(!m_window->notifier()->settings().onEnd);
  QVERIFY(m_window->notifier()->settings().onSweepEnd);
  QVERIFY(!NotifySettings::load().onEnd);  // kept for the next start

  const auto before = m_service.shown.size();
  auto sweep = startSweep(QStringLiteral("second"));
  QVERIFY(sweep);
  QTRY_VERIFY_WITH_TIMEOUT(runs().size() == 2, kWaitMs);
  QVERIFY(testing::writeAll(m_dir.filePath("second.release"), ""));
  QTRY_COMPARE_WITH_TIMEOUT(shownAs(QStringLiteral("Sweep second ended")).size(), 1, kWaitMs);
  QTRY_COMPARE_WITH_TIMEOUT(sweep->state(), QProcess::NotRunning, kWaitMs);
  QCOMPARE(m_service.shown.size(), before + 1);  // the sweep's end alone
  QCOMPARE(runs().front().status, spec::RunStatus::failed);
}

// A running trial that wrote one event and then nothing while its sweep follows it: one "stalled"
// notification naming it, with a click that selects it; released, it ends as before.
void TestNotifications::aSilentRunIsNotifiedAsStalled() {
  NotifySettings settings;
  settings.stallAfterMin = 0.005;  // 0.3 s
  m_window->notifier()->setSettings(settings);
  auto sweep = startSweep(QStringLiteral("third"));
  QVERIFY(sweep);
  QTRY_VERIFY_WITH_TIMEOUT(runs().size() == 3, kWaitMs);
  const backend::RunRecord run = runs().front();
  const QString title = QStringLiteral("Run %1 stalled").arg(run.name);
  QTRY_COMPARE_WITH_TIMEOUT(shownAs(title).size(), 1, kWaitMs);
  const auto stalled = shownAs(title).front();
  QVERIFY2(stalled.body.contains(QStringLiteral("wrote no event for")), qPrintable(stalled.body));
  QVERIFY(stalled.actions.contains(QStringLiteral("default")));
  QVERIFY(testing::writeAll(m_dir.filePath("third.release"), ""));
  QTRY_COMPARE_WITH_TIMEOUT(shownAs(QStringLiteral("Sweep third ended")).size(), 1, kWaitMs);
  QTRY_COMPARE_WITH_TIMEOUT(sweep->state(), QProcess::NotRunning, kWaitMs);
  QCOMPARE(shownAs(title).size(), 1);  // once per stall
}

void TestNotifications::cleanupTestCase() {
  m_window.reset();
  NotifySettings{}.save();
}

QTEST_MAIN(TestNotifications)
#include "tst_notifications.moc"
