#include "trainer/dist/process_group.h"

#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "trainer/base/fatal.h"
#include "trainer/base/phase_clock.h"
#include "trainer/dist/comm_env.h"
#include "trainer/dist/device.h"
#include "trainer/dist/direct.h"
#include "trainer/dist/gloo_backend.h"
#include "trainer/dist/nccl_backend.h"

namespace shardscope::dist {
namespace {

using spec::ErrorKind;

// How much later than the collective timeout PyTorch's NCCL watchdog may end the process: the
// heartbeat watchdog needs the timeout, then Heartbeat::kSilentFor, to name a silent peer.
constexpr std::chrono::milliseconds kNcclWatchdogLead{60'000};

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

std::string where(const Rendezvous& r) {
  return r.master_addr + ":" + std::to_string(r.master_port);
}

// The store's listening socket, bound to MASTER_ADDR's own address: c10d alone binds every
// interface, so a local run's unauthenticated store was reachable from the whole network. On
// 127.0.0.1 (every local run) only this host reaches it; on a cluster, the interface the other
// ranks connect to. -1 when MASTER_ADDR is no address of this host (behind NAT, a VIP): c10d
// then binds as it always did. Throws (EADDRINUSE) like c10d when the port is taken.
int bind_store_socket(const std::string& addr, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // as c10d: TIME_WAIT
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) return fd;
    const int err = errno;
    ::close(fd);
    if (err == EADDRINUSE) throw std::runtime_error("bind: EADDRINUSE");
  }
  return -1;
}

int bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

// Rank 0 listens (on MASTER_PORT, or on a free port it publishes), the others connect.
c10::intrusive_ptr<c10d::TCPStore> connect_store(Rendezvous& r, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.isServer = r.rank == 0;
  opts.numWorkers = r.world_size;
  opts.waitWorkers = false;  // we check arrivals ourselves, with a message that says who is missing
  opts.timeout = timeout;
  if (r.rank != 0 && r.master_port == 0) {
    auto port = wait_for_port(r.port_file, timeout);
    SHARD_CHECK_OK(port, ErrorKind::peer_lost,
                   "rank 0 publishes its port once it listens; start all ranks together");
    r.master_port = *port;
  }
  opts.port = static_cast<std::uint16_t>(r.master_port);
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    if (r.rank == 0) {
      const int fd = bind_store_socket(r.master_addr, r.master_port);
      if (fd >= 0) {
        opts.masterListenFd = fd;  // the store owns and closes it
        opts.port = static_cast<std::uint16_t>(bound_port(fd));
      } else {
        std::fprintf(stderr,
                     "shardtrain: MASTER_ADDR=%s is not an address of this host; the rendezvous "
                     "listens on every interface\n",
                     r.master_addr.c_str());
      }
    }
    store = c10::make_intrusive<c10d::TCPStore>(r.master_addr, opts);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (r.rank == 0 && what.find("EADDRINUSE") != std::string::npos) {
      SHARD_FAIL(ErrorKind::config,
                 "rank 0 cannot listen on MASTER_PORT=" + std::to_string(r.master_port) +
                     ": the port is taken on this host",
                 "choose a free MASTER_PORT, or MASTER_PORT=0 with SHARDSCOPE_RDZV_FILE");
    }
    SHARD_FAIL(ErrorKind::peer_lost,
               "rank " + std::to_string(r.rank) + " could not reach the rendezvous at " + where(r) +
                   " within " + std::to_string(timeout.count() / 1000) + " s (" +
                   what.substr(0, 200) + ")",
               "check that rank 0 is running and that MASTER_ADDR and MASTER_PORT are the same on "
               "every rank");
  }
  if (r.rank == 0 && r.master_port == 0) {
    r.master_port = store->getPort();
    auto published = publish_port(r.port_file, r.master_port);
    SHARD_CHECK_OK(published, ErrorKind::io, "");
  }
  return store;
}

std::vector<std::uint8_t> bytes_of(const std::string& text) {
  return std::vector<std::uint8_t>(text.begin(), text.end());
}

// 16 bytes from the kernel's generator, as hex: rank 0's nonce for this store.
std::string random_hex(std::size_t n) {
  std::ifstream in("/dev/urandom", std::ios::binary);
  std::string raw(n, '\0');
  SHARD_CHECK(in.read(raw.data(), static_cast<std::streamsize>(n)), ErrorKind::io,
              "cannot read /dev/urandom for the rendezvous nonce", "");
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) out += {kHex[c >> 4], kHex[c & 15]};
  return out;
}

