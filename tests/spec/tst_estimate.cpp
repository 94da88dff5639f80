// The memory estimate of real checkpoints (qwen2, qwen2_vl) from the model folder, torch-free:
// the published Qwen2-VL-2B and -7B config.json (examples/models) give the parameter counts
// transformers gives, the model-state terms follow from them, image tokens come from
// preprocessor_config.json, and a folder the estimate cannot trust (no config.json, another
// model_type, weights whose shapes contradict config.json) is an error naming the file and the
// field. The budget: launch.device_memory_gib always wins, a detected GPU next, the host's
// memory for CPU runs, and Slurm without the field is an error naming it. With lora.quantize =
// "nf4" the base's Linears are counted as the engine stores them (NF4 records in each unit's
// "<unit>/nf4" flat, dequantized while the unit runs), byte for byte on the tiny model.
#include <QTemporaryDir>
#include <QTest>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "spec/estimate.h"
#include "spec/experiment.h"
#include "spec/hf_config.h"
#include "tests/support/paths.h"
#include "tests/support/verify_ok.h"

using namespace shardscope::spec;
namespace fs = std::filesystem;

namespace {

const std::string kSource = shardscope::testing::sourceDir().toStdString();
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
const std::string kData = "[data]\ntrain_path = \"train.jsonl\"\n";
const LoadOptions kNoPaths = [] {
  LoadOptions o;
  o.check_paths = false;
  return o;
}();

Experiment experiment(const std::string& arch, const std::string& path) {
  Experiment exp;
  exp.model.arch = arch;
  exp.model.path = path;
  exp.data.train_path = "train.jsonl";  // not read by the estimate
  exp.data.format = "chat";
  exp.data.seq_len = 2048;
  exp.train.batch_size = 8;
  exp.train.micro_batch_size = 1;
  exp.shard.precision = PrecisionMode::bf16;
  exp.shard.activation_checkpointing = true;
  exp.launch.nproc_per_node = 8;
  return exp;
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A safetensors file holding only a header (data offsets are not read by the shape check).
void write_safetensors(const fs::path& path, const nlohmann::json& tensors) {
  const std::string header = tensors.dump();
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write(path, bytes + header);
}

// Every tensor of `config`'s layers with its shape, in the published names.
nlohmann::json headers_for(const HfModelConfig& config) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& layer : hf_layers(config))
    for (const auto& p : layer.params)
      if (p.tied_to.empty())
        out[p.name] = {{"dtype", "BF16"}, {"shape", p.shape}, {"data_offsets", {0, 0}}};
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

class TestEstimate : public QObject {
  Q_OBJECT

 private slots:
  void qwen2vlModelStatesFollowThePublishedConfigs() {
    for (const auto& [name, params] : {std::pair{"qwen2-vl-2b", std::int64_t{2208985600}},
                                       std::pair{"qwen2-vl-7b", std::int64_t{8291375616}}}) {
      auto exp = experiment("qwen2_vl", kSource + "/examples/models/" + name);
      auto one = estimate_memory(exp, 1, 1);
      VERIFY_OK(one);
      QCOMPARE(one->params_total, params);
      QCOMPARE(one->params_trainable, params);
      // Unsharded fp32 master, gradient and two AdamW moments: 16 bytes a parameter (the tied
      // head counted once), plus the padding of nothing on one rank.
      QCOMPARE(one->params + one->grads + one->optimizer, 16 * params);
      // No preprocessor_config.json: Qwen2VLImageProcessor's max_pixels (1280 tokens).
      QCOMPARE(one->image_tokens, std::int64_t{1280});
      QVERIFY(one->vision > 0);
      auto eight = estimate_memory(exp, 8, 8);
      VERIFY_OK(eight);
      // Sharded over 8: each rank holds an eighth of the model states (padding aside).
      const auto states = eight->params + eight->grads + eight->optimizer;
      QVERIFY(states >= 2 * params && states < 2 * params + 16 * 8 * 1024 * 64);
      QVERIFY(eight->total < one->total);
    }
  }

