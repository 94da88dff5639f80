// SshSession configures libssh from an SshTarget and reads the options back from libssh; bad
// targets are refused naming the field; every known-hosts result has its own message.
#include <QTest>

#include <set>
#include <string>

#include "backend/ssh/sshsession.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

using shardscope::testing::why;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

SshTarget fullTarget() {
  SshTarget target;
  target.host = "gpu1.example.org";
  target.port = 2222;
  target.user = "alice";
  target.identityFile = "/home/alice/.ssh/id_shardscope";
  target.knownHostsFile = "/home/alice/.config/shardscope/known_hosts";
  target.connectTimeoutSec = 7;
  return target;
}

}  // namespace

class TestSshSession : public QObject {
  Q_OBJECT

 private slots:
  void optionsRoundTripThroughLibssh() {
    const SshTarget target = fullTarget();
    auto session = SshSession::create(target);
    QVERIFY2(session, why(session).c_str());
    QVERIFY(session->handle() != nullptr);
    auto host = session->host();
    QVERIFY2(host, why(host).c_str());
    QCOMPARE(*host, target.host);
    auto port = session->port();
    QVERIFY2(port, why(port).c_str());
    QCOMPARE(*port, 2222);
    auto user = session->user();
    QVERIFY2(user, why(user).c_str());
    QCOMPARE(*user, target.user);
    auto identity = session->identityFile();
    QVERIFY2(identity, why(identity).c_str());
    QCOMPARE(*identity, target.identityFile);
    auto knownHosts = session->knownHostsFile();
    QVERIFY2(knownHosts, why(knownHosts).c_str());
    QCOMPARE(*knownHosts, target.knownHostsFile);
    QCOMPARE(session->connectTimeoutSec(), 7L);
  }

  void userInHostIsKeptWhenNoUserIsGiven() {
    SshTarget target;
    target.host = "bob@node7";
    auto session = SshSession::create(target);
    QVERIFY2(session, why(session).c_str());
    QCOMPARE(*session->host(), std::string("node7"));
    QCOMPARE(*session->user(), std::string("bob"));
    QCOMPARE(*session->port(), 22);
  }

  void explicitUserWinsOverUserInHost() {
    SshTarget target;
    target.host = "bob@node7";
    target.user = "carol";
    auto session = SshSession::create(target);
    QVERIFY2(session, why(session).c_str());
    QCOMPARE(*session->user(), std::string("carol"));
  }

  void invalidTargetsNameTheField_data() {
    QTest::addColumn<QString>("host");
    QTest::addColumn<int>("port");
    QTest::addColumn<long>("timeout");
    QTest::addColumn<QString>("field");
    QTest::newRow("empty host") << "" << 22 << 10L << "host is empty";
    QTest::newRow("port 0") << "h" << 0 << 10L << "port 0 is out of range";
    QTest::newRow("port 65536") << "h" << 65536 << 10L << "port 65536 is out of range";
    QTest::newRow("negative port") << "h" << -22 << 10L << "port -22 is out of range";
    QTest::newRow("zero timeout") << "h" << 22 << 0L << "connectTimeoutSec 0 must be > 0";
  }

  void invalidTargetsNameTheField() {
    QFETCH(QString, host);
    QFETCH(int, port);
    QFETCH(long, timeout);
    QFETCH(QString, field);
    SshTarget target;
    target.host = host.toStdString();
    target.port = port;
    target.connectTimeoutSec = timeout;
    auto session = SshSession::create(target);
    QVERIFY(!session);
    QVERIFY2(contains(session.message(), field.toStdString()), session.message().c_str());
  }

  void edgePortsAreAccepted() {
    for (int port : {1, 65535}) {
      SshTarget target;
      target.host = "h";
      target.port = port;
      auto session = SshSession::create(target);
      QVERIFY2(session, why(session).c_str());
      QCOMPARE(*session->port(), port);
    }
  }

  void movedSessionOwnsTheHandle() {
    auto created = SshSession::create(fullTarget());
    QVERIFY2(created, why(created).c_str());
    SshSession first = std::move(created).value();
    ssh_session raw = first.handle();
    SshSession second = std::move(first);
    QCOMPARE(second.handle(), raw);
    QCOMPARE(first.handle(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
    QCOMPARE(*second.port(), 2222);
  }

  void everyKnownHostsStateHasItsOwnMessage() {
    const ssh_known_hosts_e states[] = {SSH_KNOWN_HOSTS_OK,        SSH_KNOWN_HOSTS_CHANGED,
                                        SSH_KNOWN_HOSTS_OTHER,     SSH_KNOWN_HOSTS_UNKNOWN,
                                        SSH_KNOWN_HOSTS_NOT_FOUND, SSH_KNOWN_HOSTS_ERROR};
    std::set<std::string> messages;
    for (ssh_known_hosts_e state : states) {
      const std::string message = describeKnownHostsState(state, "gpu1", "SHA256:abc");
      QVERIFY2(contains(message, "gpu1"), message.c_str());
      QVERIFY2(!contains(message, "unexpected"), message.c_str());
      messages.insert(message);
    }
    QCOMPARE(messages.size(), std::size(states));
  }

  void unknownHostTellsHowToTrustIt() {
    const std::string message =
        describeKnownHostsState(SSH_KNOWN_HOSTS_UNKNOWN, "gpu1", "SHA256:abc");
    QVERIFY2(contains(message, "shardscope-cli hosts trust gpu1 SHA256:abc"), message.c_str());
    const std::string defaults = describeKnownHostsState(SSH_KNOWN_HOSTS_UNKNOWN);
    QVERIFY2(contains(defaults, "shardscope-cli hosts trust HOST SHA256:"), defaults.c_str());
  }

  void changedKeyIsAnAttackWarning() {
    const std::string message = describeKnownHostsState(SSH_KNOWN_HOSTS_CHANGED, "gpu1");
    QVERIFY2(contains(message, "WARNING"), message.c_str());
    QVERIFY2(contains(message, "attack"), message.c_str());
    QVERIFY2(contains(message, "Not connecting"), message.c_str());
  }

  void valueOutsideTheEnumIsReported() {
    // -3 is not an enumerator yet still inside the enum's value range (-4..3), so the cast is
    // defined behaviour: what a newer libssh adding a state would hand us.
    const std::string message = describeKnownHostsState(static_cast<ssh_known_hosts_e>(-3), "h");
    QVERIFY2(contains(message, "unexpected known-hosts result -3"), message.c_str());
  }
};

QTEST_APPLESS_MAIN(TestSshSession)
#include "tst_sshsession.moc"
