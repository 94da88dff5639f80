#include "spec/model_shape.h"

#include <fnmatch.h>

#include <algorithm>

namespace shardscope::spec {

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

Qwen2Dims tiny_dims(const ModelSection& model) {
  Qwen2Dims d;
  d.vocab_size = model.tiny_vocab_size;
  d.hidden_size = model.tiny_hidden_size;
  d.intermediate_size =
      model.tiny_intermediate_size > 0 ? model.tiny_intermediate_size : 4 * model.tiny_hidden_size;
  d.num_layers = model.tiny_layers;
  d.num_heads = model.tiny_heads;
  d.num_kv_heads = model.tiny_heads;
  d.max_position = model.tiny_max_seq_len;
  return d;
}

std::int64_t count_params(const std::vector<LayerShape>& layers) {
  std::int64_t n = 0;
  for (const auto& layer : layers)
    for (const auto& p : layer.params)
      if (p.tied_to.empty()) n += numel(p.shape);
  return n;
}

std::vector<LayerShape> qwen2_layers(const Qwen2Dims& d) {
  std::vector<LayerShape> layers;
  append_qwen2_text_layers(layers, d);
  return layers;
}

void append_qwen2_text_layers(std::vector<LayerShape>& layers, const Qwen2Dims& d) {
  const auto C = d.hidden_size;
  const auto I = d.intermediate_size;
  const auto KD = d.num_kv_heads * (C / d.num_heads);
  layers.push_back({"embed", {{"model.embed_tokens.weight", {d.vocab_size, C}, true}}, false});
  for (std::int64_t i = 0; i < d.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    layers.push_back({"layers." + std::to_string(i),
                      {
                          {p + "input_layernorm.weight", {C}, false},
                          {p + "self_attn.q_proj.weight", {C, C}, true},
                          {p + "self_attn.q_proj.bias", {C}, false},
                          {p + "self_attn.k_proj.weight", {KD, C}, true},
                          {p + "self_attn.k_proj.bias", {KD}, false},
                          {p + "self_attn.v_proj.weight", {KD, C}, true},
                          {p + "self_attn.v_proj.bias", {KD}, false},
                          {p + "self_attn.o_proj.weight", {C, C}, true},
                          {p + "post_attention_layernorm.weight", {C}, false},
                          {p + "mlp.gate_proj.weight", {I, C}, true},
                          {p + "mlp.up_proj.weight", {I, C}, true},
                          {p + "mlp.down_proj.weight", {C, I}, true},
                      },
                      true});
  }
  ParamShape head{"lm_head.weight", {d.vocab_size, C}, true};
  if (d.tie_word_embeddings) head.tied_to = "model.embed_tokens.weight";
  layers.push_back({"head", {{"model.norm.weight", {C}, false}, head}, false});
}

std::vector<std::vector<int>> plan_units(const std::vector<LayerShape>& layers, WrapPolicy policy,
                                         std::int64_t min_params) {
  std::vector<std::vector<int>> units(1);  // units[0] is the root
  std::vector<int> group;
  std::int64_t group_params = 0;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const auto& layer = layers[l];
    if (!layer.is_block || policy == WrapPolicy::none) {
      // A size-policy group still below the minimum when the blocks end (the head, the vision
      // merger) stays in the root, as FSDP's size policy leaves it; it was a unit of its own.
      for (int g : group) units[0].push_back(g);
      group.clear();
      group_params = 0;
      units[0].push_back(static_cast<int>(l));
      continue;
    }
    group.push_back(static_cast<int>(l));
    for (const auto& p : layer.params) group_params += numel(p.shape);
    if (policy == WrapPolicy::block || group_params >= min_params) {
      units.push_back(group);
      group.clear();
      group_params = 0;
    }
  }
  // A size-policy tail below the minimum stays in the root, as FSDP's size policy leaves it.
  for (int l : group) units[0].push_back(l);
  std::sort(units[0].begin(), units[0].end());
  return units;
}

std::vector<std::string> apply_freeze(const TrainSection& train, std::vector<LayerShape>& layers) {
  std::vector<std::string> unmatched;
  for (const auto& glob : train.freeze) {
    bool any = false;
    for (auto& layer : layers)
      for (auto& p : layer.params)
        if (fnmatch(glob.c_str(), p.name.c_str(), 0) == 0) {
          p.trainable = false;
          any = true;
        }
    if (!any) unmatched.push_back(glob);
  }
  return unmatched;
}

