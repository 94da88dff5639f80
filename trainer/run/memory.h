// What the trainer holds: a counting CPU allocator (c10::SetCPUAllocator) that wraps LibTorch's
// own and tracks live and peak bytes, plus the process RSS. `mem` events report these; the
// memory test compares them with the estimate of spec.
#pragma once

#include <cstdint>
#include <optional>

#include "spec/events.h"

namespace shardscope::trainer {

struct MemoryStats {
  std::int64_t allocated = 0;  // live tensor bytes now
  std::int64_t reserved = 0;   // allocated plus freed large blocks kept for reuse
  std::int64_t peak = 0;       // max of allocated since the last reset_peak()
  std::int64_t rss = 0;        // resident set size of the process
};

/// Installs the counting allocator (idempotent) and fixes glibc's mmap threshold so freed
/// large blocks go back to the system; call before any tensor is made. With
/// SHARDSCOPE_HOST_MEMORY_LIMIT=BYTES an allocation that would take the live tensor bytes over
/// the limit raises c10's OutOfMemoryError (the rank reports an `oom` error).
void install_counting_allocator();
MemoryStats memory_stats();
void reset_peak_memory();
std::int64_t current_rss_bytes();
/// The counting allocator's view when it last refused an allocation (over the limit, or a
/// mapping the system refused): the request, what was held and the peak then, and the limit;
/// nullopt when it never refused one. The `error` event of kind oom carries it.
std::optional<spec::OomMemory> host_oom_memory();

}  // namespace shardscope::trainer
