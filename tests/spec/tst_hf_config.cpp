// config.json parsing and parameter counts without LibTorch: Qwen2-VL-2B-Instruct's published
// config (examples/models/qwen2-vl-2b) must count exactly 2,208,985,600 parameters (what
// transformers' num_parameters() gives), and the nested layout transformers 5 writes for the
// same model must parse to the same dimensions.
#include <QTest>

#include "spec/hf_config.h"
#include "tests/support/paths.h"
#include "tests/support/verify_ok.h"

using namespace shardscope::spec;

namespace {

const std::string kSource = shardscope::testing::sourceDir().toStdString();

bool same_dims(const HfModelConfig& a, const HfModelConfig& b) {
  const auto& t = a.text;
  const auto& u = b.text;
  const auto& v = a.vision;
  const auto& w = b.vision;
  return a.model_type == b.model_type && t.vocab_size == u.vocab_size &&
         t.hidden_size == u.hidden_size && t.intermediate_size == u.intermediate_size &&
         t.num_layers == u.num_layers && t.num_heads == u.num_heads &&
         t.num_kv_heads == u.num_kv_heads && t.rope_theta == u.rope_theta &&
         t.rms_eps == u.rms_eps && t.tie_word_embeddings == u.tie_word_embeddings &&
         a.has_vision == b.has_vision && v.depth == w.depth && v.embed_dim == w.embed_dim &&
         v.num_heads == w.num_heads && v.mlp_ratio == w.mlp_ratio &&
         v.in_channels == w.in_channels && v.patch_size == w.patch_size &&
         v.temporal_patch_size == w.temporal_patch_size &&
         v.spatial_merge_size == w.spatial_merge_size && v.hidden_size == w.hidden_size &&
         v.hidden_act == w.hidden_act && v.rope_theta == w.rope_theta &&
         a.mrope_section == b.mrope_section && a.image_token_id == b.image_token_id &&
         a.video_token_id == b.video_token_id;
}

}  // namespace

class TestHfConfig : public QObject {
  Q_OBJECT

 private slots:
  void sizePolicyTailStaysInTheRoot() {
    // 3 tiny blocks; a minimum of 1.5 blocks groups blocks 0 and 1, and block 2, below it, stays
    // in the root with the embedding and the head (as FSDP's size policy leaves it). It used to
    // become a unit of its own when the head closed the group.
    Qwen2Dims dims;
    dims.num_layers = 3;
    const auto layers = qwen2_layers(dims);
    std::int64_t block = 0;
    for (const auto& p : layers[1].params) block += numel(p.shape);
    const auto units = plan_units(layers, WrapPolicy::size, block + block / 2);
    QCOMPARE(units.size(), std::size_t{2});
    QCOMPARE(units[1], (std::vector<int>{1, 2}));
    QCOMPARE(units[0], (std::vector<int>{0, 3, 4}));  // embed, layers.2, head
    const auto blocks = plan_units(layers, WrapPolicy::block, 0);
    QCOMPARE(blocks.size(), std::size_t{4});
    QCOMPARE(plan_units(layers, WrapPolicy::none, 0).size(), std::size_t{1});
  }

  void qwen2vl2bCountsExactly() {
    auto config = read_hf_config(kSource + "/examples/models/qwen2-vl-2b");
    VERIFY_OK(config);
    QCOMPARE(config->model_type, std::string("qwen2_vl"));
    QVERIFY(config->has_vision);
    QVERIFY(config->text.tie_word_embeddings);
    QCOMPARE(config->text.num_kv_heads, std::int64_t{2});
    QCOMPARE(config->text.rope_theta, 1000000.0);
    QCOMPARE(config->mrope_section, (std::vector<std::int64_t>{16, 24, 24}));
    QCOMPARE(config->vision.in_channels, std::int64_t{3});
    QCOMPARE(config->image_token_id, std::int64_t{151655});
    const auto layers = hf_layers(*config);
    QCOMPARE(count_params(layers), std::int64_t{2208985600});
    // 1 patch embed + 32 vision blocks + merger + embed + 28 blocks + head.
    QCOMPARE(layers.size(), std::size_t{1 + 32 + 1 + 1 + 28 + 1});
    QCOMPARE(layers.back().params.back().tied_to, std::string("model.embed_tokens.weight"));
  }

  void bothLayoutsParseToTheSameDims() {
    auto flat = read_hf_config(kSource + "/examples/models/qwen2-vl-2b/config.json");
    auto nested = read_hf_config(kSource + "/tests/spec/hf/qwen2-vl-2b-nested.json");
    VERIFY_OK(flat);
    VERIFY_OK(nested);
    QVERIFY(same_dims(*flat, *nested));
    QCOMPARE(count_params(hf_layers(*nested)), std::int64_t{2208985600});
  }

  void untiedQwen2CountsTheHead() {
    const std::string text = R"({"model_type": "qwen2", "vocab_size": 301, "hidden_size": 48,
      "intermediate_size": 72, "num_hidden_layers": 2, "num_attention_heads": 6,
      "num_key_value_heads": 2, "rope_theta": 5000.0, "tie_word_embeddings": false})";
    auto config = parse_hf_config(text, "m/config.json");
    VERIFY_OK(config);
    QVERIFY(!config->has_vision);
    QCOMPARE(config->text.rope_theta, 5000.0);
    // embed + lm_head 2*301*48; per block: q 48*48+48, k/v 2*(16*48+16), o 48*48, 3 MLP 48*72,
    // two norms; final norm.
    const std::int64_t block = 48 * 48 + 48 + 2 * (16 * 48 + 16) + 48 * 48 + 3 * 48 * 72 + 2 * 48;
    QCOMPARE(count_params(hf_layers(*config)), std::int64_t{2 * 301 * 48} + 2 * block + 48);
  }

  void errorsNameTheFileAndField() {
    auto missing = parse_hf_config(R"({"model_type": "qwen2", "vocab_size": 10})", "d/config.json");
    QVERIFY(!missing.ok());
    QVERIFY2(
        missing.message().find("d/config.json: field hidden_size is missing") != std::string::npos,
        missing.message().c_str());
    auto typed = parse_hf_config(
        R"({"model_type": "qwen2_vl", "text_config": {"vocab_size": "many"}})", "e/config.json");
    QVERIFY(!typed.ok());
    QVERIFY2(typed.message().find("field text_config.vocab_size must be an integer") !=
                 std::string::npos,
             typed.message().c_str());
    auto other = parse_hf_config(R"({"model_type": "llama"})", "f/config.json");
    QVERIFY(!other.ok());
    QVERIFY2(other.message().find("\"llama\"") != std::string::npos, other.message().c_str());
    auto novision = parse_hf_config(R"({"model_type": "qwen2_vl", "vocab_size": 10,
      "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
      "num_attention_heads": 2})",
                                    "g/config.json");
    QVERIFY(!novision.ok());
    QVERIFY2(novision.message().find("vision_config is missing") != std::string::npos,
             novision.message().c_str());
    auto absent = read_hf_config(kSource + "/no/such/dir");
    QVERIFY(!absent.ok());
    QVERIFY2(absent.message().find("cannot read") != std::string::npos, absent.message().c_str());
  }
};

QTEST_APPLESS_MAIN(TestHfConfig)
#include "tst_hf_config.moc"