constexpr const char* kNonceKey = "shardscope/auth/nonce";
constexpr const char* kServerKey = "shardscope/auth/server";
std::string auth_key(int rank) { return "shardscope/auth/rank/" + std::to_string(rank); }

// The run's token (SHARDSCOPE_RDZV_TOKEN, drawn by Shardscope's launchers and passed in the
// environment) is the first thing at the store: rank 0 writes a fresh nonce and its own proof;
// every other rank checks rank 0's proof before it writes anything else (a store that is not its
// run's, such as another run's rank 0 on a reused port, fails it here) and then presents its own,
// which rank 0 checks once the ranks arrived (check_tokens). Proofs are sha256 of the token, the
// nonce and who presents it: the token never crosses the wire. A run without a token (torchrun,
// srun by hand) writes "none"; a mix of the two fails the same way, naming what is missing.
void present_token(c10d::Store& store, const Rendezvous& r) {
  const auto proof = [&](const std::string& nonce, const std::string& who) {
    return r.token.empty() ? std::string("none") : token_proof(r.token, nonce, who);
  };
  if (r.rank == 0) {
    const std::string nonce = random_hex(16);
    store.set(kNonceKey, bytes_of(nonce));
    store.set(kServerKey, bytes_of(proof(nonce, "server")));
    return;
  }
  const auto nonce_bytes = store.get(kNonceKey);
  const auto server_bytes = store.get(kServerKey);
  const std::string nonce(nonce_bytes.begin(), nonce_bytes.end());
  const std::string server(server_bytes.begin(), server_bytes.end());
  if (server == proof(nonce, "server")) {
    store.set(auth_key(r.rank), bytes_of(proof(nonce, "rank " + std::to_string(r.rank))));
    return;
  }
  SHARD_FAIL(
      ErrorKind::config,
      "rank " + std::to_string(r.rank) + ": the rendezvous at " + where(r) +
          " is not this run's: " +
          (r.token.empty()    ? std::string("its rank 0 holds a run token "
                                               "(SHARDSCOPE_RDZV_TOKEN) and this rank has none")
           : server == "none" ? std::string("its rank 0 has no run token (SHARDSCOPE_RDZV_TOKEN)")
                              : std::string("its rank 0 holds another run token")),
      "start every rank from the same launch, which gives each the run's "
      "SHARDSCOPE_RDZV_TOKEN in its environment; if another run holds MASTER_PORT, use "
      "another port or MASTER_PORT=0");
}

// Rank 0: every rank that arrived presented the run's token; a process that did not (a client
// outside this run that claimed a rank) fails the run, named, before any collective.
void check_tokens(c10d::Store& store, const Rendezvous& r) {
  if (r.rank != 0) return;
  const auto nonce_bytes = store.get(kNonceKey);
  const std::string nonce(nonce_bytes.begin(), nonce_bytes.end());
  for (int i = 1; i < r.world_size; ++i) {
    const std::string want =
        r.token.empty() ? "none" : token_proof(r.token, nonce, "rank " + std::to_string(i));
    std::string got;
    if (store.check({auth_key(i)})) {
      const auto value = store.get(auth_key(i));
      got.assign(value.begin(), value.end());
    }
    if (got == want) continue;
    SHARD_FAIL(ErrorKind::config,
               "rank 0 refused the process that registered as rank " + std::to_string(i) + " at " +
                   where(r) + ": " +
                   (got.empty()     ? std::string("it presented no run token")
                    : got == "none" ? std::string("it has no run token (SHARDSCOPE_RDZV_TOKEN)")
                                    : std::string("its run token is not this run's")),
               "a process outside this run connected to its rendezvous; start every rank from "
               "the same launch (the launcher gives each the run's SHARDSCOPE_RDZV_TOKEN)");
  }
}

[[noreturn]] void report_world_mismatch(int rank, const std::string& mine, int other,
                                        const std::string& theirs) {
  SHARD_FAIL(ErrorKind::config,
             "WORLD_SIZE mismatch: rank " + std::to_string(rank) + " has " + mine + ", rank " +
                 std::to_string(other) + " has " + theirs,
             "set the same WORLD_SIZE for every rank");
}

