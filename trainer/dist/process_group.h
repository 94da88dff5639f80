// A c10d process group for the sharding engine: TCPStore rendezvous, then Gloo (CPU) or, with a
// CUDA LibTorch, NCCL. Failures raise TrainerError with the rank, the cause and what to check.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "trainer/dist/rendezvous.h"

namespace shardscope::dist {

struct GroupOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // per collective and rendezvous
};

/// Collective traffic of this rank since construction, in bytes (what `step` events report).
struct CommCounters {
  std::int64_t all_gather_bytes = 0;      // bytes received by all-gathers
  std::int64_t reduce_scatter_bytes = 0;  // bytes sent into reduce-scatters
};

class ProcessGroup {
 public:
  /// Meets the other ranks and builds the group; raises TrainerError (peer_lost/config/io).
  static ProcessGroup create(const Rendezvous& rdzv, const GroupOptions& options = {});

  int rank() const { return m_rank; }
  int size() const { return m_size; }
  const std::string& backend_name() const { return m_backend_name; }
  const CommCounters& counters() const { return m_counters; }

  /// out (size * in.numel()) = concatenation of every rank's `in`, in rank order.
  c10::intrusive_ptr<c10d::Work> all_gather_async(at::Tensor& out, at::Tensor& in);
  /// out (in.numel() / size) = this rank's slice of the element-wise sum over ranks of `in`.
  c10::intrusive_ptr<c10d::Work> reduce_scatter_async(at::Tensor& out, at::Tensor& in);
  void all_gather(at::Tensor& out, at::Tensor& in);
  void reduce_scatter(at::Tensor& out, at::Tensor& in);
  /// In-place element-wise sum over ranks.
  void all_reduce_sum(at::Tensor& tensor);
  void barrier();

  /// Waits for `work`, turning a Gloo/NCCL failure into a peer_lost TrainerError naming `what`.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) const;

 private:
  ProcessGroup() = default;

  int m_rank = 0;
  int m_size = 1;
  std::string m_backend_name;
  c10::intrusive_ptr<c10d::Store> m_store;
  c10::intrusive_ptr<c10d::Backend> m_backend;
  CommCounters m_counters;
};

}  // namespace shardscope::dist
