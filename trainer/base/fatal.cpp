#include "trainer/base/fatal.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>

#include <c10/util/Exception.h>

namespace shardscope::trainer {
namespace {

OomMemoryReader& oom_reader_slot() {
  static OomMemoryReader reader;
  return reader;
}

std::unique_ptr<spec::EventWriter>& writer_slot() {
  static std::unique_ptr<spec::EventWriter> writer = std::make_unique<spec::EventWriter>(0, stdout);
  return writer;
}

int report(spec::ErrorKind kind, const std::string& message, const std::string& hint,
           const std::string& where = {}) {
  std::fprintf(stderr, "shardtrain: error (%s)%s%s: %s\n",
               std::string(spec::to_string(kind)).c_str(), where.empty() ? "" : " at ",
               where.c_str(), message.c_str());
  if (!hint.empty()) std::fprintf(stderr, "shardtrain: hint: %s\n", hint.c_str());
  std::fflush(stderr);
  spec::ErrorEvent event{kind, message, hint, std::nullopt};
  if (kind == spec::ErrorKind::oom && oom_reader_slot()) event.memory = oom_reader_slot()();
  events().write(event);
  return kind == spec::ErrorKind::config ? kExitConfig : kExitFailed;
}

std::string hint_for(spec::ErrorKind kind) {
  switch (kind) {
    case spec::ErrorKind::peer_lost:
      return "another rank exited or stopped answering: read the other ranks' rank-N.log for the "
             "first error; raise shard.timeout_s if a rank is merely slow";
    case spec::ErrorKind::oom:
      return "lower train.micro_batch_size or the sequence length, or turn on activation "
             "checkpointing or CPU offload ([shard])";
    default:
      return "this is a bug in shardtrain if the message does not say otherwise: report it with "
             "rank-N.log";
  }
}

}  // namespace

void raise(spec::ErrorKind kind, const std::string& message, const std::string& hint,
           const char* file, int line) {
  throw TrainerError(kind, message, hint, std::string(file) + ":" + std::to_string(line));
}

void report_and_exit(spec::ErrorKind kind, const std::string& message, const std::string& hint) {
  const int code = report(kind, message, hint);
  std::fflush(stdout);
  std::_Exit(code);
}

spec::EventWriter& events() { return *writer_slot(); }

void set_oom_memory_reader(OomMemoryReader reader) { oom_reader_slot() = std::move(reader); }

void set_event_rank(int rank) { writer_slot() = std::make_unique<spec::EventWriter>(rank, stdout); }

spec::ErrorKind write_error_kind(int err) {
  return err == ENOSPC || err == EDQUOT || err == EFBIG ? spec::ErrorKind::disk_full
                                                        : spec::ErrorKind::io;
}

spec::ErrorKind classify_exception(const std::string& what) {
  for (const char* lost :
       {"Connection reset", "Connection closed", "connection closed", "Broken pipe", "Timed out",
        "timed out", "Socket closed", "EPIPE", "ECONNRESET"}) {
    if (what.find(lost) != std::string::npos) return spec::ErrorKind::peer_lost;
  }
  for (const char* oom : {"out of memory", "can't allocate memory", "CUDA out of memory"}) {
    if (what.find(oom) != std::string::npos) return spec::ErrorKind::oom;
  }
  return spec::ErrorKind::internal;
}

int run_guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const TrainerError& e) {
    return report(e.kind(), e.what(), e.hint(), e.where());
  } catch (const c10::OutOfMemoryError& e) {
    // CUDA's caching allocator and the counting CPU allocator: the message names the bytes asked
    // (and on CUDA the device's capacity and what was free).
    return report(spec::ErrorKind::oom, e.what_without_backtrace(), hint_for(spec::ErrorKind::oom));
  } catch (const std::bad_alloc& e) {
    return report(spec::ErrorKind::oom,
                  std::string("host out of memory (") + e.what() +
                      "): an allocation outside the tensor allocator was refused",
                  hint_for(spec::ErrorKind::oom));
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    auto kind = classify_exception(what);
    return report(kind, what, hint_for(kind));
  } catch (const std::exception& e) {
    auto kind = classify_exception(e.what());
    return report(kind, e.what(), hint_for(kind));
  }
}

}  // namespace shardscope::trainer
