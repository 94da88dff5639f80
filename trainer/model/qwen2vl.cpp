#include "trainer/model/qwen2vl.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "trainer/base/fatal.h"
#include "trainer/model/dense.h"
#include "trainer/model/nf4_bnb.h"
#include "trainer/model/text_layers.h"

namespace shardscope::model {
namespace {

using spec::ErrorKind;

constexpr double kInitStd = 0.02;     // HF initializer_range
constexpr double kVisionEps = 1e-6;   // LayerNorm eps of the vision blocks and the merger
constexpr double kQuickGelu = 1.702;  // QuickGELU: x * sigmoid(1.702 x)

// Vision block parameter order (spec::qwen2vl_layers).
enum VisionParam {
  kNorm1W,
  kNorm1B,
  kQkvW,
  kQkvB,
  kProjW,
  kProjB,
  kNorm2W,
  kNorm2B,
  kFc1W,
  kFc1B,
  kFc2W,
  kFc2B,
};

at::Tensor activation(const std::string& name, const at::Tensor& x) {
  if (name == "quick_gelu") return x * at::sigmoid(kQuickGelu * x);
  if (name == "gelu") return at::gelu(x);
  return at::silu(x);
}

// The vision tower's 2-D rotary tables (N, Dv) in float32: each patch's (h, w) in the order the
// image processor emits patches (merge-size blocks, row-major inside each block), frequencies of
// Dv/2 split into an h half and a w half.
std::pair<at::Tensor, at::Tensor> vision_rope(const at::Tensor& grid_thw, std::int64_t head_dim,
                                              std::int64_t merge, double theta) {
  auto grid = grid_thw.to(at::kLong).contiguous();
  auto g = grid.accessor<std::int64_t, 2>();
  std::vector<at::Tensor> rows;
  auto lopts = at::TensorOptions().dtype(at::kLong);
  for (std::int64_t i = 0; i < grid.size(0); ++i) {
    const auto t = g[i][0];
    const auto h = g[i][1];
    const auto w = g[i][2];
    auto hpos = at::arange(h, lopts).view({h, 1}).expand({h, w});
    auto wpos = at::arange(w, lopts).view({1, w}).expand({h, w});
    auto block = [&](const at::Tensor& pos) {
      return pos.reshape({h / merge, merge, w / merge, merge}).transpose(1, 2).flatten();
    };
    rows.push_back(at::stack({block(hpos), block(wpos)}, -1).repeat({t, 1}));  // (t*h*w, 2)
  }
  auto pos = at::cat(rows, 0).to(at::kFloat);  // (N, 2)
  const auto half = head_dim / 2;
  auto fopts = at::TensorOptions().dtype(at::kFloat);
  auto inv = 1.0 / at::pow(theta, at::arange(0, half, 2, fopts) / static_cast<double>(half));
  auto freqs = pos.unsqueeze(-1) * inv;                             // (N, 2, Dv/4)
  auto hw = at::cat({freqs.select(1, 0), freqs.select(1, 1)}, -1);  // (N, Dv/2)
  auto emb = at::cat({hw, hw}, -1);                                 // (N, Dv)
  return {emb.cos(), emb.sin()};
}

}  // namespace

Qwen2VLModel::Qwen2VLModel(spec::HfModelConfig config, std::shared_ptr<const HfWeights> weights)
    : m_config(std::move(config)),
      m_weights(std::move(weights)),
      m_layers(spec::hf_layers(m_config)) {
  m_embed = m_config.has_vision ? static_cast<int>(m_config.vision.depth) + 2 : 0;
  m_head = static_cast<int>(m_layers.size()) - 1;
}

void Qwen2VLModel::random_init(int layer, std::vector<at::Tensor>& params,
                               std::uint64_t seed) const {
  // One generator per layer: a layer's values do not depend on how layers are grouped or sharded.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed * 1000003ULL +
                                                      static_cast<std::uint64_t>(layer));
  const auto& defs = m_layers[static_cast<std::size_t>(layer)].params;
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < defs.size(); ++i) {
    const auto& name = defs[i].name;
    auto& t = params[i];
    if (spec::is_lora_param(name)) continue;  // init_lora, from their own generator
    const bool norm =
        name.find("norm") != std::string::npos || name.find("ln_q") != std::string::npos;
    const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (norm && !bias) {
      t.fill_(1.0);
    } else if (bias || defs[i].shape.size() == 1) {
      t.zero_();
    } else {
      t.normal_(0.0, kInitStd, gen);
    }
  }
}