  void loraFreezesTheBaseAndDropsItsStates() {
    auto exp = experiment("qwen2_vl", kSource + "/examples/models/qwen2-vl-2b");
    exp.lora.enabled = true;
    exp.lora.r = 16;
    exp.lora.target_modules = {"q_proj", "v_proj"};
    auto e = estimate_memory(exp, 2, 2);
    VERIFY_OK(e);
    // 28 blocks x (q: 16 x (1536 + 1536), v: 16 x (1536 + 256)).
    QCOMPARE(e->params_trainable, std::int64_t{28 * 16 * (1536 + 1536 + 1536 + 256)});
    QVERIFY(e->optimizer < 8 * e->params_trainable / 2 + 8 * 64 * 1024);
    QVERIFY(e->params >= 4 * e->params_total / 2);  // the frozen base is held, sharded
  }

  void nf4RecordsFollowTheByteFormula() {
    LoraSection lora;
    lora.quantize = "nf4";
    lora.quant_block_size = 32;
    // 130 weights: 65 packed bytes, 5 blocks: 5 absmax codes, one nested fp32 absmax, one fp32
    // offset: 78 bytes, padded to 80.
    QCOMPARE(nf4_record_bytes(130, lora.quant_block_size, lora.double_quant), std::int64_t{80});
    lora.double_quant = false;  // 65 + 5 fp32 absmax = 85, padded to 88
    QCOMPARE(nf4_record_bytes(130, lora.quant_block_size, lora.double_quant), std::int64_t{88});
    lora.double_quant = true;
    lora.quant_block_size = 64;  // 4096 weights: 2048 + 64 + 4 + 4
    QCOMPARE(nf4_record_bytes(4096, lora.quant_block_size, lora.double_quant), std::int64_t{2120});
    // 64 x 64 x 1024 weights: 65536 blocks, 256 nested absmax.
    QCOMPARE(nf4_record_bytes(64 * 64 * 1024, lora.quant_block_size, lora.double_quant),
             std::int64_t{64 * 64 * 512 + 65536 + 4 * 256 + 4});
  }

  // The tiny model (C 64, I 256, V 256, 2 blocks) with adapters on q and v (r 8) over a shard
  // group of 3, counted by hand: a block's NF4 weights are q, k, v, o (64 x 64: 2048 packed +
  // 64 codes + 4 + 4 = 2120 bytes each) and gate, up, down (64 x 256: 8192 + 256 + 4 + 4 = 8456),
  // 33848 bytes, ceil(33848 / 3) = 11283 a rank; its other frozen tensors (two norms, three
  // biases: 320) stay fp32 masters, ceil(320 / 3) = 107 elements; its adapters 2 x 2 x 8 x 64 =
  // 2048, 683 a rank; the root (embedding, final norm, head: 32832) 10944 a rank.
  void nf4CountsTheTinyModelsRecordsExactly() {
    Experiment exp;
    exp.model.arch = "tiny";
    exp.data.train_path = "train.jsonl";
    exp.data.seq_len = 32;
    exp.train.batch_size = 3;
    exp.shard.precision = PrecisionMode::bf16;
    exp.launch.nproc_per_node = 3;
    exp.lora.enabled = true;
    exp.lora.r = 8;
    exp.lora.target_modules = {"q_proj", "v_proj"};
    exp.lora.quantize = "nf4";
    auto e = estimate_memory(exp, 3, 3);
    VERIFY_OK(e);
    QCOMPARE(e->shard_size, 3);
    QCOMPARE(e->nf4_params, std::int64_t{2 * (4 * 64 * 64 + 3 * 64 * 256)});
    QCOMPARE(e->nf4_packed, std::int64_t{2 * 33848});
    QCOMPARE(e->nf4, std::int64_t{2 * 11283});
    QCOMPARE(e->params, std::int64_t{4 * 10944 + 2 * (4 * 107 + 4 * 683) + 2 * 11283});
    QCOMPARE(e->grads, std::int64_t{2 * 4 * 683});      // adapters only
    QCOMPARE(e->optimizer, std::int64_t{2 * 8 * 683});  // adapters only
    QCOMPARE(e->params_trainable, std::int64_t{2 * 2048});
    // FULL_SHARD with prefetch, in bf16: the root; the running block, its flats padded
    // (3 x 683 + 3 x 107) and its NF4 weights dequantized, while its gathered records (3 x 11283
    // bytes) are still held; the prefetched block, its flats and its records only.
    QCOMPARE(e->gathered, std::int64_t{32832 * 2 + (3 * 683 + 3 * 107 + 65536) * 2 + 3 * 11283 +
                                       (3 * 683 + 3 * 107) * 2 + 3 * 11283});
    const auto text = format_estimate(*e);
    QVERIFY2(contains(text, "nf4 base") && contains(text, "131072 weights as NF4"), text.c_str());
    QVERIFY2(contains(estimate_json(*e), "\"nf4_packed\":67696"), estimate_json(*e).c_str());

    // Without double quantization every block has an fp32 absmax: q 2048 + 4 x 64, gate
    // 8192 + 4 x 256; 36864 bytes a block, 12288 a rank.
    exp.lora.double_quant = false;
    auto plain_absmax = estimate_memory(exp, 3, 3);
    VERIFY_OK(plain_absmax);
    QCOMPARE(plain_absmax->nf4, std::int64_t{2 * 12288});
    // Stored as float32 the flat shards 4-byte elements: 33848 / 4 = 8462, 2821 a rank.
    exp.lora.double_quant = true;
    exp.lora.quant_storage = "float32";
    auto f32 = estimate_memory(exp, 3, 3);
    VERIFY_OK(f32);
    QCOMPARE(f32->nf4, std::int64_t{2 * 4 * 2821});
    // SHARD_GRAD_OP keeps every unit gathered (dequantized), plus one unit's records while it
    // dequantizes.
    exp.lora.quant_storage = "uint8";
    exp.shard.strategy = ShardStrategy::shard_grad_op;
    auto kept = estimate_memory(exp, 3, 3);
    VERIFY_OK(kept);
    QCOMPARE(kept->gathered,
             std::int64_t{(32832 + 2 * (3 * 683 + 3 * 107 + 65536)) * 2 + 3 * 11283});
  }

