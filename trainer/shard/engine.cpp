#include "trainer/shard/engine.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StreamGuard.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <array>
#include <cmath>

#include "trainer/base/dtype_name.h"
#include "trainer/base/fatal.h"
#include "trainer/base/phase_clock.h"
#include "trainer/model/nf4.h"

namespace shardscope::shard {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <class T>
T* from_int(std::int64_t v) {
  return reinterpret_cast<T*>(v);  // NOLINT(performance-no-int-to-ptr)
}
template <class T>
std::int64_t to_int(T* p) {
  return reinterpret_cast<std::int64_t>(p);
}

// The gathered flat buffer enters autograd here: forward hands out the buffer the engine
// all-gathered; backward receives the gradient of the whole flat buffer (the views' gradients
// concatenated by split's backward) and gives it to the engine to reduce. The master shard gets
// no autograd gradient: the engine accumulates the sharded gradient itself.
struct GatherFn : public torch::autograd::Function<GatherFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& /*master*/, std::int64_t engine,
                            std::int64_t unit, std::int64_t flat) {
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["unit"] = unit;
    ctx->saved_data["flat"] = flat;
    return from_int<FlatParam>(flat)->full;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* engine = from_int<ShardEngine>(ctx->saved_data["engine"].toInt());
    auto* unit = from_int<Unit>(ctx->saved_data["unit"].toInt());
    auto* flat = from_int<FlatParam>(ctx->saved_data["flat"].toInt());
    if (grads[0].defined()) engine->on_flat_grad(*unit, *flat, grads[0]);
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Views of a unit's layers' parameters into its flat buffers (one list per layer).
void build_views(const Unit& unit, const std::vector<at::Tensor>& fulls,
                 std::vector<std::vector<at::Tensor>>& layer_params) {
  for (std::size_t f = 0; f < unit.flats.size(); ++f) {
    const auto& flat = unit.flats[f];
    auto parts = at::split_with_sizes(fulls[f], flat.split_sizes());
    for (std::size_t i = 0; i < flat.slots.size(); ++i) {
      const auto& slot = flat.slots[i];
      layer_params[static_cast<std::size_t>(slot.layer)][static_cast<std::size_t>(slot.index)] =
          parts[i].view(slot.shape);
    }
  }
  for (const auto& t : unit.tied)
    layer_params[static_cast<std::size_t>(t.layer)][static_cast<std::size_t>(t.index)] =
        layer_params[static_cast<std::size_t>(t.owner_layer)]
                    [static_cast<std::size_t>(t.owner_index)];
}

// Autocast for the device the unit computes on (CPU or CUDA), in the mode's autocast dtype.
struct AutocastScope {
  AutocastScope(const spec::PrecisionDTypes& prec, c10::DeviceType device)
      : m_on(prec.autocast), m_device(device) {
    if (!m_on) return;
    m_prev_enabled = at::autocast::is_autocast_enabled(m_device);
    m_prev_dtype = at::autocast::get_autocast_dtype(m_device);
    at::autocast::set_autocast_enabled(m_device, true);
    at::autocast::set_autocast_dtype(m_device, to_scalar_type(prec.autocast_dtype));
  }
  ~AutocastScope() {
    if (!m_on) return;
    at::autocast::set_autocast_enabled(m_device, m_prev_enabled);
    at::autocast::set_autocast_dtype(m_device, m_prev_dtype);
    at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool m_on;
  c10::DeviceType m_device;
  bool m_prev_enabled = false;
  at::ScalarType m_prev_dtype = at::kFloat;
};

// Activation checkpointing of one unit: forward runs its layers without saving activations;
// backward (after the pre-backward hook re-gathered the unit) recomputes them and returns the
// gradients of the input and of the unit's flat buffers.
struct CheckpointFn : public torch::autograd::Function<CheckpointFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList fulls,
                            std::int64_t model, std::int64_t unit, std::int64_t lctx,
                            std::int64_t prec) {
    ctx->save_for_backward(variable_list{x});
    ctx->saved_data["fulls"] = c10::List<at::Tensor>(fulls.vec());
    ctx->saved_data["model"] = model;
    ctx->saved_data["unit"] = unit;
    ctx->saved_data["ctx"] = lctx;
    ctx->saved_data["prec"] = prec;
    return run(*from_int<model::Model>(model), *from_int<Unit>(unit), x, fulls.vec(),
               *from_int<model::LayerContext>(lctx));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto x = ctx->get_saved_variables()[0];
    auto fulls_list = ctx->saved_data["fulls"].toTensorList();
    const auto& unit = *from_int<Unit>(ctx->saved_data["unit"].toInt());
    const auto& prec = *from_int<spec::PrecisionDTypes>(ctx->saved_data["prec"].toInt());
    at::AutoGradMode grad_on(true);
    auto xd = x.detach().requires_grad_(x.requires_grad());
    std::vector<at::Tensor> fulls;
    variable_list inputs;
    if (xd.requires_grad()) inputs.push_back(xd);
    for (std::size_t f = 0; f < fulls_list.size(); ++f) {
      auto t = at::Tensor(fulls_list.get(f)).detach();
      if (unit.flats[f].trainable) {
        t.requires_grad_(true);
        inputs.push_back(t);
      }
      fulls.push_back(t);
    }
    at::Tensor out;
    {
      AutocastScope autocast(prec, x.device().type());
      out = run(*from_int<model::Model>(ctx->saved_data["model"].toInt()), unit, xd, fulls,
                *from_int<model::LayerContext>(ctx->saved_data["ctx"].toInt()));
    }
    auto got = torch::autograd::grad({out}, inputs, {grads[0]});
    variable_list result;
    std::size_t k = 0;
    result.push_back(xd.requires_grad() ? got[k++] : at::Tensor());
    for (std::size_t f = 0; f < fulls.size(); ++f)
      result.push_back(unit.flats[f].trainable ? got[k++] : at::Tensor());
    for (int i = 0; i < 4; ++i) result.emplace_back();
    return result;
  }
  static at::Tensor run(const model::Model& model, const Unit& unit, const at::Tensor& x,
                        const std::vector<at::Tensor>& fulls, const model::LayerContext& lctx) {
    std::vector<std::vector<at::Tensor>> params(model.layers().size());
    for (int l : unit.layers)
      params[static_cast<std::size_t>(l)].resize(
          model.layers()[static_cast<std::size_t>(l)].params.size());
    build_views(unit, fulls, params);
    at::Tensor h = x;
    for (int l : unit.layers)
      h = model.forward_layer(l, params[static_cast<std::size_t>(l)], h, lctx);
    return h;
  }
};

