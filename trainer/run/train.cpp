#include "trainer/run/train.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "data/text/packing.h"
#include "data/text/sft_prepare.h"
#include "data/tokens.h"
#include "spec/device_peaks.h"
#include "spec/estimate.h"
#include "spec/version.h"
#include "trainer/base/fatal.h"
#include "trainer/base/phase_clock.h"
#include "trainer/ckpt/checkpoint.h"
#include "trainer/ckpt/export.h"
#include "trainer/dist/comm_env.h"
#include "trainer/dist/device.h"
#include "trainer/dist/nccl_backend.h"
#include "trainer/dist/oom_watch.h"
#include "trainer/dist/process_group.h"
#include "trainer/dist/rendezvous.h"
#include "trainer/model/dense.h"
#include "trainer/model/lora.h"
#include "trainer/model/qwen2.h"
#include "trainer/model/qwen2vl.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/schedule.h"
#include "trainer/run/generate.h"
#include "trainer/run/human_log.h"
#include "trainer/run/memory.h"
#include "trainer/run/probes.h"
#include "trainer/run/sft_batch.h"
#include "trainer/run/step_runner.h"
#include "trainer/run/sys_sampler.h"
#include "trainer/shard/engine.h"

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
               shard::Trace* trace, c10::Device device)
      : m_engine(model, exp.shard, groups, trace, device) {
    m_engine.init_params(exp.train.seed);
    m_engine.set_loss_chunk_tokens(exp.train.loss_chunk_tokens);
    if (trace != nullptr) {
      const auto m = memory_stats();
      trace->loaded(m.allocated, m.peak, m.rss);
    }
    m_optimizer = std::make_unique<optim::ShardedAdamW>(m_engine.trainable_flats(), exp.train,
                                                        exp.shard.offload_optimizer);
    m_engine.trace_optimizer_state(m_optimizer->exp_avg(), m_optimizer->exp_avg_sq());
  }
  double micro_step(const model::Batch& b, double scale, bool reduce) override {
    return m_engine.forward_backward(b, scale, reduce);
  }
  void set_position(std::int64_t step, int micro) override { m_engine.set_position(step, micro); }
  double eval_step(const model::Batch& b, double scale) override {
    return m_engine.forward_only(b, scale);
  }
  bool hold_gathered(bool on, std::int64_t* bytes) override {
    return m_engine.hold_gathered(on, bytes);
  }
  double grad_norm() override { return m_engine.grad_norm(); }
  void scale_grads(double f) override { m_engine.scale_grads(f); }
  bool grads_nonfinite() override { return m_engine.grads_nonfinite(); }
  void optimizer_step(double lr) override { m_optimizer->step(lr); }
  void zero_grads() override { m_engine.zero_grads(); }
  ckpt::NamedTensors full_state() override { return m_engine.full_state(); }
  ckpt::NamedTensors full_grads() override { return m_engine.full_grads(); }
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

RankGroups make_groups(const dist::Rendezvous& r, spec::ShardStrategy strategy,
                       const dist::GroupOptions& options) {
  auto world =
      r.world_size > 1 ? dist::ProcessGroup::create(r, options) : dist::ProcessGroup::single();
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

/// Training or eval samples: pre-tokenised rows (data.format = "tokens", padded to seq_len) or
/// SFT conversations (data.format = "chat": ids, labels and image patches, padded per batch).
struct Dataset {
  std::vector<data::TokenSample> tokens;
  std::vector<data::PreparedSample> chat;
  std::int64_t pad_id = 0;  // chat padding id (masked)

  std::int64_t size() const {
    return static_cast<std::int64_t>(chat.empty() ? tokens.size() : chat.size());
  }
  bool empty() const { return size() == 0; }
  std::int64_t loss_tokens(std::int64_t i) const {
    const auto k = static_cast<std::size_t>(i);
    return chat.empty() ? data::loss_tokens(tokens[k]) : data::loss_tokens(chat[k]);
  }
  model::Batch batch(const std::vector<std::int64_t>& indices) const {
    return chat.empty() ? make_batch(tokens, indices) : make_sft_batch(chat, indices, pad_id);
  }
  /// Tokens of sample i (chat: its length; token rows: seq_len, padding included).
  std::int64_t length(std::int64_t i) const {
    const auto k = static_cast<std::size_t>(i);
    return static_cast<std::int64_t>(chat.empty() ? tokens[k].input_ids.size()
                                                  : chat[k].input_ids.size());
  }
};

/// The GPU's dense peak for the compute dtype from the datasheet table (spec/device_peaks.h),
/// else a measured 4096^3 GEMM in that dtype on the device, with a log line naming the fallback.
double cuda_peak_flops(const dist::DeviceInfo& info, const spec::PrecisionDTypes& prec,
                       bool allow_tf32) {
  const auto compute = prec.autocast ? prec.autocast_dtype : prec.param;
  auto kind = compute == spec::DType::bf16   ? spec::PeakDType::bf16
              : compute == spec::DType::fp16 ? spec::PeakDType::fp16
              : allow_tf32                   ? spec::PeakDType::tf32
                                             : spec::PeakDType::fp32;
  if (auto peak = spec::dense_peak_flops(info.name, kind)) return *peak;
  const std::int64_t n = 4096;
  auto opts = at::TensorOptions().device(info.device).dtype(shard::to_scalar_type(compute));
  auto a = at::randn({n, n}, opts);
  auto b = at::randn({n, n}, opts);
  auto c = at::mm(a, b);
  const at::NoGradGuard no_grad;
  dist::synchronize(info.device);
  const auto t0 = Clock::now();
  for (int i = 0; i < 10; ++i) at::mm_out(c, a, b);
  dist::synchronize(info.device);
  const double peak =
      10 * 2.0 * n * n * n / std::chrono::duration<double>(Clock::now() - t0).count();
  report(spec::LogEvent{
      "warn", "MFU: \"" + info.name + "\" is not in the peak table; MFU is against a measured " +
                  std::to_string(static_cast<int>(peak / 1e12)) +
                  " TFLOP/s GEMM (set SHARDSCOPE_PEAK_FLOPS to the datasheet's dense peak)"});
  return peak;
}

/// Peak fp32 GEMM FLOP/s of this process's threads, measured: the best 512^3 GEMM of LibTorch's
/// BLAS and of the models' own dense() (oneDNN where it is faster), so MFU is against the fastest
/// GEMM this process can run.
double gemm_peak_flops() {
  const std::int64_t n = 512;
  auto a = at::randn({n, n});
  auto b = at::randn({n, n});
  auto c = at::mm(a, b);
  const at::NoGradGuard no_grad;
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    at::mm_out(c, a, b);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    c = model::dense(a, b);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return 2.0 * n * n * n / best;
}

using data::rank_samples;
using data::step_shares;

/// data.pack: the rows of one rank's share of a step (positions into `share`).
data::PackedRows pack_share(const Dataset& samples, const std::vector<std::int64_t>& share,
                            std::int64_t seq_len) {
  std::vector<std::int64_t> lengths;
  lengths.reserve(share.size());
  for (auto i : share) lengths.push_back(samples.length(i));
  auto rows = data::pack_rows(lengths, seq_len);
  SHARD_CHECK_OK(rows, ErrorKind::data, "the loader refuses samples longer than data.seq_len");
  return std::move(*rows);
}

/// data.pack's efficiency over the run's first epoch (or its steps, if fewer): real tokens over
/// row slots (rows x seq_len), every rank's rows counted (data::pack_efficiency, which the data
/// inspector shows too).
double pack_efficiency(const Dataset& samples, const spec::Experiment& exp, int world) {
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(samples.size()));
  for (std::int64_t i = 0; i < samples.size(); ++i)
    lengths[static_cast<std::size_t>(i)] = samples.length(i);
  const data::PackPlan plan{exp.train.batch_size, exp.train.max_steps, world, exp.train.seed,
                            exp.data.shuffle};
  auto efficiency = data::pack_efficiency(lengths, exp.data.seq_len, plan);
  SHARD_CHECK_OK(efficiency, ErrorKind::data,
                 "the loader refuses samples longer than data.seq_len");
  return *efficiency;
}