  void nf4LowersTheEstimateBelowPlainLora() {
    auto exp = experiment("qwen2_vl", kSource + "/examples/models/qwen2-vl-2b");
    exp.lora.enabled = true;
    exp.lora.r = 16;
    exp.lora.target_modules = {"q_proj", "v_proj"};
    auto plain = estimate_memory(exp, 2, 2);
    VERIFY_OK(plain);
    QCOMPARE(plain->nf4_params, std::int64_t{0});
    QCOMPARE(plain->nf4, std::int64_t{0});
    exp.lora.quantize = "nf4";
    auto nf4 = estimate_memory(exp, 2, 2);
    VERIFY_OK(nf4);
    // Every Linear of the 28 text blocks (q, o: 1536 x 1536; k, v: 256 x 1536; gate, up, down:
    // 8960 x 1536), none of the vision tower's (not targeted).
    const std::int64_t text = 28LL * (2 * 1536 * 1536 + 2 * 256 * 1536 + 3 * 8960 * 1536);
    QCOMPARE(nf4->nf4_params, text);
    QCOMPARE(nf4->params_total, plain->params_total);
    QCOMPARE(nf4->grads, plain->grads);
    QCOMPARE(nf4->optimizer, plain->optimizer);
    // Each weight: 4 bytes as an fp32 master, about half a byte as NF4.
    QVERIFY(nf4->params < plain->params - 3 * text / 2);
    QVERIFY(nf4->nf4 < text / 2 * 6 / 10);
    QVERIFY(nf4->total < plain->total);
    QVERIFY(nf4->device < plain->device);
    // A targeted vision Linear is quantized too: qkv (3840 x 1280) in 32 vision blocks.
    exp.lora.target_modules = {"q_proj", "v_proj", "qkv"};
    auto vision = estimate_memory(exp, 2, 2);
    VERIFY_OK(vision);
    QCOMPARE(vision->nf4_params, text + 32LL * 3840 * 1280);
  }

  void offloadMovesStatesToTheHost() {
    auto exp = experiment("qwen2", kSource + "/examples/models/qwen2-vl-2b");
    exp.model.arch = "qwen2_vl";
    exp.shard.offload_optimizer = true;
    auto e = estimate_memory(exp, 4, 4);
    VERIFY_OK(e);
    QCOMPARE(e->host, e->optimizer);
    QCOMPARE(e->device, e->total - e->optimizer);
    exp.shard.offload_params = true;
    auto both = estimate_memory(exp, 4, 4);
    VERIFY_OK(both);
    QCOMPARE(both->host, both->optimizer + both->params);
  }

