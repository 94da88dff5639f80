// model_tool: loads a Hugging Face model directory with Shardscope's Qwen2 / Qwen2-VL, runs one
// unsharded forward and backward in float32 on the inputs of a safetensors file and writes what
// the reference test compares with transformers.
//
//   model_tool MODEL_DIR INPUTS.safetensors OUT.safetensors
//
// Inputs: input_ids, labels (B, T) int64; optional attention_mask (B, T), pixel_values (N, P),
// image_grid_thw (I, 3). Output: logits (B, T, V) float32, loss (float64 scalar: mean over label
// tokens), param_count (int64, from spec without LibTorch), and grad.<name> for every
// parameter (a tied parameter once, under its owner's name).
#include <ATen/ATen.h>

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "spec/hf_config.h"
#include "trainer/base/fatal.h"
#include "trainer/base/safetensors.h"
#include "trainer/model/qwen2vl.h"

using namespace shardscope;

namespace {

at::Tensor input(const ckpt::SafetensorsFile& file, const std::string& name, bool required) {
  const at::Tensor* t = file.find(name);
  SHARD_CHECK(t != nullptr || !required, spec::ErrorKind::data, "inputs file has no tensor " + name,
              "write it from the test script");
  return t != nullptr ? *t : at::Tensor();
}

// Every layer's parameters, loaded; a tied parameter is its owner's tensor (one gradient).
std::vector<std::vector<at::Tensor>> load_params(const model::Qwen2VLModel& m) {
  std::vector<std::vector<at::Tensor>> params;
  std::map<std::string, at::Tensor> by_name;
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
      values[i].requires_grad_(true);
      by_name[def.name] = values[i];
    }
    params.push_back(std::move(values));
  }
  return params;
}

int run(const std::string& dir, const std::string& inputs_path, const std::string& out_path) {
  auto model = model::load_hf_model(dir);
  const auto inputs = ckpt::read_safetensors(inputs_path);
  model::Batch batch;
  batch.input_ids = input(inputs, "input_ids", true);
  batch.labels = input(inputs, "labels", true);
  batch.attention_mask = input(inputs, "attention_mask", false);
  batch.pixel_values = input(inputs, "pixel_values", false);
  batch.image_grid_thw = input(inputs, "image_grid_thw", false);
  auto params = load_params(*model);

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

  ckpt::NamedTensors out;
  out.emplace_back("logits", logits.contiguous());
  out.emplace_back("loss", loss.detach().to(at::kDouble).reshape({}));
  out.emplace_back("param_count",
                   at::scalar_tensor(spec::count_params(spec::hf_layers(model->config())),
                                     at::TensorOptions().dtype(at::kLong)));
  const auto& layers = model->layers();
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (std::size_t i = 0; i < layers[l].params.size(); ++i) {
      const auto& def = layers[l].params[i];
      if (!def.tied_to.empty()) continue;
      const auto& g = params[l][i].grad();
      out.emplace_back("grad." + def.name, g.defined() ? g : at::zeros_like(params[l][i]));
    }
  ckpt::write_safetensors(out_path, out);
  std::cout << "model_tool: loss " << loss.item<double>() << ", " << out.size() << " tensors\n";
  return trainer::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: model_tool MODEL_DIR INPUTS.safetensors OUT.safetensors\n";
    return trainer::kExitConfig;
  }
  const std::string dir = argv[1];
  const std::string inputs = argv[2];
  const std::string out = argv[3];
  return trainer::run_guarded([&] { return run(dir, inputs, out); });
}
