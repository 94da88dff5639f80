// LoRA on the functional Qwen2: spec::apply_lora's shapes and counts, PEFT's init,
// an all-zero lora_B leaving the model's output bit-identical to the base model's, the adapter
// math of lora_linear, the merged export matching the adapted model, the PEFT adapter files, and
// the validation messages of [lora].
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "spec/model_shape.h"
#include "trainer/base/fatal.h"
#include "trainer/ckpt/peft.h"
#include "trainer/model/lora.h"
#include "trainer/model/qwen2.h"

using namespace shardscope;

namespace {

const std::vector<std::string> kAllText = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                           "gate_proj", "up_proj", "down_proj"};

spec::Qwen2Dims dims() {  // GQA ratio 3, vocabulary not a multiple of 8
  spec::Qwen2Dims d;
  d.vocab_size = 61;
  d.hidden_size = 24;
  d.intermediate_size = 40;
  d.num_layers = 2;
  d.num_heads = 6;
  d.num_kv_heads = 2;
  return d;
}

spec::LoraSection lora(std::vector<std::string> targets, std::int64_t r = 4) {
  spec::LoraSection l;
  l.enabled = true;
  l.r = r;
  l.alpha = 12.0;
  l.target_modules = std::move(targets);
  return l;
}

// Every layer's initial values (seed 7).
std::vector<std::vector<at::Tensor>> init(const model::Model& m) {
  std::vector<std::vector<at::Tensor>> params;
  for (std::size_t l = 0; l < m.layers().size(); ++l) {
    std::vector<at::Tensor> v;
    for (const auto& p : m.layers()[l].params) v.push_back(at::zeros(p.shape, at::kFloat));
    m.init_layer(static_cast<int>(l), v, 7);
    params.push_back(std::move(v));
  }
  return params;
}

model::Batch batch() {
  auto g = at::make_generator<at::CPUGeneratorImpl>(11);
  model::Batch b;
  b.input_ids = at::randint(0, 61, {2, 9}, g, at::kLong);
  b.labels = b.input_ids.clone();
  return b;
}

// The last block's output and the loss.
std::pair<at::Tensor, at::Tensor> run(const model::Model& m,
                                      const std::vector<std::vector<at::Tensor>>& params,
                                      const model::Batch& b) {
  auto ctx = m.context(b, at::kFloat);
  at::Tensor x;
  const auto n = static_cast<int>(params.size());
  for (int l = 0; l + 1 < n; ++l) x = m.forward_layer(l, params[l], x, ctx);
  return {x, m.forward_layer(n - 1, params.back(), x, ctx)};
}

// Named full state (what ShardEngine::full_state returns).
ckpt::NamedTensors state(const model::Model& m, const std::vector<std::vector<at::Tensor>>& p) {
  ckpt::NamedTensors out;
  for (std::size_t l = 0; l < p.size(); ++l)
    for (std::size_t i = 0; i < p[l].size(); ++i)
      out.emplace_back(m.layers()[l].params[i].name, p[l][i]);
  return out;
}

}  // namespace

class TestLora : public QObject {
  Q_OBJECT

