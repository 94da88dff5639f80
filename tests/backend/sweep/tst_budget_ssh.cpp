// The budget of an SSH launch comes from the host check run on the first host (the sshd
// fixture on loopback, a real SSH session): its nvidia-smi query (no NVIDIA GPU here: none) and
// its physical memory (getconf over the session), named by the host's alias; a CPU run there
// shares that memory among its ranks. A host the check cannot reach is an error naming it.
#include <QTemporaryDir>
#include <QTest>

#include <unistd.h>

#include "backend/ssh/hostcheck.h"
#include "spec/estimate.h"
#include "tests/backend/launch/remotetest.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;

class TestBudgetSsh : public QObject {
  Q_OBJECT

 private slots:
  void theFirstHostsCheckGivesItsMemory() {
    const QMap<QString, QString> sshd = remotetest::fixtureEnv("sshd");
    QVERIFY2(sshd.contains("SSHD_PORT"), "the sshd fixture is not running (fixture sshd)");
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    backend::HostCheckRequest files;
    files.sshConfigPath = dir.filePath("ssh_config");
    files.knownHostsPath = sshd.value("SSHD_KNOWN_HOSTS");
    QVERIFY(remotetest::writeAll(files.sshConfigPath, remotetest::sshConfigFor(sshd, {"gpu1"})));
    spec::Experiment exp;
    exp.launch.kind = spec::LaunchKind::ssh;
    exp.launch.hosts = {"gpu1"};
    exp.launch.nproc_per_node = 2;
    exp.launch.trainer = "sh";  // the check's "trainer found" step needs a program there
    auto found = backend::detectMemory(exp.launch, files);
    VERIFY_OK(found);
    // Loopback: the remote host is this machine.
    const qint64 physical = qint64(::sysconf(_SC_PHYS_PAGES)) * qint64(::sysconf(_SC_PAGESIZE));
    QCOMPARE(found->host_bytes, physical);
    QCOMPARE(found->host_source, std::string("gpu1"));
    QCOMPARE(found->gpu_bytes, std::int64_t{0});
    auto budget = spec::device_budget(exp, *found);
    VERIFY_OK(budget);
    QVERIFY(!budget->gpu);
    QCOMPARE(budget->bytes, physical / 2);
    QVERIFY2(budget->source.find("memory of gpu1") != std::string::npos, budget->source.c_str());

    exp.launch.hosts = {"nosuchhost.invalid"};
    auto lost = backend::detectMemory(exp.launch, files);
    QVERIFY(!lost.ok());
    QVERIFY2(lost.message().find("host check of nosuchhost.invalid failed") != std::string::npos &&
                 lost.message().find("launch.device_memory_gib") != std::string::npos,
             lost.message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestBudgetSsh)
#include "tst_budget_ssh.moc"
