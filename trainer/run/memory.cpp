#include "trainer/run/memory.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

namespace shardscope::trainer {
namespace {

std::atomic<std::int64_t> g_live{0};
std::atomic<std::int64_t> g_peak{0};

// The wrapped allocation: the inner DataPtr (freed with it) and its size.
struct Counted {
  c10::DataPtr inner;
  std::int64_t bytes;
};

void release(void* ctx) {
  auto* counted = static_cast<Counted*>(ctx);
  g_live.fetch_sub(counted->bytes, std::memory_order_relaxed);
  delete counted;  // NOLINT(cppcoreguidelines-owning-memory): the DataPtr deleter owns it
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : m_inner(inner) {}

  c10::DataPtr allocate(std::size_t n) override {
    auto inner = m_inner->allocate(n);
    void* data = inner.get();
    const auto device = inner.device();
    auto* counted = new Counted{std::move(inner), static_cast<std::int64_t>(n)};  // NOLINT
    const auto live = g_live.fetch_add(counted->bytes, std::memory_order_relaxed) + counted->bytes;
    auto peak = g_peak.load(std::memory_order_relaxed);
    while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
    return {data, counted, &release, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  c10::Allocator* m_inner;
};

}  // namespace

void install_counting_allocator() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  static CountingAllocator allocator(c10::GetDefaultCPUAllocator());
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

MemoryStats memory_stats() {
  return {g_live.load(), g_peak.load(), current_rss_bytes()};
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