// Sum of squares of a gradient in double precision. A contiguous fp32 CPU tensor is read once,
// without temporaries (four double accumulators over its elements); others go through ops in
// chunks, so the double-precision copies stay small next to the gradients.
double sum_squares(const at::Tensor& t) {
  if (t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous()) {
    const float* x = t.const_data_ptr<float>();
    const std::int64_t n = t.numel();
    std::array<double, 4> acc{};
    std::int64_t i = 0;
    // NOLINTBEGIN(cppcoreguidelines-pro-bounds-pointer-arithmetic)
    for (; i + 4 <= n; i += 4)
      for (std::size_t k = 0; k < 4; ++k) {
        const auto v = static_cast<double>(x[i + static_cast<std::int64_t>(k)]);
        acc[k] += v * v;
      }
    for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    // NOLINTEND(cppcoreguidelines-pro-bounds-pointer-arithmetic)
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
  }
  constexpr std::int64_t kChunk = 1 << 20;
  double total = 0;
  for (std::int64_t b = 0; b < t.numel(); b += kChunk)
    total +=
        t.narrow(0, b, std::min(kChunk, t.numel() - b)).to(at::kDouble).pow(2).sum().item<double>();
  return total;
}

// lora.quant_storage's dtype (validated: uint8, bfloat16, float16, float32).
at::ScalarType quant_storage_type(const std::string& name) {
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  if (name == "float32") return at::kFloat;
  return at::kByte;
}

}  // namespace

at::ScalarType to_scalar_type(spec::DType dtype) {
  switch (dtype) {
    case spec::DType::bf16:
      return at::kBFloat16;
    case spec::DType::fp16:
      return at::kHalf;
    case spec::DType::fp32:
      break;
  }
  return at::kFloat;
}

ShardEngine::ShardEngine(const model::Model& model, const spec::ShardSection& shard, Groups groups,
                         Trace* trace, c10::Device device)
    : m_model(model),
      m_shard(shard),
      m_prec(spec::resolve_precision(shard)),
      m_groups(groups),
      m_trace(trace),
      m_device(device),
      m_streams(device) {
  // Deferred on CUDA (GPU times are added once the micro-step's events are complete).
  if (m_trace && m_trace->enabled() && m_streams.active()) m_trace->defer(true);
  build_units(shard);
  m_layer_params.resize(model.layers().size());
  for (std::size_t l = 0; l < model.layers().size(); ++l)
    m_layer_params[l].resize(model.layers()[l].params.size());
}

void ShardEngine::build_units(const spec::ShardSection& shard) {
  const auto& layers = m_model.layers();
  for (auto& plan : spec::plan_units(layers, shard.wrap_policy, shard.wrap_min_params)) {
    const bool root = m_units.empty();
    std::string name = "root";
    if (!root) {
      name = layers[static_cast<std::size_t>(plan.front())].name;
      if (plan.size() > 1) name += "-" + layers[static_cast<std::size_t>(plan.back())].name;
    }
    m_units.push_back(Unit{name, std::move(plan), root, {}, {}, false, false, false, 0, {}});
  }
  m_unit_of_layer.assign(layers.size(), 0);
  const int shard_size = m_groups.shard->size();
  const int shard_rank = m_groups.shard->rank();
  for (std::size_t u = 0; u < m_units.size(); ++u) {
    auto& unit = m_units[u];
    FlatParam trainable{unit.name + "/trainable"};
    FlatParam frozen{unit.name + "/frozen"};
    frozen.trainable = false;
    // QLoRA: the NF4 weights' records, in their own flat of lora.quant_storage elements.
    const auto& lora = m_model.lora_config();
    FlatParam nf4{unit.name + "/nf4"};
    nf4.trainable = false;
    nf4.nf4 = true;
    nf4.storage = quant_storage_type(lora.quant_storage);
    nf4.nf4_block_size = lora.quant_block_size;
    nf4.nf4_double_quant = lora.double_quant;
    const auto storage_size = static_cast<std::int64_t>(c10::elementSize(nf4.storage));
    for (int l : unit.layers) {
      m_unit_of_layer[static_cast<std::size_t>(l)] = static_cast<int>(u);
      const auto& defs = layers[static_cast<std::size_t>(l)].params;
      for (std::size_t i = 0; i < defs.size(); ++i) {
        if (!defs[i].tied_to.empty()) continue;  // tie_params() points it at its owner
        FlatSlot slot{l, static_cast<int>(i), defs[i].name, defs[i].shape, 0, 0, defs[i].decay};
        if (defs[i].nf4) {
          // Records are whole 4-byte words, so any storage dtype holds them exactly.
          slot.record = spec::nf4_record_bytes(spec::numel(defs[i].shape), nf4.nf4_block_size,
                                               nf4.nf4_double_quant) /
                        storage_size;
          nf4.slots.push_back(std::move(slot));
          continue;
        }
        (defs[i].trainable ? trainable : frozen).slots.push_back(std::move(slot));
      }
    }
    for (auto* flat : {&trainable, &frozen, &nf4}) {
      if (flat->slots.empty()) continue;
      layout_flat(*flat, shard_size, shard_rank);
      unit.flats.push_back(std::move(*flat));
    }
  }
  tie_params();
}

