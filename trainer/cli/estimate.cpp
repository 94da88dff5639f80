#include "trainer/cli/estimate.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "data/inspect.h"
#include "spec/estimate.h"
#include "trainer/base/fatal.h"
#include "trainer/dist/device.h"

namespace shardscope::trainer {
namespace {

// What this machine has: the GPU rank 0 would use (shard.device's rule) and its memory.
spec::DetectedMemory detect_here(const spec::Experiment& exp) {
  spec::DetectedMemory d;
  const auto host = dist::describe(c10::Device(c10::kCPU));
  d.host_bytes = host.memory_bytes;
  d.host_source = "this machine";
  if (exp.shard.device == "cpu") return d;
  const auto device = dist::choose_device(exp.shard.device, 0);
  if (device.is_cuda()) {
    const auto info = dist::describe(device);
    d.gpu_bytes = info.memory_bytes;
    d.gpu_source = "this machine's GPU " + std::to_string(device.index()) + " (" + info.name + ")";
  }
  return d;
}

}  // namespace

int run_estimate(const EstimateOptions& options) {
  auto exp = spec::load_experiment(options.config, options.overrides);
  SHARD_CHECK_OK(exp, spec::ErrorKind::config, "fix the experiment file");
  const int local =
      options.local_world_size > 0 ? options.local_world_size : exp->launch.nproc_per_node;
  const int world =
      options.world_size > 0 ? options.world_size : exp->launch.nnodes * exp->launch.nproc_per_node;
  // The configuration and the model folder first (a configuration error), then chat data bounds
  // the rows by what its samples hold, as the trainer's hello does (a data error).
  auto estimate = spec::estimate_memory(*exp, world, local);
  SHARD_CHECK_OK(estimate, spec::ErrorKind::config,
                 "fix the experiment file, the model folder or the world shape");
  auto bound = data::train_data_bound(*exp);
  SHARD_CHECK_OK(bound, spec::ErrorKind::data, "fix the data file or model.path's tokenizer");
  if (*bound) {
    estimate = spec::estimate_memory(*exp, world, local, &**bound);
    SHARD_CHECK_OK(estimate, spec::ErrorKind::config, "fix the experiment file");
  }
  auto budget = spec::device_budget(*exp, detect_here(*exp));
  SHARD_CHECK_OK(budget, spec::ErrorKind::config, "fix the experiment file");
  if (options.json) {
    auto out = nlohmann::json::parse(spec::estimate_json(*estimate));
    out["budget"] = {
        {"bytes", budget->bytes},
        {"source", budget->source},
        {"gpu", budget->gpu},
        {"fits", budget->bytes <= 0 || spec::budgeted_bytes(*estimate, *budget) <= budget->bytes}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("%s%s", spec::format_estimate(*estimate).c_str(),
                spec::format_budget(*estimate, *budget).c_str());
  }
  return kExitOk;
}

}  // namespace shardscope::trainer
