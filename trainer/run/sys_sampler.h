// `sys` events (spec/events.h): a thread in each rank samples the process (CPU time, RSS), the
// host (load average) and, on CUDA, the rank's GPU through NVML, every period. NVML is loaded at
// run time with dlopen (libnvidia-ml.so.1), so nothing links it: without it, or for a counter the
// device lacks, the rank logs one line and goes on without those figures.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace shardscope::trainer {

class SysSampler {
 public:
  /// Samples every `period_s` seconds (> 0) until destroyed. `gpu_bus_id`: the rank's GPU (its
  /// PCI bus id), empty on the CPU. `step` is read for each sample's step.
  SysSampler(double period_s, const std::string& gpu_bus_id, const std::atomic<std::int64_t>& step);
  ~SysSampler();
  SysSampler(const SysSampler&) = delete;
  SysSampler& operator=(const SysSampler&) = delete;

  /// The period from SHARDSCOPE_SYS_EVERY_S (seconds; 0 turns sampling off), 1 s by default.
  /// A value that is not a number >= 0 is a config error naming the variable.
  static double period_from_environment();

 private:
  void loop();

  double m_period_s;
  const std::atomic<std::int64_t>& m_step;
  struct Gpu;
  std::unique_ptr<Gpu> m_gpu;  // null on the CPU or without NVML
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;
  std::thread m_thread;
};

}  // namespace shardscope::trainer
