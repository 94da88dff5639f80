#include "trainer/run/sys_sampler.h"

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "spec/events.h"
#include "trainer/base/fatal.h"
#include "trainer/run/human_log.h"

namespace shardscope::trainer {
namespace {

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::int64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0;
  std::int64_t resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

// NVML through dlopen: the few entry points the sample reads, declared here with NVML's C
// signatures (nvmlReturn_t is an int, 0 on success; a device is an opaque pointer).
struct SysSampler::Gpu {
  using Device = void*;
  struct Utilization {
    unsigned int gpu;
    unsigned int memory;
  };
  struct Memory {
    unsigned long long total;  // NOLINT(google-runtime-int): NVML's type
    unsigned long long free;   // NOLINT(google-runtime-int)
    unsigned long long used;   // NOLINT(google-runtime-int)
  };
  void* lib = nullptr;
  Device device = nullptr;
  int (*shutdown)() = nullptr;
  int (*utilization)(Device, Utilization*) = nullptr;
  int (*clock)(Device, int, unsigned int*) = nullptr;
  int (*power)(Device, unsigned int*) = nullptr;
  int (*power_limit)(Device, unsigned int*) = nullptr;
  int (*temperature)(Device, int, unsigned int*) = nullptr;
  int (*memory)(Device, Memory*) = nullptr;
  int (*pcie)(Device, int, unsigned int*) = nullptr;

  ~Gpu() {
    if (shutdown) shutdown();
    if (lib) dlclose(lib);
  }

  template <class F>
  void bind(F& slot, const char* name) {
    slot = reinterpret_cast<F>(dlsym(lib, name));  // NOLINT(*-reinterpret-cast): dlsym's way
  }

  /// NVML for the GPU at `bus_id`, or null with `why` set.
  static std::unique_ptr<Gpu> open(const std::string& bus_id, std::string& why) {
    auto gpu = std::make_unique<Gpu>();
    const char* name = std::getenv("SHARDSCOPE_NVML_LIBRARY");
    gpu->lib = dlopen(name && *name ? name : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!gpu->lib) {
      why = std::string("NVML is not available (") + dlerror() + ")";
      return nullptr;
    }
    int (*init)() = nullptr;
    int (*by_bus)(const char*, Device*) = nullptr;
    gpu->bind(init, "nvmlInit_v2");
    gpu->bind(by_bus, "nvmlDeviceGetHandleByPciBusId_v2");
    gpu->bind(gpu->shutdown, "nvmlShutdown");
    if (!init || !by_bus || !gpu->shutdown) {
      why = "the NVML library lacks nvmlInit_v2 or nvmlDeviceGetHandleByPciBusId_v2";
      gpu->shutdown = nullptr;
      return nullptr;
    }
    if (const int rc = init(); rc != 0) {
      why = "nvmlInit_v2 failed (NVML error " + std::to_string(rc) + ")";
      gpu->shutdown = nullptr;
      return nullptr;
    }
    if (const int rc = by_bus(bus_id.c_str(), &gpu->device); rc != 0) {
      why = "NVML does not know the GPU at PCI bus " + bus_id + " (NVML error " +
            std::to_string(rc) + ")";
      return nullptr;
    }
    gpu->bind(gpu->utilization, "nvmlDeviceGetUtilizationRates");
    gpu->bind(gpu->clock, "nvmlDeviceGetClockInfo");
    gpu->bind(gpu->power, "nvmlDeviceGetPowerUsage");
    gpu->bind(gpu->power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    gpu->bind(gpu->temperature, "nvmlDeviceGetTemperature");
    gpu->bind(gpu->memory, "nvmlDeviceGetMemoryInfo");
    gpu->bind(gpu->pcie, "nvmlDeviceGetPcieThroughput");
    return gpu;
  }

  /// One sample; a counter the device or driver lacks stays absent.
  spec::GpuSample sample() const {
    spec::GpuSample s;
    unsigned int v = 0;
    if (Utilization u{}; utilization && utilization(device, &u) == 0) s.util = u.gpu / 100.0;
    if (clock && clock(device, /*NVML_CLOCK_SM*/ 1, &v) == 0) s.sm_clock_mhz = v;
    if (power && power(device, &v) == 0) s.power_w = v / 1000.0;  // mW
    if (power_limit && power_limit(device, &v) == 0) s.power_limit_w = v / 1000.0;
    if (temperature && temperature(device, /*NVML_TEMPERATURE_GPU*/ 0, &v) == 0) s.temp_c = v;
    if (Memory m{}; memory && memory(device, &m) == 0)
      s.mem_used = static_cast<std::int64_t>(m.used);
    if (pcie && pcie(device, /*TX bytes*/ 0, &v) == 0) s.pcie_tx = v * 1024.0;  // KB/s
    if (pcie && pcie(device, /*RX bytes*/ 1, &v) == 0) s.pcie_rx = v * 1024.0;
    return s;
  }
};

double SysSampler::period_from_environment() {
  const char* env = std::getenv("SHARDSCOPE_SYS_EVERY_S");
  if (env == nullptr || *env == '\0') return 1.0;
  char* end = nullptr;
  const double period = std::strtod(env, &end);
  SHARD_CHECK(
      end != env && *end == '\0' && period >= 0 && period < 1e6, spec::ErrorKind::config,
      std::string("SHARDSCOPE_SYS_EVERY_S = \"") + env + "\" is not a number of seconds >= 0",
      "set it to the sampling period in seconds (1 by default; 0 turns `sys` events off), "
      "e.g. in launch.env");
  return period;
}

SysSampler::SysSampler(double period_s, const std::string& gpu_bus_id,
                       const std::atomic<std::int64_t>& step)
    : m_period_s(period_s), m_step(step) {
  if (!gpu_bus_id.empty()) {
    std::string why;
    m_gpu = Gpu::open(gpu_bus_id, why);
    if (!m_gpu) {
      report(spec::LogEvent{
          "warn", "sys: no GPU figures: " + why + "; CPU time, memory and load are still sampled"});
    }
  }
  m_thread = std::thread([this] { loop(); });
}

SysSampler::~SysSampler() {
  {
    const std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  m_thread.join();
}

void SysSampler::loop() {
  double last_cpu = cpu_seconds();
  double last_time = steady_seconds();
  std::unique_lock lock(m_mutex);
  while (!m_wake.wait_for(lock, std::chrono::duration<double>(m_period_s),
                          [this] { return m_stop; })) {
    const double cpu = cpu_seconds();
    const double now = steady_seconds();
    spec::SysEvent e;
    e.step = m_step.load();
    e.cpu = now > last_time ? (cpu - last_cpu) / (now - last_time) : 0;
    e.rss = rss_bytes();
    double load[1] = {0};
    if (getloadavg(load, 1) == 1) e.load1 = load[0];
    if (m_gpu) e.gpu = m_gpu->sample();
    last_cpu = cpu;
    last_time = now;
    events().write(e);  // the writer is shared with the training thread: it locks
  }
}

}  // namespace shardscope::trainer