void ShardEngine::tie_params() {
  const auto& layers = m_model.layers();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const auto& defs = layers[l].params;
    for (std::size_t i = 0; i < defs.size(); ++i) {
      if (defs[i].tied_to.empty()) continue;
      TiedParam tied{static_cast<int>(l), static_cast<int>(i), defs[i].name, -1, -1,
                     defs[i].tied_to};
      for (std::size_t ol = 0; ol < l && tied.owner_layer < 0; ++ol)
        for (std::size_t oi = 0; oi < layers[ol].params.size(); ++oi)
          if (layers[ol].params[oi].name == defs[i].tied_to) {
            tied.owner_layer = static_cast<int>(ol);
            tied.owner_index = static_cast<int>(oi);
          }
      SHARD_CHECK(tied.owner_layer >= 0, spec::ErrorKind::internal,
                  defs[i].name + " is tied to " + defs[i].tied_to +
                      ", which no earlier layer of the model has",
                  "report this model definition as a bug");
      // One storage for both: the owner's unit must run both layers while gathered (FSDP keeps
      // tied parameters in one unit for the same reason).
      auto& unit = m_units[static_cast<std::size_t>(m_unit_of_layer[l])];
      SHARD_CHECK(m_unit_of_layer[l] == m_unit_of_layer[static_cast<std::size_t>(tied.owner_layer)],
                  spec::ErrorKind::config,
                  defs[i].name + " is tied to " + defs[i].tied_to +
                      " but the wrap policy puts them in different units",
                  "use shard.wrap_policy = \"block\" or \"none\" (the root keeps both)");
      unit.tied.push_back(std::move(tied));
    }
  }
}

void ShardEngine::init_params(std::uint64_t seed) {
  const auto& layers = m_model.layers();
  for (auto& unit : m_units) {
    // Each rank fills its own shard: checkpoint values straight from the file's bytes of the
    // shard (no full buffer, no broadcast); the rest (seeded init, LoRA adapters) from init_layer
    // of the layers that need it, computed whole (the same values on every rank) and clipped.
    std::map<int, std::vector<at::Tensor>> computed;  // layer -> params (undefined: not needed)
    std::vector<std::int64_t> read(unit.flats.size(), 0);
    for (std::size_t f = 0; f < unit.flats.size(); ++f) {
      auto& flat = unit.flats[f];
      flat.master = at::zeros({flat.shard_numel}, flat.storage);  // (N), padding stays zero
      for (const auto& slot : flat.slots) {
        const auto begin = std::max(slot.offset, flat.shard_offset);
        const auto end = std::min(slot.offset + slot.numel, flat.shard_offset + flat.shard_numel);
        if (begin >= end) continue;
        if (flat.nf4) {  // quantized whole below, from the checkpoint or init_layer's values
          auto none = at::empty({0}, at::kFloat);
          if (!m_model.load_param_elements(slot.layer, static_cast<std::size_t>(slot.index), 0, 0,
                                           none))
            computed.emplace(slot.layer, std::vector<at::Tensor>{});
          continue;
        }
        auto dst = flat.master.narrow(0, begin - flat.shard_offset, end - begin);
        const auto index = static_cast<std::size_t>(slot.index);
        if (m_model.load_param_elements(slot.layer, index, begin - slot.offset, end - begin, dst)) {
          read[f] += end - begin;
          continue;
        }
        computed.emplace(slot.layer, std::vector<at::Tensor>{});
      }
    }
    // A layer computed by init_layer gets every parameter that has no checkpoint value (a seeded
    // init draws them in sequence); checkpoint-backed ones stay undefined and are not read.
    for (auto& [layer, params] : computed) {
      const auto& defs = layers[static_cast<std::size_t>(layer)].params;
      params.resize(defs.size());
      for (std::size_t i = 0; i < defs.size(); ++i) {
        auto none = at::empty({0}, at::kFloat);
        if (!m_model.load_param_elements(layer, i, 0, 0, none))
          params[i] = at::zeros(defs[i].shape, at::kFloat);
      }
    }
    for (auto& [layer, params] : computed) m_model.init_layer(layer, params, seed);
    for (std::size_t f = 0; f < unit.flats.size(); ++f) {
      auto& flat = unit.flats[f];
      if (flat.nf4) read[f] += init_nf4(flat, computed);
      for (const auto& slot : flat.slots) {
        if (flat.nf4) break;
        auto it = computed.find(slot.layer);
        if (it == computed.end()) continue;
        const auto& value = it->second[static_cast<std::size_t>(slot.index)];
        if (!value.defined()) continue;
        const auto begin = std::max(slot.offset, flat.shard_offset);
        const auto end = std::min(slot.offset + slot.numel, flat.shard_offset + flat.shard_numel);
        if (begin >= end) continue;
        flat.master.narrow(0, begin - flat.shard_offset, end - begin)
            .copy_(value.reshape({-1}).narrow(0, begin - slot.offset, end - begin));
      }
      // Built on the host from the checkpoint's bytes, then placed: the compute device, or pinned
      // host memory with offload_params (copied to the device per gather, on the gather stream).
      if (m_device.is_cuda()) {
        flat.master = m_shard.offload_params ? flat.master.pin_memory() : flat.master.to(m_device);
      }
      flat.master.requires_grad_(flat.trainable);
      if (m_trace) trace_init(flat, read[f]);
    }
  }
}

