// `shardtrain selftest`: proves this machine can run shardtrain's collectives. Without a
// rendezvous in the environment it starts `world_size` local ranks of itself; each rank meets
// the others through a TCPStore, checks all-gather and reduce-scatter into tensors (fp32 and
// bf16, an odd element count so the last shard is padded), all-reduce and broadcast element by
// element, and writes `hello`, `log` and `done` events on stdout. With --no-shortcut a world of
// one runs them through Gloo or NCCL too (a group of one otherwise copies locally), so one GPU
// creates, uses and tears down a real NCCL communicator.
#pragma once

#include <string>

namespace shardscope::trainer {

struct SelftestOptions {
  int world_size = 2;               // ranks to start when no rendezvous is in the environment
  int timeout_s = 30;               // rendezvous and collective timeout
  int fault_rank = -1;              // this rank misbehaves, to check failure detection
  std::string fault_mode = "exit";  // exit: leaves before the collectives; hang: never answers
  std::string device = "cpu";       // where the tensors live: cpu, cuda, auto (as shard.device)
  std::string backend = "auto";     // CUDA tensors: auto/nccl (NCCL) or gloo (host-staged)
  bool no_shortcut = false;         // a world of one still goes through Gloo/NCCL
};

/// Runs the selftest; returns the process exit code.
int run_selftest(const SelftestOptions& options);

}  // namespace shardscope::trainer