spec::PhasesEvent phases_event(std::int64_t step, const PhaseTimes& t) {
  spec::PhasesEvent e;
  e.step = step;
  e.wall = t.wall;
  e.data = t[Phase::data];
  e.forward = t[Phase::forward];
  e.backward = t[Phase::backward];
  e.optimizer = t[Phase::optimizer];
  e.comm_exposed = t[Phase::comm];
  e.comm_total = t.comm_total;
  e.copy = t[Phase::copy];
  e.other = t[Phase::other];
  return e;
}

struct Loop {
  const spec::Experiment& exp;
  const TrainOptions& options;
  const model::Model& model;
  StepRunner& runner;
  EngineRunner* engine_runner;  // null for the reference
  RankGroups& groups;
  const dist::Rendezvous& rdzv;
  const Dataset& samples;
  const Dataset& eval_samples;
  const data::SftPreparer* preparer;  // chat data's tokenizer (null for token data)
  std::string config_hash;
  spec::PrecisionDTypes precision;
  dist::DeviceInfo device;
  const ProbeSet* probes = nullptr;  // eval.probes (null or empty: none)
  std::int64_t probed_step = -1;     // the step of the last probe answers
  double grad_scale = 1.0;           // fp16 gradient scaler: the loss is multiplied by it
  int good_steps = 0;                // steps since the scale last changed
  bool skipped = false;              // the last step found inf/NaN gradients and did not update

  bool dumped_grads = false;  // --dump-grads written
  double step_tokens = 0;     // real tokens of the last step, all ranks (chat: padding excluded)
  shard::Trace* trace = nullptr;  // the per-unit trace when one is open

  std::int64_t micro_batch() const {
    const auto per_rank = exp.train.batch_size / rdzv.world_size;
    return exp.train.micro_batch_size > 0 ? exp.train.micro_batch_size : per_rank;
  }

  bool packing() const { return exp.data.pack && !samples.chat.empty(); }

  // This rank's micro-batches of a step, each a list of rows and each row positions into its
  // share (shares[rank]). One sample a row, micro_batch() samples at a time; or (data.pack) whole
  // samples packed into rows of seq_len, micro_batch() rows at a time, in as many micro-batches
  // as the rank that needs the most: every rank plans every rank's rows (all know the lengths),
  // so all run the same number of micro-steps and their collectives pair up.
  std::vector<std::vector<std::vector<std::int64_t>>> micro_batches(
      const std::vector<std::vector<std::int64_t>>& shares) const {
    const auto mb = static_cast<std::size_t>(micro_batch());
    const auto& mine = shares[static_cast<std::size_t>(rdzv.rank)];
    std::vector<std::vector<std::vector<std::int64_t>>> out;
    if (!packing()) {
      for (std::size_t j = 0; j < mine.size(); ++j) {
        if (j % mb == 0) out.emplace_back();
        out.back().push_back({static_cast<std::int64_t>(j)});
      }
      return out;
    }
    data::PackedRows own;
    std::size_t count = 1;
    for (std::size_t r = 0; r < shares.size(); ++r) {
      auto rows = pack_share(samples, shares[r], exp.data.seq_len);
      count = std::max(count, (rows.rows.size() + mb - 1) / mb);
      if (r == static_cast<std::size_t>(rdzv.rank)) own = std::move(rows);
    }
    data::split_rows(own, count);  // a row for every micro-batch (each share has >= count samples)
    SHARD_CHECK(own.rows.size() >= count, ErrorKind::internal,
                "rank " + std::to_string(rdzv.rank) + " packed " + std::to_string(mine.size()) +
                    " samples into fewer rows than the " + std::to_string(count) +
                    " micro-steps another rank runs",
                "give every rank the same number of samples a step");
    // Contiguous groups whose sizes differ by at most one (none above micro_batch()).
    const auto rows = own.rows.size();
    std::size_t next = 0;
    for (std::size_t k = 0; k < count; ++k) {
      const auto take = rows / count + (k < rows % count ? 1 : 0);
      out.emplace_back(own.rows.begin() + static_cast<std::ptrdiff_t>(next),
                       own.rows.begin() + static_cast<std::ptrdiff_t>(next + take));
      next += take;
    }
    return out;
  }

