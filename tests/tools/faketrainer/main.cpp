// faketrainer: `shardtrain train` without the training. It keeps the trainer contract that the
// launchers and the monitor rely on, and fails on request (see options.h for the modes):
//   hello (every rank, before the rendezvous) -> per step: step (rank 0), mem (every rank,
//   --mem-every), ckpt (--ckpt-every) -> end barrier -> done complete; exit 0.
//   SIGTERM/SIGINT: done stopped at the next step boundary (checkpoint first when configured),
//   exit 0. Usage and config errors: an `error` event of kind config, exit 2.
// The loss is a decaying curve with seeded noise, a function of the step only, so runs with the
// same seed (any world size, resumed or not) report equal losses.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "spec/events.h"
#include "tests/tools/faketrainer/options.h"
#include "tests/tools/faketrainer/rendezvous.h"

namespace {

namespace spec = shardscope::spec;
using faketrainer::Mode;
using faketrainer::Options;
using faketrainer::RankEnv;

volatile std::sig_atomic_t g_stop = 0;

extern "C" void on_stop_signal(int /*sig*/) { g_stop = 1; }

/// SIGTERM and SIGINT interrupt sleeps (no SA_RESTART) and ask for a graceful stop.
void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

void ignore_stop_signals() {
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
}

double loss_at(std::uint64_t seed, std::int64_t step) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(step + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  const double noise = static_cast<double>(z >> 11) / static_cast<double>(1ULL << 53) * 2 - 1;
  return 0.3 + 2.2 * std::exp(-static_cast<double>(step) / 25.0) + 0.02 * noise;
}

std::int64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t pages = 0;
  std::int64_t resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

std::string hash_hex(const std::string& bytes) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

/// Sleeps `ms`, returning early when a stop was asked for.
void sleep_ms(int ms) {
  timespec left{ms / 1000, (ms % 1000) * 1000000L};
  while (g_stop == 0 && nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

class FakeTrainer {
 public:
  FakeTrainer(RankEnv env, Options opts)
      : m_env(std::move(env)), m_opts(std::move(opts)), m_out(m_env.rank, stdout) {}

  int run();

 private:
  void log(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  int fail_with(spec::ErrorKind kind, const std::string& message, const std::string& hint,
                int code);
  bool targeted() const { return m_opts.rank_only < 0 || m_opts.rank_only == m_env.rank; }
  void log_environment();
  void say_hello(const std::string& config_bytes);
  void spawn_child();
  void reap_child();
  std::int64_t resume_step();
  void inject_failure(std::int64_t step);
  void write_garbage(std::int64_t step);
  void do_step(std::int64_t step);
  void checkpoint(std::int64_t step);
  int finish(spec::DoneStatus status, std::int64_t step);

  RankEnv m_env;
  Options m_opts;
  spec::EventWriter m_out;
  faketrainer::Group m_group;
  pid_t m_child = -1;
};

void FakeTrainer::log(const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  std::fprintf(stderr, "[faketrainer rank %d/%d pid %d] %s\n", m_env.rank, m_env.world_size,
               static_cast<int>(getpid()), text);
}

int FakeTrainer::fail_with(spec::ErrorKind kind, const std::string& message,
                           const std::string& hint, int code) {
  log("error (%s): %s; %s", std::string(spec::to_string(kind)).c_str(), message.c_str(),
      hint.c_str());
  m_out.write(spec::ErrorEvent{kind, message, hint});
  return code;
}

void FakeTrainer::log_environment() {
  std::string line = "env source=" + m_env.source;
  const char* names[] = {"RANK",        "WORLD_SIZE",  "LOCAL_RANK",      "LOCAL_WORLD_SIZE",
                         "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES"};
  for (const char* name : names) {
    const char* v = std::getenv(name);
    line += std::string(" ") + name + "=" + (v != nullptr ? v : "<unset>");
  }
  for (const std::string& name : m_opts.print_env) {
    const char* v = std::getenv(name.c_str());
    line += " " + name + "=" + (v != nullptr ? v : "<unset>");
  }
  char cwd[4096] = "?";
  if (getcwd(cwd, sizeof cwd) == nullptr) std::strcpy(cwd, "?");
  line += std::string(" cwd=") + cwd;
  log("%s", line.c_str());
}

void FakeTrainer::say_hello(const std::string& config_bytes) {
  spec::HelloEvent hello;
  hello.world_size = m_env.world_size;
  hello.local_world_size = m_env.local_world_size;
  hello.config_hash = hash_hex(config_bytes);
  hello.versions = {{"shardtrain", "faketrainer"}, {"torch", "none"}, {"backend", "tcp"}};
  hello.params_total = 1000000;
  hello.params_trainable = 1000000;
  hello.mem_estimate = 64LL << 20;
  m_out.write(hello);
}

/// A child in the rank's session that ignores SIGTERM, like a stuck data-loader worker.
void FakeTrainer::spawn_child() {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    ignore_stop_signals();
    for (;;) pause();
  }
  m_child = pid;
  log("spawned child pid %d (ignores SIGTERM)", static_cast<int>(pid));
}

void FakeTrainer::reap_child() {
  if (m_child <= 0) return;
  kill(m_child, SIGKILL);
  waitpid(m_child, nullptr, 0);
  m_child = -1;
}

/// The step to continue after: 0, or the newest checkpoint this rank finished.
std::int64_t FakeTrainer::resume_step() {
  if (m_opts.resume.empty()) return 0;
  std::int64_t best = 0;
  if (m_opts.resume != "auto") {
    const auto slash = m_opts.resume.find_last_of('/');
    const std::string base = m_opts.resume.substr(slash == std::string::npos ? 0 : slash + 1);
    long long step = 0;
    if (std::sscanf(base.c_str(), "step-%lld", &step) == 1) best = step;
  } else if (DIR* dir = opendir("ckpt")) {
    while (const dirent* e = readdir(dir)) {
      long long step = 0;
      if (std::sscanf(e->d_name, "step-%lld", &step) != 1) continue;
      const std::string file =
          std::string("ckpt/") + e->d_name + "/rank-" + std::to_string(m_env.rank) + ".bin";
      struct stat st {};
      if (stat(file.c_str(), &st) == 0 && step > best) best = step;
    }
    closedir(dir);
  }
  log("resume %s: continuing after step %lld", m_opts.resume.c_str(), static_cast<long long>(best));
  return best;
}

void FakeTrainer::inject_failure(std::int64_t step) {
  switch (m_opts.mode) {
    case Mode::crash:
      log("injected crash at step %lld (%s)", static_cast<long long>(step),
          m_opts.crash_how.c_str());
      std::fflush(stdout);
      if (m_opts.crash_how == "abort") std::abort();
      std::_Exit(3);
    case Mode::hang:
      log("injected hang at step %lld: no progress, SIGTERM ignored", static_cast<long long>(step));
      ignore_stop_signals();
      for (;;) pause();
    case Mode::no_done:
      log("injected exit %d at step %lld without a done event", m_opts.exit_code,
          static_cast<long long>(step));
      std::fflush(stdout);
      std::_Exit(m_opts.exit_code);
    case Mode::oom: {
      const int code = fail_with(spec::ErrorKind::oom,
                                 "CUDA out of memory. Tried to allocate 2.00 GiB (injected at "
                                 "step " +
                                     std::to_string(step) + ")",
                                 "lower train.micro_batch_size, or turn on shard.cpu_offload or "
                                 "activation checkpointing",
                                 1);
      std::fflush(stdout);
      std::_Exit(code);
    }
    case Mode::normal:
    case Mode::garbage:
      break;
  }
}

void FakeTrainer::write_garbage(std::int64_t step) {
  static const char* const kLines[] = {
      "garbage: this line is not JSON",
      "{\"v\":1,\"ev\":\"step\",\"rank\":",  // a line cut short
      "[1, 2, 3]",
      "\x01\x02\xff\xfe binary bytes",
  };
  std::fputs(kLines[step % 4], stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void FakeTrainer::do_step(std::int64_t step) {
  if (m_env.rank == 0) {
    spec::StepEvent ev;
    ev.step = step;
    ev.loss = loss_at(m_opts.seed, step);
    const double progress = static_cast<double>(step) / static_cast<double>(m_opts.steps);
    ev.lr = 3e-4 * 0.5 * (1 + std::cos(M_PI * progress));
    ev.grad_norm = 1.0 + 0.5 * std::exp(-static_cast<double>(step) / 10.0);
    ev.tokens_per_s = 1000.0 * m_env.world_size;
    ev.mfu = 0.1;
    ev.all_gather_bytes = 4096LL * (m_env.world_size - 1);
    ev.reduce_scatter_bytes = 4096LL * (m_env.world_size - 1);
    m_out.write(ev);
  }
  if (step % m_opts.mem_every == 0) {
    const std::int64_t allocated = (1LL << 20) * (m_env.rank + 1) + 1000 * step;
    m_out.write(spec::MemEvent{step, allocated, 2 * allocated, 2 * allocated, rss_bytes()});
  }
}

void FakeTrainer::checkpoint(std::int64_t step) {
  char dir[64];
  std::snprintf(dir, sizeof dir, "ckpt/step-%06lld", static_cast<long long>(step));
  mkdir("ckpt", 0755);
  mkdir(dir, 0755);
  const std::string file = std::string(dir) + "/rank-" + std::to_string(m_env.rank) + ".bin";
  const std::string tmp = file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "faketrainer step " << step << " rank " << m_env.rank << " seed " << m_opts.seed << "\n";
  }
  std::rename(tmp.c_str(), file.c_str());
  m_out.write(spec::CkptEvent{step, dir, "sharded"});
}

int FakeTrainer::finish(spec::DoneStatus status, std::int64_t step) {
  reap_child();
  spec::DoneEvent done;
  done.status = status;
  if (step > 0) done.objective = {loss_at(m_opts.seed, step)};
  done.steps = step;
  m_out.write(done);
  log("done %s after step %lld", std::string(spec::to_string(status)).c_str(),
      static_cast<long long>(step));
  return 0;
}

int FakeTrainer::run() {
  log_environment();
  std::ifstream config(m_opts.config, std::ios::binary);
  if (!config) {
    return fail_with(spec::ErrorKind::config, "cannot read CONFIG " + m_opts.config,
                     "pass the trial's config file (trial.toml in the run directory)", 2);
  }
  std::stringstream bytes;
  bytes << config.rdbuf();
  say_hello(bytes.str());
  if (m_opts.spawn_child) spawn_child();
  // A process started without any rank variables has no peers and binds no port.
  const bool alone = m_env.source == "single";
  if (auto joined = alone ? shardscope::ok() : m_group.join(m_env, m_opts.rdzv_timeout_s, g_stop);
      !joined) {
    if (g_stop != 0) return finish(spec::DoneStatus::stopped, 0);
    return fail_with(m_group.last_kind(), joined.message(), "see rank 0's log", 1);
  }
  if (!alone) {
    log("rendezvous done: rank 0 listens on %s:%d", m_env.master_addr.c_str(), m_group.port());
  }
  std::int64_t step = resume_step();
  while (step < m_opts.steps) {
    if (g_stop != 0) break;
    if (targeted() && step + 1 == m_opts.fail_step) inject_failure(step + 1);
    if (m_opts.mode == Mode::garbage && targeted()) write_garbage(step);
    sleep_ms(m_opts.step_ms);
    if (m_opts.sync) {
      if (auto peers = m_group.check_peers(); !peers) {
        return fail_with(spec::ErrorKind::peer_lost, peers.message(), "see the other ranks' logs",
                         1);
      }
    }
    ++step;
    do_step(step);
    if (m_opts.ckpt_every > 0 && step % m_opts.ckpt_every == 0) checkpoint(step);
  }
  if (g_stop != 0) {
    if (m_opts.ckpt_every > 0 && step > 0 && step % m_opts.ckpt_every != 0) checkpoint(step);
    return finish(spec::DoneStatus::stopped, step);
  }
  if (auto end = m_group.barrier(g_stop); !end) {
    if (g_stop != 0) return finish(spec::DoneStatus::stopped, step);
    return fail_with(spec::ErrorKind::peer_lost, end.message(), "see the other ranks' logs", 1);
  }
  if (m_opts.ckpt_every > 0 && step > 0 && step % m_opts.ckpt_every != 0) checkpoint(step);
  return finish(spec::DoneStatus::complete, step);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(faketrainer::usage(), stdout);
    return 0;
  }
  install_stop_handlers();
  auto env = shardscope::dist::rendezvous_from_env();
  const int rank = env ? env->rank : 0;
  spec::EventWriter early(rank, stdout);
  if (!env) {
    std::fprintf(stderr, "faketrainer: %s\n", env.message().c_str());
    early.write(
        spec::ErrorEvent{spec::ErrorKind::config, env.message(), "fix the rendezvous environment"});
    return 2;
  }
  auto opts = faketrainer::parse_options(argc, argv, std::getenv("SHARDSCOPE_FAKE_MODE"));
  if (!opts) {
    std::fprintf(stderr, "faketrainer: %s\n%s", opts.message().c_str(), faketrainer::usage());
    early.write(
        spec::ErrorEvent{spec::ErrorKind::config, opts.message(), "see faketrainer --help"});
    return 2;
  }
  FakeTrainer trainer(*env, *opts);
  return trainer.run();
}