std::int64_t ShardEngine::init_nf4(FlatParam& flat,
                                   const std::map<int, std::vector<at::Tensor>>& computed) {
  // Each weight whose record overlaps this rank's shard is read (or taken from init_layer's
  // values) whole, quantized, and the overlapping bytes kept: the rank holds packed bytes plus
  // one weight unpacked at a time, never the model unpacked.
  const auto size = static_cast<std::int64_t>(c10::elementSize(flat.storage));
  auto bytes = flat.master.view(at::kByte);  // (N * size)
  std::int64_t read = 0;
  for (const auto& slot : flat.slots) {
    const auto begin = std::max(slot.offset, flat.shard_offset);
    const auto end = std::min(slot.offset + slot.numel, flat.shard_offset + flat.shard_numel);
    if (begin >= end) continue;
    model::Nf4Weight stored;
    if (m_model.load_nf4(slot.layer, static_cast<std::size_t>(slot.index), stored)) {
      // Already NF4 in the checkpoint (bitsandbytes' layout): its codes, not quantized again.
      const auto record = model::nf4_record(stored);
      bytes.narrow(0, (begin - flat.shard_offset) * size, (end - begin) * size)
          .copy_(record.narrow(0, (begin - slot.offset) * size, (end - begin) * size));
      read += spec::numel(slot.shape);
      continue;
    }
    at::Tensor weight;
    auto it = computed.find(slot.layer);
    if (it != computed.end() && it->second[static_cast<std::size_t>(slot.index)].defined()) {
      weight = it->second[static_cast<std::size_t>(slot.index)];
    } else {
      weight = at::empty({spec::numel(slot.shape)}, at::kFloat);
      const bool loaded = m_model.load_param_elements(
          slot.layer, static_cast<std::size_t>(slot.index), 0, weight.numel(), weight);
      SHARD_CHECK(loaded, spec::ErrorKind::internal, slot.name + " has no value to quantize",
                  "report this as a bug");
      read += weight.numel();
    }
    const auto record = model::nf4_record(
        model::quantize_nf4(weight.view(slot.shape), flat.nf4_block_size, flat.nf4_double_quant));
    bytes.narrow(0, (begin - flat.shard_offset) * size, (end - begin) * size)
        .copy_(record.narrow(0, (begin - slot.offset) * size, (end - begin) * size));
  }
  return read;
}

void ShardEngine::dequantize(FlatParam& flat) {
  // The gathered records become the unit's weights in the param dtype, slot by slot; the packed
  // buffer goes back at once, so a live unit holds its weights once, not twice.
  const auto size = static_cast<std::int64_t>(c10::elementSize(flat.storage));
  const auto bytes = flat.packed.view(at::kByte);  // (P * size)
  const auto dtype = to_scalar_type(m_prec.param);
  if (!flat.full.defined()) {  // the micro-step's first gather of this unit
    flat.full = at::empty({flat.full_numel()}, at::TensorOptions().dtype(dtype).device(m_device));
    flat.full_data = flat.full.variable_data();
  } else {  // gathered again (backward): the views' storage comes back
    alloc_storage(flat.full_data,
                  static_cast<std::size_t>(flat.full_numel()) * c10::elementSize(dtype));
  }
  const auto parts = at::split_with_sizes(flat.full_data, flat.split_sizes());
  for (std::size_t i = 0; i < flat.slots.size(); ++i) {
    const auto& slot = flat.slots[i];
    model::dequantize_nf4_record_into(bytes.narrow(0, slot.offset * size, slot.numel * size),
                                      slot.shape, flat.nf4_block_size, flat.nf4_double_quant,
                                      parts[i]);
  }
  if (m_streams.active()) {
    c10::getDeviceAllocator(c10::DeviceType::CUDA)
        ->recordStream(flat.packed.storage().data_ptr(), m_streams.compute());
  }
  flat.packed.reset();
}

void ShardEngine::trace_init(const FlatParam& flat, std::int64_t read_elements) {
  // offload_params keeps masters on the CPU; a CPU run keeps them there anyway.
  m_trace->placement(flat.name, "master", flat.master.device().is_cpu() ? "cpu" : "cuda",
                     trainer::torch_dtype_name(flat.storage),
                     static_cast<std::int64_t>(flat.master.nbytes()), m_shard.offload_params);
  m_trace->placement(flat.name, "param", m_device.is_cuda() ? "cuda" : "cpu",
                     trainer::torch_dtype_name(to_scalar_type(m_prec.param)),
                     flat.full_numel() *
                         static_cast<std::int64_t>(c10::elementSize(to_scalar_type(m_prec.param))));
  m_trace->load(flat.name, read_elements, flat.shard_numel);
}

std::int64_t ShardEngine::params_trainable() const {
  std::int64_t n = 0;
  for (const auto& unit : m_units)
    for (const auto& flat : unit.flats)
      if (flat.trainable) n += flat.numel;
  return n;
}

std::vector<FlatParam*> ShardEngine::trainable_flats() {
  std::vector<FlatParam*> out;
  for (auto& unit : m_units)
    for (auto& flat : unit.flats)
      if (flat.trainable) out.push_back(&flat);
  return out;
}

void ShardEngine::issue_gather(Unit& unit, const char* phase, bool prefetch) {
  bool live = true;
  for (const auto& flat : unit.flats) live = live && flat.storage_live;
  if (unit.gathering || (unit.active && live) || (!unit.active && unit.flats.empty())) return;
  while (static_cast<int>(m_inflight.size()) >= m_shard.max_inflight_gathers)
    wait_gather(*m_inflight.front(), phase, "limit");
  const auto dtype = to_scalar_type(m_prec.param);
  std::int64_t bytes = 0;
  std::vector<FlatParam*> todo;
  // On CUDA the gathered buffers are allocated on the gather stream and read by the compute
  // stream, which release() records as a user of the block: the caching allocator hands a freed
  // block out again only once the compute stream's work queued before the free is done, so the
  // gather never waits for compute and overlaps the units computing now.
  std::optional<c10::StreamGuard> on_gather;
  std::optional<c10::Event> start;
  if (m_streams.active()) {
    on_gather.emplace(m_streams.gather());
    if (timing()) start = dist::Streams::record(m_streams.gather(), true);
  }
  for (auto& flat : unit.flats) {
    if (flat.storage_live) continue;
    flat.storage_live = true;
    todo.push_back(&flat);
    if (flat.nf4) {
      // The records travel; wait_gather dequantizes them into `full`, allocated only then, so a
      // prefetched unit holds its packed bytes alone.
      flat.packed =
          at::empty({flat.padded}, at::TensorOptions().dtype(flat.storage).device(m_device));
      bytes += static_cast<std::int64_t>(flat.packed.nbytes());
      continue;
    }
    const auto nbytes = static_cast<std::size_t>(flat.padded) * c10::elementSize(dtype);
    if (!unit.active) {
      flat.full = at::empty({flat.padded}, at::TensorOptions().dtype(dtype).device(m_device));
      flat.full_data = flat.full.variable_data();
    } else {
      alloc_storage(flat.full_data, nbytes);
    }
    bytes += static_cast<std::int64_t>(nbytes);
  }
  for (auto* flat : todo) {
    // The all-gather runs in place, as FSDP's copy-in does: this rank's master shard is cast (and
    // with offload_params copied from pinned host memory) straight into its own slice of the
    // gathered buffer, so no separate send buffer is allocated.
    auto& target = flat->nf4 ? flat->packed : flat->full_data;
    auto mine = target.narrow(0, flat->shard_offset, flat->shard_numel);  // (N)
    mine.copy_(flat->master.detach(), /*non_blocking=*/true);
    unit.works.push_back(m_groups.shard->all_gather_async(target, mine));
  }
  if (m_streams.active()) {
    // The gather stream waits for the collectives (NCCL's stream; a host-staged Gloo exchange
    // copies back here), so one event on it marks the unit gathered.
    for (auto& work : unit.works) m_groups.shard->wait(work, "all_gather_into_tensor");
    unit.works.clear();
    unit.gathered = dist::Streams::record(m_streams.gather());
    if (start)
      m_spans.push_back({"all_gather", unit.name, phase, std::move(*start),
                         dist::Streams::record(m_streams.gather(), true)});
  }
  unit.gathering = true;
  m_inflight.push_back(&unit);
  if (tracing())
    m_trace->collective("all_gather", "issue", unit.name, phase, bytes,
                        static_cast<int>(m_inflight.size()), prefetch);
}

