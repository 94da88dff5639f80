#include "trainer/dist/rendezvous.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "spec/sha256.h"

namespace shardscope::dist {
namespace {

constexpr std::size_t kMinTokenChars = 16;

Result<int> parse_int(const std::string& name, const std::string& text, int min_value) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) {
    return fail(name + "=\"" + text + "\" is not an integer; set it to a whole number");
  }
  if (value < min_value) {
    return fail(name + "=" + text + " must be at least " + std::to_string(min_value));
  }
  return value;
}

// Reads an integer variable, or `fallback` when it is unset.
Result<int> int_var(const EnvLookup& env, const std::string& name, int fallback, int min_value) {
  auto text = env(name);
  if (!text) return fallback;
  return parse_int(name, *text, min_value);
}

// SLURM_NTASKS_PER_NODE may be absent; SLURM_TASKS_PER_NODE looks like "4(x2)" or "4,4".
int slurm_tasks_per_node(const EnvLookup& env, int world_size) {
  for (const char* name : {"SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (auto text = env(name)) {
      int value = std::atoi(text->c_str());
      if (value > 0) return value;
    }
  }
  return world_size;
}

// The variables one launcher family sets, and where the master address comes from.
struct Family {
  const char* source;
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* addr_fallback;  // read when MASTER_ADDR is unset (or nullptr)
};
constexpr Family kTorchrun{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", nullptr};
constexpr Family kSlurm{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                        "SLURM_LAUNCH_NODE_IPADDR"};

// Reads rank, world size, local rank and the master address/port of one family. The local
// world size is the caller's (it differs between families).
Result<Rendezvous> read_family(const EnvLookup& env, const Family& f, bool local_rank_is_rank) {
  Rendezvous r;
  r.source = f.source;
  auto rank = int_var(env, f.rank, 0, 0);
  if (!rank) return rank.error();
  auto world = int_var(env, f.world, 1, 1);
  if (!world) return world.error();
  r.rank = *rank;
  r.world_size = *world;
  auto local_rank = int_var(env, f.local_rank, local_rank_is_rank ? r.rank : 0, 0);
  if (!local_rank) return local_rank.error();
  r.local_rank = *local_rank;
  if (auto addr = env("MASTER_ADDR")) {
    r.master_addr = *addr;
  } else if (f.addr_fallback) {
    if (auto node = env(f.addr_fallback)) r.master_addr = *node;
  }
  auto port = int_var(env, "MASTER_PORT", 29500, 0);
  if (!port) return port.error();
  r.master_port = *port;
  return r;
}

Result<Rendezvous> from_torchrun(const EnvLookup& env) {
  auto r = read_family(env, kTorchrun, /*local_rank_is_rank=*/true);
  if (!r) return r;
  auto local_world = int_var(env, "LOCAL_WORLD_SIZE", r->world_size, 1);
  if (!local_world) return local_world.error();
  r->local_world_size = *local_world;
  return r;
}

Result<Rendezvous> from_slurm(const EnvLookup& env) {
  auto r = read_family(env, kSlurm, /*local_rank_is_rank=*/false);
  if (!r) return r;
  r->local_world_size = slurm_tasks_per_node(env, r->world_size);
  return r;
}

Result<void> validate(const Rendezvous& r) {
  const bool slurm = r.source == "slurm";
  const std::string rank = slurm ? "SLURM_PROCID" : "RANK";
  const std::string world = slurm ? "SLURM_NTASKS" : "WORLD_SIZE";
  if (r.rank >= r.world_size) {
    return fail(rank + "=" + std::to_string(r.rank) + " is not below " + world + "=" +
                std::to_string(r.world_size) + "; ranks count from 0 to world size - 1");
  }
  if (r.local_rank >= r.local_world_size) {
    return fail("LOCAL_RANK=" + std::to_string(r.local_rank) +
                " is not below LOCAL_WORLD_SIZE=" + std::to_string(r.local_world_size));
  }
  if (r.world_size % r.local_world_size != 0) {
    return fail(world + "=" + std::to_string(r.world_size) +
                " is not a multiple of LOCAL_WORLD_SIZE=" + std::to_string(r.local_world_size) +
                "; every node must run the same number of ranks");
  }
  if (r.master_port > 65535) {
    return fail("MASTER_PORT=" + std::to_string(r.master_port) + " is not a TCP port (0-65535)");
  }
  if (r.master_port == 0 && r.world_size > 1 && r.port_file.empty()) {
    return fail("MASTER_PORT=0 needs SHARDSCOPE_RDZV_FILE: rank 0 writes the port it picked there");
  }
  return ok();
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  };
}

Result<Rendezvous> rendezvous_from_env(const EnvLookup& env) {
  const bool torchrun = env("RANK") || env("WORLD_SIZE");
  const bool slurm = !torchrun && env("SLURM_PROCID");
  Result<Rendezvous> r = slurm ? from_slurm(env) : from_torchrun(env);
  if (!r) return r;
  if (!torchrun && !slurm) r->source = "single";
  if (auto file = env("SHARDSCOPE_RDZV_FILE")) r->port_file = *file;
  if (auto token = env("SHARDSCOPE_RDZV_TOKEN")) {
    if (token->size() < kMinTokenChars) {
      return fail("SHARDSCOPE_RDZV_TOKEN has " + std::to_string(token->size()) +
                  " characters, fewer than " + std::to_string(kMinTokenChars) +
                  ": a guessable token guards nothing; unset it, or let Shardscope's launcher "
                  "draw one");
    }
    r->token = *token;
  }
  if (auto v = validate(*r); !v) return v.error();
  return r;
}

std::string token_proof(const std::string& token, const std::string& nonce,
                        const std::string& who) {
  return spec::sha256_hex("shardscope-rdzv-v1\n" + token + "\n" + nonce + "\n" + who);
}

Result<void> publish_port(const std::string& port_file, int port) {
  const std::string tmp = port_file + ".tmp";
  // Owner-only from its creation (0600, never chmod'ed after): which port a run's store listens
  // on is the run's business.
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const std::string text = std::to_string(port) + "\n";
  const bool written =
      fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  if (fd >= 0 && ::close(fd) != 0 && written) {
    return fail(port_file + ": cannot write the rendezvous port (" + std::strerror(errno) +
                "); check SHARDSCOPE_RDZV_FILE points into a writable folder");
  }
  if (!written) {
    return fail(port_file + ": cannot write the rendezvous port (" + std::strerror(err) +
                "); check SHARDSCOPE_RDZV_FILE points into a writable folder");
  }
  if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
    return fail(port_file + ": cannot rename " + tmp + " (" + std::strerror(errno) + ")");
  }
  return ok();
}

Result<int> wait_for_port(const std::string& port_file, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream in(port_file);
    int port = 0;
    if (in >> port && port > 0) return port;
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(port_file + ": rank 0 did not publish its port within " +
                  std::to_string(timeout.count() / 1000) +
                  " s; check that rank 0 started (its rank-0.log)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace shardscope::dist