namespace {

constexpr const char* kLoraPrefix = "base_model.model.";
constexpr const char* kLoraA = ".lora_A.weight";
constexpr const char* kLoraB = ".lora_B.weight";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The module path of a Linear weight "<module>.weight", or "" for any other parameter.
std::string linear_module(const ParamShape& p) {
  static const std::string kWeight = ".weight";
  if (p.shape.size() != 2 || !p.tied_to.empty() || !ends_with(p.name, kWeight)) return {};
  auto module = p.name.substr(0, p.name.size() - kWeight.size());
  const auto dot = module.rfind('.');
  const auto last = dot == std::string::npos ? module : module.substr(dot + 1);
  const auto& names = lora_module_names();
  return std::find(names.begin(), names.end(), last) != names.end() ? module : std::string();
}

}  // namespace

double training_flops_per_token(const Qwen2Dims& d, std::int64_t seq_len) {
  // Every parameter after the embedding: the blocks, the final norm and lm_head (a tied head's
  // weight is listed there too, tied_to the embedding's), so the head's matmul counts either way.
  double n = 0;
  const auto layers = qwen2_layers(d);
  for (std::size_t l = 1; l < layers.size(); ++l)
    for (const auto& p : layers[l].params) n += static_cast<double>(numel(p.shape));
  return 6.0 * n + 12.0 * static_cast<double>(d.num_layers) * static_cast<double>(d.hidden_size) *
                       static_cast<double>(seq_len);
}

const std::vector<std::string>& lora_module_names() {
  static const std::vector<std::string> kNames = {"q_proj",    "k_proj",  "v_proj",    "o_proj",
                                                  "gate_proj", "up_proj", "down_proj", "qkv",
                                                  "proj",      "fc1",     "fc2"};
  return kNames;
}

std::string lora_module_list() {
  std::string out;
  for (const auto& n : lora_module_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string lora_param_name(const std::string& module, char which) {
  return kLoraPrefix + module + (which == 'A' ? kLoraA : kLoraB);
}

bool is_lora_param(const std::string& name) {
  return name.rfind(kLoraPrefix, 0) == 0 && (ends_with(name, kLoraA) || ends_with(name, kLoraB));
}

bool lora_target_matches(const std::string& target, const std::string& module) {
  return module == target || ends_with(module, "." + target);
}

std::int64_t nf4_record_bytes(std::int64_t n, std::int64_t block_size, bool double_quant) {
  const std::int64_t blocks = (n + block_size - 1) / block_size;
  const std::int64_t nested = (blocks + 255) / 256;
  const std::int64_t absmax = double_quant ? 4 * nested + 4 + blocks : 4 * blocks;
  return (absmax + (n + 1) / 2 + 3) / 4 * 4;
}

std::vector<std::string> apply_lora(const LoraSection& lora, std::vector<LayerShape>& layers) {
  if (!lora.enabled) return {};
  std::vector<bool> used(lora.target_modules.size(), false);
  for (auto& layer : layers) {
    std::vector<ParamShape> adapters;
    for (auto& p : layer.params) {
      p.trainable = false;
      const auto module = linear_module(p);
      if (module.empty()) continue;
      bool selected = false;
      for (std::size_t t = 0; t < lora.target_modules.size(); ++t)
        if (lora_target_matches(lora.target_modules[t], module)) used[t] = selected = true;
      if (lora.quantize == "nf4") p.nf4 = selected || module.rfind("visual.", 0) != 0;
      if (!selected) continue;
      const auto out = p.shape[0];
      const auto in = p.shape[1];
      adapters.push_back({lora_param_name(module, 'A'), {lora.r, in}, true, true, {}});
      adapters.push_back({lora_param_name(module, 'B'), {out, lora.r}, true, true, {}});
    }
    for (auto& a : adapters) layer.params.push_back(std::move(a));
  }
  std::vector<std::string> unmatched;
  for (std::size_t t = 0; t < used.size(); ++t)
    if (!used[t]) unmatched.push_back(lora.target_modules[t]);
  return unmatched;
}

}  // namespace shardscope::spec