void ShardEngine::trace_optimizer_state(const std::vector<at::Tensor>& exp_avg,
                                        const std::vector<at::Tensor>& exp_avg_sq) {
  if (!m_trace) return;
  auto flats = trainable_flats();
  for (std::size_t i = 0; i < flats.size() && i < exp_avg.size(); ++i) {
    // offload_optimizer keeps the moments on the CPU; on a CPU run they are there anyway.
    for (const auto& [what, t] :
         {std::pair{"exp_avg", exp_avg[i]}, std::pair{"exp_avg_sq", exp_avg_sq[i]}})
      m_trace->placement(flats[i]->name, what, t.device().is_cpu() ? "cpu" : "cuda", "float32",
                         static_cast<std::int64_t>(t.nbytes()), m_shard.offload_optimizer);
  }
}

void ShardEngine::wait_gather(Unit& unit, const char* phase, const char* reason) {
  if (!unit.gathering) return;
  const double wait_ms = tracing() ? m_trace->now_ms() : -1;
  for (auto& work : unit.works) m_groups.shard->wait(work, "all_gather_into_tensor");
  unit.works.clear();
  unit.gathering = false;
  std::optional<c10::Event> before;
  std::optional<c10::Event> after;
  if (unit.gathered) {
    // The compute stream waits for the gather; the host does not.
    if (timing()) before = dist::Streams::record(m_streams.compute(), true);
    unit.gathered->block(m_streams.compute());
    unit.gathered.reset();
    if (timing()) after = dist::Streams::record(m_streams.compute(), true);
  }
  for (auto& flat : unit.flats)
    if (flat.nf4 && flat.packed.defined()) dequantize(flat);
  for (auto it = m_inflight.begin(); it != m_inflight.end(); ++it) {
    if (*it == &unit) {
      m_inflight.erase(it);
      break;
    }
  }
  if (tracing()) {
    const int record =
        m_trace->collective("all_gather", "wait", unit.name, phase, 0,
                            static_cast<int>(m_inflight.size()), false, reason, wait_ms);
    if (before) m_exposed.push_back({record, std::move(*before), std::move(*after)});
  }
}

void ShardEngine::free_unit(Unit& unit, const char* phase) {
  wait_gather(unit, phase);
  bool freed = false;
  for (auto& flat : unit.flats) {
    if (!flat.storage_live) continue;
    release(flat);
    freed = true;
  }
  if (freed && tracing()) m_trace->collective("free", "done", unit.name, phase, 0, 0);
}

void ShardEngine::activate(Unit& unit) {
  std::vector<at::Tensor> fulls;
  unit.trainable_pending = 0;
  for (auto& flat : unit.flats) {
    if (m_grad_enabled && flat.trainable) {
      flat.full = GatherFn::apply(flat.master, to_int(this), to_int(&unit), to_int(&flat));
      ++unit.trainable_pending;
    }
    fulls.push_back(flat.full);
  }
  build_views(unit, fulls, m_layer_params);
  unit.active = true;
  unit.backward_done = false;
}

Unit* ShardEngine::next_forward(const Unit& unit) {
  Unit* best = nullptr;
  for (auto& u : m_units) {
    if (u.root || u.layers.front() <= (unit.root ? -1 : unit.layers.front())) continue;
    if (!best || u.layers.front() < best->layers.front()) best = &u;
  }
  return best;
}

Unit* ShardEngine::next_backward(const Unit& unit) {
  if (unit.root) return nullptr;
  Unit* best = nullptr;
  for (auto& u : m_units) {
    if (u.root || u.layers.front() >= unit.layers.front()) continue;
    if (!best || u.layers.front() > best->layers.front()) best = &u;
  }
  return best;
}

at::Tensor ShardEngine::run_unit_layers(Unit& unit, std::size_t& layer_pos, at::Tensor x,
                                        const model::LayerContext& ctx) {
  const bool checkpoint = m_shard.activation_checkpointing && !unit.root && m_grad_enabled;
  if (checkpoint) {
    std::vector<at::Tensor> fulls;
    for (auto& flat : unit.flats) fulls.push_back(flat.full);
    layer_pos += unit.layers.size();
    return CheckpointFn::apply(x, at::TensorList(fulls), to_int(&m_model), to_int(&unit),
                               to_int(&ctx), to_int(&m_prec));
  }
  const auto n = m_model.layers().size();
  while (layer_pos < n && m_unit_of_layer[layer_pos] ==
                              m_unit_of_layer[static_cast<std::size_t>(unit.layers.front())]) {
    x = m_model.forward_layer(static_cast<int>(layer_pos), m_layer_params[layer_pos], x, ctx);
    ++layer_pos;
  }
  return x;
}

