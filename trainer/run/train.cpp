#include "trainer/run/train.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "trainer/ckpt/checkpoint.h"
#include "trainer/data/tokens.h"
#include "trainer/dist/process_group.h"
#include "trainer/dist/rendezvous.h"
#include "trainer/model/qwen2.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/schedule.h"
#include "trainer/run/fatal.h"
#include "trainer/run/memory.h"
#include "trainer/run/step_runner.h"
#include "trainer/shard/engine.h"
#include "trainer/spec/estimate.h"
#include "trainer/spec/version.h"

namespace shardscope::trainer {
namespace {

using spec::ErrorKind;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop_requested{false};
extern "C" void on_stop_signal(int /*sig*/) { g_stop_requested.store(true); }

/// The engine behind the StepRunner seam.
class EngineRunner final : public StepRunner {
 public:
  EngineRunner(const model::Model& model, const spec::Experiment& exp, shard::Groups groups,
               shard::Trace* trace)
      : m_engine(model, exp.shard, groups, trace) {
    m_engine.init_params(exp.train.seed);
    m_optimizer = std::make_unique<optim::ShardedAdamW>(m_engine.trainable_flats(), exp.train);
    m_engine.trace_optimizer_state(m_optimizer->exp_avg(), m_optimizer->exp_avg_sq());
  }
  double micro_step(const model::Batch& b, double scale, bool reduce) override {
    return m_engine.forward_backward(b, scale, reduce);
  }
  void set_position(std::int64_t step, int micro) override { m_engine.set_position(step, micro); }
  double eval_step(const model::Batch& b, double scale) override {
    return m_engine.forward_only(b, scale);
  }
  double grad_norm() override { return m_engine.grad_norm(); }
  void scale_grads(double f) override { m_engine.scale_grads(f); }
  bool grads_nonfinite() override { return m_engine.grads_nonfinite(); }
  void optimizer_step(double lr) override { m_optimizer->step(lr); }
  void zero_grads() override { m_engine.zero_grads(); }
  ckpt::NamedTensors full_state() override { return m_engine.full_state(); }
  shard::ShardEngine& engine() { return m_engine; }
  optim::ShardedAdamW& optimizer() { return *m_optimizer; }

 private:
  shard::ShardEngine m_engine;
  std::unique_ptr<optim::ShardedAdamW> m_optimizer;
};

/// Process groups of one rank for the configured strategy.
struct RankGroups {
  dist::ProcessGroup world;
  dist::ProcessGroup shard;
  dist::ProcessGroup replicate;
};

RankGroups make_groups(const dist::Rendezvous& r, spec::ShardStrategy strategy, int timeout_s) {
  auto world = r.world_size > 1 ? dist::ProcessGroup::create(r, {std::chrono::seconds(timeout_s)})
                                : dist::ProcessGroup::single();
  const int W = r.world_size;
  const int L = r.local_world_size;
  std::vector<int> all(static_cast<std::size_t>(W));
  for (int i = 0; i < W; ++i) all[static_cast<std::size_t>(i)] = i;
  switch (strategy) {
    case spec::ShardStrategy::no_shard:
      return {world, dist::ProcessGroup::single(), world.subgroup("replicate", all)};
    case spec::ShardStrategy::hybrid_shard: {
      std::vector<int> node;
      std::vector<int> replicas;
      node.reserve(static_cast<std::size_t>(L));
      replicas.reserve(static_cast<std::size_t>(W / L));
      for (int i = 0; i < L; ++i) node.push_back(r.node_rank() * L + i);
      for (int n = 0; n < W / L; ++n) replicas.push_back(n * L + r.local_rank);
      auto shard = world.subgroup("node", node);
      auto replicate = world.subgroup("replica", replicas);
      return {std::move(world), std::move(shard), std::move(replicate)};
    }
    default:
      break;
  }
  auto shard = world.subgroup("shard", all);
  return {std::move(world), std::move(shard), dist::ProcessGroup::single()};
}

/// The batch of the given samples: (B, T) ids and labels.
model::Batch make_batch(const std::vector<data::TokenSample>& samples,
                        const std::vector<std::int64_t>& indices) {
  const auto B = static_cast<std::int64_t>(indices.size());
  const auto T = static_cast<std::int64_t>(samples.front().input_ids.size());
  auto ids = at::empty({B, T}, at::kLong);
  auto labels = at::empty({B, T}, at::kLong);
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& s = samples[static_cast<std::size_t>(indices[static_cast<std::size_t>(b)])];
    std::memcpy(ids[b].data_ptr<std::int64_t>(), s.input_ids.data(), T * sizeof(std::int64_t));
    std::memcpy(labels[b].data_ptr<std::int64_t>(), s.labels.data(), T * sizeof(std::int64_t));
  }
  return {ids, labels};
}

/// Peak fp32 GEMM FLOP/s of this process's threads, measured (or SHARDSCOPE_PEAK_FLOPS).
double gemm_peak_flops() {
  if (const char* env = std::getenv("SHARDSCOPE_PEAK_FLOPS"); env && *env) return std::atof(env);
  const std::int64_t n = 512;
  auto a = at::randn({n, n});
  auto b = at::randn({n, n});
  auto c = at::mm(a, b);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    at::mm_out(c, a, b);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return 2.0 * n * n * n / best;
}

/// Samples of rank r of W for a step starting at global offset `base`: base + r + k W.
std::vector<std::int64_t> rank_samples(data::SampleOrder& order, std::int64_t base,
                                       std::int64_t batch, int rank, int world) {
  std::vector<std::int64_t> out;
  for (std::int64_t k = rank; k < batch; k += world) out.push_back(order.at(base + k));
  return out;
}

struct Loop {
  const spec::Experiment& exp;
  const TrainOptions& options;
  const model::Model& model;
  StepRunner& runner;
  EngineRunner* engine_runner;  // null for the reference
  RankGroups& groups;
  const dist::Rendezvous& rdzv;
  std::vector<data::TokenSample>& samples;
  std::vector<data::TokenSample>& eval_samples;
  std::string config_hash;
  spec::PrecisionDTypes precision;
  double grad_scale = 1.0;  // fp16 gradient scaler: the loss is multiplied by it
  int good_steps = 0;       // steps since the scale last changed
  bool skipped = false;     // the last step found inf/NaN gradients and did not update

