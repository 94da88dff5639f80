#include "trainer/model/qwen2.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <utility>

namespace shardscope::model {
namespace {

constexpr double kInitStd = 0.02;  // HF initializer_range

}  // namespace

std::int64_t Model::params_total() const { return spec::count_params(layers()); }

std::int64_t Model::params_trainable() const {
  std::int64_t n = 0;
  for (const auto& layer : layers())
    for (const auto& p : layer.params)
      if (p.trainable && p.tied_to.empty()) n += numel(p.shape);
  return n;
}

at::Tensor Model::prompt_positions(const Batch& batch) const {
  const auto& ids = batch.input_ids;
  if (!batch.attention_mask.defined())
    return at::arange(ids.size(1), at::kLong).expand({ids.size(0), ids.size(1)}).clone();
  return (batch.attention_mask.to(at::kLong).cumsum(1) - 1).clamp_min(0);  // (B, T)
}

Qwen2Model::Qwen2Model(Qwen2Config config)
    : m_config(config), m_layers(spec::qwen2_layers(m_config)) {}

void Qwen2Model::init_layer(int layer, std::vector<at::Tensor>& params, std::uint64_t seed) const {
  // One generator per layer: a layer's values do not depend on how layers are grouped or sharded.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed * 1000003ULL +
                                                      static_cast<std::uint64_t>(layer));
  const auto& defs = m_layers[static_cast<std::size_t>(layer)].params;
  for (std::size_t i = 0; i < defs.size(); ++i) {
    const auto& name = defs[i].name;
    auto& t = params[i];
    if (spec::is_lora_param(name)) continue;  // after the base, from their own generator
    const bool norm = name.find("norm") != std::string::npos;
    if (norm) {
      t.fill_(1.0);
    } else if (defs[i].shape.size() == 1) {
      t.zero_();  // biases
    } else {
      t.normal_(0.0, kInitStd, gen);
    }
  }
  init_lora(m_layers[static_cast<std::size_t>(layer)], layer, params, seed);
}

std::vector<std::string> Qwen2Model::add_lora(const spec::LoraSection& lora) {
  auto unmatched = spec::apply_lora(lora, m_layers);
  m_lora = LoraLinks(m_layers, lora);
  return unmatched;
}

LayerContext Qwen2Model::context(const Batch& batch, at::ScalarType buffer_dtype) const {
  const auto T = batch.input_ids.size(1);
  const auto D = m_config.hidden_size / m_config.num_heads;
  LayerContext ctx;
  ctx.batch = &batch;
  std::pair<at::Tensor, at::Tensor> rope;
  if (batch.decode) {  // generation: explicit positions, cached keys
    rope = rope_tables_at(batch.decode->positions, D, m_config.rope_theta);
    ctx.attn_mask = decode_mask(batch.decode->key_mask, T);
  } else {
    check_segments(batch);
    rope = batch.position_ids.defined()  // packed rows: each sample's positions from 0
               ? rope_tables_at(batch.position_ids, D, m_config.rope_theta)
               : rope_tables(T, D, m_config.rope_theta);
    require_right_padding(batch.attention_mask);  // causal attention, no mask tensor
  }
  ctx.rope_cos = rope.first.to(buffer_dtype);
  ctx.rope_sin = rope.second.to(buffer_dtype);
  return ctx;
}

at::Tensor Qwen2Model::forward_layer(int layer, const std::vector<at::Tensor>& params,
                                     const at::Tensor& x, const LayerContext& ctx) const {
  const auto& def = m_layers[static_cast<std::size_t>(layer)];
  if (layer == 0) return at::embedding(params[0], ctx.batch->input_ids);  // (B, T, C)
  if (def.is_block)
    return qwen2_block(m_config, params, x, ctx, m_lora.layer(layer), kv_slot(ctx, layer));
  return qwen2_head(m_config, params, x, ctx);
}

double Qwen2Model::flops_per_token(std::int64_t seq_len) const {
  return spec::training_flops_per_token(m_config, seq_len);
}

}  // namespace shardscope::model
