// The communication libraries' settings a rank puts into its own environment before its process
// group exists (NCCL and PyTorch's NCCL wrapper read them once, when the group is made):
//
//   NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME  "lo" when every rank runs on this host; otherwise
//                                           the interface this host reaches MASTER_ADDR through
//   TORCH_NCCL_ASYNC_ERROR_HANDLING=3       a collective that fails or outlives its timeout ends
//                                           the process instead of hanging it (the rank's own
//                                           watchdog reports the lost peer before that timeout)
//   TORCH_NCCL_DUMP_ON_TIMEOUT=0            no flight-recorder dump on the way out
//
// A variable the user set (launch.env, the shell, the cluster's module) is never overridden.
// Torch-free, so tests read what a rank would set without starting one.
#pragma once

#include <string>
#include <vector>

#include "trainer/dist/rendezvous.h"

namespace shardscope::dist {

struct EnvSetting {
  std::string name;
  std::string value;
  std::string why;  // one clause, for the rank's log
};

/// This host's network interface whose address routes to `addr` ("lo" for a loopback address);
/// "" when `addr` does not resolve or no interface reaches it. Sends nothing.
std::string interface_toward(const std::string& addr);

/// The settings rank `r` needs, leaving out every variable `env` already has.
/// `interface_of` finds the interface toward an address (tests pass their own).
std::vector<EnvSetting> comm_environment(
    const Rendezvous& r, const EnvLookup& env = process_env(),
    const std::function<std::string(const std::string&)>& interface_of = interface_toward);

/// Whether a CUDA rank of several sends its tensors through NCCL (shard.backend): "nccl" always,
/// "gloo" never, "auto" when every local rank has a GPU of its own (local_world_size <= the
/// visible GPUs). Ranks that share a GPU go through Gloo staged in host memory, as NCCL refuses
/// two ranks on one device; `why` (when given) then says so.
bool use_nccl(const std::string& backend, const Rendezvous& r, int visible_gpus,
              std::string* why = nullptr);

/// Sets each variable in this process's environment, never overwriting one that is set.
void apply_environment(const std::vector<EnvSetting>& settings);

}  // namespace shardscope::dist