  std::int64_t micro_batch() const {
    const auto per_rank = exp.train.batch_size / rdzv.world_size;
    return exp.train.micro_batch_size > 0 ? exp.train.micro_batch_size : per_rank;
  }

  // One optimizer step; returns the step's mean loss and sets grad_norm.
  double train_step(data::SampleOrder& order, std::int64_t base, double& grad_norm) {
    auto mine = rank_samples(order, base, exp.train.batch_size, rdzv.rank, rdzv.world_size);
    auto count = at::zeros({1}, at::kDouble);
    for (auto i : mine)
      count += static_cast<double>(data::loss_tokens(samples[static_cast<std::size_t>(i)]));
    groups.world.all_reduce_sum(count);
    const double tokens = std::max(1.0, count.item<double>());
    const auto mb = micro_batch();
    double local = 0;
    for (std::size_t start = 0; start < mine.size(); start += static_cast<std::size_t>(mb)) {
      std::vector<std::int64_t> part(
          mine.begin() + static_cast<std::ptrdiff_t>(start),
          mine.begin() + static_cast<std::ptrdiff_t>(
                             std::min(mine.size(), start + static_cast<std::size_t>(mb))));
      const bool last = start + static_cast<std::size_t>(mb) >= mine.size();
      runner.set_position(base / exp.train.batch_size + 1,
                          static_cast<int>(start / static_cast<std::size_t>(mb)));
      local += runner.micro_step(make_batch(samples, part), grad_scale / tokens,
                                 last || exp.shard.reduce_every_microstep);
    }
    auto loss = at::full({1}, local / grad_scale, at::kDouble);
    groups.world.all_reduce_sum(loss);
    skipped = false;
    if (precision.grad_scaler) {
      // A sharded scaler: every rank checks its own shards, the flag is all-reduced.
      if (runner.grads_nonfinite()) {
        skipped = true;
        grad_scale /= 2.0;
        good_steps = 0;
        runner.zero_grads();
        grad_norm = std::nan("");
        return loss.item<double>();
      }
      runner.scale_grads(1.0 / grad_scale);
      if (++good_steps == 2000) {
        grad_scale *= 2.0;
        good_steps = 0;
      }
    }
    grad_norm = runner.grad_norm();
    if (exp.train.grad_clip > 0) {
      const double coef = exp.train.grad_clip / (grad_norm + 1e-6);
      if (coef < 1.0) runner.scale_grads(coef);
    }
    return loss.item<double>();
  }

