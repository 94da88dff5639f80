// `shardscope-cli hosts add|ls|check|trust` against the real sshd fixture: an unknown host is
// refused (by `check` and by an ssh `run`) with its fingerprint and the way to trust it; `trust`
// accepts only the fingerprint the host offers (as `ssh-keygen -lf` prints it); then `check` is
// ok; a changed key is a hard failure with the attack warning. `check --steps` runs the Hosts
// panel's diagnostics (backend/ssh/hostcheck) and prints each step.
#include <QJsonArray>
#include <QJsonObject>
#include <QMap>
#include <QTemporaryDir>
#include <QTest>

#include "clitest.h"

using namespace clitest;

class TestCliHosts : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  QProcessEnvironment m_env;
  QString db() const { return m_dir.filePath("runs.db"); }
  QString knownHosts() const { return m_dir.filePath("home/.ssh/known_hosts"); }
  Run hosts(const QStringList& args) {
    return cli(QStringList{"--db", db(), "hosts"} + args, m_env);
  }
  // `hosts check --steps --json`: {step id: state}, and the whole document.
  QMap<QString, QString> stepStates(const Run& run) {
    QMap<QString, QString> states;
    for (const auto& step : json(run.out)["steps"].toArray())
      states[step.toObject()["id"].toString()] = step.toObject()["state"].toString();
    return states;
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY2(writeSshConfig(m_dir.filePath("home"), "gpu1"),
             "the sshd fixture is not running (fixture sshd)");
    m_env = QProcessEnvironment::systemEnvironment();
    m_env.insert("HOME", m_dir.filePath("home"));
    m_env.remove("SSH_AUTH_SOCK");
  }

  void unknownHostIsRefusedWithItsFingerprint() {
    const QString fingerprint = fixtureFingerprint();
    QVERIFY2(fingerprint.startsWith("SHA256:"), qPrintable(fingerprint));
    const Run add = hosts({"add", "gpu1"});
    QVERIFY2(add.exitCode == 0, qPrintable(add.out + add.err));
    const QJsonArray listed =
        json(cli({"--db", db(), "--json", "hosts", "ls"}, m_env).out)["hosts"].toArray();
    QCOMPARE(listed.size(), 1);
    QCOMPARE(listed[0].toObject()["alias"].toString(), QString("gpu1"));
    QCOMPARE(listed[0].toObject()["port"].toInt(), fixtureEnv("sshd").value("SSHD_PORT").toInt());
    QVERIFY(listed[0].toObject()["fingerprint"].isNull());

    const Run check = hosts({"check", "gpu1"});
    QCOMPARE(check.exitCode, 1);
    QVERIFY2(check.out.contains(fingerprint), qPrintable(check.out + check.err));
    QVERIFY2(check.out.contains("hosts trust gpu1 " + fingerprint), qPrintable(check.out));

    // Every step: the connection works, the key is not vouched for, so nothing logs in.
    const Run steps = cli({"--db", db(), "--json", "hosts", "check", "gpu1", "--steps"}, m_env);
    QCOMPARE(steps.exitCode, 1);
    const auto states = stepStates(steps);
    QCOMPARE(states.value("resolve"), QString("passed"));
    QCOMPARE(states.value("connect"), QString("passed"));
    QCOMPARE(states.value("hostkey"), QString("failed"));
    QCOMPARE(states.value("auth"), QString("skipped"));
    QCOMPARE(json(steps.out)["offered"].toObject()["fingerprint"].toString(), fingerprint);

    // An ssh run to the unknown host starts nothing and says how to trust it.
    const QString exp = m_dir.filePath("remote.toml");
    QVERIFY(writeAll(exp,
                     "[experiment]\nname = \"remote\"\n[model]\narch = \"tiny\"\n"
                     "[data]\ntrain_path = \"/nonexistent/train.jsonl\"\nseq_len = 16\n"
                     "[train]\nmax_steps = 3\n[launch]\nkind = \"ssh\"\n"
                     "hosts = [\"gpu1\"]\nnproc_per_node = 1\ntrainer = \"/bin/true\"\n"
                     "remote_dir = \"" +
                         m_dir.filePath("remote").toUtf8() + "\"\n"));
    const Run run = cli({"--db", db(), "run", exp}, m_env);
    QCOMPARE(run.exitCode, 1);
    QVERIFY2(run.err.contains(fingerprint), qPrintable(run.err));
    QVERIFY(!QDir(m_dir.filePath("remote")).exists());
    QVERIFY(!QFile::exists(knownHosts()));
  }

  void trustTakesOnlyTheOfferedFingerprint() {
    const QString fingerprint = fixtureFingerprint();
    QCOMPARE(hosts({"trust", "gpu1", "MD5:00:11"}).exitCode, 2);
    const QString wrong = "SHA256:" + QString(43, 'A');
    const Run refused = hosts({"trust", "gpu1", wrong});
    QCOMPARE(refused.exitCode, 1);
    QVERIFY2(refused.err.contains(fingerprint) && refused.err.contains(wrong),
             qPrintable(refused.err));
    QVERIFY(!readAll(knownHosts()).contains("ssh-"));

    const Run trusted = hosts({"trust", "gpu1", fingerprint});
    QVERIFY2(trusted.exitCode == 0, qPrintable(trusted.out + trusted.err));
    const Run check = cli({"--db", db(), "--json", "hosts", "check", "gpu1"}, m_env);
    QVERIFY2(check.exitCode == 0, qPrintable(check.out + check.err));
    QCOMPARE(json(check.out)["known"].toBool(), true);
    QCOMPARE(json(check.out)["fingerprint"].toString(), fingerprint);
    const QJsonArray listed =
        json(cli({"--db", db(), "--json", "hosts", "ls"}, m_env).out)["hosts"].toArray();
    QCOMPARE(listed[0].toObject()["fingerprint"].toString(), fingerprint);

    // Trusted: every required step passes, the trainer is found where --trainer says.
    const QString trainer = m_dir.filePath("bin/shardtrain");
    QVERIFY(QDir().mkpath(m_dir.filePath("bin")));
    QVERIFY(writeAll(trainer, "#!/bin/sh\necho shardtrain\n"));
    QVERIFY(QFile(trainer).setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                          QFileDevice::ExeOwner));
    const Run steps = cli(
        {"--db", db(), "--json", "hosts", "check", "gpu1", "--steps", "--trainer", trainer}, m_env);
    QVERIFY2(steps.exitCode == 0, qPrintable(steps.out + steps.err));
    const auto states = stepStates(steps);
    for (const char* id : {"resolve", "connect", "hostkey", "auth", "trainer"})
      QVERIFY2(states.value(id) == "passed", qPrintable(QString(id) + ": " + steps.out));
    QCOMPARE(states.value("gpus"), QString("not available"));  // no nvidia-smi here
    QVERIFY2(json(steps.out)["host_key"].toString().contains(fingerprint), qPrintable(steps.out));
    // The text form prints one line per step as it ends.
    const Run text = hosts({"check", "gpu1", "--steps", "--trainer", "no-such-trainer"});
    QCOMPARE(text.exitCode, 1);
    QVERIFY2(text.out.count('\n') >= 7 && text.out.contains("not on the remote PATH"),
             qPrintable(text.out));
  }

  void changedKeyIsAHardFailureWithTheWarning() {
    QProcess keygen;
    keygen.start("ssh-keygen", {"-q", "-t", "ed25519", "-N", "", "-f", m_dir.filePath("other")});
    QVERIFY(keygen.waitForFinished(30000) && keygen.exitCode() == 0);
    const QByteArray other = readAll(m_dir.filePath("other.pub")).trimmed();
    const QByteArray port = fixtureEnv("sshd").value("SSHD_PORT").toUtf8();
    const QList<QByteArray> words = other.split(' ');
    QVERIFY(writeAll(knownHosts(), "[127.0.0.1]:" + port + " " + words[0] + " " + words[1] + "\n"));
    const Run check = cli({"--db", db(), "--json", "hosts", "check", "gpu1"}, m_env);
    QCOMPARE(check.exitCode, 1);
    const QString message = json(check.out)["message"].toString();
    QCOMPARE(json(check.out)["known"].toBool(), false);
    QVERIFY2(message.contains("CHANGED") && message.contains("man-in-the-middle"),
             qPrintable(message));
    // `trust` does not paper over a changed key, even with the right fingerprint.
    const Run trust = hosts({"trust", "gpu1", fixtureFingerprint()});
    QCOMPARE(trust.exitCode, 1);
    QCOMPARE(readAll(knownHosts()).count('\n'), 1);
  }
};

QTEST_GUILESS_MAIN(TestCliHosts)
#include "tst_cli_hosts.moc"
