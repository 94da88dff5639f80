// Rendezvous from torchrun's and Slurm's environment variables (trainer/dist/rendezvous.cpp).
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <map>
#include <thread>

#include "tests/trainer/dist/env_of.h"
#include "trainer/dist/rendezvous.h"

using namespace shardscope::dist;

namespace {

using shardscope::testing::envOf;

}  // namespace

class TestRendezvous : public QObject {
  Q_OBJECT

 private slots:
  void torchrunVariables() {
    auto r = rendezvous_from_env(envOf({{"RANK", "3"},
                                        {"WORLD_SIZE", "8"},
                                        {"LOCAL_RANK", "1"},
                                        {"LOCAL_WORLD_SIZE", "2"},
                                        {"MASTER_ADDR", "10.0.0.5"},
                                        {"MASTER_PORT", "29555"}}));
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    QCOMPARE(r->source, std::string("torchrun"));
    QCOMPARE(r->rank, 3);
    QCOMPARE(r->world_size, 8);
    QCOMPARE(r->local_rank, 1);
    QCOMPARE(r->node_rank(), 1);
    QCOMPARE(r->num_nodes(), 4);
    QCOMPARE(r->master_addr, std::string("10.0.0.5"));
    QCOMPARE(r->master_port, 29555);
  }

  void slurmVariablesWhenTorchrunsAreAbsent() {
    auto r = rendezvous_from_env(envOf({{"SLURM_PROCID", "5"},
                                        {"SLURM_NTASKS", "8"},
                                        {"SLURM_LOCALID", "1"},
                                        {"SLURM_TASKS_PER_NODE", "4(x2)"},
                                        {"MASTER_ADDR", "node1"}}));
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    QCOMPARE(r->source, std::string("slurm"));
    QCOMPARE(r->rank, 5);
    QCOMPARE(r->local_world_size, 4);
    QCOMPARE(r->node_rank(), 1);
    QCOMPARE(r->master_port, 29500);
  }

  void torchrunWinsOverSlurm() {
    auto r = rendezvous_from_env(
        envOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}));
    QVERIFY(r.ok());
    QCOMPARE(r->source, std::string("torchrun"));
    QCOMPARE(r->rank, 0);
  }

  void noVariablesIsASingleProcess() {
    auto r = rendezvous_from_env(envOf({}));
    QVERIFY(r.ok());
    QCOMPARE(r->source, std::string("single"));
    QCOMPARE(r->world_size, 1);
  }

  void errorsNameTheVariable_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("expected");
    QTest::newRow("rank too big") << "RANK"
                                  << "2"
                                  << "RANK=2 is not below WORLD_SIZE=2";
    QTest::newRow("not a number") << "RANK"
                                  << "one"
                                  << "RANK=\"one\" is not an integer";
    QTest::newRow("negative") << "RANK"
                              << "-1"
                              << "RANK=-1 must be at least 0";
    QTest::newRow("port") << "MASTER_PORT"
                          << "70000"
                          << "MASTER_PORT=70000 is not a TCP port";
    QTest::newRow("uneven nodes") << "LOCAL_WORLD_SIZE"
                                  << "3"
                                  << "WORLD_SIZE=2 is not a multiple of LOCAL_WORLD_SIZE=3";
    QTest::newRow("port 0 without file") << "MASTER_PORT"
                                         << "0"
                                         << "MASTER_PORT=0 needs SHARDSCOPE_RDZV_FILE";
    QTest::newRow("short token") << "SHARDSCOPE_RDZV_TOKEN"
                                 << "abc"
                                 << "SHARDSCOPE_RDZV_TOKEN has 3 characters, fewer than 16";
  }
  void errorsNameTheVariable() {
    QFETCH(QString, name);
    QFETCH(QString, value);
    QFETCH(QString, expected);
    std::map<std::string, std::string> vars{
        {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}};
    vars[name.toStdString()] = value.toStdString();
    auto r = rendezvous_from_env(envOf(vars));
    QVERIFY(!r.ok());
    QVERIFY2(QString::fromStdString(r.message()).contains(expected), r.message().c_str());
  }

  // The run's token comes from the environment; proofs bind it to the nonce and who presents it.
  void tokenFromTheEnvironment() {
    const std::string token = "0123456789abcdef0123456789abcdef";
    auto r = rendezvous_from_env(
        envOf({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SHARDSCOPE_RDZV_TOKEN", token}}));
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    QCOMPARE(r->token, token);
    auto none = rendezvous_from_env(envOf({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
    QVERIFY(none.ok());
    QVERIFY(none->token.empty());
    const auto proof = token_proof(token, "nonce", "rank 1");
    QCOMPARE(proof.size(), std::size_t{64});
    QVERIFY(proof.find(token) == std::string::npos);
    QCOMPARE(token_proof(token, "nonce", "rank 1"), proof);
    QVERIFY(token_proof(token, "nonce", "rank 2") != proof);
    QVERIFY(token_proof(token, "other", "rank 1") != proof);
    QVERIFY(token_proof(token + "x", "nonce", "rank 1") != proof);
  }

  void portFileHandsThePortOver() {
    QTemporaryDir dir;
    const std::string file = dir.filePath("port").toStdString();
    std::thread writer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      QVERIFY(publish_port(file, 40123).ok());
    });
    auto port = wait_for_port(file, std::chrono::seconds(10));
    writer.join();
    QVERIFY(port.ok());
    QCOMPARE(*port, 40123);
    // Owner-only from its creation: 0600 whatever the umask allows.
    QCOMPARE(QFile::permissions(QString::fromStdString(file)),
             QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ReadUser |
                 QFileDevice::WriteUser);
    auto missing =
        wait_for_port(dir.filePath("none").toStdString(), std::chrono::milliseconds(100));
    QVERIFY(!missing.ok());
    QVERIFY(QString::fromStdString(missing.message()).contains("rank 0 did not publish its port"));
  }
};

QTEST_APPLESS_MAIN(TestRendezvous)
#include "tst_rendezvous.moc"