  // eval.batches batches of batch_size samples from the start of the eval file, the loss
  // normalized like training's. Only "loss" is reported so far ("accuracy" needs the logits).
  void evaluate(std::int64_t step) {
    data::SampleOrder order(static_cast<std::int64_t>(eval_samples.size()), 0, false);
    double sum = 0;
    double count_all = 0;
    for (std::int64_t b = 0; b < exp.eval.batches; ++b) {
      auto mine = rank_samples(order, b * exp.train.batch_size, exp.train.batch_size, rdzv.rank,
                               rdzv.world_size);
      double count = 0;
      for (auto i : mine)
        count += static_cast<double>(data::loss_tokens(eval_samples[static_cast<std::size_t>(i)]));
      sum += runner.eval_step(make_batch(eval_samples, mine), 1.0);
      count_all += count;
    }
    auto totals = at::tensor({sum, count_all}, at::kDouble);
    groups.world.all_reduce_sum(totals);
    const double loss = totals[0].item<double>() / std::max(1.0, totals[1].item<double>());
    if (rdzv.rank == 0) events().write(spec::EvalEvent{step, {{"loss", loss}}});
    last_eval = loss;
  }
  double last_eval = std::nan("");

  bool stop_agreed() {
    auto flag = at::full({1}, g_stop_requested.load() ? 1.0F : 0.0F);
    groups.world.all_reduce_max(flag);
    return flag.item<float>() > 0;
  }

  std::int64_t comm_bytes(bool gather) const {
    std::int64_t n = 0;
    for (const auto* g : {&groups.world, &groups.shard, &groups.replicate})
      n += gather ? g->counters().all_gather_bytes : g->counters().reduce_scatter_bytes;
    return n;
  }

  void checkpoint(std::int64_t step, std::int64_t offset) {
    if (!engine_runner) return;
    auto rel =
        ckpt::save_checkpoint(options.run_dir, engine_runner->engine(), engine_runner->optimizer(),
                              {step, offset, 1.0}, config_hash, groups.world, exp.train.ckpt_keep);
    if (rdzv.rank == 0) events().write(spec::CkptEvent{step, rel, "sharded"});
  }

  int run() {
    data::SampleOrder order(static_cast<std::int64_t>(samples.size()), exp.train.seed,
                            exp.data.shuffle);
    std::int64_t step = 0;
    if (!options.resume.empty() && engine_runner) {
      std::string dir =
          options.resume == "auto" ? ckpt::find_latest_checkpoint(options.run_dir) : options.resume;
      if (!dir.empty()) {
        auto pos = ckpt::load_checkpoint(dir, engine_runner->engine(), engine_runner->optimizer());
        step = pos.step;
        events().write(
            spec::LogEvent{"info", "resumed from " + dir + " at step " + std::to_string(step)});
      }
    }
    const double peak = rdzv.rank == 0 ? gemm_peak_flops() : 0.0;
    const double flops_token = model.flops_per_token(exp.data.seq_len);
    double last_loss = 0;
    bool stopped = false;
    while (step < exp.train.max_steps) {
      const auto ag0 = comm_bytes(true);
      const auto rs0 = comm_bytes(false);
      const auto t0 = Clock::now();
      double grad_norm = 0;
      const double loss = train_step(order, step * exp.train.batch_size, grad_norm);
      const double lr = optim::lr_at(exp.train, step);
      if (!skipped) runner.optimizer_step(lr);
      runner.zero_grads();
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      ++step;
      last_loss = loss;
      const double tps = static_cast<double>(exp.train.batch_size * exp.data.seq_len) / secs;
      if (rdzv.rank == 0 && (step % exp.train.log_every == 0 || step == exp.train.max_steps)) {
        const double mfu = peak > 0 ? flops_token * tps / (peak * rdzv.world_size) : 0.0;
        events().write(spec::StepEvent{step, loss, lr, grad_norm, tps, mfu, comm_bytes(true) - ag0,
                                       comm_bytes(false) - rs0});
      }
      if (exp.train.mem_every > 0 && step % exp.train.mem_every == 0) {
        auto m = memory_stats();
        events().write(spec::MemEvent{step, m.allocated, m.reserved, m.peak, m.rss});
      }
      if (exp.eval.every > 0 && !eval_samples.empty() && step % exp.eval.every == 0) evaluate(step);
      if (exp.train.ckpt_every > 0 && step % exp.train.ckpt_every == 0 &&
          step < exp.train.max_steps)
        checkpoint(step, step * exp.train.batch_size);
      if (stop_agreed()) {
        stopped = true;
        break;
      }
    }
    if (exp.train.ckpt_at_end || (stopped && exp.train.ckpt_every > 0))
      checkpoint(step, step * exp.train.batch_size);
    if (!options.dump_params.empty()) {
      auto state = runner.full_state();
      if (rdzv.rank == 0) ckpt::write_safetensors(options.dump_params, state);
    }
    groups.world.barrier();
    const double objective = std::isnan(last_eval) ? last_loss : last_eval;
    events().write(spec::DoneEvent{stopped ? spec::DoneStatus::stopped : spec::DoneStatus::complete,
                                   {objective},
                                   false,
                                   step});
    return kExitOk;
  }
};

std::vector<data::TokenSample> load_data(const spec::Experiment& exp, const std::string& path) {
  SHARD_CHECK(exp.data.format == "tokens", ErrorKind::config,
              "data.format = \"" + exp.data.format + "\" is not supported by this trainer yet",
              "use data.format = \"tokens\" (pre-tokenized JSONL)");
  auto samples = data::load_token_samples(path, exp.data.seq_len, exp.model.tiny_vocab_size);
  SHARD_CHECK_OK(samples, ErrorKind::data,
                 "fix the line, or point data.train_path at another file");
  return std::move(*samples);
}

std::int64_t estimate_total(const spec::Experiment& exp, const dist::Rendezvous& r) {
  auto e = spec::estimate_memory(exp, r.world_size, r.local_world_size);
  return e ? e->total : 0;
}

}  // namespace