void Qwen2VLModel::init_layer(int layer, std::vector<at::Tensor>& params,
                              std::uint64_t seed) const {
  const auto& defs_layer = m_layers[static_cast<std::size_t>(layer)];
  const auto& defs = defs_layer.params;
  if (!m_weights) {
    random_init(layer, params, seed);
    // A tied parameter handed over as its own tensor gets its owner's values.
    for (std::size_t i = 0; i < defs.size(); ++i) {
      if (defs[i].tied_to.empty()) continue;
      std::vector<at::Tensor> owner{at::empty_like(params[i])};
      random_init(m_embed, owner, seed);
      at::NoGradGuard no_grad;
      params[i].copy_(owner[0]);
    }
    init_lora(defs_layer, layer, params, seed);
    return;
  }
  for (std::size_t i = 0; i < defs.size(); ++i) {
    const auto& name = defs[i].name;
    if (spec::is_lora_param(name) || !params[i].defined()) continue;
    if (Nf4Weight nf4; load_nf4(layer, i, nf4)) {  // stored in 4 bits: its dequantized values
      at::NoGradGuard no_grad;
      params[i].copy_(dequantize_nf4(nf4, at::kFloat));
      continue;
    }
    m_weights->load(checkpoint_name(defs[i]), params[i]);
  }
  init_lora(defs_layer, layer, params, seed);
}

std::string Qwen2VLModel::checkpoint_name(const ParamDef& def) const {
  const bool use_owner = !def.tied_to.empty() && !m_weights->has(def.name);
  return use_owner ? def.tied_to : def.name;
}

namespace {

// bitsandbytes' tensors of `weights` for nf4_bnb's readers, each read once.
class BnbTensors {
 public:
  explicit BnbTensors(const HfWeights& weights) : m_weights(weights) {}
  const at::Tensor* operator()(const std::string& name) {
    if (!m_weights.has(name)) return nullptr;
    auto it = m_read.find(name);
    if (it == m_read.end()) it = m_read.emplace(name, m_weights.read(name)).first;
    return &it->second;
  }

 private:
  const HfWeights& m_weights;
  std::map<std::string, at::Tensor> m_read;
};

}  // namespace

bool Qwen2VLModel::load_nf4(int layer, std::size_t index, Nf4Weight& out) const {
  if (!m_weights) return false;
  const auto& def = m_layers[static_cast<std::size_t>(layer)].params[index];
  if (spec::is_lora_param(def.name)) return false;
  const auto name = checkpoint_name(def);
  BnbTensors find(*m_weights);
  if (!is_bnb_quantized(name, std::ref(find))) return false;
  out = nf4_from_bnb(name, std::ref(find), lora_config());
  SHARD_CHECK(out.shape == def.shape, ErrorKind::data,
              m_weights->dir() + ": the 4-bit tensor " + name + " has shape " +
                  c10::str(at::IntArrayRef(out.shape)) + " but config.json gives " +
                  c10::str(at::IntArrayRef(def.shape)),
              "config.json and the weights disagree; use the config.json saved with them");
  return true;
}

