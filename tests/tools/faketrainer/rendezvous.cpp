#include "tests/tools/faketrainer/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace faketrainer {

namespace {

using shardscope::fail;
using shardscope::Result;
using shardscope::spec::ErrorKind;

long now_ms() {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count());
}

sockaddr_in loopback_or(const std::string& addr, int port, bool* ok) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  *ok = inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) == 1;
  if (!*ok) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo* res = nullptr;
    if (getaddrinfo(addr.c_str(), nullptr, &hints, &res) == 0 && res != nullptr) {
      sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
      *ok = true;
      freeaddrinfo(res);
    }
  }
  return sa;
}

bool send_line(int fd, const std::string& line) {
  const std::string text = line + "\n";
  return send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

/// Reads up to '\n' until `deadline_ms` (-1: none) or `stop`; "" with *eof on a closed peer.
Result<std::string> read_line(int fd, long deadline_ms, const volatile std::sig_atomic_t& stop,
                              bool* eof) {
  std::string line;
  *eof = false;
  for (;;) {
    if (stop != 0) return fail("stopped by a signal");
    const long left = deadline_ms < 0 ? 100 : std::min(100L, deadline_ms - now_ms());
    if (left < 0) return fail("timed out");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char c = 0;
    const ssize_t n = recv(fd, &c, 1, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
      *eof = true;
      return line;
    }
    if (n < 0) continue;
    if (c == '\n') return line;
    line.push_back(c);
  }
}

/// Rank 0's published port (dist::wait_for_port in short slices, so SIGTERM ends the wait).
Result<int> wait_port(const std::string& file, long deadline_ms,
                      const volatile std::sig_atomic_t& stop) {
  while (now_ms() < deadline_ms && stop == 0) {
    const long slice = std::min(100L, deadline_ms - now_ms());
    if (auto port = shardscope::dist::wait_for_port(file, std::chrono::milliseconds(slice))) {
      return port;
    }
  }
  return fail("rank 0 did not publish its port in " + file +
              " in time; check that rank 0 started (its log) and shares SHARDSCOPE_RDZV_FILE");
}

}  // namespace

Group::~Group() {
  if (m_listen >= 0) close(m_listen);
  for (int fd : m_fds) {
    if (fd >= 0) close(fd);
  }
}

shardscope::Error Group::failure(ErrorKind kind, const std::string& message) {
  m_kind = kind;
  return fail(message);
}

Result<void> Group::join(const RankEnv& env, int timeout_s,
                         const volatile std::sig_atomic_t& stop) {
  m_rank = env.rank;
  const long deadline = now_ms() + 1000L * timeout_s;
  return env.rank == 0 ? join_as_root(env, deadline, stop) : join_as_peer(env, deadline, stop);
}

