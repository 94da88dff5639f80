// What every fuzz target shares. A target is one LLVMFuzzerTestOneInput that feeds its input to
// one parser through the same entry point the product calls, and turns a broken promise into a
// crash libFuzzer reports: a parser must return an error that says what is wrong (and, for a
// file, names it), never throw something unexpected, crash or allocate without bound.
//
// The same sources build twice: with clang and -fsanitize=fuzzer,address,undefined (the `fuzz`
// preset; libFuzzer supplies main), and with the regular compiler and replay_main.cpp, which
// feeds every file of the corpus folders to the target (the `fuzz_replay_*` unit tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

namespace shardscope::fuzz {

/// Stops the run with `what` on stderr: libFuzzer records the input as a crash.
[[noreturn]] inline void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz: broken promise: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// A refused input's message must say something and, when the input came from a file, name it.
inline void expect_clear_error(const std::string& message, std::string_view must_name = {}) {
  if (message.empty()) broken("an error without a message");
  if (!must_name.empty() && message.find(must_name) == std::string::npos)
    broken("the error does not name " + std::string(must_name) + ": " + message);
}

/// The bytes as they would arrive from a file: written to `name` in this process's own
/// temporary folder (kept for the next input), returned as a path.
inline std::string as_file(const std::uint8_t* data, std::size_t size, const std::string& name) {
  static const std::filesystem::path dir = [] {
    // The pid padded to ten digits: the path has the same length in every process, so a fixed
    // seed's run does not depend on how many digits this one's pid has.
    char folder[48];
    std::snprintf(folder, sizeof folder, "shardscope-fuzz-%010ld", static_cast<long>(::getpid()));
    auto d = std::filesystem::temp_directory_path() / folder;
    std::filesystem::create_directories(d);
    return d;
  }();
  const auto path = (dir / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) broken("cannot write the fuzz input to " + path);
  return path;
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace shardscope::fuzz