  // One optimizer step; returns the step's mean loss and sets grad_norm.
  double train_step(data::SampleOrder& order, std::int64_t base, double& grad_norm) {
    // Phases: data until the runner runs (its forward and backward name their own), then the
    // optimizer's part (the scaler's check, the norm and clipping); the caller ends the step.
    auto& clock = PhaseClock::process();
    clock.enter(Phase::data);
    const auto shares = step_shares(order, base, exp.train.batch_size, rdzv.world_size);
    const auto& mine = shares[static_cast<std::size_t>(rdzv.rank)];
    auto count = at::zeros({1}, at::kDouble);
    for (auto i : mine) count += static_cast<double>(samples.loss_tokens(i));
    groups.world.all_reduce_sum(count);
    const double tokens = std::max(1.0, count.item<double>());
    step_tokens = 0;
    for (const auto& share : shares)
      for (auto i : share) step_tokens += static_cast<double>(samples.length(i));
    const std::int64_t step = base / exp.train.batch_size + 1;
    // Dropout keys: mine[j] is the step's sample base + rank + j * world (rank_samples).
    std::vector<std::int64_t> keys;
    keys.reserve(mine.size());
    for (std::size_t j = 0; j < mine.size(); ++j)
      keys.push_back(base + rdzv.rank + static_cast<std::int64_t>(j) * rdzv.world_size);
    const auto micros = micro_batches(shares);
    double local = 0;
    for (std::size_t k = 0; k < micros.size(); ++k) {
      const auto& rows = micros[k];
      const bool last = k + 1 == micros.size();
      runner.set_position(step, static_cast<int>(k));
      clock.enter(Phase::data);
      model::Batch batch;
      if (packing()) {
        batch = make_packed_sft_batch(samples.chat, mine, rows, samples.pad_id, keys);
      } else {
        std::vector<std::int64_t> part;
        part.reserve(rows.size());
        for (const auto& row : rows) part.push_back(mine[static_cast<std::size_t>(row.front())]);
        batch = samples.batch(part);
        batch.dropout.samples.reserve(rows.size());
        for (const auto& row : rows)
          batch.dropout.samples.push_back(keys[static_cast<std::size_t>(row.front())]);
      }
      batch.dropout.seed = exp.train.seed;
      batch.dropout.step = step;
      clock.enter(Phase::other);
      local +=
          runner.micro_step(batch, grad_scale / tokens, last || exp.shard.reduce_every_microstep);
    }
    auto loss = at::full({1}, local / grad_scale, at::kDouble);
    groups.world.all_reduce_sum(loss);
    clock.enter(Phase::optimizer);
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
    if (!options.dump_grads.empty() && !dumped_grads) {  // this run's first step's gradients
      auto grads = runner.full_grads();  // collective: every rank gathers, rank 0 writes
      if (rdzv.rank == 0) ckpt::write_safetensors(options.dump_grads, grads);
      dumped_grads = true;
    }
    grad_norm = runner.grad_norm();
    if (exp.train.grad_clip > 0) {
      const double coef = exp.train.grad_clip / (grad_norm + 1e-6);
      if (coef < 1.0) runner.scale_grads(coef);
    }
    return loss.item<double>();
  }

  bool wants(const char* metric) const {
    return std::find(exp.eval.metrics.begin(), exp.eval.metrics.end(), metric) !=
           exp.eval.metrics.end();
  }

  // Answers of this rank's eval samples `mine` (exact_match, `shardtrain generate`).
  std::vector<GeneratedAnswer> generate_mine(const std::vector<std::int64_t>& mine,
                                             std::int64_t per_rank) {
    SHARD_CHECK(preparer != nullptr && !eval_samples.chat.empty(), ErrorKind::config,
                "generation needs chat eval samples (data.format = \"chat\", data.eval_path)",
                "set data.format = \"chat\" and data.eval_path");
    return generate_from(eval_samples.chat, mine, per_rank, exp.eval.max_new_tokens, "generation");
  }

