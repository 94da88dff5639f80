#include "trainer/dist/comm_env.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

namespace shardscope::dist {
namespace {

bool is_loopback_name(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

}  // namespace

std::string interface_toward(const std::string& addr) {
  if (is_loopback_name(addr)) return "lo";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(addr.c_str(), "9", &hints, &found) != 0) return "";
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  // connect() on a datagram socket only asks the kernel for a route: no packet leaves, and
  // getsockname() then names the local address that route uses.
  sockaddr_storage local{};
  bool routed = false;
  for (const addrinfo* ai = found; ai != nullptr && !routed; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    socklen_t len = sizeof local;
    routed = ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
             ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    ::close(fd);
  }
  if (!routed) return "";
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  const std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> owned_list(list, &::freeifaddrs);
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (same_address(i->ifa_addr, reinterpret_cast<const sockaddr*>(&local))) return i->ifa_name;
  }
  return "";
}

std::vector<EnvSetting> comm_environment(
    const Rendezvous& r, const EnvLookup& env,
    const std::function<std::string(const std::string&)>& interface_of) {
  std::vector<EnvSetting> out;
  const auto add = [&](const std::string& name, const std::string& value, const std::string& why) {
    if (!value.empty() && !env(name)) out.push_back({name, value, why});
  };
  if (r.world_size > 1) {
    // Every rank on this host: loopback, so no traffic (and no firewall) touches a real
    // interface. Otherwise the interface toward rank 0, where NCCL's own guess (the first
    // interface that is up) is often a container bridge or a management network.
    const bool one_host = r.local_world_size == r.world_size;
    const std::string iface = one_host ? "lo" : interface_of(r.master_addr);
    const std::string why = one_host ? "every rank runs on this host"
                                     : "the interface that reaches MASTER_ADDR=" + r.master_addr;
    add("NCCL_SOCKET_IFNAME", iface, why);
    add("GLOO_SOCKET_IFNAME", iface, why);
  }
  add("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3",
      "a failed or timed-out NCCL collective ends the process instead of hanging it");
  add("TORCH_NCCL_DUMP_ON_TIMEOUT", "0", "no flight-recorder dump while the run ends");
  return out;
}

bool use_nccl(const std::string& backend, const Rendezvous& r, int visible_gpus, std::string* why) {
  if (backend == "gloo" || r.world_size < 2) return false;
  if (backend == "nccl" || r.local_world_size <= visible_gpus) return true;
  if (why != nullptr) {
    *why = std::to_string(r.local_world_size) + " ranks on this host share " +
           std::to_string(visible_gpus) +
           " visible GPU(s): shard.backend \"auto\" sends their collectives through Gloo in "
           "host memory (NCCL needs one GPU per rank; start at most one rank per GPU for it)";
  }
  return false;
}

void apply_environment(const std::vector<EnvSetting>& settings) {
  for (const auto& s : settings) ::setenv(s.name.c_str(), s.value.c_str(), /*overwrite=*/0);
}

}  // namespace shardscope::dist
