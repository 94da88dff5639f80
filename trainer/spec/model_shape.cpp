#include "trainer/spec/model_shape.h"

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
      if (!group.empty()) {
        units.push_back(group);
        group.clear();
        group_params = 0;
      }
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

}  // namespace shardscope::spec
