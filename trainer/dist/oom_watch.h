// What the CUDA caching allocator saw when it ran out of memory: an out-of-memory observer on
// c10's CUDACachingAllocator records the request, the allocated, reserved and peak bytes
// (getDeviceStats), the largest free block of its segments (its snapshot) and the driver's free
// and total memory; with trace.memory_on_oom the allocator's history is recorded from the start
// (c10's recordHistory, through torch::cuda::_record_memory_history) and the observer writes
// its pickled snapshot (what torch.cuda.memory._snapshot() holds, https://pytorch.org/memory_viz
// reads) into the run directory. The `error` event of kind oom carries the view. Compiled where
// the LibTorch has CUDA (SHARDSCOPE_WITH_CUDA); elsewhere watch_cuda_oom does nothing.
#pragma once

#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "spec/events.h"

namespace shardscope::dist {

/// True when this shardtrain can record the CUDA allocator's history (a CUDA LibTorch).
bool cuda_memory_history_available();

/// Watches `device`'s caching allocator for out-of-memory (CUDA devices only; once per
/// process). `snapshot` (relative to `run_dir`, e.g. "memory/rank-0.pickle"): non-empty turns
/// the history recording on now and names where the snapshot goes on an oom.
void watch_cuda_oom(c10::Device device, const std::string& run_dir, const std::string& snapshot);

/// The view the observer recorded at the last oom; nullopt when there was none.
std::optional<spec::OomMemory> cuda_oom_memory();

}  // namespace shardscope::dist