// Every rank announces its world size; all must arrive and agree before the backend is built.
void check_arrivals(c10d::Store& store, const Rendezvous& r, std::chrono::milliseconds timeout) {
  const std::string mine = std::to_string(r.world_size);
  std::int64_t claims = store.add("shardscope/rank/" + std::to_string(r.rank), 1);
  SHARD_CHECK(claims == 1, ErrorKind::config,
              "two processes started as rank " + std::to_string(r.rank),
              "give every process its own RANK (0.." + std::to_string(r.world_size - 1) + ")");
  store.set("shardscope/world/" + std::to_string(r.rank),
            std::vector<std::uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(r.world_size));
  for (int i = 0; i < r.world_size; ++i) keys.push_back("shardscope/world/" + std::to_string(i));
  try {
    store.wait(keys, timeout);
  } catch (const std::exception&) {
    std::string missing;
    for (const auto& key : keys) {
      if (!store.check({key}))
        missing += (missing.empty() ? "" : ", ") + key.substr(key.rfind('/') + 1);
    }
    SHARD_FAIL(ErrorKind::peer_lost,
               "rank " + std::to_string(r.rank) + ": ranks " + missing + " of WORLD_SIZE=" + mine +
                   " did not arrive within " + std::to_string(timeout.count() / 1000) + " s",
               "start WORLD_SIZE ranks with the same MASTER_ADDR/MASTER_PORT; check WORLD_SIZE is "
               "the same on every rank");
  }
  check_tokens(store, r);
  for (int i = 0; i < r.world_size; ++i) {
    auto value = store.get(keys[static_cast<std::size_t>(i)]);
    std::string theirs(value.begin(), value.end());
    if (theirs != mine) report_world_mismatch(r.rank, mine, i, theirs);
  }
}

// Every rank publishes "host pid"; all read the table once, while rank 0's store still lives.
std::vector<std::pair<std::string, long>> exchange_peers(c10d::Store& store, const Rendezvous& r) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string name = host;
  // Where host names are not unique (containers that all call themselves "localhost"), the
  // launcher can give each node a name of its own; a peer on another name is never probed as a
  // local process, only through its heartbeat.
  if (const char* own = std::getenv("SHARDSCOPE_PEER_HOST"); own != nullptr && *own != '\0')
    name = own;
  std::ostringstream mine;
  mine << name << ' ' << ::getpid();
  const std::string text = mine.str();
  store.set("shardscope/peer/" + std::to_string(r.rank),
            std::vector<std::uint8_t>(text.begin(), text.end()));
  std::vector<std::pair<std::string, long>> peers;
  for (int i = 0; i < r.world_size; ++i) {
    auto value = store.get("shardscope/peer/" + std::to_string(i));
    std::istringstream in(std::string(value.begin(), value.end()));
    std::pair<std::string, long> peer;
    in >> peer.first >> peer.second;
    peers.push_back(peer);
  }
  return peers;
}

// False once `pid` has exited: gone, or a zombie its parent has not reaped yet.
// What became of a peer process on this host: "" while it runs, else why it cannot answer.
std::string peer_state(long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return "exited";
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return "";
  switch (line[close + 2]) {
    case 'Z':
    case 'X':
      return "exited";
    case 'T':  // SIGSTOP, SIGTSTP: alive but silent, as a hung host is
      return "stopped";
    case 't':
      return "stopped by a debugger";
    default:
      return "";
  }
}

// A pinned host tensor shaped like `t` (page-locked, so copies to and from the GPU are direct).
at::Tensor pinned_like(const at::Tensor& t) {
  return at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
}

// `t`'s values in pinned host memory, once the queued work that writes `t` is done.
at::Tensor to_host(const at::Tensor& t) {
  auto host = pinned_like(t);
  host.copy_(t);  // synchronous: waits for the stream that produced `t`
  return host;
}

