#include "trainer/run/memory.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

namespace shardscope::trainer {
namespace {

std::atomic<std::int64_t> g_live{0};
std::atomic<std::int64_t> g_peak{0};

c10::Allocator* g_inner = nullptr;

// Each block carries its size in a header in front of the data, so the data pointer is also the
// deleter's context (LibTorch's raw_allocate() requires that) and freeing needs no lookup table.
// 64 bytes keep the data 64-byte aligned, like the default CPU allocator.
constexpr std::size_t kHeader = 64;

// Large blocks (gathered units, activations, gradients) recur with the same sizes every step.
// glibc maps each one freshly (the fixed mmap threshold below) and every first touch of a fresh
// mapping is a page fault: a freed large block is kept for the next request of the same size
// instead, like PyTorch's CUDA caching allocator. Live plus cached bytes never exceed the live
// peak, so the cache costs no memory at the peak; it is emptied from its largest blocks first.
constexpr std::size_t kLargeBlock = 1 << 20;

class BlockCache {
 public:
  void* take(std::size_t total) {
    const std::lock_guard lock(m_mutex);
    auto it = m_free.find(total);
    if (it == m_free.end() || it->second.empty()) return nullptr;
    void* base = it->second.back();
    it->second.pop_back();
    m_cached -= static_cast<std::int64_t>(total);
    return base;
  }
  /// Keeps `base` (when given), then returns the blocks to drop so the cache holds at most
  /// `limit` bytes, largest first.
  std::vector<void*> give(void* base, std::size_t total, std::int64_t limit) {
    const std::lock_guard lock(m_mutex);
    if (base) {
      m_free[total].push_back(base);
      m_cached += static_cast<std::int64_t>(total);
    }
    std::vector<void*> drop;
    for (auto it = m_free.rbegin(); m_cached > limit && it != m_free.rend(); ++it)
      while (m_cached > limit && !it->second.empty()) {
        drop.push_back(it->second.back());
        it->second.pop_back();
        m_cached -= static_cast<std::int64_t>(it->first);
      }
    return drop;
  }
  std::int64_t cached() const {
    const std::lock_guard lock(m_mutex);
    return m_cached;
  }

 private:
  mutable std::mutex m_mutex;
  std::map<std::size_t, std::vector<void*>> m_free;  // by total size (header included)
  std::int64_t m_cached = 0;
};

BlockCache& block_cache() {
  static auto* cache = new BlockCache;  // never destroyed: tensors may be freed during exit
  return *cache;
}

/// Caches `base` (when given) and frees cached blocks until live + cached <= the live peak.
void release_beyond_peak(void* base, std::size_t total) {
  const auto headroom =
      g_peak.load(std::memory_order_relaxed) - g_live.load(std::memory_order_relaxed);
  for (void* dropped : block_cache().give(base, total, std::max<std::int64_t>(0, headroom)))
    g_inner->raw_deallocate(dropped);
}

void counted_delete(void* data) {
  if (!data) return;
  auto* base = static_cast<char*>(data) - kHeader;
  std::int64_t bytes = 0;
  std::memcpy(&bytes, base, sizeof bytes);
  g_live.fetch_sub(bytes, std::memory_order_relaxed);
  const auto total = static_cast<std::size_t>(bytes) + kHeader;
  if (total < kLargeBlock) {
    g_inner->raw_deallocate(base);
    return;
  }
  release_beyond_peak(base, total);
}

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t n) override {
    const auto total = n + kHeader;
    const bool large = total >= kLargeBlock;
    void* cached = large ? block_cache().take(total) : nullptr;
    auto* base = static_cast<char*>(cached ? cached : g_inner->raw_allocate(total));
    const auto bytes = static_cast<std::int64_t>(n);
    std::memcpy(base, &bytes, sizeof bytes);
    const auto live = g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    auto peak = g_peak.load(std::memory_order_relaxed);
    while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
    if (large && !cached) release_beyond_peak(nullptr, 0);  // a new block: keep within the peak
    void* data = base + kHeader;
    return {data, data, &counted_delete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

void install_counting_allocator() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  // glibc raises its mmap threshold after each large free (up to 32 MiB), after which blocks of
  // gathered units and activations come from the heap and fragment it: RSS grew to 1.5x the
  // live peak. A fixed threshold keeps every block >= 8 MiB in its own mapping, returned to
  // the system when freed, so RSS follows what the engine holds.
  mallopt(M_MMAP_THRESHOLD, 8 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 32 * 1024 * 1024);
  g_inner = c10::GetDefaultCPUAllocator();
  static CountingAllocator allocator;
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

MemoryStats memory_stats() {
  const auto live = g_live.load();
  return {live, live + block_cache().cached(), g_peak.load(), current_rss_bytes()};
}

void reset_peak_memory() { g_peak.store(g_live.load()); }

std::int64_t current_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long pages = 0;
  long resident = 0;
  const int read = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return read == 2 ? resident * sysconf(_SC_PAGESIZE) : 0;
}

}  // namespace shardscope::trainer
