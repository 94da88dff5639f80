// SshConfig reads ~/.ssh/config the way OpenSSH does for the keywords Shardscope uses: Host
// patterns and negation, first value wins, %-tokens and ~, ProxyJump as a ProxyCommand, and
// errors that name the file and line.
#include <QTemporaryDir>
#include <QTest>

#include "backend/ssh/sshconfig.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

using shardscope::testing::why;

namespace {

const char* kConfig = R"(# comment
User fallback-before-any-host
Host gpu?  !gpu9
  HostName %h.cluster.example.org
  Port 2201
  IdentityFile ~/.ssh/id_gpu
Host gpu1
  # GPU 1 has its own port, but the earlier block's Port wins (first value obtained)
  Port 9999
  User alice
Host "quoted" eq
  HostName=10.0.0.7
  user   bob
Host behind
  HostName 10.1.0.5
  ProxyJump jumpuser@bastion:2222
Host twohops
  ProxyJump a,b
Match host whatever
  User never
Host *
  User everyone
  IdentityFile %d/.ssh/id_default
)";

}  // namespace

class TestSshConfig : public QObject {
  Q_OBJECT

 private slots:
  void patternsAndFirstValueWins() {
    auto config = SshConfig::parse(kConfig, "cfg");
    QVERIFY2(config, why(config).c_str());
    const SshHostConfig gpu1 = config->resolve("gpu1");
    QCOMPARE(gpu1.hostName, std::string("gpu1.cluster.example.org"));
    QCOMPARE(gpu1.port, 2201);
    // The lines before the first Host apply to every host, and come first.
    QCOMPARE(gpu1.user, std::string("fallback-before-any-host"));
    const std::string home = qEnvironmentVariable("HOME").toStdString();
    QCOMPARE(gpu1.identityFiles,
             (std::vector<std::string>{home + "/.ssh/id_gpu", home + "/.ssh/id_default"}));
  }

  void negationExcludesAHost() {
    auto config = SshConfig::parse(kConfig, "cfg");
    QVERIFY(config);
    const SshHostConfig gpu9 = config->resolve("gpu9");
    QCOMPARE(gpu9.hostName, std::string("gpu9"));
    QCOMPARE(gpu9.port, 22);
    QVERIFY(sshHostMatches({"gpu*", "!gpu9"}, "gpu12"));
    QVERIFY(!sshHostMatches({"gpu*", "!gpu9"}, "gpu9"));
    QVERIFY(!sshHostMatches({"gpu?"}, "gpu12"));
    QVERIFY(sshHostMatches({"*.example.org"}, "a.b.example.org"));
  }

  void quotedNamesEqualsSignAndUserAtHost() {
    const std::string text = "Host \"quoted\" eq\n  HostName=10.0.0.7\n  USER   bob\n";
    auto config = SshConfig::parse(text, "cfg");
    QVERIFY2(config, why(config).c_str());
    QCOMPARE(config->resolve("quoted").hostName, std::string("10.0.0.7"));
    QCOMPARE(config->resolve("eq").user, std::string("bob"));
    QCOMPARE(config->resolve("carol@eq").user, std::string("carol"));
    QCOMPARE(config->resolve("carol@eq").hostName, std::string("10.0.0.7"));
  }

  void matchBlocksNeverApply() {
    auto config = SshConfig::parse("Match host x\n  User never\n", "cfg");
    QVERIFY(config);
    QCOMPARE(config->resolve("x").user, std::string());
  }

  void proxyJumpBecomesAProxyCommand() {
    QTemporaryDir dir;
    const QString path = dir.filePath("config");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(kConfig);
    file.close();
    auto config = SshConfig::load(path.toStdString());
    QVERIFY2(config, why(config).c_str());
    const SshTarget target = config->target("behind", "/kh");
    QCOMPARE(target.host, std::string("10.1.0.5"));
    QCOMPARE(target.alias, std::string("behind"));  // messages name the host as the user does
    QCOMPARE(target.proxyCommand,
             "ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -F '" + path.toStdString() +
                 "' -o UserKnownHostsFile='/kh' -W '10.1.0.5:22' 'jumpuser@bastion:2222'");
    const SshTarget two = config->target("twohops");
    QVERIFY2(two.proxyCommand.find(" -J 'a' -W 'twohops:22' 'b'") != std::string::npos,
             two.proxyCommand.c_str());
    QVERIFY(config->target("gpu1").proxyCommand.empty());
  }

  void aliasesListsConcreteNames() {
    auto config = SshConfig::parse(kConfig, "cfg");
    QVERIFY(config);
    QCOMPARE(config->aliases(),
             (std::vector<std::string>{"gpu1", "quoted", "eq", "behind", "twohops"}));
  }

  void badPortNamesFileAndLine() {
    auto config = SshConfig::parse("Host a\n  Port 70000\n", "/home/u/.ssh/config");
    QVERIFY(!config);
    QVERIFY2(config.message().find("/home/u/.ssh/config:2: Port: '70000'") != std::string::npos,
             config.message().c_str());
    auto missing = SshConfig::parse("Host a\n  HostName\n", "cfg");
    QVERIFY(!missing);
    QVERIFY2(missing.message().find("cfg:2: HostName: needs a value") != std::string::npos,
             missing.message().c_str());
  }

  void missingFileIsEmpty() {
    auto config = SshConfig::load("/nonexistent/shardscope/config");
    QVERIFY2(config, why(config).c_str());
    QCOMPARE(config->resolve("h").hostName, std::string("h"));
  }
};

QTEST_APPLESS_MAIN(TestSshConfig)
#include "tst_sshconfig.moc"