 private slots:
  void shapesAndCounts() {
    model::Qwen2Model base(dims());
    model::Qwen2Model m(dims());
    QVERIFY(model::apply_lora(m, lora(kAllText)).empty());
    // Per block: r * (in + out) for q (24->24), k, v (24->8), o (24->24), gate, up (24->40),
    // down (40->24).
    const std::int64_t per_block =
        4 * ((24 + 24) + 2 * (24 + 8) + (24 + 24) + 2 * (24 + 40) + (40 + 24));
    QCOMPARE(m.params_trainable(), 2 * per_block);
    QCOMPARE(m.params_total(), base.params_total() + 2 * per_block);
    // The torch-free count (the GUI, the estimate) sees the same layers.
    auto layers = spec::qwen2_layers(dims());
    QVERIFY(spec::apply_lora(lora(kAllText), layers).empty());
    QCOMPARE(spec::count_params(layers), m.params_total());
    const auto& block = m.layers()[1].params;
    const auto* a = &block[12];
    QCOMPARE(a->name,
             std::string("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"));
    QCOMPARE(a->shape, (std::vector<std::int64_t>{4, 24}));
    QCOMPARE(block[15].name,
             std::string("base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight"));
    QCOMPARE(block[15].shape, (std::vector<std::int64_t>{8, 4}));
    for (const auto& layer : m.layers())
      for (const auto& p : layer.params) QCOMPARE(p.trainable, spec::is_lora_param(p.name));
    // A target that selects nothing comes back; a suffix with a dotted path selects one module.
    model::Qwen2Model vision_target(dims());
    QCOMPARE(model::apply_lora(vision_target, lora({"q_proj", "qkv"})),
             std::vector<std::string>{"qkv"});
    auto one = spec::qwen2_layers(dims());
    QVERIFY(spec::apply_lora(lora({"layers.1.mlp.down_proj"}), one).empty());
    QCOMPARE(spec::count_params(one), base.params_total() + 4 * (40 + 24));
  }

  void initIsPeftsAndLeavesTheBase() {
    model::Qwen2Model base(dims());
    model::Qwen2Model m(dims());
    (void)model::apply_lora(m, lora(kAllText, 8));
    const auto pb = init(base);
    const auto pm = init(m);
    for (std::size_t l = 0; l < pb.size(); ++l) {
      for (std::size_t i = 0; i < pb[l].size(); ++i) QVERIFY(at::equal(pb[l][i], pm[l][i]));
      for (std::size_t i = pb[l].size(); i < pm[l].size(); ++i) {
        const auto& name = m.layers()[l].params[i].name;
        const auto& t = pm[l][i];
        if (name.find("lora_B") != std::string::npos) {
          QVERIFY(at::equal(t, at::zeros_like(t)));
          continue;
        }
        const double bound = 1.0 / std::sqrt(static_cast<double>(t.size(1)));
        QVERIFY(t.abs().max().item<double>() <= bound);
        QVERIFY(t.abs().max().item<double>() > 0.8 * bound);  // uniform over the whole range
        QVERIFY(std::abs(t.mean().item<double>()) < 0.2 * bound);
      }
    }
  }

  void zeroBLeavesOutputsBitIdentical() {
    model::Qwen2Model base(dims());
    model::Qwen2Model m(dims());
    (void)model::apply_lora(m, lora(kAllText));
    const auto b = batch();
    auto [hb, lb] = run(base, init(base), b);
    auto [hm, lm] = run(m, init(m), b);
    QVERIFY(at::equal(hb, hm));
    QVERIFY(at::equal(lb, lm));
  }

  void adapterMathAndMerge() {
    model::Qwen2Model base(dims());
    model::Qwen2Model m(dims());
    const auto cfg = lora(kAllText);
    (void)model::apply_lora(m, cfg);
    auto pm = init(m);
    auto g = at::make_generator<at::CPUGeneratorImpl>(3);
    for (std::size_t l = 0; l < pm.size(); ++l)
      for (std::size_t i = 0; i < pm[l].size(); ++i)
        if (m.layers()[l].params[i].name.find("lora_B") != std::string::npos)
          pm[l][i].normal_(0.0, 0.1, g);
    const auto b = batch();
    auto [hb, lb] = run(base, init(base), b);
    auto [hm, lm] = run(m, pm, b);
    QVERIFY(!at::allclose(hb, hm));  // the adapters act

    // lora_linear on block 0's q_proj: W x + b + alpha / r * B A x.
    const model::LoraLinks all(m.layers(), cfg);
    const auto* links = all.layer(1);
    QVERIFY(links != nullptr);
    QVERIFY(all.layer(0) == nullptr);  // the embedding
    auto x = at::randn({3, 24}, g);
    const auto& p = pm[1];
    auto want = at::linear(x, p[1], p[2]) + 3.0 * at::linear(at::linear(x, p[12]), p[13]);
    QVERIFY(at::allclose(model::lora_linear(x, p, 1, 2, links, nullptr), want, 1e-6, 1e-6));

    // Merged weights in the plain model give the adapted model's output.
    auto merged = ckpt::merge_lora(state(m, pm), cfg);
    QCOMPARE(merged.size(), state(base, init(base)).size());
    std::vector<std::vector<at::Tensor>> pmerged;
    std::size_t k = 0;
    for (const auto& layer : base.layers()) {
      std::vector<at::Tensor> v;
      for (const auto& def : layer.params) {
        QCOMPARE(merged[k].first, def.name);
        v.push_back(merged[k++].second);
      }
      pmerged.push_back(std::move(v));
    }
    auto [hg, lg] = run(base, pmerged, b);
    QVERIFY(at::allclose(hg, hm, 1e-5, 1e-5));
    QVERIFY(std::abs(lg.item<double>() - lm.item<double>()) < 1e-5 * std::abs(lm.item<double>()));
  }