  // Answers of this rank's `mine` of `from`, generated in batches of micro_batch() prompts;
  // `per_rank` is the largest share of any rank, so every rank runs the same number of batches.
  // Rank 0 logs the tokens and seconds under `label`.
  std::vector<GeneratedAnswer> generate_from(const std::vector<data::PreparedSample>& from,
                                             const std::vector<std::int64_t>& mine,
                                             std::int64_t per_rank, std::int64_t max_new_tokens,
                                             const std::string& label) {
    GenerateConfig config;
    config.max_new_tokens = max_new_tokens;
    config.do_sample = exp.eval.do_sample;
    config.temperature = exp.eval.temperature;
    config.top_p = exp.eval.top_p;
    config.seed = exp.train.seed;
    config.use_cache = !options.no_cache;
    config.pad_id = preparer->pad_id();
    const auto mb = micro_batch();
    auto forward = [this](const model::Batch& b) { runner.eval_step(b, 1.0); };
    auto any_running = [this](bool running) {
      auto flag = at::full({1}, running ? 1.0F : 0.0F);
      groups.world.all_reduce_max(flag);
      return flag.item<float>() > 0;
    };
    std::int64_t bytes = 0;
    const bool held = runner.hold_gathered(true, &bytes);
    const auto started = std::chrono::steady_clock::now();
    auto answers = generate_answers(model, from, mine, (per_rank + mb - 1) / mb, mb,
                                    preparer->tokenizer(), config, forward, any_running);
    runner.hold_gathered(false, nullptr);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    auto tokens = at::zeros({1}, at::kDouble);
    for (const auto& a : answers) tokens[0] += static_cast<double>(a.ids.size());
    groups.world.all_reduce_sum(tokens);
    if (rdzv.rank == 0) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "%s: %.0f tokens in %.2f s, %.1f tokens/s on %s (parameters %s, "
                    "%.1f MB a rank)",
                    label.c_str(), tokens[0].item<double>(), seconds,
                    tokens[0].item<double>() / std::max(seconds, 1e-9), device.name.c_str(),
                    held ? "gathered once" : "gathered per unit and token",
                    static_cast<double>(bytes) / 1e6);
      report(spec::LogEvent{"info", line});
    }
    return answers;
  }

  // eval.probes at `step`: rank r answers probes r, r + W, ... under the run's sharding with the
  // eval generation settings (at most eval.probe_max_new_tokens each); their ids are summed into
  // one (probes, 1 + max tokens) table of counts and ids, and rank 0 writes a `sample` event per
  // probe in file order. The log line "probes at step N: ..." gives the seconds spent.
  void run_probes(std::int64_t step) {
    const auto n = probes->size();
    const auto max_tokens = exp.eval.probe_max_new_tokens;
    std::vector<std::int64_t> mine;
    for (std::int64_t i = rdzv.rank; i < n; i += rdzv.world_size) mine.push_back(i);
    auto answers =
        generate_from(probes->prepared, mine, (n + rdzv.world_size - 1) / rdzv.world_size,
                      max_tokens, "probes at step " + std::to_string(step));
    auto table = at::zeros({n, 1 + max_tokens}, at::kDouble);  // (probes, 1 + max tokens)
    auto cells = table.accessor<double, 2>();
    for (const auto& a : answers) {
      cells[a.index][0] = static_cast<double>(a.ids.size());
      for (std::size_t k = 0; k < a.ids.size(); ++k)
        cells[a.index][static_cast<std::int64_t>(k) + 1] = static_cast<double>(a.ids[k]);
    }
    groups.world.all_reduce_sum(table);  // each row is filled by one rank only
    probed_step = step;
    if (rdzv.rank != 0) return;
    cells = table.accessor<double, 2>();
    for (std::int64_t i = 0; i < n; ++i) {
      std::vector<std::int64_t> ids;
      for (std::int64_t k = 0; k < static_cast<std::int64_t>(cells[i][0]); ++k)
        ids.push_back(static_cast<std::int64_t>(cells[i][k + 1]));
      report(sample_event(*probes, static_cast<std::size_t>(i), step,
                          decode_text(preparer->tokenizer(), ids),
                          static_cast<std::int64_t>(ids.size())));
    }
  }

  // Fraction of `answers` (this rank's) that match, over every rank.
  double match_rate(const std::vector<GeneratedAnswer>& answers) {
    auto counts = at::zeros({2}, at::kDouble);
    for (const auto& a : answers) {
      counts[0] += a.match ? 1.0 : 0.0;
      counts[1] += 1.0;
    }
    groups.world.all_reduce_sum(counts);
    return counts[0].item<double>() / std::max(1.0, counts[1].item<double>());
  }

  // eval.batches batches of batch_size samples from the start of the eval file: the loss
  // normalized like training's, and the exact-match rate of generated answers.
  void evaluate(std::int64_t step) {
    std::map<std::string, double> metrics;
    if (wants("accuracy")) {
      const auto [loss, accuracy] = eval_loss_accuracy();
      if (wants("loss")) metrics["loss"] = loss;
      metrics["accuracy"] = accuracy;
    } else if (wants("loss")) {
      metrics["loss"] = eval_loss();
    }
    if (wants("exact_match")) {
      data::SampleOrder order(eval_samples.size(), 0, false);
      std::vector<std::int64_t> mine;
      for (std::int64_t b = 0; b < exp.eval.batches; ++b) {
        auto part = rank_samples(order, b * exp.train.batch_size, exp.train.batch_size, rdzv.rank,
                                 rdzv.world_size);
        mine.insert(mine.end(), part.begin(), part.end());
      }
      const auto per_batch = (exp.train.batch_size + rdzv.world_size - 1) / rdzv.world_size;
      metrics["exact_match"] = match_rate(generate_mine(mine, exp.eval.batches * per_batch));
    }
    if (rdzv.rank == 0) report(spec::EvalEvent{step, metrics});
    last_eval = metrics.count("loss")       ? metrics["loss"]
                : metrics.count("accuracy") ? metrics["accuracy"]
                                            : metrics["exact_match"];
  }

  // The eval loss and the token accuracy over label tokens (argmax == label) of the same
  // forwards and logits: the head counts this rank's hits, the counts are all-reduced.
  std::pair<double, double> eval_loss_accuracy() {
    model::TokenTally tally;
    const double loss = eval_loss(&tally);
    auto counts = at::tensor({static_cast<double>(tally.correct), static_cast<double>(tally.total)},
                             at::kDouble);
    groups.world.all_reduce_sum(counts);
    return {loss, counts[0].item<double>() / std::max(1.0, counts[1].item<double>())};
  }

  double eval_loss(model::TokenTally* tally = nullptr) {
    data::SampleOrder order(eval_samples.size(), 0, false);
    double sum = 0;
    double count_all = 0;
    for (std::int64_t b = 0; b < exp.eval.batches; ++b) {
      auto mine = rank_samples(order, b * exp.train.batch_size, exp.train.batch_size, rdzv.rank,
                               rdzv.world_size);
      double count = 0;
      for (auto i : mine) count += static_cast<double>(eval_samples.loss_tokens(i));
      auto batch = eval_samples.batch(mine);
      batch.tally = tally;
      sum += runner.eval_step(batch, 1.0);
      count_all += count;
    }
    auto totals = at::tensor({sum, count_all}, at::kDouble);
    groups.world.all_reduce_sum(totals);
    return totals[0].item<double>() / std::max(1.0, totals[1].item<double>());
  }

  // `shardtrain generate`: every eval sample, rank r taking r, r + W, ...; one JSON line each.
  int generate_all() {
    const auto n = eval_samples.size();
    std::vector<std::int64_t> mine;
    for (std::int64_t i = rdzv.rank; i < n; i += rdzv.world_size) mine.push_back(i);
    auto answers = generate_mine(mine, (n + rdzv.world_size - 1) / rdzv.world_size);
    const auto path = options.generate_out +
                      (rdzv.rank > 0 ? ".rank-" + std::to_string(rdzv.rank) : std::string());
    std::ofstream out(path, std::ios::binary);
    for (const auto& a : answers)
      out << nlohmann::json{{"index", a.index},
                            {"ids", a.ids},
                            {"text", a.text},
                            {"answer", a.answer},
                            {"match", a.match}}
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)  // partial UTF-8
          << '\n';
    out.close();
    SHARD_CHECK(static_cast<bool>(out), ErrorKind::io, path + ": cannot write the answers",
                "choose a writable --out path");
    const double rate = match_rate(answers);
    groups.world.barrier();
    report(spec::DoneEvent{spec::DoneStatus::complete, {rate}, false, std::nullopt});
    return kExitOk;
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
    auto rel = ckpt::save_checkpoint(
        options.run_dir, engine_runner->engine(), engine_runner->optimizer(),
        {step, offset, grad_scale, good_steps}, config_hash, groups.world, exp.train.ckpt_keep);
    if (rdzv.rank == 0) report(spec::CkptEvent{step, rel, "sharded"});
  }

  // The step's micro-steps are recorded; a trace that reached trace.max_mib says so once.
  void end_trace_step() {
    trace->end_step();
    if (trace->take_stopped_notice())
      report(spec::LogEvent{
          "warn", "rank " + std::to_string(rdzv.rank) + ": trace/rank-" +
                      std::to_string(rdzv.rank) + ".jsonl reached trace.max_mib (" +
                      std::to_string(exp.trace.max_mib) +
                      " MiB): no further steps are recorded in detail; raise trace.max_mib or "
                      "trace.every_n_steps to cover the whole run"});
  }

  int run() {
    data::SampleOrder order(samples.size(), exp.train.seed, exp.data.shuffle);
    std::int64_t step = 0;
    if (!options.resume.empty() && engine_runner) {
      std::string dir =
          options.resume == "auto" ? ckpt::find_latest_checkpoint(options.run_dir) : options.resume;
      if (dir.empty()) dir = options.resume_fallback;
      SHARD_CHECK(!dir.empty() || !options.export_only, ErrorKind::io,
                  "no complete checkpoint under " + options.run_dir + "/ckpt to export",
                  "pass --checkpoint with a checkpoint folder (ckpt/step-NNNNNN of a run)");
      if (!dir.empty()) {
        auto pos = ckpt::load_checkpoint(dir, engine_runner->engine(), engine_runner->optimizer());
        step = pos.step;
        std::string scaler;
        if (precision.grad_scaler) {
          // The fp16 scaler goes on where it was: its scale and its count towards the next growth.
          grad_scale = pos.grad_scale;
          good_steps = static_cast<int>(pos.good_steps);
          scaler = " (loss scale " + std::to_string(grad_scale) + ", " +
                   std::to_string(good_steps) + " steps since it changed)";
        }
        report(spec::LogEvent{"info",
                              "resumed from " + dir + " at step " + std::to_string(step) + scaler});
      }
    }
    if (!options.generate_out.empty()) return generate_all();
    // SHARDSCOPE_PEAK_FLOPS wins over the table and saves the measured GEMM.
    double peak = 0.0;
    if (const char* env = std::getenv("SHARDSCOPE_PEAK_FLOPS"); env && *env) {
      peak = std::atof(env);
    } else if (rdzv.rank == 0) {
      peak = device.device.is_cuda() ? cuda_peak_flops(device, precision, exp.shard.allow_tf32)
                                     : gemm_peak_flops();
    }
    const double flops_token = model.flops_per_token(exp.data.seq_len);
    // `sys` events from a thread of this rank while it trains (its GPU's through NVML).
    std::atomic<std::int64_t> steps_done{step};
    std::optional<SysSampler> sampler;
    if (const double period = SysSampler::period_from_environment(); period > 0)
      sampler.emplace(period, device.device.is_cuda() ? device.bus_id : "", steps_done);
    double last_loss = 0;
    bool stopped = false;
    std::int64_t last_ckpt = -1;  // the step of this run's last checkpoint
    while (!options.export_only && step < exp.train.max_steps) {
      const auto ag0 = comm_bytes(true);
      const auto rs0 = comm_bytes(false);
      const auto t0 = Clock::now();
      auto& clock = PhaseClock::process();
      clock.start_step();
      double grad_norm = 0;
      const double loss = train_step(order, step * exp.train.batch_size, grad_norm);
      if (trace) end_trace_step();
      const double lr = optim::lr_at(exp.train, step);
      {
        const PhaseScope phase(Phase::optimizer);
        if (!skipped) runner.optimizer_step(lr);
        runner.zero_grads();
      }
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      // Agreed here, inside the step's phases: a rank that finished early waits for the others
      // in this all-reduce, and that wait is the step's (a SIGTERM during this step's
      // evaluation or checkpoint is then agreed at the next step's end).
      const bool stop = stop_agreed();
      const auto phases = clock.end_step();
      ++step;
      steps_done.store(step);
      last_loss = loss;
      // Real tokens: chat samples without their padding; token rows are seq_len long.
      const double tps = step_tokens / secs;
      // Events are the run's record: a rank that cannot write them (a full disk, a launcher
      // gone from the other end of its pipe) stops rather than train on unrecorded.
      SHARD_CHECK(events().ok(), ErrorKind::io,
                  "rank " + std::to_string(rdzv.rank) +
                      ": cannot write events to its output: " + events().error(),
                  "free space where the rank's output goes (the run directory), or, for a broken "
                  "pipe, keep its reader (the launcher) running; then resume with --resume auto");
      if (rdzv.rank == 0 && (step % exp.train.log_every == 0 || step == exp.train.max_steps)) {
        const double mfu = peak > 0 ? flops_token * tps / (peak * rdzv.world_size) : 0.0;
        report(spec::StepEvent{step, loss, lr, grad_norm, tps, mfu, comm_bytes(true) - ag0,
                               comm_bytes(false) - rs0},
               exp.train.max_steps);
      }
      // On the CPU the host's clock is the step's; on CUDA it would time the queueing of
      // kernels, not the kernels, so no figures rather than wrong ones (docs/trainer.md).
      if (!device.device.is_cuda() && clock.enabled()) report(phases_event(step, phases));
      if (exp.train.mem_every > 0 && step % exp.train.mem_every == 0) {
        auto m = memory_stats();
        spec::MemEvent mem{step, m.allocated, m.reserved, m.peak, m.rss, {}, {}, {}};
        if (device.device.is_cuda()) {
          const auto d = dist::device_memory(device.device);
          mem.cuda_allocated = d.allocated;
          mem.cuda_reserved = d.reserved;
          mem.cuda_peak = d.peak;
        }
        report(mem);
      }
      if (exp.eval.every > 0 && step % exp.eval.every == 0) {
        if (!eval_samples.empty()) evaluate(step);
        if (probes != nullptr && !probes->empty()) run_probes(step);
      }
      if (exp.train.ckpt_every > 0 && step % exp.train.ckpt_every == 0 &&
          step < exp.train.max_steps) {
        checkpoint(step, step * exp.train.batch_size);
        last_ckpt = step;
      }
      if (stop) {
        stopped = true;
        break;
      }
    }
    // The end of training: the probes' answers of the final weights, unless this step's
    // evaluation gave them (a stopped run ends without them: a SIGTERM wants it gone soon).
    if (probes != nullptr && !probes->empty() && !options.export_only && !stopped &&
        probed_step != step)
      run_probes(step);
    // A stop agreed right after a periodic checkpoint has its checkpoint: writing the same step
    // again would delete the complete one first, and a SIGKILL then would leave none of it.
    if (!options.export_only && last_ckpt != step &&
        (exp.train.ckpt_at_end || (stopped && exp.train.ckpt_every > 0)))
      checkpoint(step, step * exp.train.batch_size);
    if (!options.dump_params.empty()) {
      auto state = runner.full_state();
      if (rdzv.rank == 0) ckpt::write_safetensors(options.dump_params, state);
    }
    if (!options.export_dir.empty()) {
      auto state = runner.full_state();  // collective: every rank gathers, rank 0 writes
      if (rdzv.rank == 0) {
        for (const auto& part : ckpt::export_model(options.export_dir, state, exp))
          report(spec::CkptEvent{step, part.path, part.kind});
      }
    }
    sampler.reset();  // its last event before `done`
    groups.world.barrier();
    const double objective = std::isnan(last_eval) ? last_loss : last_eval;
    report(spec::DoneEvent{stopped ? spec::DoneStatus::stopped : spec::DoneStatus::complete,
                           {objective},
                           false,
                           step});
    return kExitOk;
  }
};

