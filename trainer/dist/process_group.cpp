#include "trainer/dist/process_group.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "trainer/base/fatal.h"
#include "trainer/dist/direct.h"
#include "trainer/dist/gloo_backend.h"
#include "trainer/dist/nccl_backend.h"

namespace shardscope::dist {
namespace {

using spec::ErrorKind;

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

std::string where(const Rendezvous& r) {
  return r.master_addr + ":" + std::to_string(r.master_port);
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
  std::ostringstream mine;
  mine << host << ' ' << ::getpid();
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
bool process_alive(long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

}  // namespace

std::string ProcessGroup::lost_peers() const {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string lost;
  for (std::size_t i = 0; i < m_peers.size(); ++i) {
    const auto& p = m_peers[i];
    if (p.host != host || p.pid <= 0) continue;
    if (!process_alive(p.pid)) {
      lost += (lost.empty() ? "" : ", ") + std::to_string(i) + " (pid " + std::to_string(p.pid) +
              " exited)";
    }
  }
  return lost;
}

ProcessGroup ProcessGroup::create(const Rendezvous& rdzv, const GroupOptions& options) {
  Rendezvous r = rdzv;
  ProcessGroup group;
  group.m_rank = r.rank;
  group.m_global_rank = r.rank;
  group.m_size = r.world_size;
  group.m_store = connect_store(r, options.timeout);
  check_arrivals(*group.m_store, r, options.timeout);
  for (auto& [host, pid] : exchange_peers(*group.m_store, r)) group.m_peers.push_back({host, pid});
  const std::string bind = is_loopback(r.master_addr) ? "127.0.0.1" : "";
  group.m_options = options;
  group.m_bind = bind;
  const char* wanted = std::getenv("SHARDSCOPE_DIST_BACKEND");
  if (wanted && std::string(wanted) == "nccl") {
    group.m_backend = make_nccl_backend(group.m_store, r.rank, r.world_size, options.timeout);
    group.m_backend_name = "nccl";
    return group;
  }
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
  try {
    sub.m_backend =
        make_gloo_backend(sub.m_store, sub.m_rank, sub.m_size, m_bind, m_options.timeout);
  } catch (const std::exception& e) {
    SHARD_FAIL(ErrorKind::peer_lost,
               "rank " + std::to_string(m_rank) + ": Gloo could not connect group " + name + " (" +
                   std::string(e.what()).substr(0, 300) + ")",
               "a peer of this group did not arrive; read the other ranks' rank-N.log");
  }
  sub.m_backend_name = m_backend_name;
  return sub;
}

void ProcessGroup::wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) const {
  if (!work) return;  // a one-process group finished the collective inline
  try {
    work->wait();
  } catch (const std::exception& e) {
    auto kind = trainer::classify_exception(e.what());
    if (kind == ErrorKind::internal) kind = ErrorKind::peer_lost;
    // Give a dying peer's process a moment to be reaped before naming it.
    std::string lost = lost_peers();
    for (int i = 0; i < 20 && lost.empty(); ++i) {
      ::usleep(50'000);
      lost = lost_peers();
    }
    SHARD_FAIL(kind,
               "rank " + std::to_string(m_global_rank) + ": " + what + " failed" +
                   (lost.empty() ? std::string() : "; lost rank " + lost) + ": " +
                   std::string(e.what()).substr(0, 300),
               "another rank exited or stopped answering: read the other ranks' rank-N.log for the "
               "first error");
  }
}

Exchange ProcessGroup::next_exchange() {
  m_exchanges = (m_exchanges + 1) % (1 << 30);  // the same count on every rank: the same calls
  return {*m_backend, m_rank, m_size, m_exchanges};
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::all_gather_async(at::Tensor& out, at::Tensor& in) {
  if (m_size == 1) {
    out.copy_(in.view(out.sizes()));
    return {};
  }
  m_counters.all_gather_bytes += static_cast<std::int64_t>(out.nbytes());
  if (m_backend_name == "gloo") return direct_all_gather(next_exchange(), out, in);
  return m_backend->_allgather_base(out, in);
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::reduce_scatter_async(at::Tensor& out, at::Tensor& in) {
  if (m_size == 1) {
    out.copy_(in.view(out.sizes()));
    return {};
  }
  m_counters.reduce_scatter_bytes += static_cast<std::int64_t>(in.nbytes());
  if (m_backend_name == "gloo") return direct_reduce_scatter(next_exchange(), out, in);
  return m_backend->_reduce_scatter_base(out, in);
}

void ProcessGroup::all_gather(at::Tensor& out, at::Tensor& in) {
  wait(all_gather_async(out, in), "all_gather_into_tensor");
}

void ProcessGroup::reduce_scatter(at::Tensor& out, at::Tensor& in) {
  at::Tensor result = out;
  wait(reduce_scatter_async(result, in), "reduce_scatter_tensor");
  if (!result.is_same(out)) out.copy_(result.view(out.sizes()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::all_reduce_sum_async(at::Tensor& tensor) {
  if (m_size == 1) return {};
  m_counters.all_gather_bytes += static_cast<std::int64_t>(tensor.nbytes());
  m_counters.reduce_scatter_bytes += static_cast<std::int64_t>(tensor.nbytes());
  std::vector<at::Tensor> tensors{tensor};
  return m_backend->allreduce(tensors);
}

void ProcessGroup::all_reduce_sum(at::Tensor& tensor) {
  wait(all_reduce_sum_async(tensor), "all_reduce");
}

void ProcessGroup::all_reduce_max(at::Tensor& tensor) {
  if (m_size == 1) return;
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::MAX;
  wait(m_backend->allreduce(tensors, opts), "all_reduce(max)");
}

void ProcessGroup::barrier() {
  if (m_size == 1) return;
  wait(m_backend->barrier(), "barrier");
}

}  // namespace shardscope::dist
