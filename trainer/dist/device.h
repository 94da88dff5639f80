// The compute device of a rank and what the trainer asks of it: which device (shard.device, the
// visible devices and LOCAL_RANK), what it is (name, memory, compute capability), its caching
// allocator's statistics, and side streams. Everything but the device's name and capability goes
// through c10's device-generic interfaces (c10::Stream, c10::Event, the DeviceAllocator), so the
// engine compiles unchanged against a CPU LibTorch; device.cpp's CUDA-only part is compiled where
// the LibTorch has CUDA (SHARDSCOPE_WITH_CUDA).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

namespace shardscope::dist {

/// What `hello` reports of the device.
struct DeviceInfo {
  c10::Device device{c10::kCPU};
  std::string name;               // "NVIDIA H100 80GB HBM3"; the CPU model on a CPU run
  std::int64_t memory_bytes = 0;  // device memory (CPU: physical memory)
  int major = 0;                  // compute capability (CUDA)
  int minor = 0;
  std::string bus_id;  // PCI bus id (CUDA): two ranks with the same one share a GPU
};

/// CUDA devices this process sees (0 on a CPU LibTorch or without a driver).
int cuda_device_count();

/// The device a rank computes on: shard.device "cpu" -> CPU; "cuda" -> cuda:(local_rank mod
/// visible devices), a config error without one; "auto" -> CUDA when there is a device, else CPU.
/// With the launcher's share of CUDA_VISIBLE_DEVICES each rank sees only its own devices, so
/// the same rule picks one of them.
c10::Device choose_device(const std::string& wanted, int local_rank);
/// Makes `device` the current CUDA device of this thread (nothing on CPU).
void use_device(c10::Device device);
DeviceInfo describe(c10::Device device);

/// The CUDA caching allocator's bytes on `device` (all zero on CPU), and the device memory the
/// driver reports.
struct DeviceMemory {
  std::int64_t allocated = 0;
  std::int64_t reserved = 0;
  std::int64_t peak = 0;  // max allocated since the process started
  std::int64_t total = 0;
  std::int64_t free = 0;  // what this process can still allocate: the driver's free memory
                          // plus the allocator's reserved bytes no tensor holds
};
DeviceMemory device_memory(c10::Device device);
/// The host memory the kernel could give this process now (MemAvailable), in bytes; 0 unknown.
std::int64_t host_available_memory();
/// TF32 for CUDA matmuls and convolutions (shard.allow_tf32); off unless asked.
void set_allow_tf32(bool allow);
/// Waits until everything queued on the device is done (nothing on CPU).
void synchronize(c10::Device device);

/// The streams of one rank's CUDA device: compute (the current stream when the engine starts),
/// gather (all-gathers and their casts) and reduce (reduce-scatters). Inactive on CPU, where
/// every call does nothing and `event()` gives none.
class Streams {
 public:
  explicit Streams(c10::Device device);
  bool active() const { return m_compute.has_value(); }
  c10::Stream compute() const { return *m_compute; }
  c10::Stream gather() const { return *m_gather; }
  c10::Stream reduce() const { return *m_reduce; }
  /// An event recorded on `stream` now; `timing` makes it usable with elapsedTime().
  static c10::Event record(c10::Stream stream, bool timing = false);

 private:
  std::optional<c10::Stream> m_compute;
  std::optional<c10::Stream> m_gather;
  std::optional<c10::Stream> m_reduce;
};

}  // namespace shardscope::dist
