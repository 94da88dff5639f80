// Known hosts and login against the real sshd fixture: an unknown host is refused until trusted
// by the fingerprint `ssh-keygen -lf` prints; a wrong fingerprint is not trusted; a changed key
// and a key of another type are hard failures with the attack warning; ssh-agent login; remote
// commands and SFTP reads from an offset; ProxyJump through OpenSSH's client.
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "../launch/remotetest.h"
#include "backend/ssh/knownhosts.h"
#include "backend/ssh/sftp.h"
#include "backend/ssh/sshconfig.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;
using namespace remotetest;

using shardscope::testing::why;

namespace {

bool contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

class TestKnownHosts : public QObject {
  Q_OBJECT

 private:
  QMap<QString, QString> m_sshd;
  QTemporaryDir m_tmp;

  SshTarget target(const QString& knownHosts) {
    SshTarget t;
    t.host = m_sshd.value("SSHD_HOST").toStdString();
    t.port = m_sshd.value("SSHD_PORT").toInt();
    t.user = m_sshd.value("SSHD_USER").toStdString();
    t.identityFile = m_sshd.value("SSHD_KEY").toStdString();
    t.knownHostsFile = knownHosts.toStdString();
    t.alias = "testhost";
    return t;
  }

  // The fingerprint as the user would check it: ssh-keygen -lf on the server's public key.
  std::string keygenFingerprint(const QString& pubFile) {
    const QString line = QString::fromUtf8(run("ssh-keygen", {"-lf", pubFile}));
    return line.section(' ', 1, 1).toStdString();
  }

  QString knownHostsWith(const QString& name, const QString& keyType) {
    const QString key = m_tmp.filePath(name + "_key");
    run("ssh-keygen", {"-q", "-t", keyType, "-N", "", "-f", key});
    QString file = m_tmp.filePath(name + "_known_hosts");
    const QByteArray pub = readAll(key + ".pub").split(' ').mid(0, 2).join(' ');
    writeAll(file, "[127.0.0.1]:" + m_sshd.value("SSHD_PORT").toUtf8() + " " + pub + "\n");
    return file;
  }

 private slots:
  void initTestCase() {
    m_sshd = fixtureEnv("sshd");
    QVERIFY2(m_sshd.contains("SSHD_PORT"), "the sshd fixture is not running (fixture sshd)");
  }

  void unknownHostIsRefusedUntilTrusted() {
    const QString file = m_tmp.filePath("fresh/known_hosts");  // folder does not exist yet
    auto session = SshSession::create(target(file));
    QVERIFY(session);
    auto opened = session->open();
    QVERIFY(!opened);
    QVERIFY2(contains(opened.message(), "shardscope-cli hosts trust testhost SHA256:"),
             opened.message().c_str());

    const std::string right =
        keygenFingerprint(m_sshd.value("SSHD_KNOWN_HOSTS").section('/', 0, -2) + "/host_key.pub");
    QVERIFY2(isSha256Fingerprint(right), right.c_str());
    QVERIFY2(contains(opened.message(), right.c_str()), opened.message().c_str());
    KnownHosts known(file.toStdString());
    auto wrong = known.trust(target(file), "SHA256:" + std::string(43, 'A'));
    QVERIFY(!wrong);
    QVERIFY2(contains(wrong.message(), "Not trusting it"), wrong.message().c_str());
    auto malformed = known.trust(target(file), "MD5:aa:bb");
    QVERIFY(!malformed);
    QVERIFY2(contains(malformed.message(), "ssh-keygen -lf"), malformed.message().c_str());
    QVERIFY(!QFile::exists(file));

    auto trusted = known.trust(target(file), right);
    QVERIFY2(trusted, why(trusted).c_str());
    auto again = known.trust(target(file), right);
    QVERIFY2(again && contains(*again, "already trusted"), why(again).c_str());
    auto entries = known.entries();
    QVERIFY2(entries, why(entries).c_str());
    QCOMPARE(entries->size(), size_t(1));
    QCOMPARE(entries->front().fingerprint, right);

    auto now = SshSession::create(target(file));
    QVERIFY(now);
    auto login = now->open();
    QVERIFY2(login, why(login).c_str());
    auto echoed = now->exec("printf '%s' \"$0\" >&2; echo out; exit 3");
    QVERIFY2(echoed, why(echoed).c_str());
    QCOMPARE(echoed->out, std::string("out\n"));
    QCOMPARE(echoed->exitStatus, 3);
    QVERIFY(!echoed->err.empty());
  }

  void changedKeyIsAHardFailure() {
    const QString file = knownHostsWith("changed", "ed25519");
    auto session = SshSession::create(target(file));
    QVERIFY(session);
    auto opened = session->open();
    QVERIFY(!opened);
    QVERIFY2(contains(opened.message(), "CHANGED") && contains(opened.message(), "attack"),
             opened.message().c_str());
    auto check = KnownHosts(file.toStdString()).inspect(target(file));
    QVERIFY2(check, why(check).c_str());
    QCOMPARE(check->state, SSH_KNOWN_HOSTS_CHANGED);
    auto trust = KnownHosts(file.toStdString()).trust(target(file), check->fingerprint);
    QVERIFY(!trust);  // a changed key is never overwritten by a trust command
    QVERIFY2(contains(trust.message(), "ssh-keygen -R"), trust.message().c_str());
  }

