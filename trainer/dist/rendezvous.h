// Where this rank is and how to meet its peers, read from the environment that torchrun, srun
// and Shardscope's launchers set. Torch-free, so it is tested without a process group.
//
//   MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE   (torchrun's names)
//   SLURM_PROCID SLURM_NTASKS SLURM_LOCALID SLURM_NTASKS_PER_NODE ...      (used when absent)
//   SHARDSCOPE_RDZV_FILE   with MASTER_PORT=0: rank 0 listens on a free port and writes it to
//                          this file; the other ranks read it (local runs never collide).
//   SHARDSCOPE_RDZV_TOKEN  the run's secret, drawn by Shardscope's launchers and passed in the
//                          environment (never the command line): every rank proves it knows it
//                          before it registers at the store (ProcessGroup::create).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "spec/result.h"

namespace shardscope::dist {

struct Rendezvous {
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: rank 0 picks a free port and publishes it through port_file
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string port_file;  // SHARDSCOPE_RDZV_FILE
  std::string token;      // SHARDSCOPE_RDZV_TOKEN ("" when the launcher gave none)
  std::string source;     // "torchrun", "slurm" or "single": where the values came from

  /// Index of this rank's node, when nodes have local_world_size ranks each.
  int node_rank() const { return rank / local_world_size; }
  int num_nodes() const { return world_size / local_world_size; }
};

/// Reads a variable; the default reads the process environment (tests pass their own).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup process_env();

/// Builds the rendezvous from torchrun's variables, else Slurm's, else a single process.
/// Errors name the variable and the fix, e.g. "RANK=2 is not below WORLD_SIZE=2".
Result<Rendezvous> rendezvous_from_env(const EnvLookup& env = process_env());

/// Rank 0: publishes the port it listens on (write to a temporary name, then rename).
Result<void> publish_port(const std::string& port_file, int port);

/// What a rank presents for the run's token at the store: sha256 of the token, the nonce rank 0
/// drew for this store and who presents it ("rank 3", "server"), so the token itself never
/// crosses the wire and a proof read from the store is no good for another store or rank.
std::string token_proof(const std::string& token, const std::string& nonce, const std::string& who);

/// Other ranks: waits for rank 0's port, up to `timeout`.
Result<int> wait_for_port(const std::string& port_file, std::chrono::milliseconds timeout);

}  // namespace shardscope::dist
