#include "trainer/cli/selftest.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include "spec/remove_tree.h"
#include "spec/version.h"
#include "trainer/base/fatal.h"
#include "trainer/dist/comm_env.h"
#include "trainer/dist/device.h"
#include "trainer/dist/process_group.h"

extern char** environ;

namespace shardscope::trainer {
namespace {

using spec::ErrorKind;

// Value of global element g of the test vector: 1-based, padding (g >= n) is 0.
double expected_value(std::int64_t g, std::int64_t n) {
  return g < n ? static_cast<double>(g + 1) : 0.0;
}

void check_equal(const at::Tensor& got, const std::vector<double>& want, const std::string& what) {
  auto values = got.to(at::kCPU).to(at::kDouble).contiguous();
  const double* data = values.data_ptr<double>();
  for (std::size_t i = 0; i < want.size(); ++i) {
    SHARD_CHECK(data[i] == want[i], ErrorKind::internal,
                "selftest: " + what + " element " + std::to_string(i) + " is " +
                    std::to_string(data[i]) + ", expected " + std::to_string(want[i]),
                "the collective library gave wrong results: check the LibTorch build");
  }
}

// One dtype: all-gather each rank's shard of 1..n (padded), then reduce-scatter (rank+1)*(1..n).
void check_collectives(dist::ProcessGroup& group, at::ScalarType dtype, std::int64_t n,
                       c10::Device device) {
  const std::int64_t world = group.size();
  const std::int64_t shard = (n + world - 1) / world;  // elements per rank after padding
  const std::int64_t padded = shard * world;
  const std::string name = std::string(c10::toString(dtype));

  auto index = at::arange(padded, at::kLong);  // (padded,) global element index
  auto full =
      at::where(index < n, index + 1, at::zeros_like(index)).to(device).to(dtype);  // (padded,)
  auto mine = full.narrow(0, group.rank() * shard, shard).clone();                  // (shard,)
  auto gathered = at::empty({padded}, mine.options());                              // (padded,)
  group.all_gather(gathered, mine);
  std::vector<double> want(static_cast<std::size_t>(padded));
  for (std::int64_t g = 0; g < padded; ++g)
    want[static_cast<std::size_t>(g)] = expected_value(g, n);
  check_equal(gathered, want, "all_gather_into_tensor " + name);

  auto contribution = (full.to(at::kDouble) * (group.rank() + 1)).to(dtype);  // (padded,)
  auto reduced = at::empty({shard}, contribution.options());                  // (shard,)
  group.reduce_scatter(reduced, contribution);
  const double rank_sum = static_cast<double>(world * (world + 1)) / 2.0;  // sum of (r+1)
  std::vector<double> want_rs(static_cast<std::size_t>(shard));
  for (std::int64_t i = 0; i < shard; ++i) {
    want_rs[static_cast<std::size_t>(i)] = rank_sum * expected_value(group.rank() * shard + i, n);
  }
  check_equal(reduced, want_rs, "reduce_scatter_tensor " + name);

  // (reduce-scatter summed into `contribution` in place: a fresh copy)
  auto summed = (full.to(at::kDouble) * (group.rank() + 1)).to(dtype);  // (padded,)
  group.all_reduce_sum(summed);
  std::vector<double> want_ar(static_cast<std::size_t>(padded));
  for (std::int64_t g = 0; g < padded; ++g)
    want_ar[static_cast<std::size_t>(g)] = rank_sum * expected_value(g, n);
  check_equal(summed, want_ar, "all_reduce " + name);

  // Rank world-1 (rank 0 when alone) sends (world)*(1..n); every rank ends with it.
  const int root = static_cast<int>(world) - 1;
  auto sent = (full.to(at::kDouble) * (group.rank() + 1)).to(dtype);  // (padded,)
  group.broadcast(sent, root);
  std::vector<double> want_bc(static_cast<std::size_t>(padded));
  for (std::int64_t g = 0; g < padded; ++g)
    want_bc[static_cast<std::size_t>(g)] = static_cast<double>(world) * expected_value(g, n);
  check_equal(sent, want_bc, "broadcast " + name);
  events().write(spec::LogEvent{
      "info", "selftest: all_gather_into_tensor, reduce_scatter_tensor, all_reduce and broadcast " +
                  name + " ok on " + device.str() + " (" + std::to_string(n) + " elements, " +
                  std::to_string(padded - n) + " padding)"});
}

// The communication variables this rank ended up with (set by it, or by the user before it).
std::string comm_settings() {
  std::string out;
  for (const char* name : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME",
                           "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_DUMP_ON_TIMEOUT"}) {
    const char* value = std::getenv(name);
    out += std::string(out.empty() ? "" : " ") + name + "=" + (value ? value : "(unset)");
  }
  return out;
}

int run_rank(const dist::Rendezvous& rdzv, const SelftestOptions& options) {
  set_event_rank(rdzv.rank);
  const auto device = dist::choose_device(options.device, rdzv.local_rank);
  dist::use_device(device);
  const auto info = dist::describe(device);
  dist::GroupOptions group_options;
  group_options.timeout = std::chrono::seconds(options.timeout_s);
  // A world of one takes no shortcut with --no-shortcut, so it may use NCCL too.
  group_options.nccl =
      device.is_cuda() && (dist::use_nccl(options.backend, rdzv, dist::cuda_device_count()) ||
                           (options.no_shortcut && options.backend != "gloo"));
  group_options.bus_id = info.bus_id;
  group_options.watch_peers = device.is_cuda();
  group_options.no_shortcut = options.no_shortcut;
  auto group = dist::ProcessGroup::create(rdzv, group_options);
  events().write(spec::HelloEvent{
      rdzv.world_size,
      rdzv.local_world_size,
      "selftest",
      {{"shardtrain", kVersion}, {"torch", TORCH_VERSION}, {"backend", group.backend_name()}},
      0,
      0,
      0,
      spec::DeviceSummary{device.is_cuda() ? "cuda" : "cpu", device.is_cuda() ? device.index() : 0,
                          info.name, info.memory_bytes,
                          device.is_cuda()
                              ? std::to_string(info.major) + "." + std::to_string(info.minor)
                              : std::string()}});
  if (rdzv.rank == options.fault_rank) {
    if (options.fault_mode == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
    std::fprintf(stderr, "shardtrain selftest: rank %d leaves early (--fault-rank)\n", rdzv.rank);
    std::_Exit(3);  // as a crash would: no done event, no goodbye to the peers
  }
  const std::int64_t n = 2 * group.size() + 1;  // odd: the last shard carries padding
  check_collectives(group, at::kFloat, n, device);
  check_collectives(group, at::kBFloat16, n, device);
  group.barrier();
  const auto& moved = group.counters();
  events().write(spec::LogEvent{"info", "selftest: through " + group.backend_name() + ": " +
                                            std::to_string(moved.all_gather_bytes) +
                                            " bytes all-gathered, " +
                                            std::to_string(moved.reduce_scatter_bytes) +
                                            " reduce-scattered; " + comm_settings()});
  events().write(spec::DoneEvent{spec::DoneStatus::complete, {}, false, 0});
  return kExitOk;
}

// Waits for every rank. After the first failure the others get `grace` to notice it and report
// their own error event (a lost peer is detected within the collective timeout), then SIGTERM.
int wait_ranks(std::vector<pid_t> pids, std::chrono::seconds grace) {
  int worst = kExitOk;
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (!pids.empty()) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      std::erase(pids, pid);
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (code != 0 && worst == kExitOk) {
        worst = kExitFailed;
        deadline = std::chrono::steady_clock::now() + grace;
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (pid_t other : pids) ::kill(other, SIGTERM);
      deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return worst;
}

// argv/envp for posix_spawn: pointers into `strings`, which must outlive the call.
std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Starts `exe selftest` as local rank `rank`, rendezvousing through `port_file`.
pid_t spawn_rank(const std::string& exe, int rank, const SelftestOptions& options,
                 const std::string& port_file, const std::string& token) {
  const std::string world = std::to_string(options.world_size);
  std::vector<std::string> env{"RANK=" + std::to_string(rank),
                               "WORLD_SIZE=" + world,
                               "LOCAL_RANK=" + std::to_string(rank),
                               "LOCAL_WORLD_SIZE=" + world,
                               "MASTER_ADDR=127.0.0.1",
                               "MASTER_PORT=0",
                               "SHARDSCOPE_RDZV_FILE=" + port_file,
                               "SHARDSCOPE_RDZV_TOKEN=" + token,
                               "OMP_NUM_THREADS=1"};
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  std::vector<std::string> args{exe,
                                "selftest",
                                "--timeout-s",
                                std::to_string(options.timeout_s),
                                "--fault-rank",
                                std::to_string(options.fault_rank),
                                "--fault-mode",
                                options.fault_mode,
                                "--device",
                                options.device,
                                "--backend",
                                options.backend};
  if (options.no_shortcut) args.emplace_back("--no-shortcut");
  auto argv = c_strings(args);
  auto envp = c_strings(env);
  pid_t pid = 0;
  SHARD_CHECK(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data()) == 0,
              ErrorKind::internal, "cannot start rank " + std::to_string(rank) + " of the selftest",
              "check that " + exe + " is executable");
  return pid;
}

// Starts world_size copies of this program as local ranks and waits for all of them.
int launch_local(const SelftestOptions& options) {
  auto dir = std::filesystem::temp_directory_path() /
             ("shardtrain-selftest-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  // The run's rendezvous token, in the ranks' environment (never their command line).
  std::string token;
  {
    std::ifstream urandom("/dev/urandom", std::ios::binary);
    unsigned char raw[16] = {};
    SHARD_CHECK(urandom.read(reinterpret_cast<char*>(raw), sizeof raw), ErrorKind::io,
                "cannot read /dev/urandom for the rendezvous token", "");
    static const char* const kHex = "0123456789abcdef";
    for (unsigned char c : raw) token += {kHex[c >> 4], kHex[c & 15]};
  }
  std::vector<pid_t> pids;
  pids.reserve(static_cast<std::size_t>(options.world_size));
  for (int rank = 0; rank < options.world_size; ++rank) {
    pids.push_back(spawn_rank(exe, rank, options, (dir / "port").string(), token));
  }
  const int worst = wait_ranks(pids, std::chrono::seconds(options.timeout_s + 5));
  spec::remove_tree(dir.string());
  return worst;
}

}  // namespace

int run_selftest(const SelftestOptions& options) {
  at::set_num_threads(1);
  auto rdzv = dist::rendezvous_from_env();
  SHARD_CHECK_OK(rdzv, ErrorKind::config, "");
  if (rdzv->source == "single") {
    SHARD_CHECK(options.world_size >= 1, ErrorKind::config, "--world-size must be at least 1", "");
    return launch_local(options);
  }
  return run_rank(*rdzv, options);
}

}  // namespace shardscope::trainer
