// `shardtrain estimate CONFIG [--world-size N --local-world-size M] [--json]`: the per-rank
// memory estimate of spec, without LibTorch work or peers.
#pragma once

#include <string>
#include <vector>

namespace shardscope::trainer {

struct EstimateOptions {
  std::string config;
  int world_size = 0;        // 0: launch.nnodes * launch.nproc_per_node
  int local_world_size = 0;  // 0: launch.nproc_per_node
  bool json = false;
  std::vector<std::string> overrides;
};

int run_estimate(const EstimateOptions& options);

}  // namespace shardscope::trainer