// A Gloo collective over host copies of CUDA tensors (shard.backend = "gloo" on CUDA): waiting
// waits for Gloo, then copies the host result into the CUDA tensor on the waiting stream.
class StagedWork final : public c10d::Work {
 public:
  StagedWork(c10::intrusive_ptr<c10d::Work> inner, at::Tensor host, at::Tensor device,
             at::Tensor keep)
      : m_inner(std::move(inner)),
        m_host(std::move(host)),
        m_device(std::move(device)),
        m_keep(std::move(keep)) {}
  bool wait(std::chrono::milliseconds timeout) override {
    if (m_inner) m_inner->wait(timeout);
    m_inner.reset();
    if (m_host.defined()) m_device.view({-1}).copy_(m_host.reshape({-1}), /*non_blocking=*/true);
    m_host.reset();
    m_keep.reset();
    return true;
  }
  bool isCompleted() override { return !m_inner || m_inner->isCompleted(); }

 private:
  c10::intrusive_ptr<c10d::Work> m_inner;
  at::Tensor m_host;
  at::Tensor m_device;
  at::Tensor m_keep;  // the host input, alive until the exchange is done
};

}  // namespace

// Every rank of a group of several adds 1 to "shardscope/beat/<rank>" in the world store each
// second, from a thread with its own store connection: a rank that is frozen (SIGSTOP, a hung
// host, a machine swapping to death) stops beating while its sockets stay open, so a peer whose
// collective timed out can name it on any host, where /proc only shows this host's processes.
//
// On CUDA the same thread is the rank's watchdog. A collective there is queued on a stream, and
// the host thread may wait for it inside any CUDA call, where no exception of the collective
// reaches it. When this rank's collectives have made no progress for the collective timeout, the
// thread reads every peer's beat; a peer silent for kSilentFor (or rank 0's store gone) ends the
// run with a peer_lost error naming it, before PyTorch's NCCL watchdog would abort the process
// without a word. Peers are only read while this rank is stalled, so a large world costs the
// store nothing in a healthy run.
class Heartbeat {
 public:
  /// `peers` names every global rank for messages; `watch_after` > 0 turns the watchdog on.
  Heartbeat(const c10::intrusive_ptr<c10d::Store>& store, int rank, std::vector<std::string> peers,
            std::chrono::milliseconds watch_after)
      : m_store(store->clone()),
        m_key("shardscope/beat/" + std::to_string(rank)),
        m_rank(rank),
        m_peers(std::move(peers)),
        m_watch_after(watch_after) {
    m_store->setTimeout(std::chrono::seconds(5));  // a frozen store host delays the stop only
    progress();
    m_thread = std::thread([this] { run(); });
  }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  ~Heartbeat() {
    {
      const std::lock_guard<std::mutex> lock(m_mutex);
      m_stop = true;
    }
    m_wake.notify_all();
    m_thread.join();
  }

  /// A collective of this rank was issued or completed.
  void progress() { m_progress.store(now_ms(), std::memory_order_relaxed); }

  static constexpr std::chrono::milliseconds kEvery{1000};
  static constexpr std::chrono::milliseconds kSilentFor{5000};

 private:
  static std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void run() {
    std::unique_lock<std::mutex> lock(m_mutex);
    while (!m_stop) {
      lock.unlock();
      try {
        m_store->add(m_key, 1);
      } catch (const std::exception&) {
        // The store is gone or frozen: the collectives' own failure (or the watchdog) reports it.
      }
      if (m_watch_after.count() > 0) watch();
      lock.lock();
      m_wake.wait_for(lock, kEvery, [this] { return m_stop; });
    }
  }

  // Reads the peers' beats while this rank is stalled; ends the process when one is silent.
  void watch() {
    const std::int64_t now = now_ms();
    if (now - m_progress.load(std::memory_order_relaxed) < m_watch_after.count()) {
      m_seen.clear();  // progressing again: silence is counted afresh next time
      return;
    }
    if (m_seen.empty()) m_seen.assign(m_peers.size(), {-1, now});
    std::string silent;
    try {
      for (std::size_t i = 0; i < m_peers.size(); ++i) {
        if (static_cast<int>(i) == m_rank) continue;
        const std::int64_t beat = m_store->add("shardscope/beat/" + std::to_string(i), 0);
        if (beat != m_seen[i].beat) m_seen[i] = {beat, now};
        if (now - m_seen[i].since >= kSilentFor.count())
          silent += (silent.empty() ? "" : ", ") + m_peers[i];
      }
    } catch (const std::exception&) {
      silent =
          "the rendezvous store on " + m_peers.front() + " (rank 0 is frozen, gone, or cut off)";
    }
    if (silent.empty()) return;
    trainer::report_and_exit(
        ErrorKind::peer_lost,
        "rank " + std::to_string(m_rank) + ": no collective progressed for " +
            std::to_string((now - m_progress.load()) / 1000) + " s and no heartbeat came from " +
            silent + " for " + std::to_string(kSilentFor.count() / 1000) + " s",
        "a peer exited or froze while this rank waited for it on the GPU: read that rank's "
        "rank-N.log for its first error; raise shard.timeout_s if a rank is merely slow");
  }