/// data.blank_images: every pixel value 0, the normalised mean, so image tokens and grids
/// stay and only what they show is gone.
void blank_images(std::vector<data::PreparedSample>& samples) {
  for (auto& s : samples)
    for (auto& image : s.images)
      std::fill(image.pixel_values.begin(), image.pixel_values.end(), 0.0F);
}

/// The samples of `path` in data.format; every line is read and checked (images decoded) before
/// the first collective, so a bad line fails every rank before step 1.
Dataset load_data(const spec::Experiment& exp, const std::string& path,
                  const data::SftPreparer* preparer, std::int64_t vocab_size) {
  Dataset out;
  if (exp.data.format == "chat") {
    SHARD_CHECK(preparer != nullptr, ErrorKind::config,
                "data.format = \"chat\" needs a Hugging Face model (its tokenizer)",
                "set model.arch = \"qwen2\" or \"qwen2_vl\" with model.path, or use "
                "data.format = \"tokens\"");
    auto chat = data::load_prepared_sft(path, *preparer, exp.data.seq_len, vocab_size);
    SHARD_CHECK_OK(chat, ErrorKind::data, "fix the line, or point the data path at another file");
    out.chat = std::move(*chat);
    out.pad_id = preparer->pad_id();
    if (exp.data.blank_images) blank_images(out.chat);
    return out;
  }
  SHARD_CHECK(exp.data.format == "tokens", ErrorKind::config,
              "data.format = \"" + exp.data.format + "\" is not supported by this trainer yet",
              "use data.format = \"chat\" (SFT conversations) or \"tokens\" (pre-tokenized)");
  auto samples = data::load_token_samples(path, exp.data.seq_len, vocab_size);
  SHARD_CHECK_OK(samples, ErrorKind::data,
                 "fix the line, or point data.train_path at another file");
  out.tokens = std::move(*samples);
  return out;
}