  void imageTokensComeFromThePreprocessorAndTheSequence() {
    QTemporaryDir dir;
    const fs::path model = dir.path().toStdString();
    fs::copy_file(kSource + "/examples/models/qwen2-vl-2b/config.json", model / "config.json");
    // 448 x 448 pixels at most: (448 / 28)^2 = 256 merged tokens an image.
    write(model / "preprocessor_config.json",
          R"({"max_pixels": 200704, "min_pixels": 3136, "patch_size": 14, "merge_size": 2})");
    auto exp = experiment("qwen2_vl", model.string());
    auto e = estimate_memory(exp, 1, 1);
    VERIFY_OK(e);
    QCOMPARE(e->image_tokens, std::int64_t{256});
    exp.data.seq_len = 100;  // never more image tokens than the sequence holds
    auto short_seq = estimate_memory(exp, 1, 1);
    VERIFY_OK(short_seq);
    QCOMPARE(short_seq->image_tokens, std::int64_t{100});
    QVERIFY(short_seq->vision < e->vision);
    // Packed rows hold as many image samples as fit (256 image tokens + 12 others each); one a
    // row unpacked.
    exp.data.seq_len = 2048;
    exp.data.pack = true;
    auto packed = estimate_memory(exp, 1, 1);
    VERIFY_OK(packed);
    QCOMPARE(packed->images_per_row, std::int64_t{7});
    exp.data.pack = false;
    auto unpacked = estimate_memory(exp, 1, 1);
    VERIFY_OK(unpacked);
    QCOMPARE(unpacked->images_per_row, std::int64_t{1});
    QVERIFY(packed->vision > 6 * unpacked->vision);
    exp.data.format = "tokens";  // token samples have no images
    auto text_only = estimate_memory(exp, 1, 1);
    VERIFY_OK(text_only);
    QCOMPARE(text_only->vision, std::int64_t{0});
  }

  void weightsThatAgreePass() {
    QTemporaryDir dir;
    const fs::path model = dir.path().toStdString();
    fs::copy_file(kSource + "/examples/models/qwen2-vl-2b/config.json", model / "config.json");
    auto config = read_hf_config(model.string());
    VERIFY_OK(config);
    write_safetensors(model / "model.safetensors", headers_for(*config));
    VERIFY_OK(check_hf_weights(model.string(), *config));
    VERIFY_OK(estimate_memory(experiment("qwen2_vl", model.string()), 2, 2));
  }

  void badModelFoldersNameTheFileAndField() {
    QTemporaryDir dir;
    const fs::path root = dir.path().toStdString();
    // No config.json.
    fs::create_directories(root / "empty");
    auto none = estimate_memory(experiment("qwen2_vl", (root / "empty").string()), 1, 1);
    QVERIFY(!none.ok());
    QVERIFY2(contains(none.message(), (root / "empty" / "config.json").string()),
             none.message().c_str());
    // An unknown model_type.
    fs::create_directories(root / "llama");
    write(root / "llama" / "config.json", R"({"model_type": "llama", "hidden_size": 8})");
    auto llama = estimate_memory(experiment("qwen2", (root / "llama").string()), 1, 1);
    QVERIFY(!llama.ok());
    QVERIFY2(contains(llama.message(), "config.json: field model_type is \"llama\""),
             llama.message().c_str());
    // model.arch disagreeing with config.json.
    auto arch =
        estimate_memory(experiment("qwen2", kSource + "/examples/models/qwen2-vl-2b"), 1, 1);
    QVERIFY(!arch.ok());
    QVERIFY2(contains(arch.message(),
                      "field model_type is \"qwen2_vl\" but model.arch is "
                      "\"qwen2\""),
             arch.message().c_str());
    // No model.path.
    auto nopath = estimate_memory(experiment("qwen2_vl", ""), 1, 1);
    QVERIFY(!nopath.ok());
    QVERIFY2(contains(nopath.message(), "model.path"), nopath.message().c_str());
  }

