#include "trainer/dist/oom_watch.h"

#include <mutex>

#ifdef SHARDSCOPE_WITH_CUDA
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/cuda/memory_snapshot.h>
#endif

namespace shardscope::dist {
namespace {

std::mutex g_mutex;
std::optional<spec::OomMemory> g_oom;  // guarded by g_mutex

#ifdef SHARDSCOPE_WITH_CUDA
// History entries kept (a ring): memory_viz's own example keeps 100,000.
constexpr std::size_t kHistoryEntries = 100000;

std::int64_t as_bytes(std::size_t n) {
  return static_cast<std::int64_t>(
      std::min<std::size_t>(n, std::size_t{std::numeric_limits<std::int64_t>::max()}));
}

// Writes the pickled snapshot to `path`; false (with a line on stderr) when it could not.
bool write_snapshot(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string pickled = torch::cuda::_memory_snapshot_pickled();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(pickled.data(), static_cast<std::streamsize>(pickled.size()));
  out.close();
  if (out) return true;
  std::fprintf(stderr, "shardtrain: could not write the memory snapshot %s\n", path.c_str());
  return false;
}
#endif

}  // namespace

bool cuda_memory_history_available() {
#ifdef SHARDSCOPE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void watch_cuda_oom(c10::Device device, const std::string& run_dir, const std::string& snapshot) {
#ifdef SHARDSCOPE_WITH_CUDA
  static bool watching = false;
  if (!device.is_cuda() || watching) return;
  watching = true;
  namespace alloc = c10::cuda::CUDACachingAllocator;
  if (!snapshot.empty()) {
    // Every allocation and free, with no stack frames: the trainer has no Python frames, and
    // "all" (C++ frames) would unwind the stack at every allocation.
    torch::cuda::_record_memory_history(std::optional<std::string>("all"),
                                        std::optional<std::string>("all"), "python",
                                        kHistoryEntries);
  }
  const std::string path = snapshot.empty() ? std::string() : run_dir + "/" + snapshot;
  // The allocator calls observers after releasing its lock and before it throws, so its state
  // (stats, segments, history) is the one that refused the request.
  alloc::attachOutOfMemoryObserver(
      [path, snapshot](std::int64_t dev, std::size_t request, std::size_t total, std::size_t free) {
        const auto index = static_cast<c10::DeviceIndex>(dev);
        spec::OomMemory m;
        m.device = "cuda";
        m.request = as_bytes(request);
        const auto stats = alloc::getDeviceStats(index);
        constexpr auto kAll = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
        m.allocated = stats.allocated_bytes[kAll].current;
        m.peak = stats.allocated_bytes[kAll].peak;
        m.reserved = stats.reserved_bytes[kAll].current;
        std::size_t largest = 0;
        for (const auto& segment : alloc::snapshot({0, 0}, /*include_traces=*/false).segments) {
          if (segment.device != index) continue;
          for (const auto& block : segment.blocks)
            if (!block.allocated) largest = std::max(largest, block.size);
        }
        m.largest_free = as_bytes(largest);
        m.capacity = as_bytes(total);
        m.device_free = as_bytes(free);
        if (!path.empty() && write_snapshot(path)) m.snapshot = snapshot;
        const std::lock_guard lock(g_mutex);
        g_oom = m;
      });
#else
  (void)device;
  (void)run_dir;
  (void)snapshot;
#endif
}

std::optional<spec::OomMemory> cuda_oom_memory() {
  const std::lock_guard lock(g_mutex);
  return g_oom;
}

}  // namespace shardscope::dist