  // LoRA dropout masks come from keys, not the global generator: the same keys give the same
  // loss (a resume, a checkpointed recompute), a batch without keys (evaluation) has no dropout
  // even with grad mode on, and a row's mask depends on its own sample only (not on the rows it
  // is batched with, so not on the world size) nor on its padded length.
  void dropoutMasksFromKeys() {
    model::Qwen2Model m(dims());
    auto cfg = lora(kAllText);
    cfg.dropout = 0.5;
    (void)model::apply_lora(m, cfg);
    auto pm = init(m);
    for (std::size_t l = 0; l < pm.size(); ++l)
      for (std::size_t i = 0; i < pm[l].size(); ++i)
        if (m.layers()[l].params[i].name.find("lora_B") != std::string::npos) pm[l][i].fill_(0.1);
    const auto plain = batch();
    at::Tensor off;
    {
      at::NoGradGuard no_grad;
      off = run(m, pm, plain).second;
    }
    QVERIFY(at::equal(run(m, pm, plain).second, off));  // grad mode alone does not drop
    auto keyed = plain;
    keyed.dropout = {5, 3, {10, 11}};
    const auto [h, loss] = run(m, pm, keyed);
    QVERIFY(!at::equal(loss, off));
    QVERIFY(at::equal(run(m, pm, keyed).second, loss));
    auto later = keyed;
    later.dropout.step = 4;
    QVERIFY(!at::equal(run(m, pm, later).second, loss));
    // Row 1 alone (as on another rank) sees the mask it saw in the pair.
    model::Batch row;
    row.input_ids = plain.input_ids.slice(0, 1, 2);
    row.labels = plain.labels.slice(0, 1, 2);
    row.dropout = {5, 3, {11}};
    QVERIFY(at::allclose(run(m, pm, row).first[0], h[1], 1e-5, 1e-6));
    // Masks: a longer padded row extends the shorter one's mask; about p of it is dropped.
    model::LayerLora layer;
    layer.dropout = 0.5;
    layer.layer = 1;
    const model::DropoutKeys one{5, 3, {11}};
    auto short_mask = model::lora_dropout_mask(at::zeros({1, 9, 32}), layer, 2, one);
    auto long_mask = model::lora_dropout_mask(at::zeros({1, 40, 32}), layer, 2, one);
    QVERIFY(!at::equal(model::lora_dropout_mask(at::zeros({1, 9, 32}), layer, 3, one), short_mask));
    QVERIFY(at::equal(long_mask.slice(1, 0, 9), short_mask));
    const double dropped = long_mask.eq(0).to(at::kDouble).mean().item<double>();
    QVERIFY2(dropped > 0.4 && dropped < 0.6, std::to_string(dropped).c_str());
    QVERIFY(at::equal(long_mask.masked_select(long_mask.ne(0)),
                      at::full({long_mask.ne(0).sum().item<std::int64_t>()}, 2.0f)));
    // The mask is drawn on the input's device and its dtype-independent: float32 on x's device.
    QCOMPARE(long_mask.scalar_type(), at::kFloat);
    QVERIFY(long_mask.device().is_cpu());
    // A small rate is kept at its rate too (a threshold on 32-bit hashes, not on bytes).
    layer.dropout = 0.05;
    auto sparse = model::lora_dropout_mask(at::zeros({1, 512, 64}), layer, 2, one);
    const double few = sparse.eq(0).to(at::kDouble).mean().item<double>();
    QVERIFY2(few > 0.04 && few < 0.06, std::to_string(few).c_str());
  }