Result<void> Group::join_as_root(const RankEnv& env, long deadline_ms,
                                 const volatile std::sig_atomic_t& stop) {
  bool resolved = false;
  sockaddr_in sa = loopback_or(env.master_addr, env.master_port, &resolved);
  if (!resolved) {
    return failure(ErrorKind::config,
                   "MASTER_ADDR=" + env.master_addr + " does not resolve to an IPv4 address");
  }
  m_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (m_listen < 0 || bind(m_listen, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      listen(m_listen, env.world_size) != 0) {
    return failure(ErrorKind::config,
                   "rank 0 cannot listen on " + env.master_addr + ":" +
                       std::to_string(env.master_port) + ": " + std::strerror(errno) +
                       "; choose a free MASTER_PORT, or MASTER_PORT=0 with SHARDSCOPE_RDZV_FILE");
  }
  socklen_t len = sizeof sa;
  getsockname(m_listen, reinterpret_cast<sockaddr*>(&sa), &len);
  m_port = ntohs(sa.sin_port);
  if (env.master_port == 0 && !env.port_file.empty()) {
    if (auto r = shardscope::dist::publish_port(env.port_file, m_port); !r) {
      return failure(ErrorKind::io, r.message());
    }
  }
  m_fds.assign(static_cast<size_t>(env.world_size), -1);
  std::vector<int> seen;
  while (static_cast<int>(seen.size()) < env.world_size - 1) {
    if (auto r = accept_peer(env, deadline_ms, stop, seen); !r) return r;
  }
  for (int fd : m_fds) {
    if (fd >= 0) send_line(fd, "ok");
  }
  return shardscope::ok();
}

Result<void> Group::accept_peer(const RankEnv& env, long deadline_ms,
                                const volatile std::sig_atomic_t& stop, std::vector<int>& seen) {
  if (stop != 0) return failure(ErrorKind::internal, "stopped by a signal during the rendezvous");
  if (now_ms() > deadline_ms) {
    return failure(ErrorKind::peer_lost, "rendezvous: " + std::to_string(seen.size() + 1) + " of " +
                                             std::to_string(env.world_size) +
                                             " ranks arrived in time; start WORLD_SIZE " +
                                             "ranks with the same MASTER_ADDR and MASTER_PORT");
  }
  pollfd p{m_listen, POLLIN, 0};
  if (poll(&p, 1, 100) <= 0) return shardscope::ok();
  const int fd = accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return shardscope::ok();
  bool eof = false;
  auto line = read_line(fd, deadline_ms, stop, &eof);
  int rank = -1;
  int world = -1;
  if (!line || eof || std::sscanf(line->c_str(), "rank %d world %d", &rank, &world) != 2) {
    close(fd);  // not one of ours (a port scan, a stale peer): ignore it
    return shardscope::ok();
  }
  std::string problem;
  if (world != env.world_size) {
    problem = "rank " + std::to_string(rank) + " has WORLD_SIZE=" + std::to_string(world) +
              " but rank 0 has WORLD_SIZE=" + std::to_string(env.world_size) +
              "; start every rank with the same WORLD_SIZE";
  } else if (rank <= 0 || rank >= env.world_size || m_fds[static_cast<size_t>(rank)] >= 0) {
    problem = "RANK=" + std::to_string(rank) +
              " arrived twice or is out of range; give each rank its own RANK below WORLD_SIZE";
  }
  if (!problem.empty()) {
    send_line(fd, "error " + problem);
    close(fd);
    return failure(ErrorKind::config, "rendezvous: " + problem);
  }
  m_fds[static_cast<size_t>(rank)] = fd;
  seen.push_back(rank);
  return shardscope::ok();
}

Result<void> Group::join_as_peer(const RankEnv& env, long deadline_ms,
                                 const volatile std::sig_atomic_t& stop) {
  int port = env.master_port;
  if (port == 0) {
    auto published = wait_port(env.port_file, deadline_ms, stop);
    if (!published) return failure(ErrorKind::peer_lost, published.message());
    port = *published;
  }
  m_port = port;
  bool resolved = false;
  const sockaddr_in sa = loopback_or(env.master_addr, port, &resolved);
  if (!resolved) {
    return failure(ErrorKind::config,
                   "MASTER_ADDR=" + env.master_addr + " does not resolve to an IPv4 address");
  }
  int fd = -1;
  while (fd < 0) {
    if (stop != 0) return failure(ErrorKind::internal, "stopped by a signal during rendezvous");
    if (now_ms() > deadline_ms) {
      return failure(ErrorKind::peer_lost,
                     "cannot reach rank 0 at " + env.master_addr + ":" + std::to_string(port) +
                         "; check that rank 0 is running and MASTER_ADDR/MASTER_PORT match");
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
      close(fd);
      fd = -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  m_fds = {fd};
  send_line(fd, "rank " + std::to_string(env.rank) + " world " + std::to_string(env.world_size));
  bool eof = false;
  auto reply = read_line(fd, deadline_ms, stop, &eof);
  if (!reply || eof) {
    return failure(ErrorKind::peer_lost, "rank 0 at port " + std::to_string(port) +
                                             " closed the rendezvous without an answer");
  }
  if (*reply != "ok") return failure(ErrorKind::config, reply->substr(reply->find(' ') + 1));
  return shardscope::ok();
}

Result<void> Group::check_peers() const {
  for (size_t i = 0; i < m_fds.size(); ++i) {
    if (m_fds[i] < 0) continue;
    char c = 0;
    const ssize_t n = recv(m_fds[i], &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      const int peer = m_rank == 0 ? static_cast<int>(i) : 0;
      return fail("rank " + std::to_string(peer) +
                  " closed its connection (it exited or was "
                  "killed); see its log");
    }
  }
  return shardscope::ok();
}

Result<void> Group::barrier(const volatile std::sig_atomic_t& stop) {
  m_kind = ErrorKind::peer_lost;
  bool eof = false;
  if (m_rank != 0) {
    if (m_fds.empty()) return shardscope::ok();
    send_line(m_fds[0], "end");
    auto reply = read_line(m_fds[0], -1, stop, &eof);
    if (!reply) return reply.error();
    if (eof || *reply != "ok") return fail("rank 0 left before the end of the run; see its log");
    return shardscope::ok();
  }
  for (size_t i = 0; i < m_fds.size(); ++i) {
    if (m_fds[i] < 0) continue;
    auto line = read_line(m_fds[i], -1, stop, &eof);
    if (!line) return line.error();
    if (eof || *line != "end") {
      return fail("rank " + std::to_string(i) + " left before the end of the run; see its log");
    }
  }
  for (int fd : m_fds) {
    if (fd >= 0) send_line(fd, "ok");
  }
  return shardscope::ok();
}

}  // namespace faketrainer
