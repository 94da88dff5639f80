// LoRA (Hu et al., PEFT's LoraLayer) over the functional models: a targeted Linear computes
//   y = x W^T + b + (alpha / r) * dropout(x) A^T B^T
// with A (r, in) and B (out, r) extra parameters of the Linear's layer, named as PEFT names them
// ("base_model.model.<module>.lora_A.weight"), and every base parameter frozen, so the engine puts
// the base in each unit's frozen flat (no gradient, no optimizer state) and the adapters in the
// trainable one. spec::apply_lora adds the shapes; this file holds the math and the init.
//
// Legend: r rank, in / out the Linear's input / output width.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "spec/experiment.h"
#include "trainer/model/model.h"

namespace shardscope::model {

/// The adapter of one Linear: indices of its lora_A and lora_B in the layer's parameters.
struct LoraPair {
  int a = -1;
  int b = -1;
};

/// A layer's adapters, keyed by the index of the adapted base weight.
struct LayerLora {
  std::vector<LoraPair> by_weight;  // size = the layer's parameter count; a = -1: no adapter
  double scale = 1.0;               // alpha / r
  double dropout = 0.0;             // on the adapter's input, in training batches only
  int layer = -1;                   // the model layer (with the weight index, the mask's module)
  const LoraPair* find(int weight) const;
};

/// Every layer's adapters, read from layer shapes after spec::apply_lora.
class LoraLinks {
 public:
  LoraLinks() = default;
  LoraLinks(const std::vector<LayerDef>& layers, const spec::LoraSection& lora);
  /// nullptr when `layer` has no adapter (or LoRA is off).
  const LayerLora* layer(int layer) const;

 private:
  std::vector<LayerLora> m_layers;
  std::vector<bool> m_any;
};

/// x W^T + b for weight p[w] and bias p[b] (b < 0: none), plus the adapter `lora` links to w.
/// Dropout on the adapter path applies with active `keys` only (training batches), as PEFT's
/// nn.Dropout does in train mode, with masks from lora_dropout_mask.
at::Tensor lora_linear(const at::Tensor& x, const std::vector<at::Tensor>& p, int w, int b,
                       const LayerLora* lora, const DropoutKeys* keys);

/// The inverted-dropout mask (0 or 1 / (1 - p), float32, on x's device) of an adapter input `x`
/// of weight `w` of `lora`'s layer: each row b of a (B, T, in) input, or each span of an (N, in)
/// input (keys.spans), from a counter-based hash keyed by (keys.seed, keys.step, keys.samples[b],
/// layer, w), so a row's mask depends neither on its padded length nor on the device: the CPU and
/// a GPU draw the same mask bit for bit.
/// The 64-bit key of the mask of `sample` for weight `w` of `lora`'s layer at keys' seed and
/// step (what lora_dropout_mask hashes each element's index with).
std::uint64_t lora_dropout_key(const LayerLora& lora, int w, const DropoutKeys& keys,
                               std::int64_t sample);
at::Tensor lora_dropout_mask(const at::Tensor& x, const LayerLora& lora, int w,
                             const DropoutKeys& keys);

/// PEFT's initial adapter values for the LoRA parameters of `layer` (others untouched): lora_A
/// kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in)); lora_B zeros. Draws from
/// its own generator per layer, so the base parameters' values do not change with LoRA on.
void init_lora(const LayerDef& layer, int index, std::vector<at::Tensor>& params,
               std::uint64_t seed);

/// Adds adapters to `model` as `lora` says (before an engine or optimizer is built; a no-op
/// when disabled) and freezes its base; returns the targets that select no module. Supports
/// Qwen2Model and Qwen2VLModel; raises a TrainerError for another model.
std::vector<std::string> apply_lora(Model& model, const spec::LoraSection& lora);

}  // namespace shardscope::model
