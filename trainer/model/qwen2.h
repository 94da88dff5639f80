// Qwen2 decoder-only transformer (Hugging Face's Qwen2ForCausalLM, same parameter names and
// math): RMSNorm, rotary attention with q/k/v biases and grouped KV heads, SwiGLU MLP. The "tiny"
// test model of [model] is this architecture at small dimensions, so the engine's parity suite
// and the FSDP2 benchmark (transformers' Qwen2 as the peer) run on the real thing.
//
// Legend: B batch, T sequence, C hidden, H heads, K kv heads, D head dim (C / H), I MLP width,
// V vocabulary.
#pragma once

#include <cstdint>
#include <vector>

#include "spec/experiment.h"
#include "spec/model_shape.h"
#include "trainer/model/lora.h"
#include "trainer/model/model.h"
#include "trainer/model/text_layers.h"

namespace shardscope::model {

using Qwen2Config = spec::Qwen2Dims;

/// The tiny model's configuration from [model] tiny_* fields.
inline Qwen2Config tiny_config(const spec::ModelSection& model) { return spec::tiny_dims(model); }

class Qwen2Model final : public Model {
 public:
  explicit Qwen2Model(Qwen2Config config);
  const Qwen2Config& config() const { return m_config; }

  const std::vector<LayerDef>& layers() const override { return m_layers; }
  void init_layer(int layer, std::vector<at::Tensor>& params, std::uint64_t seed) const override;
  LayerContext context(const Batch& batch, at::ScalarType buffer_dtype) const override;
  at::Tensor forward_layer(int layer, const std::vector<at::Tensor>& params, const at::Tensor& x,
                           const LayerContext& ctx) const override;
  double flops_per_token(std::int64_t seq_len) const override;
  /// Adds LoRA adapters and freezes the base (model::apply_lora); returns unmatched targets.
  std::vector<std::string> add_lora(const spec::LoraSection& lora);

 protected:
  std::vector<LayerDef>& mutable_layers() override { return m_layers; }

 private:
  Qwen2Config m_config;
  std::vector<LayerDef> m_layers;
  LoraLinks m_lora;
};

}  // namespace shardscope::model