  // The counter-based mask, recomputed here from its definition (model/lora.cpp keep_mask) for
  // a few elements: the same integers on any device, so a GPU's mask equals the CPU's.
  void dropoutMaskIsTheDocumentedHash() {
    auto hash = [](std::uint64_t x) {
      for (int i = 0; i < 2; ++i) x = ((x ^ (x >> 16)) * 0x45d9f3bULL) & 0xffffffffULL;
      return x;
    };
    model::LayerLora layer;
    layer.dropout = 0.3;
    layer.layer = 2;
    const model::DropoutKeys keys{7, 9, {4}};
    const auto mask = model::lora_dropout_mask(at::zeros({1, 6, 16}), layer, 1, keys);
    // Element i keeps iff hash(hash(i ^ lo) + hi) >= p * 2^32, for the 64-bit key of
    // (seed 7, step 9, sample 4, layer 2, weight 1).
    const auto key = model::lora_dropout_key(layer, 1, keys, 4);
    const std::uint64_t lo = key & 0xffffffffULL;
    const std::uint64_t hi = key >> 32;
    const auto threshold = static_cast<std::uint64_t>(std::ceil(0.3 * 4294967296.0));
    const auto flat = mask.reshape({-1});
    for (std::int64_t i = 0; i < flat.numel(); ++i) {
      std::uint64_t x = hash(static_cast<std::uint64_t>(i) ^ lo);
      x = hash((x + hi) & 0xffffffffULL);
      x ^= x >> 16;
      const float want = x >= threshold ? static_cast<float>(1.0 / 0.7) : 0.0f;
      QCOMPARE(flat[i].item<float>(), want);
    }
  }

