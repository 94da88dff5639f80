// faketrainer's command line: `faketrainer train CONFIG [--resume auto|PATH] [flags]`, plus the
// same flags from the environment variable SHARDSCOPE_FAKE_MODE (a mode name and/or flags,
// e.g. "crash --fail-step 3 --rank-only 1"), read first, so a launcher test can pick a failure
// without changing the trainer arguments; command-line flags win.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spec/result.h"

namespace faketrainer {

/// What goes wrong, at `fail_step`, on `rank_only` (or every rank when it is -1).
enum class Mode {
  normal,   // train `steps` steps, then done complete
  crash,    // a last stderr line, then abort() (SIGABRT) or exit 3 (--crash-how)
  hang,     // stop making progress and ignore SIGTERM/SIGINT: only SIGKILL ends it
  garbage,  // non-JSON and truncated lines on stdout between the events; otherwise normal
  no_done,  // exit with --exit-code (0) without a done event
  oom,      // an `error` event of kind oom, then exit 1
};

struct Options {
  std::string config;  // CONFIG: must exist (its bytes give config_hash)
  std::string resume;  // "", "auto" (latest checkpoint in ckpt/) or a ckpt path
  Mode mode = Mode::normal;
  std::int64_t steps = 20;             // optimizer steps of a complete run
  int step_ms = 50;                    // wall time per step
  std::int64_t fail_step = 3;          // the step at which the mode's failure happens
  std::string crash_how = "exit";      // crash: "exit" (code 3) or "abort" (SIGABRT)
  int exit_code = 0;                   // no_done: the exit code
  int rank_only = -1;                  // apply the failure to this rank only; -1: every rank
  std::uint64_t seed = 1234;           // loss curve noise
  std::int64_t mem_every = 1;          // steps between `mem` events
  std::int64_t ckpt_every = 0;         // steps between checkpoints; 0: none
  bool sync = false;                   // rank 0 checks its peers every step (peer_lost on loss)
  bool spawn_child = false;            // start a child that ignores SIGTERM (a dataloader worker)
  std::vector<std::string> print_env;  // extra variables to log at start
  int rdzv_timeout_s = 60;             // how long the rendezvous may take
};

/// Parses SHARDSCOPE_FAKE_MODE (may be null) then argv. Errors name the flag and the fix.
shardscope::Result<Options> parse_options(int argc, char** argv, const char* env_mode);

/// The usage text printed on a usage error.
const char* usage();

}  // namespace faketrainer
