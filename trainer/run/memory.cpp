#include "trainer/run/memory.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

namespace shardscope::trainer {
namespace {

std::atomic<std::int64_t> g_live{0};
std::atomic<std::int64_t> g_peak{0};

c10::Allocator* g_inner = nullptr;
// SHARDSCOPE_HOST_MEMORY_LIMIT: live tensor bytes this rank may hold on the host (0: no limit),
// so a rank on a shared node fails with an `oom` error instead of being killed by the kernel.
std::int64_t g_limit = 0;

// The last refused allocation, as host_oom_memory() reports it.
std::mutex g_oom_mutex;
std::optional<spec::OomMemory> g_oom;

// `held`: the live bytes the refusal was decided on (read once: another thread may allocate).
void note_refusal(std::int64_t request, std::int64_t held) {
  spec::OomMemory m;
  m.device = "cpu";
  m.request = request;
  m.allocated = held;
  m.peak = std::max(g_peak.load(std::memory_order_relaxed), m.allocated);
  if (g_limit > 0) m.limit = g_limit;
  const std::lock_guard lock(g_oom_mutex);
  g_oom = m;
}

// Each block carries its size in a header in front of the data, so the data pointer is also the
// deleter's context (LibTorch's raw_allocate() requires that) and freeing needs no lookup table.
// 64 bytes keep the data 64-byte aligned, like the default CPU allocator.
constexpr std::size_t kHeader = 64;

// Large blocks (gathered units, activations, gradients, optimizer temporaries) recur with the
// same sizes every step. Each is its own anonymous mapping (never glibc's heap, which fragments
// and keeps freed middle-sized blocks resident), and a freed one is kept for the next request of
// the same size, like PyTorch's CUDA caching allocator: a fresh mapping costs a page fault and a
// page clear per 4 KiB on first touch. The cache is bounded: before a new block is mapped,
// cached blocks are unmapped (largest first) until live + cached + the new block fits under the
// live peak plus 1/kCacheSlack of it (or the cache is empty), so resident large bytes stay within
// 1.125x the counted peak. Without the slack (the cache bounded by the peak itself) it had to be
// empty at the peak, and every block needed after it was mapped again each step: 10m FULL_SHARD
// on 2 ranks mapped 34 blocks a step (15 ms of populating) and ran ~6% slower (2,010 against
// 2,130 tokens/s; 25% slack gave 2,200 for +48 MiB resident). Blocks >= 2 MiB ask for
// transparent huge pages, and every new block is populated in one call instead of one fault per
// page.
constexpr std::size_t kLargeBlock = 256 << 10;
constexpr std::size_t kHugeBlock = 2 << 20;
constexpr std::size_t kPage = 4096;
constexpr std::int64_t kCacheSlack = 8;  // the cache may exceed the peak by 1/8 of it

void* map_block(std::size_t total) {
  void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (total >= kHugeBlock) madvise(p, total, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
  madvise(p, total, MADV_POPULATE_WRITE);  // best effort: first touch faults in what is left
#endif
  return p;
}

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
  void give(void* base, std::size_t total) {
    const std::lock_guard lock(m_mutex);
    m_free[total].push_back(base);
    m_cached += static_cast<std::int64_t>(total);
  }
  /// Unmaps cached blocks, largest first, until the cache holds at most `limit` bytes.
  void trim(std::int64_t limit) {
    const std::lock_guard lock(m_mutex);
    for (auto it = m_free.rbegin(); m_cached > limit && it != m_free.rend(); ++it)
      while (m_cached > limit && !it->second.empty()) {
        munmap(it->second.back(), it->first);
        it->second.pop_back();
        m_cached -= static_cast<std::int64_t>(it->first);
      }
  }
  std::int64_t cached() const {
    const std::lock_guard lock(m_mutex);
    return m_cached;
  }

 private:
  mutable std::mutex m_mutex;
  std::map<std::size_t, std::vector<void*>> m_free;  // by mapped size (header included)
  std::int64_t m_cached = 0;
};

BlockCache& block_cache() {
  static auto* cache = new BlockCache;  // never destroyed: tensors may be freed during exit
  return *cache;
}

std::size_t mapped_size(std::size_t total) { return (total + kPage - 1) / kPage * kPage; }

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
  block_cache().give(base, mapped_size(total));  // live + cached is unchanged: within the peak
}

/// A large block of `total` bytes (header included): cached, or freshly mapped after trimming
/// the cache so that the resident total stays within max(peak, live + this block).
void* large_block(std::size_t total, std::int64_t bytes) {
  const auto size = mapped_size(total);
  if (void* cached = block_cache().take(size)) return cached;
  const auto live = g_live.load(std::memory_order_relaxed) + bytes;
  const auto peak = std::max(g_peak.load(std::memory_order_relaxed), live);
  block_cache().trim(std::max<std::int64_t>(0, peak + peak / kCacheSlack - live));
  void* p = map_block(size);
  if (!p) {  // out of address space or memory: give the cache back and try once more
    block_cache().trim(0);
    p = map_block(size);
  }
  return p;
}

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t n) override {
    const auto total = n + kHeader;
    const auto bytes = static_cast<std::int64_t>(n);
    if (const auto held = g_live.load(std::memory_order_relaxed);
        g_limit > 0 && held + bytes > g_limit) {
      note_refusal(bytes, held);
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory: tried to allocate ", n,
                       " bytes with ", held,
                       " bytes of tensors held, over SHARDSCOPE_HOST_MEMORY_LIMIT=", g_limit);
    }
    auto* base = static_cast<char*>(total >= kLargeBlock ? large_block(total, bytes)
                                                         : g_inner->raw_allocate(total));
    if (!base) {
      note_refusal(bytes, g_live.load(std::memory_order_relaxed));
      // c10's out-of-memory error, as CUDA's caching allocator raises it: the rank reports an
      // `error` of kind oom naming what was asked and what was held.
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory: tried to allocate ", n,
                       " bytes with ", g_live.load(std::memory_order_relaxed),
                       " bytes of tensors held (the system or the process's address-space limit "
                       "refused the mapping)");
    }
    std::memcpy(base, &bytes, sizeof bytes);
    const auto live = g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    auto peak = g_peak.load(std::memory_order_relaxed);
    while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
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
  // Blocks >= kLargeBlock never reach glibc (large_block maps them). For the small ones glibc
  // would raise its mmap threshold after each large free (up to 32 MiB); fixed, it keeps the
  // heap's behaviour the same from the first step to the last.
  mallopt(M_MMAP_THRESHOLD, 8 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 32 * 1024 * 1024);
  g_inner = c10::GetDefaultCPUAllocator();
  if (const char* limit = std::getenv("SHARDSCOPE_HOST_MEMORY_LIMIT"); limit && *limit) {
    char* end = nullptr;
    const long long value = std::strtoll(limit, &end, 10);
    if (end && *end == '\0' && value > 0) {
      g_limit = value;
    } else {
      std::fprintf(stderr,
                   "shardtrain: SHARDSCOPE_HOST_MEMORY_LIMIT=%s is not a positive byte count (e.g. "
                   "8000000000); no limit is applied\n",
                   limit);
    }
  }
  static CountingAllocator allocator;
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

MemoryStats memory_stats() {
  const auto live = g_live.load();
  return {live, live + block_cache().cached(), g_peak.load(), current_rss_bytes()};
}

std::optional<spec::OomMemory> host_oom_memory() {
  const std::lock_guard lock(g_oom_mutex);
  return g_oom;
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
