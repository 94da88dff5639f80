// The Hosts panel against the real sshd fixture: a check shows every step green except the
// GPUs (none here: "no nvidia-smi", not a failure of the host), off the GUI thread; an unknown
// host key opens the fingerprint dialog with the key type and the fingerprint ssh-keygen prints;
// rejecting it leaves known_hosts as it was, trusting it writes the key and the check goes on;
// "Add host" through its dialog stores the host in the run log. Screenshot in tests/artifacts.
#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include "backend/store/runstore.h"
#include "tests/backend/launch/remotetest.h"
#include "tests/support/paths.h"
#include "ui/data/runlog.h"
#include "ui/hosts/hostdialogs.h"
#include "ui/hosts/hostspanel.h"

using namespace shardscope;
using namespace shardscope::ui;
using namespace remotetest;

namespace {
constexpr int kWaitMs = 30000;  // generous: SSH round trips on a loaded 2-core machine
}  // namespace

class TestHostsPanel : public QObject {
  Q_OBJECT

 private:
  QMap<QString, QString> m_sshd;
  QTemporaryDir m_dir;
  std::unique_ptr<RunLog> m_runLog;
  std::unique_ptr<HostsPanel> m_panel;
  QString m_knownHosts;

  QString hostKeyFingerprint() {
    const QString pub = QFileInfo(m_sshd.value("SSHD_KNOWN_HOSTS")).dir().filePath("host_key.pub");
    return QString::fromUtf8(run("ssh-keygen", {"-lf", pub})).section(' ', 1, 1);
  }

  bool waitCheck(const QString& alias) {
    return QTest::qWaitFor([&] { return !m_panel->isChecking(); }, kWaitMs) &&
           m_panel->table()->findItems(alias, Qt::MatchExactly).size() == 1;
  }

  backend::CheckStep::State state(const char* id) { return m_panel->step(id).state; }