  void weightsThatContradictTheConfigNameTensorFileAndField() {
    QTemporaryDir dir;
    const fs::path model = dir.path().toStdString();
    fs::copy_file(kSource + "/examples/models/qwen2-vl-2b/config.json", model / "config.json");
    auto config = read_hf_config(model.string());
    VERIFY_OK(config);
    auto headers = headers_for(*config);
    // Weights of a model with another MLP width (8192 instead of config.json's 8960).
    headers["model.layers.3.mlp.up_proj.weight"]["shape"] = {8192, 1536};
    write_safetensors(model / "model.safetensors", headers);
    auto e = estimate_memory(experiment("qwen2_vl", model.string()), 1, 1);
    QVERIFY(!e.ok());
    const auto& m = e.message();
    QVERIFY2(contains(m, (model / "model.safetensors").string()), m.c_str());
    QVERIFY2(contains(m, "tensor model.layers.3.mlp.up_proj.weight has shape [8192, 1536]"),
             m.c_str());
    QVERIFY2(contains(m, "implies [8960, 1536] (field intermediate_size)"), m.c_str());
    // A checkpoint with fewer blocks than num_hidden_layers.
    headers = headers_for(*config);
    for (const char* p : {"input_layernorm.weight", "self_attn.q_proj.weight"})
      headers.erase(std::string("model.layers.27.") + p);
    write_safetensors(model / "model.safetensors", headers);
    auto fewer = check_hf_weights(model.string(), *config);
    QVERIFY(!fewer.ok());
    QVERIFY2(contains(fewer.message(), "no tensor for model.layers.27.") &&
                 contains(fewer.message(), "num_hidden_layers"),
             fewer.message().c_str());
    // A header whose length runs past the end of the file (a truncated download).
    write(model / "model.safetensors", std::string("\xff\xff\xff\x00\x00\x00\x00\x00{}", 10));
    auto truncated = check_hf_weights(model.string(), *config);
    QVERIFY(!truncated.ok());
    QVERIFY2(contains(truncated.message(), "not a safetensors file"), truncated.message().c_str());
  }

  void deviceMemoryGibAlwaysWins() {
    auto exp = experiment("qwen2_vl", kSource + "/examples/models/qwen2-vl-2b");
    DetectedMemory found{80LL << 30, "nvidia-smi on this machine: GPU 0, H100", 512LL << 30,
                         "this machine"};
    auto gpu = device_budget(exp, found);
    VERIFY_OK(gpu);
    QCOMPARE(gpu->bytes, std::int64_t{80LL << 30});
    QVERIFY(gpu->gpu);
    QCOMPARE(gpu->source, found.gpu_source);
    exp.launch.device_memory_gib = 24;
    auto field = device_budget(exp, found);
    VERIFY_OK(field);
    QCOMPARE(field->bytes, std::int64_t{24LL << 30});
    QCOMPARE(field->source, std::string("launch.device_memory_gib = 24"));
    exp.launch.kind = LaunchKind::slurm;
    VERIFY_OK(device_budget(exp, {}));
  }

  void cpuRunsShareTheHostsMemoryAndSlurmNeedsTheField() {
    auto exp = experiment("qwen2_vl", kSource + "/examples/models/qwen2-vl-2b");
    exp.launch.nproc_per_node = 4;
    DetectedMemory host{0, {}, 64LL << 30, "this machine"};
    auto cpu = device_budget(exp, host);
    VERIFY_OK(cpu);
    QCOMPARE(cpu->bytes, std::int64_t{16LL << 30});
    QVERIFY(!cpu->gpu);
    QVERIFY2(contains(cpu->source, "this machine") && contains(cpu->source, "4 rank"),
             cpu->source.c_str());
    exp.shard.device = "cuda";
    auto nogpu = device_budget(exp, host);
    QVERIFY(!nogpu.ok());
    QVERIFY2(contains(nogpu.message(), "launch.device_memory_gib"), nogpu.message().c_str());
    exp.shard.device = "auto";
    exp.launch.kind = LaunchKind::slurm;
    auto slurm = device_budget(exp, host);
    QVERIFY(!slurm.ok());
    QVERIFY2(contains(slurm.message(),
                      "launch.device_memory_gib: required for launch.kind = "
                      "\"slurm\""),
             slurm.message().c_str());
  }

  void aGpuBudgetHoldsTheDeviceBytes() {
    auto exp = experiment("qwen2_vl", kSource + "/examples/models/qwen2-vl-7b");
    exp.shard.offload_optimizer = true;
    auto e = estimate_memory(exp, 8, 8);
    VERIFY_OK(e);
    exp.launch.device_memory_gib = static_cast<double>(e->device) / kGiB + 0.5;
    auto budget = device_budget(exp, {});
    VERIFY_OK(budget);
    QCOMPARE(budgeted_bytes(*e, *budget), e->device);
    QVERIFY(budgeted_bytes(*e, *budget) <= budget->bytes);
    QVERIFY(e->total > budget->bytes);  // the offloaded moments live in host memory
    QVERIFY(contains(format_budget(*e, *budget), "fits"));
  }

