// The communication settings a rank puts into its environment before its process group is made
// (trainer/dist/comm_env.cpp): loopback for a one-host run, the interface toward MASTER_ADDR
// otherwise, NCCL's error handling, and never a variable the user set.
#include <QTest>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstdlib>
#include <map>

#include "tests/trainer/dist/env_of.h"
#include "trainer/dist/comm_env.h"

using namespace shardscope::dist;

namespace {

using shardscope::testing::envOf;

Rendezvous world(int size, int local, const std::string& master) {
  Rendezvous r;
  r.world_size = size;
  r.local_world_size = local;
  r.master_addr = master;
  r.source = "torchrun";
  return r;
}

std::map<std::string, std::string> asMap(const std::vector<EnvSetting>& settings) {
  std::map<std::string, std::string> out;
  for (const auto& s : settings) {
    if (!out.emplace(s.name, s.value).second) qFatal("%s set twice", s.name.c_str());
    if (s.why.empty()) qFatal("%s has no reason", s.name.c_str());
  }
  return out;
}

// An IPv4 address of this host that is not loopback, with its interface; empty when none.
std::pair<std::string, std::string> ownAddress() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::pair<std::string, std::string> found;
  for (const ifaddrs* i = list; i != nullptr && found.first.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                sizeof text);
    if (std::string(text).rfind("127.", 0) == 0) continue;
    found = {text, i->ifa_name};
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace

class TestCommEnv : public QObject {
  Q_OBJECT

 private slots:
  void oneHostRunsOnLoopback() {
    const auto set = asMap(comm_environment(world(4, 4, "node7"), envOf({}),
                                            [](const std::string&) { return "eth0"; }));
    QCOMPARE(set.at("NCCL_SOCKET_IFNAME"), std::string("lo"));
    QCOMPARE(set.at("GLOO_SOCKET_IFNAME"), std::string("lo"));
    QCOMPARE(set.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), std::string("3"));
    QCOMPARE(set.at("TORCH_NCCL_DUMP_ON_TIMEOUT"), std::string("0"));
  }

  void severalHostsUseTheInterfaceTowardRankZero() {
    std::string asked;
    const auto settings =
        comm_environment(world(8, 4, "10.0.0.5"), envOf({}), [&](const std::string& addr) {
          asked = addr;
          return std::string("ib0");
        });
    QCOMPARE(asked, std::string("10.0.0.5"));
    const auto set = asMap(settings);
    QCOMPARE(set.at("NCCL_SOCKET_IFNAME"), std::string("ib0"));
    QCOMPARE(set.at("GLOO_SOCKET_IFNAME"), std::string("ib0"));
    for (const auto& s : settings) {
      if (s.name == "NCCL_SOCKET_IFNAME") QVERIFY(s.why.find("10.0.0.5") != std::string::npos);
    }
  }

  void unknownRouteLeavesTheInterfaceToTheLibraries() {
    const auto set = asMap(comm_environment(world(8, 4, "nowhere.invalid"), envOf({}),
                                            [](const std::string&) { return std::string(); }));
    QVERIFY(!set.count("NCCL_SOCKET_IFNAME"));
    QVERIFY(!set.count("GLOO_SOCKET_IFNAME"));
    QVERIFY(set.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"));
  }

  void oneRankSetsNoInterface() {
    const auto set = asMap(comm_environment(world(1, 1, "127.0.0.1"), envOf({})));
    QVERIFY(!set.count("NCCL_SOCKET_IFNAME"));
    QVERIFY(set.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"));
  }

  void whatTheUserSetIsKept() {
    const auto set = asMap(comm_environment(
        world(2, 2, "127.0.0.1"),
        envOf({{"NCCL_SOCKET_IFNAME", "eth9"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"}})));
    QVERIFY(!set.count("NCCL_SOCKET_IFNAME"));
    QVERIFY(!set.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"));
    QCOMPARE(set.at("GLOO_SOCKET_IFNAME"), std::string("lo"));

    ::setenv("SHARDSCOPE_TST_COMM_ENV", "mine", 1);
    ::unsetenv("SHARDSCOPE_TST_COMM_ENV2");
    apply_environment({{"SHARDSCOPE_TST_COMM_ENV", "theirs", "test"},
                       {"SHARDSCOPE_TST_COMM_ENV2", "new", "test"}});
    QCOMPARE(std::string(std::getenv("SHARDSCOPE_TST_COMM_ENV")), std::string("mine"));
    QCOMPARE(std::string(std::getenv("SHARDSCOPE_TST_COMM_ENV2")), std::string("new"));
  }

  void autoBackendUsesNcclOnlyWithAGpuPerRank() {
    std::string why;
    QVERIFY(use_nccl("auto", world(2, 2, "127.0.0.1"), 2, &why));
    QVERIFY(why.empty());
    QVERIFY(use_nccl("auto", world(16, 8, "node1"), 8, &why));
    QVERIFY(!use_nccl("auto", world(2, 2, "127.0.0.1"), 1, &why));  // the demo on one GPU
    QVERIFY2(why.find("2 ranks on this host share 1 visible GPU") != std::string::npos,
             why.c_str());
    QVERIFY(use_nccl("nccl", world(2, 2, "127.0.0.1"), 1));  // asked: NCCL names the clash
    QVERIFY(!use_nccl("gloo", world(2, 2, "127.0.0.1"), 2));
    QVERIFY(!use_nccl("auto", world(1, 1, "127.0.0.1"), 1));  // one rank: no collectives
  }

  void interfaceTowardRealAddresses() {
    QCOMPARE(interface_toward("127.0.0.1"), std::string("lo"));
    QCOMPARE(interface_toward("localhost"), std::string("lo"));
    QCOMPARE(interface_toward("host.invalid"), std::string());
    const auto [addr, iface] = ownAddress();
    if (addr.empty()) QFAIL("this machine has no IPv4 address besides loopback to route to");
    // The kernel routes this host's own address through loopback or through its interface,
    // depending on the host's routing table; either names a real interface, never "".
    const std::string got = interface_toward(addr);
    QVERIFY2(got == iface || got == "lo", (addr + " -> " + got + ", expected " + iface).c_str());
  }
};

QTEST_APPLESS_MAIN(TestCommEnv)
#include "tst_comm_env.moc"
