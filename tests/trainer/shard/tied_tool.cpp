// tied_tool: trains a tiny Qwen2 model whose lm_head.weight is tied to model.embed_tokens.weight
// (Qwen2-VL-2B's tie_word_embeddings), either through the sharding engine on the ranks of a
// torchrun-style environment or through the unsharded reference runner (--reference, one
// process). tied.py compares the two (tied embeddings).
//
//   tied_tool OUT.safetensors [--reference] [--steps N]
//
// Rank 0 prints one JSON line per step, {"step": k, "loss": x, "grad_norm": g}, and writes the
// final full parameters (both names of the tied pair) to OUT. The model and data are fixed here
// (shardtrain's [model] has no tie switch for the tiny model): vocabulary 64, hidden 32, 2
// blocks, 4 heads; a global batch of 8 arithmetic progressions of 16 tokens per step, rank r of
// W taking samples r, r + W, ...; AdamW lr 1e-2, weight decay 0.1, eps 1e-4, clipping at 0.5.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "trainer/base/safetensors.h"
#include "trainer/dist/process_group.h"
#include "trainer/dist/rendezvous.h"
#include "trainer/model/qwen2.h"
#include "trainer/optim/adamw.h"
#include "trainer/run/step_runner.h"
#include "trainer/shard/engine.h"

namespace {

using namespace shardscope;

constexpr std::int64_t kVocab = 64;
constexpr std::int64_t kBatch = 8;  // global samples per step
constexpr std::int64_t kSeq = 16;
constexpr double kClip = 0.5;

spec::Experiment experiment() {
  spec::Experiment exp;
  exp.train.lr = 1e-2;
  exp.train.weight_decay = 0.1;
  exp.train.adam_eps = 1e-4;
  exp.train.seed = 77;
  exp.shard.strategy = spec::ShardStrategy::full_shard;
  return exp;
}

model::Qwen2Config tied_config() {
  model::Qwen2Config c;
  c.vocab_size = kVocab;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.tie_word_embeddings = true;
  return c;
}

/// This rank's samples of step `step`: progressions (a + d k) mod V; labels = ids.
model::Batch rank_batch(std::int64_t step, int rank, int world) {
  std::vector<std::int64_t> ids;
  for (std::int64_t s = rank; s < kBatch; s += world) {
    const auto g = step * kBatch + s;
    const auto a = (g * 37 + 11) % kVocab;
    const auto d = 1 + (g * 13) % 7;
    for (std::int64_t k = 0; k < kSeq; ++k) ids.push_back((a + d * k) % kVocab);
  }
  const auto rows = static_cast<std::int64_t>(ids.size()) / kSeq;
  auto t = at::tensor(ids, at::kLong).view({rows, kSeq});  // (B_r, T)
  return {t, t.clone()};
}

/// The engine with its sharded AdamW behind the StepRunner seam.
class EngineRunner final : public trainer::StepRunner {
 public:
  EngineRunner(const model::Model& model, const spec::Experiment& exp, shard::Groups groups)
      : m_engine(model, exp.shard, groups, nullptr) {
    m_engine.init_params(exp.train.seed);
    m_optimizer = std::make_unique<optim::ShardedAdamW>(m_engine.trainable_flats(), exp.train);
  }
  double micro_step(const model::Batch& b, double scale, bool reduce) override {
    return m_engine.forward_backward(b, scale, reduce);
  }
  double eval_step(const model::Batch& b, double scale) override {
    return m_engine.forward_only(b, scale);
  }
  double grad_norm() override { return m_engine.grad_norm(); }
  void scale_grads(double f) override { m_engine.scale_grads(f); }
  bool grads_nonfinite() override { return m_engine.grads_nonfinite(); }
  void optimizer_step(double lr) override { m_optimizer->step(lr); }
  void zero_grads() override { m_engine.zero_grads(); }
  ckpt::NamedTensors full_state() override { return m_engine.full_state(); }
  ckpt::NamedTensors full_grads() override { return m_engine.full_grads(); }

 private:
  shard::ShardEngine m_engine;
  std::unique_ptr<optim::ShardedAdamW> m_optimizer;
};

int run(const std::string& out, bool reference, int steps) {
  auto rdzv = dist::rendezvous_from_env();
  if (!rdzv) {
    std::fprintf(stderr, "tied_tool: %s\n", rdzv.message().c_str());
    return 2;
  }
  at::set_num_threads(1);
  const auto exp = experiment();
  model::Qwen2Model model(tied_config());
  auto world =
      rdzv->world_size > 1 ? dist::ProcessGroup::create(*rdzv) : dist::ProcessGroup::single();
  std::vector<int> all;
  for (int i = 0; i < rdzv->world_size; ++i) all.push_back(i);
  auto shard = world.subgroup("shard", all);
  auto single = dist::ProcessGroup::single();
  std::unique_ptr<trainer::StepRunner> runner;
  if (reference) {
    runner = trainer::make_reference_runner(model, exp);
  } else {
    runner = std::make_unique<EngineRunner>(model, exp, shard::Groups{&world, &shard, &single});
  }
  const double scale = 1.0 / static_cast<double>(kBatch * (kSeq - 1));  // global loss tokens
  for (int step = 1; step <= steps; ++step) {
    auto loss = at::full(
        {1}, runner->micro_step(rank_batch(step, rdzv->rank, rdzv->world_size), scale, true),
        at::kDouble);
    world.all_reduce_sum(loss);
    const double norm = runner->grad_norm();
    if (norm > kClip) runner->scale_grads(kClip / (norm + 1e-6));
    runner->optimizer_step(exp.train.lr);
    runner->zero_grads();
    if (rdzv->rank == 0)
      std::printf("{\"step\": %d, \"loss\": %.17g, \"grad_norm\": %.17g}\n", step,
                  loss.item<double>(), norm);
  }
  auto state = runner->full_state();
  if (rdzv->rank == 0) ckpt::write_safetensors(out, state);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tied_tool OUT.safetensors [--reference] [--steps N]\n");
    return 2;
  }
  bool reference = false;
  int steps = 20;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reference") reference = true;
    if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
  }
  try {
    return run(argv[1], reference, steps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tied_tool: %s\n", e.what());
    return 1;
  }
}