  struct Seen {
    std::int64_t beat = -1;
    std::int64_t since = 0;  // when `beat` was first read (steady ms)
  };
  c10::intrusive_ptr<c10d::Store> m_store;
  std::string m_key;
  int m_rank;
  std::vector<std::string> m_peers;
  std::chrono::milliseconds m_watch_after;
  std::atomic<std::int64_t> m_progress{0};
  std::vector<Seen> m_seen;  // watchdog thread only
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;
  std::thread m_thread;
};

std::string ProcessGroup::silent_peers() const {
  if (!m_world_store || m_peers.empty()) return "";
  const auto beats = [&](c10d::Store& store) {
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < m_peers.size(); ++i)
      out.push_back(store.add("shardscope/beat/" + std::to_string(i), 0));
    return out;
  };
  const auto peer = [&](std::size_t i) {
    return "rank " + std::to_string(i) + " (" + m_peers[i].host + ", pid " +
           std::to_string(m_peers[i].pid) + ")";
  };
  try {
    auto probe = m_world_store->clone();
    probe->setTimeout(std::chrono::seconds(3));
    const std::vector<std::int64_t> before = beats(*probe);
    std::this_thread::sleep_for(Heartbeat::kEvery * 5 / 2);
    const std::vector<std::int64_t> after = beats(*probe);
    std::string silent;
    for (std::size_t i = 0; i < m_peers.size(); ++i) {
      if (static_cast<int>(i) == m_global_rank || after[i] != before[i]) continue;
      silent += (silent.empty() ? "" : ", ") + peer(i);
    }
    if (silent.empty()) return "";
    char waited[32];
    std::snprintf(waited, sizeof waited, "%.1f",
                  static_cast<double>((Heartbeat::kEvery * 5 / 2).count()) / 1000.0);
    return "no heartbeat for " + std::string(waited) + " s from " + silent +
           " (exited, frozen or cut off)";
  } catch (const std::exception&) {
    return "the rendezvous store on " + peer(0) +
           " does not answer (rank 0 is frozen, gone, or cut off)";
  }
}

std::string ProcessGroup::lost_peers() const {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string lost;
  for (std::size_t i = 0; i < m_peers.size(); ++i) {
    const auto& p = m_peers[i];
    if (p.host != host || p.pid <= 0) continue;
    const std::string state = peer_state(p.pid);
    if (!state.empty()) {
      lost += (lost.empty() ? "" : ", ") + std::to_string(i) + " (pid " + std::to_string(p.pid) +
              " " + state + ")";
    }
  }
  return lost;
}

ProcessGroup ProcessGroup::create(const Rendezvous& rdzv, const GroupOptions& options) {
  Rendezvous r = rdzv;
  // NCCL and PyTorch's wrapper read their settings once, when the first group is made.
  for (const auto& s : comm_environment(r)) {
    std::fprintf(stderr, "shardtrain: rank %d sets %s=%s (%s)\n", r.rank, s.name.c_str(),
                 s.value.c_str(), s.why.c_str());
    apply_environment({s});
  }
  ProcessGroup group;
  group.m_rank = r.rank;
  group.m_global_rank = r.rank;
  group.m_size = r.world_size;
  group.m_store = connect_store(r, options.timeout);
  present_token(*group.m_store, r);  // before anything else at the store
  check_arrivals(*group.m_store, r, options.timeout);
  for (auto& [host, pid] : exchange_peers(*group.m_store, r)) group.m_peers.push_back({host, pid});
  group.m_world_store = group.m_store;
  if (r.world_size > 1) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < group.m_peers.size(); ++i) {
      names.push_back("rank " + std::to_string(i) + " (" + group.m_peers[i].host + ", pid " +
                      std::to_string(group.m_peers[i].pid) + ")");
    }
    group.m_heartbeat = std::make_shared<Heartbeat>(
        group.m_store, r.rank, std::move(names),
        options.watch_peers ? options.timeout : std::chrono::milliseconds(0));
  }
  const std::string bind = is_loopback(r.master_addr) ? "127.0.0.1" : "";
  group.m_options = options;
  group.m_bind = bind;
  try {
    group.m_backend = make_gloo_backend(group.m_store, r.rank, r.world_size, bind, options.timeout);
  } catch (const std::exception& e) {
    SHARD_FAIL(ErrorKind::peer_lost,
               "rank " + std::to_string(r.rank) + ": Gloo could not connect to its peers (" +
                   std::string(e.what()).substr(0, 300) + ")",
               "check that every host can reach the others (set GLOO_SOCKET_IFNAME to the "
               "interface to use)");
  }
  group.m_backend_name = "gloo";
  if (options.nccl) group.add_nccl("world");
  return group;
}