int run_train(const TrainOptions& options) {
  install_counting_allocator();
  auto exp = spec::load_experiment(options.config, options.overrides);
  SHARD_CHECK_OK(exp, ErrorKind::config, "fix the experiment file and start again");
  auto rdzv = dist::rendezvous_from_env();
  SHARD_CHECK_OK(rdzv, ErrorKind::config,
                 "set RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE consistently (torchrun "
                 "and srun do), or none of them for a single process");
  set_event_rank(rdzv->rank);
  // Everything that can be checked without peers is checked before the first collective.
  auto valid = spec::validate_for_world(*exp, rdzv->world_size, rdzv->local_world_size);
  SHARD_CHECK_OK(valid, ErrorKind::config, "fix the experiment file or the launch shape");
  SHARD_CHECK(exp->model.arch == "tiny", ErrorKind::config,
              "model.arch = \"" + exp->model.arch + "\" is not available in this build yet",
              "use model.arch = \"tiny\"");
  at::set_num_threads(exp->train.threads > 0 ? exp->train.threads : at::get_num_threads());
  if (exp->train.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);

  model::Qwen2Model model(model::tiny_config(exp->model));
  // Validation checked train.freeze against the tiny model; a checkpoint's names are known here,
  // before any collective.
  for (const auto& glob : model.freeze(exp->train))
    SHARD_FAIL(ErrorKind::config,
               "train.freeze: pattern \"" + glob + "\" matches no parameter of the model",
               "use Hugging Face names such as \"model.layers.0.*\"");
  auto samples = load_data(*exp, exp->data.train_path);
  std::vector<data::TokenSample> eval_samples;
  if (exp->eval.every > 0 && !exp->data.eval_path.empty())
    eval_samples = load_data(*exp, exp->data.eval_path);
  auto groups = make_groups(*rdzv, exp->shard.strategy, 60);
  shard::Trace trace;
  if (!options.trace.empty()) trace.open(options.trace, rdzv->rank);
  std::unique_ptr<StepRunner> runner;
  EngineRunner* engine_runner = nullptr;
  if (options.reference) {
    SHARD_CHECK(rdzv->world_size == 1, ErrorKind::config, "--reference runs on one process",
                "start it without a rendezvous environment");
    runner = make_reference_runner(model, *exp);
  } else {
    auto er = std::make_unique<EngineRunner>(
        model, *exp, shard::Groups{&groups.world, &groups.shard, &groups.replicate},
        options.trace.empty() ? nullptr : &trace);
    engine_runner = er.get();
    runner = std::move(er);
  }
  const auto hash = spec::config_hash(*exp);
  events().write(spec::HelloEvent{rdzv->world_size,
                                  rdzv->local_world_size,
                                  hash,
                                  {{"shardtrain", kVersion},
                                   {"torch", TORCH_VERSION},
                                   {"backend", groups.world.backend_name()}},
                                  model.params_total(),
                                  model.params_trainable(),
                                  estimate_total(*exp, *rdzv)});
  Loop loop{*exp,
            options,
            model,
            *runner,
            engine_runner,
            groups,
            *rdzv,
            samples,
            eval_samples,
            hash,
            spec::resolve_precision(exp->shard)};
  if (loop.precision.grad_scaler) loop.grad_scale = 65536.0;
  return loop.run();
}

}  // namespace shardscope::trainer
