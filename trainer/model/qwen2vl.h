// Qwen2-VL (Hugging Face's Qwen2VLForConditionalGeneration, same parameter names and math) and
// Qwen2 from a model directory: the vision tower (patch embedding as a linear map of each
// flattened C x 2 x p x p patch, blocks with LayerNorm, 2-D rotary attention within each image
// and a QuickGELU MLP, the 2x2 patch merger), the image features spliced at <|image_pad|> tokens,
// and the Qwen2 text stack with M-RoPE positions computed as transformers' get_rope_index does.
//
// Layer chain: visual.patch_embed (reads pixel_values) -> visual.blocks.N (N patches, E) ->
// visual.merger (N/4 features, C) -> embed (takes the features as x, splices them) -> text
// blocks -> head (loss). A text-only config ("qwen2") has just the text layers.
//
// Legend: N patches, E vision width, B batch, T sequence, C hidden, D head dim, V vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spec/hf_config.h"
#include "trainer/model/hf_weights.h"
#include "trainer/model/lora.h"
#include "trainer/model/model.h"

namespace shardscope::model {

class Qwen2VLModel final : public Model {
 public:
  /// A model of `config`; with `weights`, init_layer copies the checkpoint's values instead of
  /// drawing random ones.
  explicit Qwen2VLModel(spec::HfModelConfig config,
                        std::shared_ptr<const HfWeights> weights = nullptr);
  const spec::HfModelConfig& config() const { return m_config; }

  const std::vector<LayerDef>& layers() const override { return m_layers; }
  void init_layer(int layer, std::vector<at::Tensor>& params, std::uint64_t seed) const override;
  bool load_nf4(int layer, std::size_t index, Nf4Weight& out) const override;
  bool load_param_elements(int layer, std::size_t index, std::int64_t first, std::int64_t count,
                           at::Tensor& dst) const override;
  LayerContext context(const Batch& batch, at::ScalarType buffer_dtype) const override;
  at::Tensor forward_layer(int layer, const std::vector<at::Tensor>& params, const at::Tensor& x,
                           const LayerContext& ctx) const override;
  /// Text-stack FLOPs: 6N + 12 L H Q T with N the text parameters the tokens pass through (the
  /// head's matmul counted even when tied); the vision tower's work scales with patches, not
  /// tokens, and is left out.
  double flops_per_token(std::int64_t seq_len) const override;
  /// M-RoPE positions (3, B, T) of a prompt batch with a vision tower; (B, T) without.
  at::Tensor prompt_positions(const Batch& batch) const override;

  /// Logits (B, T, V) in float32 of the head layer's parameters for its input `x`.
  at::Tensor logits(const std::vector<at::Tensor>& head_params, const at::Tensor& x) const;
  /// Index of the text embedding layer (0 without a vision tower).
  int embed_layer() const { return m_embed; }
  /// Adds LoRA adapters and freezes the base (model::apply_lora); returns unmatched targets.
  std::vector<std::string> add_lora(const spec::LoraSection& lora);

 protected:
  std::vector<LayerDef>& mutable_layers() override { return m_layers; }

 private:
  void random_init(int layer, std::vector<at::Tensor>& params, std::uint64_t seed) const;
  /// The checkpoint tensor that holds `def` (its tie owner's when the checkpoint omits it).
  std::string checkpoint_name(const ParamDef& def) const;
  at::Tensor patch_embed(const std::vector<at::Tensor>& p, const LayerContext& ctx) const;
  at::Tensor vision_block(const std::vector<at::Tensor>& p, const at::Tensor& x,
                          const LayerContext& ctx, const LayerLora* lora) const;
  at::Tensor merger(const std::vector<at::Tensor>& p, const at::Tensor& x) const;
  at::Tensor embed(const std::vector<at::Tensor>& p, const at::Tensor& x,
                   const LayerContext& ctx) const;

  spec::HfModelConfig m_config;
  std::shared_ptr<const HfWeights> m_weights;
  std::vector<LayerDef> m_layers;
  LoraLinks m_lora;
  int m_embed = 0;  // text embed layer; vision layers are [0, m_embed)
  int m_head = 0;
};

/// M-RoPE positions (3, B, T) int64 as transformers' get_rope_index computes them: text tokens
/// count up on all three axes; an image's tokens take t/h/w grid positions (merged grid) offset
/// by the position before it, and the text after continues from offset + max(h, w) / merge.
/// Padding (attention_mask 0) is skipped and left at 0. A packed row (batch.seqlens) counts each
/// sample's positions from 0. Raises when image tokens and image_grid_thw disagree.
at::Tensor mrope_positions(const Batch& batch, std::int64_t image_token_id,
                           std::int64_t spatial_merge_size);

/// Reads `dir`/config.json and maps its safetensors; raises a TrainerError naming the file.
std::unique_ptr<Qwen2VLModel> load_hf_model(const std::string& dir);

}  // namespace shardscope::model