  void peftAdapterFiles() {
    QTemporaryDir dir;
    model::Qwen2Model m(dims());
    auto cfg = lora({"q_proj", "v_proj"});
    (void)model::apply_lora(m, cfg);
    const auto out = dir.filePath("adapter").toStdString();
    ckpt::write_peft_adapter(out, state(m, init(m)), cfg, {"/models/base", "qwen2"});
    const auto file = ckpt::read_safetensors(out + "/adapter_model.safetensors");
    QCOMPARE(file.tensors.size(), std::size_t{8});  // 2 blocks x 2 modules x (A, B)
    QVERIFY(file.find("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"));
    std::ifstream in(out + "/adapter_config.json");
    const auto j = nlohmann::json::parse(in);
    QCOMPARE(j["peft_type"].get<std::string>(), std::string("LORA"));
    QCOMPARE(j["task_type"].get<std::string>(), std::string("CAUSAL_LM"));
    QCOMPARE(j["r"].get<int>(), 4);
    QCOMPARE(j["lora_alpha"].get<double>(), 12.0);
    QCOMPARE(j["target_modules"].get<std::vector<std::string>>(), cfg.target_modules);
    QCOMPARE(j["base_model_name_or_path"].get<std::string>(), std::string("/models/base"));
    // Qwen2-VL adapters take transformers 5's module paths.
    ckpt::NamedTensors vl = {
        {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", at::ones({1})},
        {"base_model.model.visual.blocks.0.attn.qkv.lora_B.weight", at::ones({1})},
        {"model.layers.0.self_attn.q_proj.weight", at::ones({1})}};
    auto keys = ckpt::peft_adapter_tensors(vl, "qwen2_vl");
    QCOMPARE(keys.size(), std::size_t{2});
    QCOMPARE(keys[0].first,
             std::string("base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A."
                         "weight"));
    QCOMPARE(keys[1].first,
             std::string("base_model.model.model.visual.blocks.0.attn.qkv.lora_B.weight"));
  }

  void quantizeMarksEveryTextLinearAndChecksTheBlocks() {
    // lora.quantize = "nf4" marks every Linear of the text stack (adapted or not, as
    // bitsandbytes' load_in_4bit does); embeddings, norms, biases and the head stay unquantized.
    auto wide = dims();
    wide.hidden_size = 64;
    wide.intermediate_size = 128;
    wide.num_heads = 8;
    model::Qwen2Model m(wide);
    auto l = lora({"q_proj"});
    l.quantize = "nf4";
    QVERIFY(model::apply_lora(m, l).empty());
    QCOMPARE(m.lora_config().quantize, std::string("nf4"));
    int marked = 0;
    for (const auto& layer : m.layers()) {
      for (const auto& p : layer.params) {
        const bool linear = p.shape.size() == 2 &&
                            p.name.find("_proj.weight") != std::string::npos &&
                            p.name.find(".lora_") == std::string::npos;
        QVERIFY2(p.nf4 == linear, p.name.c_str());
        marked += p.nf4 ? 1 : 0;
      }
    }
    QCOMPARE(marked, 7 * wide.num_layers);
    // A block that does not divide a quantized Linear's in-features (24 here) is a config error
    // naming the field and the weight; no allowed block size divides 24, so the fix is "none".
    model::Qwen2Model narrow(dims());
    try {
      model::apply_lora(narrow, l);
      QFAIL("apply_lora accepted blocks of 64 over 24 in-features");
    } catch (const trainer::TrainerError& e) {
      QCOMPARE(e.kind(), spec::ErrorKind::config);
      const std::string what = e.what();
      QVERIFY2(what.find("lora.quant_block_size") != std::string::npos, e.what());
      QVERIFY2(what.find("q_proj.weight") != std::string::npos, e.what());
      QVERIFY2(e.hint().find("lora.quantize = \"none\"") != std::string::npos, e.hint().c_str());
    }
  }

  void validationNamesTheField() {
    const std::string base = "[data]\ntrain_path = \"t.jsonl\"\n[lora]\nenabled = true\n";
    spec::LoadOptions opts;
    opts.check_paths = false;
    auto bad = spec::parse_experiment(base + "target_modules = [\"q_proj\", \"wq\"]\n", "x.toml",
                                      {}, opts);
    QVERIFY(!bad.ok());
    for (const char* part :
         {"x.toml:", "lora.target_modules", "\"wq\"", "q_proj, k_proj, v_proj", "down_proj", "qkv"})
      QVERIFY2(bad.message().find(part) != std::string::npos, bad.message().c_str());
    auto vision = spec::parse_experiment(base + "target_modules = [\"qkv\"]\n", "x.toml", {}, opts);
    QVERIFY(!vision.ok());
    QVERIFY2(vision.message().find("selects no module of the tiny") != std::string::npos,
             vision.message().c_str());
    auto r = spec::parse_experiment(base + "r = 0\n", "x.toml", {}, opts);
    QVERIFY(!r.ok() && r.message().find("lora.r") != std::string::npos);
    auto alpha = spec::parse_experiment(base + "alpha = -1.0\n", "x.toml", {}, opts);
    QVERIFY(!alpha.ok() && alpha.message().find("lora.alpha") != std::string::npos);
    auto good = spec::parse_experiment(
        base + "target_modules = [\"self_attn.q_proj\", \"mlp.down_proj\"]\n", "x.toml", {}, opts);
    QVERIFY2(good.ok(), good.ok() ? "" : good.message().c_str());
  }
};

QTEST_APPLESS_MAIN(TestLora)
#include "tst_lora.moc"