/// The model of [model]: the tiny test transformer, or a Hugging Face folder whose config.json
/// must describe the architecture model.arch names.
std::unique_ptr<model::Model> build_model(const spec::ModelSection& m) {
  if (m.arch == "tiny") return std::make_unique<model::Qwen2Model>(model::tiny_config(m));
  auto hf = model::load_hf_model(m.path);
  const bool vision = hf->config().has_vision;
  SHARD_CHECK(vision == (m.arch == "qwen2_vl"), ErrorKind::config,
              "model.arch = \"" + m.arch + "\" but " + m.path + "/config.json describes a " +
                  (vision ? "Qwen2-VL" : "text-only Qwen2") + " model",
              std::string("set model.arch = \"") + (vision ? "qwen2_vl" : "qwen2") +
                  "\", or point model.path at another checkpoint");
  return hf;
}

std::int64_t vocab_size_of(const spec::ModelSection& m, const model::Model& built) {
  if (m.arch == "tiny") return m.tiny_vocab_size;
  return static_cast<const model::Qwen2VLModel&>(built).config().text.vocab_size;
}

std::int64_t estimate_total(const spec::Experiment& exp, const dist::Rendezvous& r,
                            const std::optional<spec::DataBound>& bound) {
  auto e = spec::estimate_memory(exp, r.world_size, r.local_world_size, bound ? &*bound : nullptr);
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
  at::set_num_threads(exp->train.threads > 0 ? exp->train.threads : at::get_num_threads());
  const auto device = dist::choose_device(exp->shard.device, rdzv->local_rank);
  dist::use_device(device);
  dist::set_allow_tf32(exp->shard.allow_tf32);
  const auto device_info = dist::describe(device);
  std::string staged;  // why "auto" chose Gloo on CUDA
  const bool nccl = device.is_cuda() &&
                    dist::use_nccl(exp->shard.backend, *rdzv, dist::cuda_device_count(), &staged);
  if (!staged.empty() && rdzv->rank == 0) events().write(spec::LogEvent{"info", staged});
  // An oom's `error` event carries the allocator's view: the caching allocator's on CUDA (its
  // observer, with the history snapshot trace.memory_on_oom asks for), else the counting one's.
  const std::string snapshot =
      exp->trace.memory_on_oom ? "memory/rank-" + std::to_string(rdzv->rank) + ".pickle" : "";
  if (device.is_cuda()) dist::watch_cuda_oom(device, options.run_dir, snapshot);
  set_oom_memory_reader([] {
    if (auto cuda = dist::cuda_oom_memory()) return cuda;
    return host_oom_memory();
  });
  if (exp->trace.memory_on_oom && !(device.is_cuda() && dist::cuda_memory_history_available()) &&
      rdzv->rank == 0) {
    const std::string why =
        "trace.memory_on_oom: there is no allocator history on the CPU (only CUDA's caching "
        "allocator records one); an oom error carries the counting allocator's figures";
    report(spec::LogEvent{"warn", why});
  }
  SHARD_CHECK(
      exp->shard.backend != "nccl" || device.is_cuda(), ErrorKind::config,
      "shard.backend = \"nccl\" needs CUDA, but this rank computes on the CPU (shard.device "
      "= \"" +
          exp->shard.device + "\", " + std::to_string(dist::cuda_device_count()) +
          " CUDA devices visible)",
      "set shard.backend = \"auto\" or \"gloo\", or run where a GPU is visible");
  SHARD_CHECK(!nccl || dist::nccl_available(), ErrorKind::config,
              "this shardtrain was built without NCCL, and ranks on CUDA use it by default",
              "set shard.backend = \"gloo\" (collectives through host memory), or build "
              "shardtrain against a CUDA LibTorch with NCCL");
  if (exp->train.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);

  // Every rank maps the checkpoint; the engine reads each layer whole and keeps its own shard.
  auto model_ptr = build_model(exp->model);
  auto& model = *model_ptr;
  // LoRA first (it freezes every base weight and adds the adapters), so train.freeze may name
  // adapters too. Validation checked both against the tiny model; a checkpoint's names are known
  // here, before any collective.
  for (const auto& target : model::apply_lora(model, exp->lora))
    SHARD_FAIL(ErrorKind::config,
               "lora.target_modules: entry \"" + target + "\" selects no module of the model",
               "use q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (qkv, proj, "
               "fc1, fc2 for the vision tower)");
  for (const auto& glob : model.freeze(exp->train))
    SHARD_FAIL(ErrorKind::config,
               "train.freeze: pattern \"" + glob + "\" matches no parameter of the model",
               "use Hugging Face names such as \"model.layers.0.*\"");
  std::optional<data::SftPreparer> preparer;
  if (exp->model.arch != "tiny" && exp->data.format == "chat") {
    auto opened = data::SftPreparer::open(exp->model.path);
    SHARD_CHECK_OK(opened, ErrorKind::data, "fix model.path's tokenizer/processor files");
    preparer.emplace(std::move(*opened));
  }
  const auto vocab = vocab_size_of(exp->model, model);
  const auto* prep = preparer ? &*preparer : nullptr;
  auto samples = load_data(*exp, exp->data.train_path, prep, vocab);
  Dataset eval_samples;
  SHARD_CHECK(options.generate_out.empty() || !exp->data.eval_path.empty(), ErrorKind::config,
              "generate reads data.eval_path, which is empty",
              "set data.eval_path to the JSONL file whose answers to generate");
  if ((exp->eval.every > 0 || !options.generate_out.empty()) && !exp->data.eval_path.empty())
    eval_samples = load_data(*exp, exp->data.eval_path, prep, vocab);
  ProbeSet probes;
  if (!exp->eval.probes.empty() && options.generate_out.empty() && !options.export_only) {
    SHARD_CHECK(prep != nullptr, ErrorKind::config,
                "eval.probes needs a Hugging Face model (its tokenizer) and chat data",
                "set model.arch = \"qwen2\" or \"qwen2_vl\" with model.path, or drop eval.probes");
    probes = load_probe_set(exp->eval.probes, *prep, vocab, rdzv->rank == 0 ? options.run_dir : "");
    if (exp->data.blank_images) blank_images(probes.prepared);
  }
  dist::GroupOptions group_options;
  group_options.timeout = std::chrono::seconds(exp->shard.timeout_s);
  group_options.nccl = nccl;
  group_options.bus_id = device_info.bus_id;
  group_options.watch_peers = device.is_cuda();
  auto groups = make_groups(*rdzv, exp->shard.strategy, group_options);
  // --trace FILE records every step; trace.every_n_steps one in N into the run directory.
  shard::Trace trace;
  if (!options.trace.empty()) {
    trace.open(options.trace, rdzv->rank);
  } else if (exp->trace.every_n_steps > 0 && !options.reference && !options.export_only &&
             options.generate_out.empty()) {
    trace.open_sampled(options.run_dir + "/trace/rank-" + std::to_string(rdzv->rank) + ".jsonl",
                       exp->trace.every_n_steps, exp->trace.max_mib * 1024 * 1024);
  }
  std::unique_ptr<StepRunner> runner;
  EngineRunner* engine_runner = nullptr;
  if (options.reference) {
    SHARD_CHECK(!device.is_cuda(), ErrorKind::config,
                "--reference is the plain CPU implementation, but this rank would compute on " +
                    device_info.name,
                "set shard.device = \"cpu\" for the reference run");
    SHARD_CHECK(rdzv->world_size == 1, ErrorKind::config, "--reference runs on one process",
                "start it without a rendezvous environment");
    runner = make_reference_runner(model, *exp);
  } else {
    auto er = std::make_unique<EngineRunner>(
        model, *exp, shard::Groups{&groups.world, &groups.shard, &groups.replicate},
        trace.enabled() ? &trace : nullptr, device);
    engine_runner = er.get();
    runner = std::move(er);
  }
  const auto hash = spec::config_hash(*exp);
  spec::DeviceSummary summary{
      device.is_cuda() ? "cuda" : "cpu", device.is_cuda() ? device.index() : 0, device_info.name,
      device_info.memory_bytes,
      device.is_cuda() ? std::to_string(device_info.major) + "." + std::to_string(device_info.minor)
                       : std::string()};
  const bool packs = exp->data.pack && !samples.chat.empty();
  // Chat data: the estimate bounds rows by what the loaded samples hold, and says so in hello.
  std::optional<spec::DataBound> bound;
  if (exp->data.format == "chat") bound = data::data_bound_of(samples.chat, exp->data.train_path);
  report(spec::HelloEvent{
      rdzv->world_size,
      rdzv->local_world_size,
      hash,
      {{"shardtrain", kVersion},
       {"torch", TORCH_VERSION},
       {"backend", groups.world.backend_name()}},
      model.params_total(),
      model.params_trainable(),
      estimate_total(*exp, *rdzv, bound),
      summary,
      model.flops_per_token(exp->data.seq_len),
      packs ? std::optional<double>(pack_efficiency(samples, *exp, rdzv->world_size))
            : std::nullopt,
      bound});
  {
    const auto& t = exp->train;
    char lr[32];
    std::snprintf(lr, sizeof lr, "%g", t.lr);
    const auto micro = spec::micro_batch_size_for(t, rdzv->world_size);
    say("plan: rank " + std::to_string(rdzv->rank) + " of " + std::to_string(rdzv->world_size) +
        "; " + std::to_string(t.max_steps) + " steps of " + std::to_string(t.batch_size) +
        " samples (micro-batch " + std::to_string(micro) + (packs ? " packed rows" : "") +
        " a rank), seq_len " + std::to_string(exp->data.seq_len) + ", lr " + std::string(lr) + " " +
        std::string(spec::to_string(t.lr_schedule)) + " (warmup " +
        std::to_string(t.lr_warmup_steps) + "), " +
        std::string(spec::to_string(exp->shard.strategy)) + ", precision " +
        std::string(spec::to_string(exp->shard.precision)) + (exp->lora.enabled ? ", LoRA" : "") +
        "; " + std::to_string(samples.size()) + " training samples, " +
        std::to_string(eval_samples.size()) + " eval samples");
  }
  Loop loop{*exp,          options, model, *runner,
            engine_runner, groups,  *rdzv, samples,
            eval_samples,  prep,    hash,  spec::resolve_precision(exp->shard),
            device_info};
  if (loop.precision.grad_scaler) loop.grad_scale = 65536.0;
  loop.probes = &probes;
  if (trace.enabled() && engine_runner != nullptr) loop.trace = &trace;
  return loop.run();
}

int run_export(TrainOptions options) {
  SHARD_CHECK(!options.resume.empty() && !options.export_dir.empty(), ErrorKind::config,
              "export needs a checkpoint and an output folder",
              "shardtrain export CONFIG --checkpoint DIR|auto --out DIR");
  options.export_only = true;
  return run_train(options);
}

int run_generate(const TrainOptions& options) {
  SHARD_CHECK(!options.generate_out.empty(), ErrorKind::config, "generate needs --out FILE",
              "shardtrain generate CONFIG --out FILE [--checkpoint DIR|auto]");
  return run_train(options);
}

}  // namespace shardscope::trainer