void ShardEngine::place_batch(const model::Batch& batch, model::LayerContext& ctx) {
  // The model builds its context from the host batch (positions, masks, rotary tables: small,
  // and read with item() on the way); the device gets the tensors the layers compute with.
  auto to_device = [this](const at::Tensor& t) {
    return t.defined() ? t.to(m_device, /*non_blocking=*/true) : t;
  };
  m_batch = batch;
  m_batch.input_ids = to_device(batch.input_ids);
  m_batch.labels = to_device(batch.labels);
  m_batch.attention_mask = to_device(batch.attention_mask);
  m_batch.pixel_values = to_device(batch.pixel_values);
  for (auto* t : {&ctx.rope_cos, &ctx.rope_sin, &ctx.attn_mask, &ctx.vision_cos, &ctx.vision_sin})
    *t = to_device(*t);
  ctx.batch = &m_batch;
}

at::Tensor ShardEngine::run_forward(const model::Batch& batch, double loss_scale) {
  auto ctx = m_model.context(batch, to_scalar_type(m_prec.buffer));
  ctx.loss_scale = loss_scale;
  ctx.loss_chunk_tokens = m_loss_chunk_tokens;
  if (m_device.is_cuda() && m_loss_chunk_tokens == 0) {
    const auto mem = dist::device_memory(m_device);
    ctx.loss_free_bytes = std::max<std::int64_t>(0, mem.total - mem.reserved);
  }
  if (m_device.is_cuda()) {
    const trainer::PhaseScope copy(trainer::Phase::copy);
    place_batch(batch, ctx);
  }
  if (m_streams.active()) {
    // The gathers of this micro-step read the masters the last optimizer step wrote.
    dist::Streams::record(m_streams.compute()).block(m_streams.gather());
  }
  if (timing()) m_origin = dist::Streams::record(m_streams.compute(), true);
  m_ctx = ctx;
  AutocastScope autocast(m_prec, m_device.type());
  const bool full_shard = m_shard.strategy == spec::ShardStrategy::full_shard ||
                          m_shard.strategy == spec::ShardStrategy::hybrid_shard;
  at::Tensor x;
  Unit* prev = nullptr;
  std::size_t l = 0;
  const auto n = m_model.layers().size();
  while (l < n) {
    Unit& unit = m_units[static_cast<std::size_t>(m_unit_of_layer[l])];
    if (!unit.active) {
      // The next unit's gather is issued before this one is waited, so both travel together
      // when the limit allows; with max_inflight_gathers = 1 the limit waits this one first.
      issue_gather(unit, "forward");
      if (m_shard.forward_prefetch) {
        if (Unit* next = next_forward(unit)) issue_gather(*next, "forward", true);
      }
      wait_gather(unit, "forward");
      activate(unit);
    }
    if (prev && prev != &unit && x.defined() && x.requires_grad()) {
      // The gradient of this boundary arrives when `unit`'s backward is done and `prev`'s begins.
      Unit* consumer = unit.root ? nullptr : &unit;
      Unit* producer = (prev->root || !full_shard) ? nullptr : prev;
      const bool traced = tracing();  // a boundary of the backward's compute stretches
      if (consumer || producer || traced) {
        x.register_hook([this, consumer, producer, traced, prev](const at::Tensor&) {
          if (traced) end_backward_stretch();
          if (consumer) on_unit_backward_done(*consumer);
          if (producer) on_pre_backward(*producer);
          if (traced) begin_backward_stretch(prev);
        });
      }
    }
    const double start_ms = tracing() ? m_trace->now_ms() : 0;
    x = run_unit_layers(unit, l, x, m_ctx);
    if (tracing()) m_trace->compute(unit.name, "forward", start_ms, m_trace->now_ms());
    if (!unit.root && full_shard && !m_hold_gathered) free_unit(unit, "forward");
    prev = &unit;
  }
  return x;
}

double ShardEngine::forward_backward(const model::Batch& batch, double loss_scale, bool reduce) {
  m_reduce = reduce;
  m_grad_enabled = true;
  at::Tensor loss;
  {
    const trainer::PhaseScope forward(trainer::Phase::forward);
    loss = run_forward(batch, loss_scale);
  }
  {
    // Backward is queued before the loss is read: on CUDA, item() would wait for the forward.
    // The CPU's autograd runs the hooks (gathers, reduce-scatters) on this thread.
    const trainer::PhaseScope backward(trainer::Phase::backward);
    // The last layer's unit (the root's head) runs first, until the first unit boundary.
    if (tracing())
      begin_backward_stretch(&m_units[static_cast<std::size_t>(m_unit_of_layer.back())]);
    loss.backward();
    if (tracing()) end_backward_stretch();
  }
  const double value = loss.item<double>();
  const trainer::PhaseScope backward(trainer::Phase::backward);
  for (auto it = m_units.rbegin(); it != m_units.rend(); ++it) on_unit_backward_done(*it);
  if (reduce) finish_reductions();
  reset_micro_state();
  return value;
}

double ShardEngine::forward_only(const model::Batch& batch, double loss_scale) {
  at::NoGradGuard no_grad;
  m_grad_enabled = false;
  auto loss = run_forward(batch, loss_scale);
  const double value = loss.item<double>();
  if (m_hold_gathered) {
    // The units stay gathered and active (their views built) for the next call.
    m_inflight.clear();
    if (timing()) flush_timing();
    m_batch = model::Batch{};
  } else {
    for (auto& unit : m_units) free_unit(unit, "forward");
    reset_micro_state();
  }
  m_grad_enabled = true;
  return value;
}

