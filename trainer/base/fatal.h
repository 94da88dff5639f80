// Fail fast and loudly: a trainer error names what failed and what to do, is written as an
// `error` event on stdout (the backend's channel) and as a line on stderr (rank-N.log), and
// ends the process with a non-zero code. Everything below main() throws TrainerError; main()
// catches it once (run_guarded), together with LibTorch's own exceptions.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "spec/events.h"

namespace shardscope::trainer {

/// Exit codes of shardtrain.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitConfig = 2;  // bad command line or configuration

class TrainerError : public std::runtime_error {
 public:
  TrainerError(spec::ErrorKind kind, const std::string& message, std::string hint,
               std::string where = {})
      : std::runtime_error(message),
        m_kind(kind),
        m_hint(std::move(hint)),
        m_where(std::move(where)) {}
  spec::ErrorKind kind() const { return m_kind; }
  const std::string& hint() const { return m_hint; }
  /// file:line of the check that raised it (stderr only; the event carries message and hint).
  const std::string& where() const { return m_where; }

 private:
  spec::ErrorKind m_kind;
  std::string m_hint;
  std::string m_where;
};

[[noreturn]] void raise(spec::ErrorKind kind, const std::string& message, const std::string& hint,
                        const char* file, int line);

/// The rank's event stream; set once the rank knows its number (before that, rank 0 is used).
spec::EventWriter& events();
void set_event_rank(int rank);

/// For a thread other than main's: reports the error as run_guarded would (event and stderr)
/// and ends the process at once with its exit code.
[[noreturn]] void report_and_exit(spec::ErrorKind kind, const std::string& message,
                                  const std::string& hint);

/// What an allocator saw when it refused an allocation (trainer/run/memory.h on the host,
/// trainer/dist/oom_watch.h on CUDA): every `error` event of kind oom carries it as `memory`.
/// Set once, before training; nullopt (or no reader) leaves the field out.
using OomMemoryReader = std::function<std::optional<spec::OomMemory>()>;
void set_oom_memory_reader(OomMemoryReader reader);

/// Runs `body`, turning any exception into an `error` event, a stderr line and an exit code.
int run_guarded(const std::function<int()>& body);

/// The kind of a failed write's errno: disk_full when the disk has no space left (ENOSPC, EDQUOT)
/// or the file passed the size limit (EFBIG, RLIMIT_FSIZE with SIGXFSZ ignored), else io.
spec::ErrorKind write_error_kind(int err);

/// Classifies an exception message from LibTorch/Gloo: a lost peer, out of memory, or internal.
spec::ErrorKind classify_exception(const std::string& what);

}  // namespace shardscope::trainer

/// SHARD_CHECK(cond, kind, message, hint): raises a TrainerError with file:line when cond fails.
#define SHARD_CHECK(cond, kind, message, hint)                                     \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      ::shardscope::trainer::raise((kind), (message), (hint), __FILE__, __LINE__); \
    }                                                                              \
  } while (false)

/// SHARD_CHECK_OK(result, kind, hint): raises with the Result's own message when it failed.
#define SHARD_CHECK_OK(result, kind, hint) \
  SHARD_CHECK((result).ok(), (kind), (result).message(), (hint))

/// SHARD_FAIL(kind, message, hint): raises unconditionally.
#define SHARD_FAIL(kind, message, hint) \
  ::shardscope::trainer::raise((kind), (message), (hint), __FILE__, __LINE__)