  void keyOfAnotherTypeIsRefused() {
    const QString file = knownHostsWith("other", "ecdsa");
    auto check = KnownHosts(file.toStdString()).inspect(target(file));
    QVERIFY2(check, why(check).c_str());
    QCOMPARE(check->state, SSH_KNOWN_HOSTS_OTHER);
    auto session = SshSession::create(target(file));
    QVERIFY(session);
    auto opened = session->open();
    QVERIFY(!opened);
    QVERIFY2(contains(opened.message(), "different type"), opened.message().c_str());
  }

  void agentLoginWithoutAnIdentityFile() {
    QProcess agent;
    agent.start("ssh-agent", {"-s"});
    QVERIFY(agent.waitForFinished(10000));
    const QString out = QString::fromUtf8(agent.readAllStandardOutput());
    const QString sock = out.section("SSH_AUTH_SOCK=", 1).section(';', 0, 0);
    const QString pid = out.section("SSH_AGENT_PID=", 1).section(';', 0, 0);
    QVERIFY2(!sock.isEmpty() && !pid.isEmpty(), qPrintable(out));
    const QByteArray oldSock = qgetenv("SSH_AUTH_SOCK");
    const QByteArray oldHome = qgetenv("HOME");
    qputenv("HOME", m_tmp.path().toUtf8());  // no default keys there
    SshTarget t = target(m_sshd.value("SSHD_KNOWN_HOSTS"));
    t.identityFile.clear();
    qunsetenv("SSH_AUTH_SOCK");
    auto without = SshSession::create(t);
    QVERIFY(without);
    auto refused = without->open();
    QVERIFY(!refused);
    QVERIFY2(contains(refused.message(), "never uses passwords"), refused.message().c_str());

    qputenv("SSH_AUTH_SOCK", sock.toUtf8());
    QProcess add;
    add.start("ssh-add", {m_sshd.value("SSHD_KEY")});
    QVERIFY(add.waitForFinished(10000));
    QCOMPARE(add.exitCode(), 0);
    auto with = SshSession::create(t);
    QVERIFY(with);
    auto login = with->open();
    qputenv("HOME", oldHome);
    qputenv("SSH_AUTH_SOCK", oldSock);
    run("kill", {pid});
    QVERIFY2(login, why(login).c_str());
  }

  void sftpWritesAndReadsFromOffsets() {
    auto session = SshSession::create(target(m_sshd.value("SSHD_KNOWN_HOSTS")));
    QVERIFY(session);
    auto opened = session->open();
    QVERIFY2(opened, why(opened).c_str());
    const std::string dir = m_tmp.filePath("sftp/a b/c").toStdString();
    auto made = sftpMakeDirs(*session, dir);
    QVERIFY2(made, why(made).c_str());
    std::string data(100000, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 % 251);
    auto written = sftpWriteFile(*session, dir + "/f", data);
    QVERIFY2(written, why(written).c_str());
    QCOMPARE(readAll(QString::fromStdString(dir + "/f")).toStdString(), data);
    auto middle = sftpRead(*session, dir + "/f", 70000, 20000);
    QVERIFY2(middle, why(middle).c_str());
    QCOMPARE(*middle, data.substr(70000, 20000));
    auto tail = sftpRead(*session, dir + "/f", 99990, 1000);
    QVERIFY(tail);
    QCOMPARE(*tail, data.substr(99990));
    auto missing = sftpRead(*session, dir + "/nothing-yet", 0, 10);
    QVERIFY2(missing && missing->empty(), why(missing).c_str());
    auto home = sftpAbsolutePath(*session, "~/x");
    QVERIFY2(home, why(home).c_str());
    QCOMPARE(*home, qEnvironmentVariable("HOME").toStdString() + "/x");
  }

  void proxyJumpReachesTheHost() {
    const QString config = m_tmp.filePath("jump_config");
    writeAll(config, sshConfigFor(m_sshd, {"bastion"}) +
                         "Host inner\n  HostName 127.0.0.1\n  Port " +
                         m_sshd.value("SSHD_PORT").toUtf8() + "\n  IdentityFile " +
                         m_sshd.value("SSHD_KEY").toUtf8() + "\n  ProxyJump bastion\n");
    auto parsed = SshConfig::load(config.toStdString());
    QVERIFY2(parsed, why(parsed).c_str());
    SshTarget t = parsed->target("inner", m_sshd.value("SSHD_KNOWN_HOSTS").toStdString());
    QVERIFY(!t.proxyCommand.empty());
    auto session = SshSession::create(t);
    QVERIFY(session);
    auto opened = session->open();
    QVERIFY2(opened, why(opened).c_str());
    auto result = session->exec("echo through");
    QVERIFY2(result, why(result).c_str());
    QCOMPARE(result->out, std::string("through\n"));
  }
};

QTEST_GUILESS_MAIN(TestKnownHosts)
#include "tst_knownhosts.moc"