 private slots:
  void initTestCase() {
    m_sshd = fixtureEnv("sshd");
    QVERIFY2(m_sshd.contains("SSHD_PORT"), "the sshd fixture is not running (fixture sshd)");
    QVERIFY(m_dir.isValid());
    const QString config = m_dir.filePath("ssh_config");
    QVERIFY(writeAll(config, sshConfigFor(m_sshd, {"gpubox", "other"})));
    // A trainer on the host's PATH is what "trainer found" looks for; this one is a stand-in.
    const QString trainer = m_dir.filePath("bin/shardtrain");
    QDir().mkpath(m_dir.filePath("bin"));
    QVERIFY(writeAll(trainer, "#!/bin/sh\necho shardtrain\n"));
    QFile(trainer).setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                  QFileDevice::ExeOwner);
    m_knownHosts = m_dir.filePath("known_hosts");  // absent: every key is unknown at first
    auto store = backend::RunStore::open(m_dir.filePath("runs.db"));  // an empty run log
    QVERIFY2(store, store ? "" : store.message().c_str());
    store->reset();
    m_runLog = std::make_unique<RunLog>(50);
    m_panel = std::make_unique<HostsPanel>(*m_runLog);
    m_panel->setSshFiles(config, m_knownHosts);
    m_panel->setTrainer(trainer);
    m_panel->resize(1400, 700);
    m_panel->show();
    m_runLog->open(m_dir.filePath("runs.db"));
    QTRY_VERIFY_WITH_TIMEOUT(m_panel->isLoaded(), kWaitMs);
  }

  void listsTheAliasesOfTheSshConfig() {
    QTableWidget* table = m_panel->table();
    QCOMPARE(table->rowCount(), 2);
    QCOMPARE(table->item(0, HostsPanel::AliasCol)->text(), QString("gpubox"));
    QCOMPARE(table->item(0, HostsPanel::AddressCol)->text(),
             QString("%1@127.0.0.1:%2").arg(m_sshd.value("SSHD_USER"), m_sshd.value("SSHD_PORT")));
    QCOMPARE(table->item(0, HostsPanel::FromCol)->text(), QString("ssh config"));
  }

  void unknownKeyRejectedLeavesKnownHostsUnchanged() {
    QVERIFY(m_panel->checkHost("gpubox"));
    QVERIFY(waitCheck("gpubox"));
    QCOMPARE(state("resolve"), backend::CheckStep::State::passed);
    QCOMPARE(state("connect"), backend::CheckStep::State::passed);
    QCOMPARE(state("hostkey"), backend::CheckStep::State::failed);
    QCOMPARE(state("auth"), backend::CheckStep::State::skipped);  // never tried with an unknown key
    FingerprintDialog* dialog = m_panel->fingerprintDialog();
    QVERIFY(dialog != nullptr);
    QTRY_VERIFY_WITH_TIMEOUT(dialog->isVisible(), kWaitMs);
    QCOMPARE(dialog->findChild<QLabel*>("keyType")->text(), QString("ssh-ed25519"));
    QCOMPARE(dialog->findChild<QLabel*>("fingerprint")->text(), hostKeyFingerprint());
    QVERIFY(dialog->trustButton() != nullptr);
    QTest::mouseClick(dialog->rejectButton(), Qt::LeftButton);
    QVERIFY(!QFile::exists(m_knownHosts));  // nothing written, not even an empty file
    QVERIFY(m_panel->step("hostkey").detail.contains("rejected"));
  }

  void trustedKeyIsWrittenAndEveryStepButGpusIsGreen() {
    QVERIFY(m_panel->checkHost("gpubox"));
    QVERIFY(waitCheck("gpubox"));
    FingerprintDialog* dialog = m_panel->fingerprintDialog();
    QVERIFY(dialog != nullptr);
    QSignalSpy trusted(m_panel.get(), &HostsPanel::keyTrusted);
    QSignalSpy finished(m_panel.get(), &HostsPanel::checkFinished);
    QTest::mouseClick(dialog->trustButton(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(trusted.size(), 1, kWaitMs);
    QVERIFY2(trusted[0][1].toBool(), qPrintable(trusted[0][2].toString()));
    QVERIFY(readAll(m_knownHosts).contains("ssh-ed25519"));
    // Trusting goes on with the check by itself.
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, kWaitMs);
    QCOMPARE(finished[0][1].toBool(), true);
    for (const char* id : {"resolve", "connect", "hostkey", "auth", "trainer"}) {
      QVERIFY2(state(id) == backend::CheckStep::State::passed,
               qPrintable(QString("%1: %2").arg(id, m_panel->step(id).detail)));
    }
    QCOMPARE(state("gpus"), backend::CheckStep::State::notAvailable);
    QVERIFY(m_panel->step("gpus").detail.contains("no nvidia-smi"));
    QCOMPARE(m_panel->step("hostkey").detail, "ssh-ed25519 " + hostKeyFingerprint());
    // What the user sees: the steps table's result column.
    QTableWidget* steps = m_panel->stepsTable();
    QCOMPARE(steps->rowCount(), 7);
    QVERIFY(steps->item(0, 1)->text().contains("passed"));
    QCOMPARE(steps->item(0, 1)->background().color(), QColor(0xd4, 0xed, 0xda));
    QVERIFY(steps->item(5, 1)->text().contains("not available"));
    // The run log now knows the host and the fingerprint the user accepted.
    const auto row = m_panel->table()->findItems("gpubox", Qt::MatchExactly).first()->row();
    const auto keyText = [&] { return m_panel->table()->item(row, HostsPanel::KeyCol)->text(); };
    QTRY_VERIFY2_WITH_TIMEOUT(keyText().contains("trusted here"), qPrintable(keyText()), kWaitMs);
    QCOMPARE(keyText(), hostKeyFingerprint() + " (trusted here)");
    QCOMPARE(m_panel->table()->item(row, HostsPanel::FromCol)->text(),
             QString("ssh config, added"));
    QVERIFY(m_panel->table()->item(row, HostsPanel::CheckCol)->text().contains("ready"));
  }

  void checksRunOffTheGuiThread() {
    QVERIFY(m_panel->jobThread() != QThread::currentThread());
    QVERIFY(m_panel->jobThread()->isRunning());
  }

  void missingTrainerFailsItsStep() {
    m_panel->setTrainer("shardtrain-not-installed");
    QVERIFY(m_panel->checkHost("other"));  // same sshd, so its key is known by now
    QVERIFY(waitCheck("other"));
    QCOMPARE(state("auth"), backend::CheckStep::State::passed);
    QCOMPARE(state("trainer"), backend::CheckStep::State::failed);
    QVERIFY(m_panel->step("trainer").detail.contains("not on the remote PATH"));
    m_panel->setTrainer(m_dir.filePath("bin/shardtrain"));
  }

  void addHostThroughTheDialogStoresIt() {
    QSignalSpy saved(m_panel.get(), &HostsPanel::hostSaved);
    QTest::mouseClick(m_panel->addButton(), Qt::LeftButton);
    AddHostDialog* dialog = m_panel->addDialog();
    QVERIFY(dialog != nullptr);
    QCOMPARE(dialog->aliasBox()->count(), 2);  // the ssh config's aliases are offered
    dialog->aliasBox()->setCurrentText("other");
    QCOMPARE(dialog->port(), m_sshd.value("SSHD_PORT").toInt());  // resolved from the config
    dialog->accept();
    QTRY_COMPARE_WITH_TIMEOUT(saved.size(), 1, kWaitMs);
    QVERIFY2(saved[0][1].toBool(), qPrintable(saved[0][2].toString()));
    auto reader = backend::RunReader::open(m_dir.filePath("runs.db"));
    QVERIFY(reader);
    auto hosts = reader->hosts();
    QVERIFY(hosts);
    QStringList aliases;
    for (const auto& h : *hosts) aliases.append(h.alias);
    aliases.sort();
    QCOMPARE(aliases, QStringList({"gpubox", "other"}));
    const auto row = m_panel->table()->findItems("other", Qt::MatchExactly).first()->row();
    QTRY_COMPARE_WITH_TIMEOUT(m_panel->table()->item(row, HostsPanel::FromCol)->text(),
                              QString("ssh config, added"), kWaitMs);
  }

  void screenshot() {
    QVERIFY(m_panel->checkHost("gpubox"));
    QVERIFY(waitCheck("gpubox"));
    m_panel->table()->selectRow(0);
    const QString artifacts = shardscope::testing::binaryDir() + "/tests/artifacts";
    QDir().mkpath(artifacts);
    QVERIFY(m_panel->grab().save(artifacts + "/hosts-panel.png"));
  }

  void cleanupTestCase() {
    m_panel.reset();
    m_runLog.reset();
  }
};

QTEST_MAIN(TestHostsPanel)
#include "tst_hostspanel.moc"
