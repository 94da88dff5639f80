// A c10d process group for the sharding engine: TCPStore rendezvous, then Gloo, and NCCL beside
// it when the rank computes on CUDA with shard.backend "nccl" (the default there). CPU tensors
// (the control plane: token counts, stop flags, norms, barriers) always go through Gloo, as
// PyTorch FSDP keeps its control plane off NCCL; CUDA tensors go through NCCL, or through Gloo
// staged in pinned host buffers (shard.backend "gloo", so several ranks can share one GPU).
// Failures raise TrainerError with the rank, the cause and what to check.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "trainer/dist/direct.h"
#include "trainer/dist/rendezvous.h"

namespace shardscope::dist {

struct GroupOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // per collective and rendezvous
  bool nccl = false;   // CUDA tensors through NCCL (else Gloo, staged through host memory)
  std::string bus_id;  // with nccl: this rank's GPU (PCI bus id), to name ranks sharing one
  /// The rank computes on CUDA: when its collectives stall for `timeout`, the heartbeat thread
  /// reads its peers' beats and ends the run with peer_lost if one is silent (a wait on the GPU
  /// raises nothing by itself).
  bool watch_peers = false;
  /// A group of one still runs every collective through Gloo/NCCL instead of copying locally
  /// (`shardtrain selftest --no-shortcut`: NCCL's communicator on a machine with one GPU).
  bool no_shortcut = false;
};

/// Collective traffic of this rank since construction, in bytes (what `step` events report).
/// An all-reduce of N bytes counts as N all-gathered plus N reduce-scattered (what a ring moves),
/// so NO_SHARD and the sharded strategies are compared in the same units.
struct CommCounters {
  std::int64_t all_gather_bytes = 0;      // bytes received by all-gathers
  std::int64_t reduce_scatter_bytes = 0;  // bytes sent into reduce-scatters
};

class ProcessGroup {
 public:
  /// Meets the other ranks and builds the group; raises TrainerError (peer_lost/config/io).
  static ProcessGroup create(const Rendezvous& rdzv, const GroupOptions& options = {});
  /// A group of one process: collectives are local copies, nothing listens.
  static ProcessGroup single();
  /// A group of the given global ranks (this rank among them), built over this group's store
  /// under its own key prefix; every member must call it with the same name and ranks.
  ProcessGroup subgroup(const std::string& name, const std::vector<int>& ranks) const;

  int rank() const { return m_rank; }
  int size() const { return m_size; }
  /// "gloo", "nccl" (CUDA tensors through NCCL, the control plane through Gloo) or "local".
  const std::string& backend_name() const { return m_backend_name; }
  const CommCounters& counters() const { return m_counters; }

  /// out (size * in.numel()) = concatenation of every rank's `in`, in rank order; `in` may be
  /// this rank's slice of `out` (in place). On Gloo a direct exchange (trainer/dist/direct.h),
  /// not Gloo's all-gather.
  c10::intrusive_ptr<c10d::Work> all_gather_async(at::Tensor& out, at::Tensor& in);
  /// out (in.numel() / size) = this rank's slice of the element-wise sum over ranks of `in`,
  /// once the work is done. On Gloo a direct exchange (trainer/dist/direct.h): `out` is replaced
  /// by a view of `in` (this rank's slice, where the sum lands) and `in` must not be read or
  /// written until the work is done. The counters count a reduce-scatter of in.nbytes().
  c10::intrusive_ptr<c10d::Work> reduce_scatter_async(at::Tensor& out, at::Tensor& in);
  void all_gather(at::Tensor& out, at::Tensor& in);
  /// The same, waited; `out` keeps its own buffer (the slice is copied into it on Gloo).
  void reduce_scatter(at::Tensor& out, at::Tensor& in);
  /// In-place element-wise sum over ranks.
  void all_reduce_sum(at::Tensor& tensor);
  c10::intrusive_ptr<c10d::Work> all_reduce_sum_async(at::Tensor& tensor);
  /// In-place element-wise maximum over ranks (control flags, e.g. "a rank asked to stop").
  void all_reduce_max(at::Tensor& tensor);
  /// In place: every rank's `tensor` becomes rank `root`'s.
  void broadcast(at::Tensor& tensor, int root);
  void barrier();

  /// Waits for `work`, turning a Gloo/NCCL failure into a peer_lost TrainerError naming `what`.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) const;

 private:
  ProcessGroup() = default;
  /// A group of one whose collectives are local copies (no_shortcut unset).
  bool local() const { return m_size == 1 && !m_options.no_shortcut; }
  /// The next point-to-point exchange's tag and peers.
  Exchange next_exchange();
  /// NCCL over this group's store (its own key prefix), after checking no two ranks share a GPU.
  void add_nccl(const std::string& what);
  c10::intrusive_ptr<c10d::Work> all_reduce_async(at::Tensor& tensor, const c10d::ReduceOp& op);
  c10::intrusive_ptr<c10d::Work> issue_all_gather(at::Tensor& out, at::Tensor& in);
  c10::intrusive_ptr<c10d::Work> issue_reduce_scatter(at::Tensor& out, at::Tensor& in);
  c10::intrusive_ptr<c10d::Work> issue_all_reduce(at::Tensor& tensor, const c10d::ReduceOp& op);
  /// Runs `issue`, turning a Gloo/NCCL failure into a TrainerError as wait() does.
  template <class F>
  auto guarded(const char* what, F&& issue) -> decltype(issue());
  /// Raises the TrainerError for a failed collective: peer_lost (or oom), naming lost peers.
  [[noreturn]] void fail(const char* what, const std::exception& e) const;

  int m_rank = 0;
  int m_global_rank = 0;  // this process's rank in the world (messages)
  int m_size = 1;
  std::string m_backend_name;
  c10::intrusive_ptr<c10d::Store> m_store;
  c10::intrusive_ptr<c10d::Backend> m_backend;  // Gloo: CPU tensors, staged CUDA tensors
  c10::intrusive_ptr<c10d::Backend> m_nccl;     // CUDA tensors, when options.nccl
  std::shared_ptr<void> m_nccl_owner;           // shuts NCCL down with the group's last copy
  CommCounters m_counters;
  int m_exchanges = 0;  // direct exchanges issued (their tags)
  GroupOptions m_options;
  std::string m_bind;
  /// Host name and pid of every global rank, read at creation, to name a lost peer.
  struct Peer {
    std::string host;
    long pid = 0;
  };
  std::vector<Peer> m_peers;
  std::string lost_peers() const;
  /// Ranks (on any host) whose heartbeat in the world store stopped, or a sentence saying the
  /// store itself (rank 0's) does not answer; "" when every peer still beats.
  std::string silent_peers() const;
  c10::intrusive_ptr<c10d::Store> m_world_store;  // the TCPStore (heartbeats live there)
  std::shared_ptr<class Heartbeat> m_heartbeat;   // this rank's beat, while any copy lives
};

}  // namespace shardscope::dist
