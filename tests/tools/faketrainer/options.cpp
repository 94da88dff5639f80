#include "tests/tools/faketrainer/options.h"

#include <cstdlib>
#include <sstream>

namespace faketrainer {

namespace {

using shardscope::fail;
using shardscope::Result;

Result<Mode> parse_mode(const std::string& name) {
  if (name == "normal") return Mode::normal;
  if (name == "crash") return Mode::crash;
  if (name == "hang") return Mode::hang;
  if (name == "garbage") return Mode::garbage;
  if (name == "no-done" || name == "no_done") return Mode::no_done;
  if (name == "oom") return Mode::oom;
  return fail("--mode: unknown mode \"" + name +
              "\"; use normal, crash, hang, garbage, no-done or oom");
}

Result<std::int64_t> parse_int(const std::string& flag, const std::string& text, long long min) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min) {
    return fail(flag + ": expected an integer >= " + std::to_string(min) + ", got \"" + text +
                "\"");
  }
  return static_cast<std::int64_t>(v);
}

std::vector<std::string> split_words(const char* text) {
  std::vector<std::string> out;
  if (text == nullptr) return out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/// Applies one integer flag; true when `flag` was one of them.
Result<bool> apply_int(Options& o, const std::string& flag, const std::string& value) {
  struct IntFlag {
    const char* name;
    long long min;
    std::int64_t* target64;
    int* target32;
  };
  std::int64_t seed = 0;
  const IntFlag flags[] = {
      {"--steps", 0, &o.steps, nullptr},
      {"--step-ms", 0, nullptr, &o.step_ms},
      {"--fail-step", 1, &o.fail_step, nullptr},
      {"--exit-code", 0, nullptr, &o.exit_code},
      {"--rank-only", -1, nullptr, &o.rank_only},
      {"--seed", 0, &seed, nullptr},
      {"--mem-every", 1, &o.mem_every, nullptr},
      {"--ckpt-every", 0, &o.ckpt_every, nullptr},
      {"--rdzv-timeout-s", 1, nullptr, &o.rdzv_timeout_s},
  };
  for (const IntFlag& f : flags) {
    if (flag != f.name) continue;
    auto v = parse_int(flag, value, f.min);
    if (!v) return v.error();
    if (f.target64 != nullptr) *f.target64 = *v;
    if (f.target32 != nullptr) *f.target32 = static_cast<int>(*v);
    if (flag == "--seed") o.seed = static_cast<std::uint64_t>(seed);
    return true;
  }
  return false;
}

Result<void> apply_flag(Options& o, const std::string& flag, const std::string& value) {
  auto as_int = apply_int(o, flag, value);
  if (!as_int) return as_int.error();
  if (*as_int) return shardscope::ok();
  if (flag == "--mode") {
    auto m = parse_mode(value);
    if (!m) return m.error();
    o.mode = *m;
  } else if (flag == "--resume") {
    o.resume = value;
  } else if (flag == "--crash-how") {
    if (value != "exit" && value != "abort") {
      return fail("--crash-how: expected exit or abort, got \"" + value + "\"");
    }
    o.crash_how = value;
  } else if (flag == "--print-env") {
    std::istringstream in(value);
    for (std::string name; std::getline(in, name, ',');) o.print_env.push_back(name);
  } else {
    return fail("unknown flag " + flag + " (see faketrainer --help)");
  }
  return shardscope::ok();
}

/// Flags in `words`; `positional` receives the others.
Result<void> apply_words(Options& o, const std::vector<std::string>& words,
                         std::vector<std::string>& positional) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.rfind("--", 0) != 0) {
      positional.push_back(w);
      continue;
    }
    if (w == "--sync") {
      o.sync = true;
      continue;
    }
    if (w == "--spawn-child") {
      o.spawn_child = true;
      continue;
    }
    if (i + 1 >= words.size()) return fail(w + ": needs a value");
    if (auto r = apply_flag(o, w, words[i + 1]); !r) return r.error();
    ++i;
  }
  return shardscope::ok();
}

}  // namespace

const char* usage() {
  return "usage: faketrainer train CONFIG [--resume auto|PATH] [--mode normal|crash|hang|garbage|"
         "no-done|oom]\n"
         "         [--steps N] [--step-ms MS] [--fail-step N] [--crash-how exit|abort]\n"
         "         [--exit-code C] [--rank-only R] [--seed S] [--mem-every N] [--ckpt-every N]\n"
         "         [--sync] [--spawn-child] [--print-env NAME,...] [--rdzv-timeout-s S]\n"
         "  SHARDSCOPE_FAKE_MODE=\"MODE [flags]\" is read first; command-line flags win.\n";
}

Result<Options> parse_options(int argc, char** argv, const char* env_mode) {
  Options o;
  std::vector<std::string> env_positional;
  if (auto r = apply_words(o, split_words(env_mode), env_positional); !r) {
    return fail("SHARDSCOPE_FAKE_MODE: " + r.message());
  }
  if (env_positional.size() > 1) {
    return fail("SHARDSCOPE_FAKE_MODE: expected one mode name and flags, got \"" +
                std::string(env_mode) + "\"");
  }
  if (env_positional.size() == 1) {
    auto m = parse_mode(env_positional[0]);
    if (!m) return fail("SHARDSCOPE_FAKE_MODE: " + m.message());
    o.mode = *m;
  }
  std::vector<std::string> positional;
  if (auto r = apply_words(o, std::vector<std::string>(argv + 1, argv + argc), positional); !r) {
    return r.error();
  }
  if (positional.size() != 2 || positional[0] != "train") {
    return fail("expected the verb train and one CONFIG path");
  }
  o.config = positional[1];
  return o;
}

}  // namespace faketrainer