bool ShardEngine::hold_gathered(bool on, std::int64_t* bytes) {
  std::int64_t need = 0;
  const auto size = static_cast<std::int64_t>(c10::elementSize(to_scalar_type(m_prec.param)));
  for (const auto& unit : m_units)
    for (const auto& flat : unit.flats) need += flat.full_numel() * size;
  if (bytes != nullptr) *bytes = need;
  if (!on) {
    if (m_hold_gathered) {
      m_hold_gathered = false;
      for (auto& unit : m_units) free_unit(unit, "forward");
      reset_micro_state();
    }
    return false;
  }
  std::int64_t free = 0;
  if (m_device.is_cuda()) {
    free = dist::device_memory(m_device).free;
  } else {
    free = dist::host_available_memory();
  }
  // Every rank of the shard group must decide alike: one holding while another gathers per
  // token would leave their all-gathers unmatched.
  auto refuse = at::full({1}, need <= free / 2 ? 0.0F : 1.0F);
  m_groups.shard->all_reduce_max(refuse);
  m_hold_gathered = refuse.item<float>() == 0.0F;
  return m_hold_gathered;
}

void ShardEngine::on_pre_backward(Unit& unit) {
  issue_gather(unit, "backward");
  if (m_shard.backward_prefetch == spec::BackwardPrefetch::pre) {
    if (Unit* next = next_backward(unit)) issue_gather(*next, "backward", true);
  }
  wait_gather(unit, "backward");
}

void ShardEngine::on_flat_grad(Unit& unit, FlatParam& flat, const at::Tensor& grad) {
  const auto rdtype = to_scalar_type(m_prec.reduce);
  auto g = grad.to(rdtype).contiguous();  // (P)
  if (!m_reduce) {
    if (flat.accum.defined()) {
      flat.accum.add_(g);
    } else {
      flat.accum = g.data_ptr() == grad.data_ptr() ? g.clone() : g;
    }
  } else {
    if (flat.accum.defined()) {
      g = g + flat.accum;
      flat.accum.reset();
    }
    PendingReduce pending{&flat, &unit, {}, {}, false, {}, {}};
    const auto bytes = static_cast<std::int64_t>(g.nbytes());
    const bool scatter = m_groups.shard->size() > 1;
    const bool replicas = m_groups.replicate->size() > 1;
    // On CUDA the reduction runs on the reduce stream after the gradient is computed, and the
    // compute stream waits for it only when the sharded gradient is accumulated.
    if (scatter) pending.out = at::empty({flat.shard_numel}, g.options());  // (N)
    std::optional<c10::StreamGuard> on_reduce;
    std::optional<c10::Event> start;
    if (m_streams.active() && (scatter || replicas)) {
      dist::Streams::record(m_streams.compute()).block(m_streams.reduce());
      on_reduce.emplace(m_streams.reduce());
      if (timing()) start = dist::Streams::record(m_streams.reduce(), true);
    }
    if (scatter) {
      pending.work = m_groups.shard->reduce_scatter_async(pending.out, g);
      if (tracing())
        m_trace->collective("reduce_scatter", "issue", unit.name, "backward", bytes, 0);
    } else {
      pending.out = g;  // (P): NO_SHARD or a single rank, the replicas all-reduce it
      if (replicas) {
        pending.work = m_groups.replicate->all_reduce_sum_async(pending.out);
        if (tracing()) m_trace->collective("all_reduce", "issue", unit.name, "backward", bytes, 0);
      }
      pending.second_stage = true;
    }
    if (on_reduce) {
      auto& group = scatter ? *m_groups.shard : *m_groups.replicate;
      group.wait(pending.work, scatter ? "reduce_scatter_tensor" : "all_reduce");
      pending.work.reset();
      pending.input = g;
      pending.done = dist::Streams::record(m_streams.reduce());
      if (start)
        m_spans.push_back({scatter ? "reduce_scatter" : "all_reduce", unit.name, "backward",
                           std::move(*start), dist::Streams::record(m_streams.reduce(), true)});
    }
    on_reduce.reset();
    m_reductions.push_back(std::move(pending));
    // Bound the gradients held in flight (two units' worth), as FSDP's rate limit does.
    while (m_reductions.size() > 2) {
      finish_one_reduction();
    }
  }
  if (flat.storage_live) {
    release(flat);
    if (tracing()) m_trace->collective("free", "done", unit.name, "backward", 0, 0);
  }
  if (--unit.trainable_pending == 0 && m_shard.backward_prefetch == spec::BackwardPrefetch::post) {
    if (Unit* next = next_backward(unit)) issue_gather(*next, "backward", true);
  }
}

void ShardEngine::finish_one_reduction() {
  auto p = std::move(m_reductions.front());
  m_reductions.pop_front();
  const double wait_ms = tracing() ? m_trace->now_ms() : -1;
  m_groups.shard->wait(p.work, p.second_stage ? "all_reduce" : "reduce_scatter_tensor");
  if (p.done) p.done->block(m_streams.compute());
  if (!p.second_stage && m_groups.replicate->size() > 1) {
    m_groups.replicate->all_reduce_sum(p.out);  // HYBRID_SHARD: sum the shard across nodes
  }
  if (tracing())
    m_trace->collective(p.second_stage ? "all_reduce" : "reduce_scatter", "wait", p.unit->name,
                        "backward", 0, 0, false, {}, wait_ms);
  auto& flat = *p.flat;
  auto shard = p.out.numel() == flat.shard_numel
                   ? p.out
                   : p.out.narrow(0, flat.shard_offset, flat.shard_numel);
  auto value = shard.to(at::kFloat);  // (N) fp32
  if (flat.grad.defined()) {
    flat.grad.add_(value);
  } else if (value.is_same(shard) && value.storage().nbytes() > value.nbytes()) {
    flat.grad = value.clone();  // a slice of a full (P) buffer (NO_SHARD, Gloo): keep the shard
  } else {
    flat.grad = std::move(value);  // the reduction's own buffer: no copy
  }
  if (tracing() && !flat.grad_traced) {
    flat.grad_traced = true;
    m_trace->placement(flat.name, "grad", flat.grad.device().is_cpu() ? "cpu" : "cuda", "float32",
                       static_cast<std::int64_t>(flat.grad.nbytes()));
  }
}

void ShardEngine::finish_reductions() {
  while (!m_reductions.empty()) finish_one_reduction();
}

