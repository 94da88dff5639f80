#include "trainer/model/lora.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "trainer/base/fatal.h"
#include "trainer/model/dense.h"
#include "trainer/model/qwen2.h"
#include "trainer/model/qwen2vl.h"

namespace shardscope::model {
namespace {

// Separates the adapters' random stream from the base init's (seed * 1000003 + layer).
constexpr std::uint64_t kLoraStream = 0x4c6f5241ULL;  // "LoRA"
// Separates the dropout masks' generators from other keyed streams.
constexpr std::uint64_t kDropoutStream = 0x44726f70ULL;  // "Drop"
constexpr std::string_view kPrefix = "base_model.model.";
constexpr std::string_view kSuffixA = ".lora_A.weight";
constexpr std::string_view kSuffixB = ".lora_B.weight";

// SplitMix64's finaliser: a well-mixed 64-bit value of the mask key's parts, folded in one by one.
std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  std::uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One round of a 32-bit integer hash on int64 tensors holding values below 2^32: every product
// stays below 2^63 (the multiplier is below 2^31), so the integer ops are exact on any device.
at::Tensor hash32_round(const at::Tensor& x) {
  constexpr std::int64_t kMul = 0x45d9f3b;
  constexpr std::int64_t kLow32 = 0xffffffffLL;
  return (x.bitwise_xor(x.bitwise_right_shift(16)) * kMul).bitwise_and(kLow32);
}

// Keep-mask of `shape` scaled by 1 / (1 - p), on `options`' device. Element i (row-major) keeps
// when hash(i, key) >= p * 2^32: a counter-based draw, so the mask is the same on the CPU and on
// a GPU (integer ops only) and a longer shape extends a shorter one's values (a packed sample's
// span sees the mask of its unpacked row). Drawn where it is used: no host loop, no copy.
at::Tensor keep_mask(at::IntArrayRef shape, double p, std::uint64_t key,
                     const at::TensorOptions& options) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  const auto low = static_cast<std::int64_t>(key & 0xffffffffULL);
  const auto high = static_cast<std::int64_t>(key >> 32);
  auto x = at::arange(n, options.dtype(at::kLong)).bitwise_xor(low);
  x = hash32_round(hash32_round(x));
  x = hash32_round(hash32_round((x + high).bitwise_and(0xffffffffLL)));
  x = x.bitwise_xor(x.bitwise_right_shift(16));
  const auto threshold = static_cast<std::int64_t>(std::ceil(p * 4294967296.0));
  return x.ge(threshold).to(at::kFloat).mul_(1.0 / (1.0 - p)).view(shape);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

const LoraPair* LayerLora::find(int weight) const {
  if (weight < 0 || static_cast<std::size_t>(weight) >= by_weight.size()) return nullptr;
  const auto& pair = by_weight[static_cast<std::size_t>(weight)];
  return pair.a >= 0 ? &pair : nullptr;
}

LoraLinks::LoraLinks(const std::vector<LayerDef>& layers, const spec::LoraSection& lora) {
  if (!lora.enabled) return;
  for (const auto& layer : layers) {
    LayerLora ll;
    ll.scale = lora.alpha / static_cast<double>(lora.r);
    ll.dropout = lora.dropout;
    ll.layer = static_cast<int>(m_layers.size());
    ll.by_weight.resize(layer.params.size());
    bool any = false;
    for (std::size_t i = 0; i < layer.params.size(); ++i) {
      const auto& name = layer.params[i].name;
      if (!spec::is_lora_param(name) || !ends_with(name, std::string(kSuffixA))) continue;
      // "base_model.model.<module>.lora_A.weight" -> "<module>.weight" and "...lora_B.weight"
      const std::string module =
          name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffixA.size());
      int base = -1;
      int b = -1;
      for (std::size_t j = 0; j < layer.params.size(); ++j) {
        if (layer.params[j].name == module + ".weight") base = static_cast<int>(j);
        if (layer.params[j].name == spec::lora_param_name(module, 'B')) b = static_cast<int>(j);
      }
      SHARD_CHECK(base >= 0 && b >= 0, spec::ErrorKind::internal,
                  "LoRA parameter " + name + " has no base weight or lora_B in layer " + layer.name,
                  "add adapters with spec::apply_lora only");
      ll.by_weight[static_cast<std::size_t>(base)] = {static_cast<int>(i), b};
      any = true;
    }
    m_layers.push_back(std::move(ll));
    m_any.push_back(any);
  }
}

const LayerLora* LoraLinks::layer(int layer) const {
  if (layer < 0 || static_cast<std::size_t>(layer) >= m_layers.size()) return nullptr;
  return m_any[static_cast<std::size_t>(layer)] ? &m_layers[static_cast<std::size_t>(layer)]
                                                : nullptr;
}

std::uint64_t lora_dropout_key(const LayerLora& lora, int w, const DropoutKeys& keys,
                               std::int64_t sample) {
  const auto module = mix(static_cast<std::uint64_t>(lora.layer), static_cast<std::uint64_t>(w));
  auto h = mix(mix(kDropoutStream, keys.seed), static_cast<std::uint64_t>(keys.step));
  return mix(mix(h, static_cast<std::uint64_t>(sample)), module);
}

at::Tensor lora_dropout_mask(const at::Tensor& x, const LayerLora& lora, int w,
                             const DropoutKeys& keys) {
  auto key = [&](std::int64_t sample) { return lora_dropout_key(lora, w, keys, sample); };
  const auto K = static_cast<std::int64_t>(keys.samples.size());
  std::vector<at::Tensor> parts;  // K x (rows, in)
  parts.reserve(static_cast<std::size_t>(K));
  if (!keys.spans.empty()) {
    std::int64_t rows = 0;
    for (auto n : keys.spans) rows += n;
    const auto width = x.size(-1);
    SHARD_CHECK((x.dim() == 2 || x.dim() == 3) && x.numel() == rows * width &&
                    keys.spans.size() == keys.samples.size(),
                spec::ErrorKind::internal,
                "LoRA dropout: " + std::to_string(keys.spans.size()) + " spans of " +
                    std::to_string(rows) + " rows for an input of " +
                    std::to_string(width > 0 ? x.numel() / width : 0),
                "key one span per image (vision) or per packed segment (text)");
    for (std::int64_t j = 0; j < K; ++j) {
      const auto jj = static_cast<std::size_t>(j);
      parts.push_back(
          keep_mask({keys.spans[jj], width}, lora.dropout, key(keys.samples[jj]), x.options()));
    }
    return at::cat(parts).view(x.sizes());  // (N, in) or (B, T, in)
  }
  SHARD_CHECK(x.dim() == 3 && x.size(0) == K, spec::ErrorKind::internal,
              "LoRA dropout: " + std::to_string(K) + " sample keys for an input of shape " +
                  std::to_string(x.dim() > 0 ? x.size(0) : 0) + " x ...",
              "set one dropout key per batch row");
  for (std::int64_t b = 0; b < K; ++b)
    parts.push_back(keep_mask({x.size(1), x.size(2)}, lora.dropout,
                              key(keys.samples[static_cast<std::size_t>(b)]), x.options()));
  return at::stack(parts);  // (B, T, in)
}

at::Tensor lora_linear(const at::Tensor& x, const std::vector<at::Tensor>& p, int w, int b,
                       const LayerLora* lora, const DropoutKeys* keys) {
  auto y = b >= 0 ? dense(x, p[static_cast<std::size_t>(w)], p[static_cast<std::size_t>(b)])
                  : dense(x, p[static_cast<std::size_t>(w)]);
  const LoraPair* pair = lora != nullptr ? lora->find(w) : nullptr;
  if (pair == nullptr) return y;
  const auto& A = p[static_cast<std::size_t>(pair->a)];  // (r, in)
  const auto& B = p[static_cast<std::size_t>(pair->b)];  // (out, r)
  auto h = x.to(A.scalar_type());
  if (lora->dropout > 0 && keys != nullptr && keys->active()) {
    // Not at::dropout: its mask would come from the global generator, so it would change with the
    // world size and on a resume, and activation checkpointing's recompute (and its forward,
    // which runs without grad mode) would not see the mask the loss used.
    h = h * lora_dropout_mask(h, *lora, w, *keys).to(h.scalar_type());
  }
  auto delta = dense(dense(h, A), B) * lora->scale;  // (..., out)
  return y + delta.to(y.scalar_type());
}

void init_lora(const LayerDef& layer, int index, std::vector<at::Tensor>& params,
               std::uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>((seed ^ kLoraStream) * 1000003ULL +
                                                      static_cast<std::uint64_t>(index));
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < layer.params.size(); ++i) {
    const auto& def = layer.params[i];
    if (!spec::is_lora_param(def.name)) continue;
    if (ends_with(def.name, std::string(kSuffixB))) {
      params[i].zero_();
      continue;
    }
    // kaiming_uniform_(a=sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in).
    const double bound = 1.0 / std::sqrt(static_cast<double>(def.shape[1]));
    params[i].uniform_(-bound, bound, gen);
  }
}

