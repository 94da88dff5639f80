#include "trainer/dist/device.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <ATen/Context.h>
#include <ATen/DeviceAccelerator.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#ifdef SHARDSCOPE_WITH_CUDA
#include <ATen/cuda/CUDAContextLight.h>
#endif

#include "trainer/base/fatal.h"

namespace shardscope::dist {
namespace {

using spec::ErrorKind;

// The CPU model line of /proc/cpuinfo ("AMD EPYC 9454 48-Core Processor"), for `hello`.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "cpu";
}

std::int64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<std::int64_t>(pages) * size : 0;
}

std::string visible_devices() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v ? std::string("CUDA_VISIBLE_DEVICES=\"") + v + "\"" : "CUDA_VISIBLE_DEVICES unset";
}

}  // namespace

int cuda_device_count() {
  if (!at::hasCUDA()) return 0;
  return static_cast<int>(c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).deviceCount());
}

c10::Device choose_device(const std::string& wanted, int local_rank) {
  if (wanted == "cpu") return c10::Device(c10::kCPU);
  const int count = cuda_device_count();
  if (count == 0) {
    SHARD_CHECK(wanted != "cuda", ErrorKind::config,
                std::string("shard.device = \"cuda\" but ") +
                    (at::detail::getCUDAHooks().hasCUDA() || at::hasCUDA()
                         ? "no CUDA device is visible (" + visible_devices() + ")"
                         : "this shardtrain's LibTorch has no CUDA"),
                "run on a GPU node with a CUDA LibTorch build of shardtrain (README: the trainer "
                "alone on a GPU node), or set shard.device = \"cpu\" or \"auto\"");
    return c10::Device(c10::kCPU);
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
}

void use_device(c10::Device device) {
  if (device.is_cuda()) c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).setDevice(device);
}

DeviceInfo describe(c10::Device device) {
  DeviceInfo info;
  info.device = device;
  if (!device.is_cuda()) {
    info.name = cpu_model();
    info.memory_bytes = physical_memory();
    return info;
  }
#ifdef SHARDSCOPE_WITH_CUDA
  const auto* p = at::cuda::getDeviceProperties(device.index());
  info.name = p->name;
  info.memory_bytes = static_cast<std::int64_t>(p->totalGlobalMem);
  info.major = p->major;
  info.minor = p->minor;
  char bus[32];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", p->pciDomainID, p->pciBusID, p->pciDeviceID);
  info.bus_id = bus;
#else
  info.name = "cuda";
  info.memory_bytes = device_memory(device).total;
#endif
  return info;
}

std::int64_t host_available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) return kib * 1024;
  }
  return 0;
}

DeviceMemory device_memory(c10::Device device) {
  DeviceMemory m;
  if (!device.is_cuda()) return m;
  const auto stats = at::accelerator::getDeviceStats(device.index());
  constexpr auto kAll = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  m.allocated = stats.allocated_bytes[kAll].current;
  m.reserved = stats.reserved_bytes[kAll].current;
  m.peak = stats.allocated_bytes[kAll].peak;
  const auto [free, total] = at::accelerator::getMemoryInfo(device.index());
  m.total = static_cast<std::int64_t>(total);
  m.free = static_cast<std::int64_t>(free) + (m.reserved - m.allocated);
  return m;
}

void set_allow_tf32(bool allow) {
  at::globalContext().setAllowTF32CuBLAS(allow);
  at::globalContext().setAllowTF32CuDNN(allow);
}

void synchronize(c10::Device device) {
  if (device.is_cuda())
    c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).synchronizeDevice(device.index());
}

Streams::Streams(c10::Device device) {
  if (!device.is_cuda()) return;
  const c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
  m_compute = impl.getStream(device);
  m_gather = impl.getStreamFromGlobalPool(device, /*isHighPriority=*/true);
  m_reduce = impl.getStreamFromGlobalPool(device, /*isHighPriority=*/true);
}

c10::Event Streams::record(c10::Stream stream, bool timing) {
  c10::Event event(stream.device_type(),
                   timing ? c10::EventFlag::BACKEND_DEFAULT : c10::EventFlag::PYTORCH_DEFAULT);
  event.record(stream);
  return event;
}

}  // namespace shardscope::dist