bool Qwen2VLModel::load_param_elements(int layer, std::size_t index, std::int64_t first,
                                       std::int64_t count, at::Tensor& dst) const {
  if (!m_weights) return false;
  const auto& def = m_layers[static_cast<std::size_t>(layer)].params[index];
  if (spec::is_lora_param(def.name)) return false;
  const auto name = checkpoint_name(def);
  BnbTensors find(*m_weights);
  if (is_bnb_quantized(name, std::ref(find))) {
    // The engine's probe (count 0) only asks whether a value exists: nothing is read for it.
    if (count == 0) return true;
    // Stored in 4 bits but wanted unquantized here (a weight lora.quantize does not mark): its
    // dequantized values, as transformers computes with them.
    Nf4Weight nf4;
    (void)load_nf4(layer, index, nf4);
    at::NoGradGuard no_grad;
    dst.copy_(dequantize_nf4(nf4, at::kFloat).reshape(-1).narrow(0, first, count));
    return true;
  }
  const auto shape = m_weights->shape(name);
  SHARD_CHECK(shape == def.shape, ErrorKind::data,
              m_weights->dir() + ": tensor " + name + " has shape " +
                  c10::str(at::IntArrayRef(shape)) + " but config.json gives " +
                  c10::str(at::IntArrayRef(def.shape)),
              "config.json and the weights disagree; use the config.json saved with them");
  at::NoGradGuard no_grad;
  dst.copy_(m_weights->load_elements(name, first, count));
  return true;
}

std::vector<std::string> Qwen2VLModel::add_lora(const spec::LoraSection& lora) {
  auto unmatched = spec::apply_lora(lora, m_layers);
  m_lora = LoraLinks(m_layers, lora);
  return unmatched;
}

at::Tensor mrope_positions(const Batch& batch, std::int64_t image_token_id,
                           std::int64_t spatial_merge_size) {
  auto ids = batch.input_ids.to(at::kLong).contiguous();
  const auto B = ids.size(0);
  const auto T = ids.size(1);
  auto mask = batch.attention_mask.defined() ? batch.attention_mask.to(at::kLong).contiguous()
                                             : at::ones({B, T}, at::kLong);
  auto grid = batch.image_grid_thw.defined() ? batch.image_grid_thw.to(at::kLong).contiguous()
                                             : at::zeros({0, 3}, at::kLong);
  auto pos = at::zeros({3, B, T}, at::kLong);
  auto p = pos.accessor<std::int64_t, 3>();
  auto id = ids.accessor<std::int64_t, 2>();
  auto m = mask.accessor<std::int64_t, 2>();
  auto g = grid.accessor<std::int64_t, 2>();
  std::int64_t image = 0;
  std::size_t segment = 0;  // packed rows: batch.seqlens' next segment
  for (std::int64_t b = 0, t0 = 0; b < B;) {
    // The next sample: row b's columns [t0, t0 + n) (a packed segment; else the whole row), its
    // positions counted from 0.
    const auto span = batch.seqlens.empty() ? T : batch.seqlens[segment++];
    std::vector<std::int64_t> cols;  // its unpadded columns
    for (std::int64_t t = t0; t < t0 + span; ++t)
      if (m[b][t] != 0) cols.push_back(t);
    t0 += span;
    const auto row = b;
    if (t0 >= T) {
      ++b;
      t0 = 0;
    }
    std::int64_t cur = 0;
    for (std::size_t i = 0; i < cols.size();) {
      if (id[row][cols[i]] != image_token_id) {
        for (int a = 0; a < 3; ++a) p[a][row][cols[i]] = cur;
        ++cur;
        ++i;
        continue;
      }
      SHARD_CHECK(image < grid.size(0), ErrorKind::data,
                  "sample " + std::to_string(row) +
                      " has more <|image_pad|> runs than "
                      "image_grid_thw has images",
                  "expand each image to t*h*w/merge^2 pad tokens as the processor does");
      const auto gt = g[image][0];
      const auto gh = g[image][1] / spatial_merge_size;
      const auto gw = g[image][2] / spatial_merge_size;
      const auto n = static_cast<std::size_t>(gt * gh * gw);
      for (std::size_t k = 0; k < n; ++k) {
        SHARD_CHECK(i + k < cols.size() && id[row][cols[i + k]] == image_token_id, ErrorKind::data,
                    "sample " + std::to_string(row) + ": image " + std::to_string(image) +
                        " needs " + std::to_string(n) + " <|image_pad|> tokens in a row",
                    "expand each image to t*h*w/merge^2 pad tokens as the processor does");
        const auto s = static_cast<std::int64_t>(k);
        p[0][row][cols[i + k]] = cur + s / (gh * gw);
        p[1][row][cols[i + k]] = cur + (s / gw) % gh;
        p[2][row][cols[i + k]] = cur + s % gw;
      }
      cur += std::max(gh, gw);
      i += n;
      ++image;
    }
  }
  SHARD_CHECK(image == grid.size(0), ErrorKind::data,
              "image_grid_thw has " + std::to_string(grid.size(0)) +
                  " images but the tokens hold " + std::to_string(image),
              "give one <|image_pad|> run per image");
  return pos;
}

