#include "trainer/cli/estimate.h"

#include <cstdio>

#include "trainer/base/fatal.h"
#include "trainer/spec/estimate.h"

namespace shardscope::trainer {

int run_estimate(const EstimateOptions& options) {
  auto exp = spec::load_experiment(options.config, options.overrides);
  SHARD_CHECK_OK(exp, spec::ErrorKind::config, "fix the experiment file");
  const int local =
      options.local_world_size > 0 ? options.local_world_size : exp->launch.nproc_per_node;
  const int world =
      options.world_size > 0 ? options.world_size : exp->launch.nnodes * exp->launch.nproc_per_node;
  auto estimate = spec::estimate_memory(*exp, world, local);
  SHARD_CHECK_OK(estimate, spec::ErrorKind::config, "fix the experiment file or the world shape");
  if (options.json) {
    std::printf("%s\n", spec::estimate_json(*estimate).c_str());
  } else {
    std::printf("%s", spec::format_estimate(*estimate).c_str());
  }
  return kExitOk;
}

}  // namespace shardscope::trainer
