#include "trainer/run/memory.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

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

void counted_delete(void* data) {
  if (!data) return;
  auto* base = static_cast<char*>(data) - kHeader;
  std::int64_t bytes = 0;
  std::memcpy(&bytes, base, sizeof bytes);
  g_live.fetch_sub(bytes, std::memory_order_relaxed);
  g_inner->raw_deallocate(base);
}

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t n) override {
    auto* base = static_cast<char*>(g_inner->raw_allocate(n + kHeader));
    const auto bytes = static_cast<std::int64_t>(n);
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
  g_inner = c10::GetDefaultCPUAllocator();
  static CountingAllocator allocator;
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

MemoryStats memory_stats() { return {g_live.load(), g_peak.load(), current_rss_bytes()}; }

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