namespace {

// The vision tower's LoRA dropout keys: one span per image (its t*h*w patches, in token order),
// keyed by its sample's global index and its place among that sample's images (index * 2^16 +
// place), so an image's masks do not depend on the samples batched with it. Image i belongs to
// the row (or packed segment) whose <|image_pad|> tokens it consumes (t*h*w / merge^2 of them,
// in token order).
DropoutKeys vision_dropout_keys(const Batch& batch, std::int64_t image_token_id,
                                std::int64_t merge) {
  DropoutKeys keys{batch.dropout.seed, batch.dropout.step, {}, {}};
  auto grid = batch.image_grid_thw.to(at::kLong).contiguous();
  auto g = grid.accessor<std::int64_t, 2>();
  // The <|image_pad|> tokens of each keyed span of the text: a row, or a packed row's segment.
  const auto T = batch.input_ids.size(1);
  const auto pads_upto =  // (B * T) <|image_pad|> tokens up to each token
      batch.input_ids.eq(image_token_id).reshape({-1}).to(at::kCPU, at::kLong).cumsum(0);
  auto pads_at = pads_upto.accessor<std::int64_t, 1>();
  const std::vector<std::int64_t> spans =
      batch.dropout.spans.empty()
          ? std::vector<std::int64_t>(static_cast<std::size_t>(batch.input_ids.size(0)), T)
          : batch.dropout.spans;
  std::vector<std::int64_t> left;  // per span
  std::int64_t end = 0;
  std::int64_t before = 0;
  for (auto n : spans) {
    end += n;
    const auto upto = pads_at[end - 1];
    left.push_back(upto - before);
    before = upto;
  }
  std::size_t b = 0;
  std::int64_t place = 0;
  for (std::int64_t i = 0; i < grid.size(0); ++i) {
    const auto patches = g[i][0] * g[i][1] * g[i][2];
    while (b < left.size() && left[b] == 0) {
      ++b;
      place = 0;
    }
    SHARD_CHECK(b < left.size() && left[b] >= patches / (merge * merge), ErrorKind::data,
                "image " + std::to_string(i) + " has no <|image_pad|> run of its size in the batch",
                "expand each image to t*h*w/merge^2 pad tokens as the processor does");
    left[b] -= patches / (merge * merge);
    keys.samples.push_back(batch.dropout.samples[b] * (1 << 16) + place++);
    keys.spans.push_back(patches);
  }
  return keys;
}

}  // namespace