std::vector<std::string> apply_lora(Model& model, const spec::LoraSection& lora) {
  std::vector<std::string> unmatched;
  if (auto* q = dynamic_cast<Qwen2Model*>(&model)) {
    unmatched = q->add_lora(lora);
  } else if (auto* v = dynamic_cast<Qwen2VLModel*>(&model)) {
    unmatched = v->add_lora(lora);
  } else {
    SHARD_FAIL(spec::ErrorKind::config, "lora.enabled: this model type has no LoRA support",
               "use a Qwen2 or Qwen2-VL model, or set lora.enabled = false");
  }
  model.set_lora_config(lora);
  // An NF4 block never spans two rows of a weight (the validation's rule for tiny models; here
  // with the widths of the model's own config.json).
  for (const auto& layer : model.layers()) {
    for (const auto& p : layer.params) {
      if (!p.nf4 || p.shape.size() != 2 || p.shape[1] % lora.quant_block_size == 0) continue;
      const std::int64_t fits = std::min<std::int64_t>(p.shape[1] & -p.shape[1], 4096);
      SHARD_FAIL(spec::ErrorKind::config,
                 "lora.quant_block_size: " + std::to_string(lora.quant_block_size) +
                     " does not divide the " + std::to_string(p.shape[1]) + " in-features of " +
                     p.name + ", so an NF4 block would span two rows",
                 fits >= 32 ? "use a power of two that divides it, e.g. " + std::to_string(fits)
                            : std::string("use lora.quantize = \"none\" for this model"));
    }
  }
  return unmatched;
}

}  // namespace shardscope::model
