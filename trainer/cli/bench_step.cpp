#include "trainer/cli/bench_step.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/tokens.h"
#include "trainer/base/fatal.h"
#include "trainer/dist/process_group.h"
#include "trainer/model/lora.h"
#include "trainer/model/qwen2.h"
#include "trainer/model/qwen2vl.h"
#include "trainer/run/memory.h"
#include "trainer/run/step_runner.h"
#include "trainer/shard/engine.h"

namespace shardscope::trainer {
namespace {

using spec::ErrorKind;
using Clock = std::chrono::steady_clock;

std::unique_ptr<model::Model> build_model(const spec::ModelSection& m) {
  if (m.arch == "tiny") return std::make_unique<model::Qwen2Model>(model::tiny_config(m));
  return model::load_hf_model(m.path);
}

std::int64_t vocab_of(const spec::ModelSection& m, const model::Model& built) {
  if (m.arch == "tiny") return m.tiny_vocab_size;
  return static_cast<const model::Qwen2VLModel&>(built).config().text.vocab_size;
}

/// The first `batch` samples of data.train_path: ids and labels (B, T), and the loss tokens.
model::Batch first_batch(const spec::Experiment& exp, std::int64_t vocab, double& loss_tokens) {
  SHARD_CHECK(exp.data.format == "tokens", ErrorKind::config,
              "bench-step reads pre-tokenized samples; data.format is \"" + exp.data.format + "\"",
              "set data.format = \"tokens\" and point data.train_path at {\"input_ids\": [...]} "
              "lines");
  auto samples = data::load_token_samples(exp.data.train_path, exp.data.seq_len, vocab);
  SHARD_CHECK_OK(samples, ErrorKind::data, "fix the line, or point data.train_path elsewhere");
  const auto B = exp.train.batch_size;
  SHARD_CHECK(static_cast<std::int64_t>(samples->size()) >= B, ErrorKind::data,
              exp.data.train_path + " has " + std::to_string(samples->size()) +
                  " samples, fewer than train.batch_size (" + std::to_string(B) + ")",
              "write more samples or lower train.batch_size");
  const auto T = exp.data.seq_len;
  auto ids = at::empty({B, T}, at::kLong);     // (B, T)
  auto labels = at::empty({B, T}, at::kLong);  // (B, T)
  loss_tokens = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& s = (*samples)[static_cast<std::size_t>(b)];
    std::memcpy(ids[b].data_ptr<std::int64_t>(), s.input_ids.data(), T * sizeof(std::int64_t));
    std::memcpy(labels[b].data_ptr<std::int64_t>(), s.labels.data(), T * sizeof(std::int64_t));
    loss_tokens += static_cast<double>(data::loss_tokens(s));
  }
  return {ids, labels};
}

/// One forward+backward pass and the dropping of its gradients.
struct Pass {
  std::function<double()> run;  // returns the scaled loss
  std::function<void()> clear;  // drops the gradients (untimed)
};

}  // namespace

int run_bench_step(const BenchStepOptions& options) {
  install_counting_allocator();  // the allocator `train` runs with
  auto exp = spec::load_experiment(options.config, options.overrides);
  SHARD_CHECK_OK(exp, ErrorKind::config, "fix the experiment file and start again");
  SHARD_CHECK(options.iters >= 1 && options.warmup >= 0, ErrorKind::config,
              "bench-step: --iters must be >= 1 and --warmup >= 0", "pass e.g. --iters 5");
  at::set_num_threads(exp->train.threads > 0 ? exp->train.threads : at::get_num_threads());
  auto model = build_model(exp->model);
  for (const auto& target : model::apply_lora(*model, exp->lora))
    SHARD_FAIL(ErrorKind::config, "lora.target_modules: \"" + target + "\" selects no module",
               "use q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj");
  double tokens = 0;
  const auto batch = first_batch(*exp, vocab_of(exp->model, *model), tokens);
  const double scale = 1.0 / std::max(1.0, tokens);

  auto world = dist::ProcessGroup::single();
  auto shard_group = dist::ProcessGroup::single();
  auto replicate = dist::ProcessGroup::single();
  std::unique_ptr<shard::ShardEngine> engine;
  std::unique_ptr<StepRunner> plain;
  Pass pass;
  if (options.plain) {
    plain = make_reference_runner(*model, *exp);
    pass = {[&] { return plain->micro_step(batch, scale, true); }, [&] { plain->zero_grads(); }};
  } else {
    engine = std::make_unique<shard::ShardEngine>(
        *model, exp->shard, shard::Groups{&world, &shard_group, &replicate}, nullptr);
    engine->init_params(exp->train.seed);
    engine->set_loss_chunk_tokens(exp->train.loss_chunk_tokens);
    pass = {[&] { return engine->forward_backward(batch, scale, true); },
            [&] { engine->zero_grads(); }};
  }

  const char* peak_env = std::getenv("SHARDSCOPE_PEAK_FLOPS");
  const double peak = peak_env != nullptr ? std::atof(peak_env) : 0.0;
  const double flops_token = model->flops_per_token(exp->data.seq_len);
  const auto n_tokens = static_cast<double>(batch.input_ids.numel());
  // The first line names the FLOPs per token the `mfu` fields divide by (for the benchmarks).
  events().write(spec::HelloEvent{1,
                                  1,
                                  "bench-step",
                                  {},
                                  model->params_total(),
                                  model->params_trainable(),
                                  0,
                                  std::nullopt,
                                  flops_token});
  std::vector<double> rates;
  for (int i = 0; i < options.warmup + options.iters; ++i) {
    const auto t0 = Clock::now();
    const double loss = pass.run();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    pass.clear();
    if (i < options.warmup) continue;
    const double tps = n_tokens / secs;
    rates.push_back(tps);
    events().write(spec::StepEvent{static_cast<std::int64_t>(rates.size()), loss, 0.0, 0.0, tps,
                                   peak > 0 ? flops_token * tps / peak : 0.0, 0, 0});
  }
  std::sort(rates.begin(), rates.end());
  const auto mid = rates.size() / 2;
  const double median = rates.size() % 2 == 1 ? rates[mid] : 0.5 * (rates[mid - 1] + rates[mid]);
  events().write(spec::DoneEvent{
      spec::DoneStatus::complete, {median}, false, static_cast<std::int64_t>(rates.size())});
  return kExitOk;
}

}  // namespace shardscope::trainer