ProcessGroup ProcessGroup::single() {
  ProcessGroup group;
  group.m_backend_name = "local";
  return group;
}

ProcessGroup ProcessGroup::subgroup(const std::string& name, const std::vector<int>& ranks) const {
  ProcessGroup sub;
  sub.m_size = static_cast<int>(ranks.size());
  sub.m_rank = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == m_global_rank) sub.m_rank = static_cast<int>(i);
  }
  SHARD_CHECK(sub.m_rank >= 0, ErrorKind::internal,
              "rank " + std::to_string(m_rank) + " is not a member of group " + name, "");
  if (sub.m_size == 1) {
    sub.m_backend_name = "local";
    sub.m_rank = 0;
    return sub;
  }
  std::string key = "shardscope/group/" + name;
  for (int r : ranks) {
    key.push_back('/');
    key.append(std::to_string(r));
  }
  sub.m_store = c10::make_intrusive<c10d::PrefixStore>(key, m_store);
  sub.m_options = m_options;
  sub.m_bind = m_bind;
  sub.m_peers = m_peers;
  sub.m_global_rank = m_global_rank;
  sub.m_world_store = m_world_store;
  sub.m_heartbeat = m_heartbeat;
  try {
    sub.m_backend =
        make_gloo_backend(sub.m_store, sub.m_rank, sub.m_size, m_bind, m_options.timeout);
  } catch (const std::exception& e) {
    SHARD_FAIL(ErrorKind::peer_lost,
               "rank " + std::to_string(m_rank) + ": Gloo could not connect group " + name + " (" +
                   std::string(e.what()).substr(0, 300) + ")",
               "a peer of this group did not arrive; read the other ranks' rank-N.log");
  }
  sub.m_backend_name = "gloo";
  if (m_nccl) sub.add_nccl(name);
  return sub;
}