LayerContext Qwen2VLModel::context(const Batch& batch, at::ScalarType buffer_dtype) const {
  const auto& t = m_config.text;
  const auto D = t.hidden_size / t.num_heads;
  LayerContext ctx;
  ctx.batch = &batch;
  if (!batch.decode) check_segments(batch);
  std::pair<at::Tensor, at::Tensor> rope;
  if (batch.decode) {  // generation: this call's explicit positions
    rope = m_config.has_vision
               ? mrope_tables(batch.decode->positions, D, t.rope_theta, m_config.mrope_section)
               : rope_tables_at(batch.decode->positions, D, t.rope_theta);
  }
  if (m_config.has_vision) {
    if (!batch.decode) {
      auto pos =
          mrope_positions(batch, m_config.image_token_id, m_config.vision.spatial_merge_size);
      rope = mrope_tables(pos, D, t.rope_theta, m_config.mrope_section);
    }
    if (batch.image_grid_thw.defined() && batch.image_grid_thw.size(0) > 0) {
      const auto& v = m_config.vision;
      auto [vcos, vsin] = vision_rope(batch.image_grid_thw, v.embed_dim / v.num_heads,
                                      v.spatial_merge_size, v.rope_theta);
      ctx.vision_cos = vcos;
      ctx.vision_sin = vsin;
      auto grid = batch.image_grid_thw.to(at::kLong).contiguous();
      auto g = grid.accessor<std::int64_t, 2>();
      for (std::int64_t i = 0; i < grid.size(0); ++i)
        for (std::int64_t f = 0; f < g[i][0]; ++f) ctx.vision_seqlens.push_back(g[i][1] * g[i][2]);
      if (batch.dropout.active())
        ctx.vision_dropout =
            vision_dropout_keys(batch, m_config.image_token_id, v.spatial_merge_size);
    }
  } else if (!batch.decode) {
    rope = batch.position_ids.defined()  // packed rows: each sample's positions from 0
               ? rope_tables_at(batch.position_ids, D, t.rope_theta)
               : rope_tables(batch.input_ids.size(1), D, t.rope_theta);
  }
  ctx.rope_cos = rope.first.to(buffer_dtype);
  ctx.rope_sin = rope.second.to(buffer_dtype);
  if (batch.decode)
    ctx.attn_mask = decode_mask(batch.decode->key_mask, batch.input_ids.size(1));
  else
    require_right_padding(batch.attention_mask);  // causal attention, no mask tensor
  return ctx;
}

at::Tensor Qwen2VLModel::prompt_positions(const Batch& batch) const {
  if (!m_config.has_vision) return Model::prompt_positions(batch);
  return mrope_positions(batch, m_config.image_token_id, m_config.vision.spatial_merge_size);
}

at::Tensor Qwen2VLModel::patch_embed(const std::vector<at::Tensor>& p,
                                     const LayerContext& ctx) const {
  const auto& v = m_config.vision;
  at::Tensor pixels = ctx.batch->pixel_values;
  if (!pixels.defined()) pixels = at::zeros({0, v.patch_dim()}, p[0].options());
  SHARD_CHECK(pixels.dim() == 2 && pixels.size(1) == v.patch_dim(), ErrorKind::data,
              "pixel_values must be (patches, " + std::to_string(v.patch_dim()) + "), got " +
                  c10::str(pixels.sizes()),
              "patchify images with the model's patch_size and temporal_patch_size");
  std::int64_t expected = 0;
  for (auto n : ctx.vision_seqlens) expected += n;
  SHARD_CHECK(pixels.size(0) == expected, ErrorKind::data,
              "pixel_values has " + std::to_string(pixels.size(0)) +
                  " patches but image_grid_thw gives " + std::to_string(expected),
              "pass the image_grid_thw of the same images");
  return dense(pixels.to(p[0].scalar_type()), p[0].reshape({v.embed_dim, -1}));  // (N, E)
}

at::Tensor Qwen2VLModel::vision_block(const std::vector<at::Tensor>& p, const at::Tensor& x,
                                      const LayerContext& ctx, const LayerLora* lora) const {
  const auto& v = m_config.vision;
  const auto N = x.size(0);
  const auto E = v.embed_dim;
  const auto nh = v.num_heads;
  const auto hd = E / nh;
  auto h = at::layer_norm(x, {E}, p[kNorm1W], p[kNorm1B], kVisionEps);
  auto qkv = lora_linear(h, p, kQkvW, kQkvB, lora, &ctx.vision_dropout)
                 .view({N, 3, nh, hd})
                 .permute({1, 0, 2, 3});
  auto q = qkv[0];  // (N, nh, hd)
  auto k = qkv[1];
  auto val = qkv[2];
  if (N > 0) {                                // rotary in float32, as HF does
    auto cos = ctx.vision_cos.unsqueeze(-2);  // (N, 1, hd)
    auto sin = ctx.vision_sin.unsqueeze(-2);
    auto qf = q.to(at::kFloat);
    auto kf = k.to(at::kFloat);
    q = (qf * cos + rotate_half(qf) * sin).to(x.scalar_type());
    k = (kf * cos + rotate_half(kf) * sin).to(x.scalar_type());
  }
  std::vector<at::Tensor> outs;
  std::int64_t start = 0;
  for (auto n : ctx.vision_seqlens) {  // full attention within each image frame
    auto piece = [&](const at::Tensor& t) {
      return t.narrow(0, start, n).transpose(0, 1).unsqueeze(0);
    };
    auto a = at::scaled_dot_product_attention(piece(q), piece(k), piece(val), {}, 0.0, false);
    outs.push_back(a.squeeze(0).transpose(0, 1));  // (n, nh, hd)
    start += n;
  }
  auto a = outs.empty() ? at::zeros({0, E}, x.options()) : at::cat(outs, 0).reshape({N, E});
  auto x1 = x + lora_linear(a, p, kProjW, kProjB, lora, &ctx.vision_dropout);
  auto h2 = at::layer_norm(x1, {E}, p[kNorm2W], p[kNorm2B], kVisionEps);
  auto fc1 = activation(v.hidden_act, lora_linear(h2, p, kFc1W, kFc1B, lora, &ctx.vision_dropout));
  auto mlp = lora_linear(fc1, p, kFc2W, kFc2B, lora, &ctx.vision_dropout);
  return x1 + mlp;  // (N, E)
}