  // Chat data's samples bound the rows: the longest sample (the trainer pads a micro-batch to its
  // longest row) and the most image tokens one sample has, instead of seq_len tokens and one
  // image at the processor's largest size; packed, a full row with as many image samples as the
  // shortest fits. Other formats ignore the bound.
  void theDataBoundsTheRows() {
    auto exp = experiment("qwen2_vl", kSource + "/examples/models/qwen2-vl-2b");
    exp.lora.enabled = true;
    exp.data.pack = false;  // one sample a row, padded to the micro-batch's longest
    auto seq = estimate_memory(exp, 8, 8);
    VERIFY_OK(seq);
    QCOMPARE(seq->row_tokens, std::int64_t{2048});
    QCOMPARE(seq->rows_from, std::string("data.seq_len"));
    DataBound bound;
    bound.add(300, 0);
    bound.add(512, 256);
    bound.add(400, 320);
    bound.source = "train.jsonl: 3 samples, the longest 512 tokens";
    QCOMPARE(bound.samples, std::int64_t{3});
    QCOMPARE(bound.longest, std::int64_t{512});
    QCOMPARE(bound.most_visual_tokens, std::int64_t{320});
    QCOMPARE(bound.shortest_with_image, std::int64_t{400});
    auto data = estimate_memory(exp, 8, 8, &bound);
    VERIFY_OK(data);
    QCOMPARE(data->row_tokens, std::int64_t{512});
    QCOMPARE(data->image_tokens, std::int64_t{320});
    QCOMPARE(data->images_per_row, std::int64_t{1});
    QCOMPARE(data->rows_from, bound.source);
    // The states do not depend on the data; what scales with a row's tokens does, by 512/2048
    // (the text stack's saved tensors are linear in tokens, with checkpointing too).
    QCOMPARE(data->params, seq->params);
    QCOMPARE(data->optimizer, seq->optimizer);
    QCOMPARE(data->activations * 4, seq->activations);
    QVERIFY(data->vision > 0 && data->vision < seq->vision);  // 320 of 1280 image tokens
    QVERIFY(data->total < seq->total);
    QVERIFY2(contains(format_estimate(*data), "512 tokens, bounded by train.jsonl: 3 samples"),
             format_estimate(*data).c_str());
    QVERIFY(contains(estimate_json(*data), "\"row_tokens\":512"));

    exp.data.pack = true;  // a row: seq_len tokens, 2048 / 400 = 5 image samples of 320 at most
    auto packed = estimate_memory(exp, 8, 8, &bound);
    VERIFY_OK(packed);
    QCOMPARE(packed->row_tokens, std::int64_t{2048});
    QCOMPARE(packed->images_per_row, std::int64_t{5});
    QCOMPARE(packed->activations, seq->activations);
    QVERIFY(packed->vision > data->vision);

    // Packed, a rank's 4 samples of at most 512 tokens share one row of 2048: one micro-step, as
    // with 1 sample, so full fine-tuning carries no gradients between micro-steps. Without the
    // data, 4 rows and 4 micro-steps are assumed.
    exp.lora.enabled = false;
    exp.train.batch_size = 8;
    auto one = estimate_memory(exp, 8, 8, &bound);
    exp.train.batch_size = 32;
    auto four = estimate_memory(exp, 8, 8, &bound);
    auto four_seq = estimate_memory(exp, 8, 8);
    VERIFY_OK(one);
    VERIFY_OK(four);
    VERIFY_OK(four_seq);
    QCOMPARE(four->total, one->total);
    QVERIFY(four_seq->total > four->total);

    exp.data.pack = false;
    exp.data.format = "tokens";  // not chat: the bound is not the trainer's, so it is ignored
    auto tokens = estimate_memory(exp, 8, 8, &bound);
    VERIFY_OK(tokens);
    QCOMPARE(tokens->row_tokens, std::int64_t{2048});
    QCOMPARE(tokens->rows_from, std::string("data.seq_len"));
  }

  void deviceMemoryGibIsValidated() {
    auto exp =
        parse_experiment(kData + "[launch]\ndevice_memory_gib = -1\n", "neg.toml", {}, kNoPaths);
    QVERIFY(!exp.ok());
    QVERIFY2(contains(exp.message(), "launch.device_memory_gib"), exp.message().c_str());
    auto good =
        parse_experiment(kData + "[launch]\ndevice_memory_gib = 79.5\n", "ok.toml", {}, kNoPaths);
    VERIFY_OK(good);
    QCOMPARE(good->launch.device_memory_gib, 79.5);
  }
};

QTEST_APPLESS_MAIN(TestEstimate)
#include "tst_estimate.moc"
