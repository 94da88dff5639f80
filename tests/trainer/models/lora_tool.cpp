// lora_tool: the C++ side of the LoRA reference test. Loads a Hugging Face model directory,
// adds adapters, draws a non-zero lora_B (so the adapters act), runs one unsharded float32
// forward and backward on the inputs of a safetensors file, and exports the adapter as PEFT
// would save it and the weights merged into the base.
//
//   lora_tool MODEL_DIR INPUTS.safetensors OUT_DIR R ALPHA TARGET[,TARGET...] [NF4_BLOCK]
//
// With NF4_BLOCK the run is QLoRA's (lora.quantize = "nf4", double quantization): every base
// weight spec::apply_lora marks nf4 computes with its NF4 round trip (model::quantize_nf4, then
// dequantize_nf4 to fp32), the values the engine's units dequantize.
//
// Writes OUT_DIR/out.safetensors (logits (B, T, V) float32, loss float64 = mean over label
// tokens, params_total / params_trainable int64 from spec, grad.<PEFT key> of every
// adapter), OUT_DIR/adapter/ (adapter_model.safetensors + adapter_config.json) and
// OUT_DIR/merged/model.safetensors (OUT_DIR/merged must exist).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "spec/hf_config.h"
#include "trainer/base/fatal.h"
#include "trainer/base/safetensors.h"
#include "trainer/ckpt/peft.h"
#include "trainer/model/lora.h"
#include "trainer/model/nf4.h"
#include "trainer/model/qwen2vl.h"

using namespace shardscope;

namespace {

constexpr double kLoraBStd = 0.05;  // lora_B's test values: far from PEFT's zero init

at::Tensor input(const ckpt::SafetensorsFile& file, const std::string& name) {
  const at::Tensor* t = file.find(name);
  return t != nullptr ? *t : at::Tensor();
}

// Every layer's values; adapters trainable, base frozen; a tied parameter is its owner's tensor.
std::vector<std::vector<at::Tensor>> load_params(const model::Qwen2VLModel& m,
                                                 const spec::LoraSection& lora) {
  std::vector<std::vector<at::Tensor>> params;
  std::map<std::string, at::Tensor> by_name;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  const auto& layers = m.layers();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    std::vector<at::Tensor> values;
    for (const auto& p : layers[l].params) values.push_back(at::zeros(p.shape, at::kFloat));
    m.init_layer(static_cast<int>(l), values, 0);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto& def = layers[l].params[i];
      if (!def.tied_to.empty()) {
        values[i] = by_name.at(def.tied_to);
        continue;
      }
      if (def.name.find(".lora_B.") != std::string::npos) values[i].normal_(0.0, kLoraBStd, gen);
      if (def.nf4) {
        values[i] = model::dequantize_nf4(
            model::quantize_nf4(values[i], lora.quant_block_size, lora.double_quant), at::kFloat);
      }
      values[i].requires_grad_(def.trainable);
      by_name[def.name] = values[i];
    }
    params.push_back(std::move(values));
  }
  return params;
}

spec::LoraSection lora_of(const std::string& r, const std::string& alpha,
                          const std::string& targets) {
  spec::LoraSection lora;
  lora.enabled = true;
  lora.r = std::stoll(r);
  lora.alpha = std::stod(alpha);
  lora.target_modules.clear();
  std::stringstream ss(targets);
  for (std::string t; std::getline(ss, t, ',');) lora.target_modules.push_back(t);
  return lora;
}

int run(const std::string& dir, const std::string& inputs_path, const std::string& out_dir,
        const spec::LoraSection& lora) {
  auto model = model::load_hf_model(dir);
  const auto unmatched = model::apply_lora(*model, lora);
  SHARD_CHECK(
      unmatched.empty(), spec::ErrorKind::config,
      "lora.target_modules: " + (unmatched.empty() ? "" : unmatched[0]) + " selects no module",
      "name modules the model has");
  const auto inputs = ckpt::read_safetensors(inputs_path);
  model::Batch batch;
  batch.input_ids = input(inputs, "input_ids");
  batch.labels = input(inputs, "labels");
  batch.attention_mask = input(inputs, "attention_mask");
  batch.pixel_values = input(inputs, "pixel_values");
  batch.image_grid_thw = input(inputs, "image_grid_thw");
  auto params = load_params(*model, lora);

  auto ctx = model->context(batch, at::kFloat);
  const auto T = batch.labels.size(1);
  const auto n_labels = batch.labels.narrow(1, 1, T - 1).ne(-100).sum().item<std::int64_t>();
  ctx.loss_scale = 1.0 / static_cast<double>(std::max<std::int64_t>(n_labels, 1));
  at::Tensor x;
  const auto n_layers = static_cast<int>(params.size());
  for (int l = 0; l + 1 < n_layers; ++l) x = model->forward_layer(l, params[l], x, ctx);
  auto logits = model->logits(params.back(), x).detach();
  auto loss = model->forward_layer(n_layers - 1, params.back(), x, ctx);
  loss.backward();

  ckpt::NamedTensors state;
  ckpt::NamedTensors grads;
  const auto& layers = model->layers();
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (std::size_t i = 0; i < layers[l].params.size(); ++i) {
      const auto& def = layers[l].params[i];
      if (!def.tied_to.empty()) continue;
      state.emplace_back(def.name, params[l][i].detach());
      if (def.trainable) grads.emplace_back(def.name, params[l][i].grad());
    }
  const auto& type = model->config().model_type;
  ckpt::NamedTensors out;
  out.emplace_back("logits", logits.contiguous());
  out.emplace_back("loss", loss.detach().to(at::kDouble).reshape({}));
  auto count = [](std::int64_t n) {
    return at::scalar_tensor(n, at::TensorOptions().dtype(at::kLong));
  };
  auto shapes = spec::hf_layers(model->config());
  (void)spec::apply_lora(lora, shapes);
  out.emplace_back("params_total", count(spec::count_params(shapes)));
  out.emplace_back("params_trainable", count(model->params_trainable()));
  for (auto& [key, g] : ckpt::peft_adapter_tensors(grads, type)) out.emplace_back("grad." + key, g);
  ckpt::write_safetensors(out_dir + "/out.safetensors", out);
  ckpt::write_peft_adapter(out_dir + "/adapter", state, lora, {dir, type});
  ckpt::write_safetensors(out_dir + "/merged/model.safetensors", ckpt::merge_lora(state, lora),
                          {{"format", "pt"}});
  std::cout << "lora_tool: loss " << loss.item<double>() << ", " << grads.size()
            << " adapter gradients\n";
  return trainer::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::cerr << "usage: lora_tool MODEL_DIR INPUTS.safetensors OUT_DIR R ALPHA TARGETS "
                 "[NF4_BLOCK]\n";
    return trainer::kExitConfig;
  }
  const std::vector<std::string> a(argv + 1, argv + argc);
  auto lora = lora_of(a[3], a[4], a[5]);
  if (a.size() == 7) {
    lora.quantize = "nf4";
    lora.quant_block_size = std::stoll(a[6]);
  }
  return trainer::run_guarded([&] { return run(a[0], a[1], a[2], lora); });
}