at::Tensor Qwen2VLModel::merger(const std::vector<at::Tensor>& p, const at::Tensor& x) const {
  const auto& v = m_config.vision;
  const auto width = v.embed_dim * v.spatial_merge_size * v.spatial_merge_size;
  auto h = at::layer_norm(x, {v.embed_dim}, p[0], p[1], kVisionEps).reshape({-1, width});
  return dense(at::gelu(dense(h, p[2], p[3])), p[4], p[5]);  // (N / merge^2, C)
}

at::Tensor Qwen2VLModel::embed(const std::vector<at::Tensor>& p, const at::Tensor& x,
                               const LayerContext& ctx) const {
  const auto& ids = ctx.batch->input_ids;
  auto e = at::embedding(p[0], ids);  // (B, T, C)
  if (!m_config.has_vision) return e;
  auto mask = (ids == m_config.image_token_id).unsqueeze(-1);  // (B, T, 1)
  const auto n = mask.sum().item<std::int64_t>();
  SHARD_CHECK(n == x.size(0), ErrorKind::data,
              "the batch has " + std::to_string(n) + " <|image_pad|> tokens but its images give " +
                  std::to_string(x.size(0)) + " features",
              "expand each image to t*h*w/merge^2 pad tokens as the processor does");
  if (n == 0) return e + x.sum().to(e.scalar_type()) * 0.0;  // keeps the vision graph connected
  return e.masked_scatter(mask, x.to(e.scalar_type()));
}

at::Tensor Qwen2VLModel::forward_layer(int layer, const std::vector<at::Tensor>& params,
                                       const at::Tensor& x, const LayerContext& ctx) const {
  if (layer < m_embed) {
    if (layer == 0) return patch_embed(params, ctx);
    if (layer == m_embed - 1) return merger(params, x);
    return vision_block(params, x, ctx, m_lora.layer(layer));
  }
  if (layer == m_embed) return embed(params, x, ctx);
  if (layer == m_head) return qwen2_head(m_config.text, params, x, ctx);
  return qwen2_block(m_config.text, params, x, ctx, m_lora.layer(layer), kv_slot(ctx, layer));
}

at::Tensor Qwen2VLModel::logits(const std::vector<at::Tensor>& head_params,
                                const at::Tensor& x) const {
  return qwen2_logits(m_config.text, head_params, x);
}

double Qwen2VLModel::flops_per_token(std::int64_t seq_len) const {
  return spec::training_flops_per_token(m_config.text, seq_len);  // the text stack's
}

std::unique_ptr<Qwen2VLModel> load_hf_model(const std::string& dir) {
  auto config = spec::read_hf_config(dir);
  SHARD_CHECK(config.ok(), ErrorKind::config, config.ok() ? "" : config.message(),
              "fix config.json or point --model at a Hugging Face model directory");
  auto weights = std::make_shared<const HfWeights>(dir);
  return std::make_unique<Qwen2VLModel>(std::move(config).value(), std::move(weights));
}

}  // namespace shardscope::model