void ShardEngine::on_unit_backward_done(Unit& unit) {
  if (!unit.active || unit.backward_done) return;
  unit.backward_done = true;
  free_unit(unit, "backward");
  if (unit.trainable_pending > 0 && m_shard.backward_prefetch == spec::BackwardPrefetch::post) {
    // No gradient arrived for this unit (frozen, or unused): prefetching cannot wait for one.
    if (Unit* next = next_backward(unit)) issue_gather(*next, "backward", true);
  }
}

void ShardEngine::end_backward_stretch() {
  if (m_backward_unit)
    m_trace->compute(m_backward_unit->name, "backward", m_backward_from, m_trace->now_ms());
  m_backward_unit = nullptr;
}

void ShardEngine::begin_backward_stretch(const Unit* unit) {
  m_backward_unit = unit;
  m_backward_from = m_trace->now_ms();
}

void ShardEngine::reset_micro_state() {
  for (auto& unit : m_units) {
    wait_gather(unit, "forward");
    for (auto& flat : unit.flats) {
      if (flat.storage_live) release(flat);
      flat.full.reset();
      flat.full_data.reset();
    }
    unit.active = false;
    unit.backward_done = false;
    unit.trainable_pending = 0;
  }
  for (auto& params : m_layer_params)
    for (auto& p : params) p.reset();
  m_inflight.clear();
  if (timing()) flush_timing();
  m_batch = model::Batch{};
}

void ShardEngine::release(FlatParam& flat) {
  if (m_streams.active()) {
    c10::getDeviceAllocator(c10::DeviceType::CUDA)
        ->recordStream(flat.full_data.storage().data_ptr(), m_streams.compute());
  }
  free_storage(flat.full_data);
  flat.packed.reset();
  flat.storage_live = false;
}

void ShardEngine::flush_timing() {
  if (m_origin) {
    dist::synchronize(m_device);  // every event of the micro-step is complete
    for (const auto& span : m_spans)
      m_trace->gpu_span(span.op, span.unit, span.phase, m_origin->elapsedTime(span.start),
                        m_origin->elapsedTime(span.end));
    for (const auto& e : m_exposed)
      m_trace->set(e.record, "exposed_ms", e.before.elapsedTime(e.after));
  }
  m_spans.clear();
  m_exposed.clear();
  m_origin.reset();
  m_trace->flush();
}

double ShardEngine::grad_norm() {
  double local = 0;
  at::Tensor on_device;  // CUDA: summed there, read once
  for (auto* flat : trainable_flats()) {
    if (!flat->grad.defined()) continue;
    if (!flat->grad.is_cuda()) {
      local += sum_squares(flat->grad);
      continue;
    }
    auto sq = at::linalg_vector_norm(flat->grad, 2, std::nullopt, false, at::kDouble).square();
    on_device = on_device.defined() ? on_device + sq : sq;
  }
  if (on_device.defined()) local += on_device.item<double>();
  auto total = at::full({1}, local, at::kDouble);
  m_groups.shard->all_reduce_sum(total);
  return std::sqrt(total.item<double>());
}

void ShardEngine::scale_grads(double factor) {
  for (auto* flat : trainable_flats())
    if (flat->grad.defined()) flat->grad.mul_(factor);
}

bool ShardEngine::grads_nonfinite() {
  auto flag = at::zeros({1}, at::kFloat);
  at::Tensor bad;  // summed on the gradients' device, read once
  for (auto* flat : trainable_flats()) {
    if (!flat->grad.defined()) continue;
    auto here = at::isfinite(flat->grad).logical_not().any();
    bad = bad.defined() ? bad.logical_or(here) : here;
  }
  if (bad.defined() && bad.item<bool>()) flag.fill_(1.0);
  m_groups.world->all_reduce_max(flag);
  return flag.item<float>() > 0.0F;
}

void ShardEngine::zero_grads() {
  // Freed, not zeroed (torch's zero_grad(set_to_none=True)): the next step's backward allocates
  // them as the reductions land, so its activation peak does not also hold every gradient.
  for (auto* flat : trainable_flats()) flat->grad.reset();
}

std::vector<std::pair<std::string, at::Tensor>> ShardEngine::full_grads() {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto* flat : trainable_flats()) {
    if (!flat->grad.defined()) continue;
    auto send = flat->grad.detach().to(at::kFloat);
    auto full = at::empty({flat->padded}, send.options());  // (P)
    m_groups.shard->all_gather(full, send);
    for (const auto& slot : flat->slots)
      out.emplace_back(slot.name, full.narrow(0, slot.offset, slot.numel)
                                      .view(slot.shape)
                                      .to(at::kCPU, /*non_blocking=*/false, /*copy=*/true));
  }
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> ShardEngine::full_state() {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& unit : m_units) {
    for (auto& flat : unit.flats) {
      auto send = flat.master.detach().to(m_device);
      auto full = at::empty({flat.padded}, send.options());  // (P)
      m_groups.shard->all_gather(full, send);
      if (flat.nf4) {  // the dequantized weights, in fp32 (what the layers compute with)
        const auto size = static_cast<std::int64_t>(c10::elementSize(flat.storage));
        const auto bytes = full.view(at::kByte);
        for (const auto& slot : flat.slots)
          out.emplace_back(slot.name,
                           model::dequantize_nf4_record(
                               bytes.narrow(0, slot.offset * size, slot.numel * size), slot.shape,
                               flat.nf4_block_size, flat.nf4_double_quant, at::kFloat)
                               .to(at::kCPU));
        continue;
      }
      for (const auto& slot : flat.slots)
        out.emplace_back(slot.name, full.narrow(0, slot.offset, slot.numel)
                                        .view(slot.shape)
                                        .to(at::kCPU, /*non_blocking=*/false, /*copy=*/true));
    }
    for (const auto& tied : unit.tied) {  // the same values under the tied name too
      for (std::size_t k = 0; k < out.size(); ++k)
        if (out[k].first == tied.owner) {
          out.emplace_back(tied.name, out[k].second.clone());
          break;
        }
    }
  }
  return out;
}

}  // namespace shardscope::shard