void ProcessGroup::add_nccl(const std::string& what) {
  // NCCL refuses two ranks on one GPU ("Duplicate GPU detected") only at its first collective;
  // every member publishes its host and GPU first, so the error names the ranks and the counts.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string mine = std::string(host) + " " + m_options.bus_id;
  m_store->set("shardscope/gpu/" + std::to_string(m_rank),
               std::vector<std::uint8_t>(mine.begin(), mine.end()));
  for (int i = 0; i < m_size; ++i) {
    if (i == m_rank) continue;
    auto value = m_store->get("shardscope/gpu/" + std::to_string(i));
    if (std::string(value.begin(), value.end()) != mine) continue;
    int same_host = 0;
    for (int j = 0; j < m_size; ++j) {
      auto v = m_store->get("shardscope/gpu/" + std::to_string(j));
      const std::string other(v.begin(), v.end());
      if (other.substr(0, other.find(' ')) == host) ++same_host;
    }
    SHARD_FAIL(ErrorKind::config,
               "group " + what + ": ranks " + std::to_string(std::min(i, m_rank)) + " and " +
                   std::to_string(std::max(i, m_rank)) + " both compute on GPU " +
                   m_options.bus_id + " of " + host + ": " + std::to_string(same_host) +
                   " NCCL ranks on this node, " + std::to_string(cuda_device_count()) +
                   " visible GPUs (NCCL needs one GPU per rank)",
               "start at most one rank per GPU (launch.nproc_per_node), or set "
               "shard.backend = \"gloo\" to share GPUs through host memory");
  }
  try {
    // PyTorch's own NCCL watchdog aborts the process at its timeout without an event; this
    // rank's heartbeat watchdog (on from the collective timeout) reports a lost peer first.
    m_nccl = make_nccl_backend(c10::make_intrusive<c10d::PrefixStore>("nccl", m_store), m_rank,
                               m_size, m_options.timeout + kNcclWatchdogLead);
  } catch (const trainer::TrainerError&) {
    throw;
  } catch (const std::exception& e) {
    SHARD_FAIL(ErrorKind::peer_lost,
               "rank " + std::to_string(m_global_rank) + ": NCCL could not set up group " + what +
                   " (" + std::string(e.what()).substr(0, 300) + ")",
               "check the NCCL environment (NCCL_DEBUG=INFO names the cause)");
  }
  // NCCL's communicators are shut down when the last copy of this group goes (ProcessGroupNCCL
  // warns, and can crash in its destructor, when a process exits without); while an error
  // unwinds they are aborted instead, since a lost peer would keep a graceful shutdown waiting.
  m_nccl_owner = std::shared_ptr<void>(nullptr, [backend = m_nccl](void*) {
    try {
      if (std::uncaught_exceptions() > 0) {
        backend->abort();
      } else {
        backend->shutdown();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shardtrain: NCCL shutdown: %s\n", e.what());
    }
  });
  m_backend_name = "nccl";
}

void ProcessGroup::fail(const char* what, const std::exception& e) const {
  auto kind = trainer::classify_exception(e.what());
  if (kind == ErrorKind::internal) kind = ErrorKind::peer_lost;
  // Give a dying peer's process a moment to be reaped before naming it.
  std::string lost = lost_peers();
  for (int i = 0; i < 20 && lost.empty(); ++i) {
    ::usleep(50'000);
    lost = lost_peers();
  }
  // No process of this host explains it: ask the heartbeats, which name a rank on any host.
  const std::string silent =
      lost.empty() && kind == ErrorKind::peer_lost ? silent_peers() : std::string();
  SHARD_FAIL(kind,
             "rank " + std::to_string(m_global_rank) + ": " + what + " failed" +
                 (lost.empty() ? std::string() : "; lost rank " + lost) +
                 (silent.empty() ? std::string() : "; " + silent) + ": " +
                 std::string(e.what()).substr(0, 300),
             "another rank exited or stopped answering within shard.timeout_s (" +
                 std::to_string(m_options.timeout.count() / 1000) +
                 " s): read the other ranks' rank-N.log for the first error, or raise "
                 "shard.timeout_s if a rank is merely slow");
}

template <class F>
auto ProcessGroup::guarded(const char* what, F&& issue) -> decltype(issue()) {
  // A peer that is gone can fail a collective when it is issued (a send to a closed socket) as
  // well as when it is waited: both report the same way.
  try {
    auto work = issue();
    if (m_heartbeat) m_heartbeat->progress();
    trainer::PhaseClock::process().issued(work.get());
    return work;
  } catch (const trainer::TrainerError&) {
    throw;
  } catch (const std::exception& e) {
    fail(what, e);
  }
}

void ProcessGroup::wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) const {
  if (!work) return;  // a one-process group finished the collective inline
  // The host stands waiting: the step's exposed communication (on the CPU, where the host is
  // the compute).
  const trainer::PhaseScope waiting(trainer::Phase::comm);
  try {
    work->wait();
    trainer::PhaseClock::process().waited(work.get());
    if (m_heartbeat) m_heartbeat->progress();
  } catch (const trainer::TrainerError&) {
    throw;
  } catch (const std::exception& e) {
    fail(what, e);
  }
}

Exchange ProcessGroup::next_exchange() {
  m_exchanges = (m_exchanges + 1) % (1 << 30);  // the same count on every rank: the same calls
  return {*m_backend, m_rank, m_size, m_exchanges};
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::all_gather_async(at::Tensor& out, at::Tensor& in) {
  return guarded("all_gather_into_tensor", [&] { return issue_all_gather(out, in); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::issue_all_gather(at::Tensor& out, at::Tensor& in) {
  if (local()) {
    if (in.data_ptr() != out.data_ptr()) out.copy_(in.view(out.sizes()));  // else in place
    return {};
  }
  m_counters.all_gather_bytes += static_cast<std::int64_t>(out.nbytes());
  if (!out.is_cuda()) return direct_all_gather(next_exchange(), out, in);
  if (m_nccl) return m_nccl->_allgather_base(out, in);
  auto host_in = to_host(in);
  auto host_out = pinned_like(out);
  auto work = direct_all_gather(next_exchange(), host_out, host_in);
  return c10::make_intrusive<StagedWork>(work, host_out, out, host_in);
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::reduce_scatter_async(at::Tensor& out, at::Tensor& in) {
  return guarded("reduce_scatter_tensor", [&] { return issue_reduce_scatter(out, in); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::issue_reduce_scatter(at::Tensor& out, at::Tensor& in) {
  if (local()) {
    out.copy_(in.view(out.sizes()));
    return {};
  }
  m_counters.reduce_scatter_bytes += static_cast<std::int64_t>(in.nbytes());
  if (!in.is_cuda()) return direct_reduce_scatter(next_exchange(), out, in);
  if (m_nccl) return m_nccl->_reduce_scatter_base(out, in);
  // Staged: the sum lands in the host copy of `in`; the work copies this rank's slice to `out`.
  auto host_in = to_host(in);
  at::Tensor host_out;
  auto work = direct_reduce_scatter(next_exchange(), host_out, host_in);
  return c10::make_intrusive<StagedWork>(work, host_out, out, host_in);
}

void ProcessGroup::all_gather(at::Tensor& out, at::Tensor& in) {
  wait(all_gather_async(out, in), "all_gather_into_tensor");
}

void ProcessGroup::reduce_scatter(at::Tensor& out, at::Tensor& in) {
  at::Tensor result = out;
  wait(reduce_scatter_async(result, in), "reduce_scatter_tensor");
  if (!result.is_same(out)) out.copy_(result.view(out.sizes()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::all_reduce_async(at::Tensor& tensor,
                                                              const c10d::ReduceOp& op) {
  return guarded("all_reduce", [&] { return issue_all_reduce(tensor, op); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::issue_all_reduce(at::Tensor& tensor,
                                                              const c10d::ReduceOp& op) {
  c10d::AllreduceOptions opts;
  opts.reduceOp = op;
  if (tensor.is_cuda() && m_nccl) {
    std::vector<at::Tensor> tensors{tensor};
    return m_nccl->allreduce(tensors, opts);
  }
  if (!tensor.is_cuda()) {
    std::vector<at::Tensor> tensors{tensor};
    return m_backend->allreduce(tensors, opts);
  }
  auto host = to_host(tensor);
  std::vector<at::Tensor> tensors{host};
  auto work = m_backend->allreduce(tensors, opts);
  return c10::make_intrusive<StagedWork>(work, host, tensor, at::Tensor());
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::all_reduce_sum_async(at::Tensor& tensor) {
  if (local()) return {};
  m_counters.all_gather_bytes += static_cast<std::int64_t>(tensor.nbytes());
  m_counters.reduce_scatter_bytes += static_cast<std::int64_t>(tensor.nbytes());
  return all_reduce_async(tensor, c10d::ReduceOp::SUM);
}

void ProcessGroup::all_reduce_sum(at::Tensor& tensor) {
  wait(all_reduce_sum_async(tensor), "all_reduce");
}

void ProcessGroup::all_reduce_max(at::Tensor& tensor) {
  if (local()) return;
  wait(all_reduce_async(tensor, c10d::ReduceOp::MAX), "all_reduce(max)");
}

void ProcessGroup::broadcast(at::Tensor& tensor, int root) {
  if (local()) return;
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  auto issue = [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (tensor.is_cuda() && m_nccl) {
      std::vector<at::Tensor> tensors{tensor};
      return m_nccl->broadcast(tensors, opts);
    }
    if (!tensor.is_cuda()) {
      std::vector<at::Tensor> tensors{tensor};
      return m_backend->broadcast(tensors, opts);
    }
    auto host = to_host(tensor);
    std::vector<at::Tensor> tensors{host};
    auto work = m_backend->broadcast(tensors, opts);
    return c10::make_intrusive<StagedWork>(work, host, tensor, at::Tensor());
  };
  wait(guarded("broadcast", issue), "broadcast");
}

void ProcessGroup::barrier() {
  if (local()) return;
  wait(guarded("barrier", [&] { return m_backend->barrier(); }), "barrier");
}

}  // namespace shardscope::dist
