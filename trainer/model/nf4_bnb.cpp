#include "trainer/model/nf4_bnb.h"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include "trainer/base/dtype_name.h"
#include "trainer/base/fatal.h"

namespace shardscope::model {
namespace {

using spec::ErrorKind;
using Find = std::function<const at::Tensor*(const std::string&)>;

constexpr const char* kStateNf4 = ".quant_state.bitsandbytes__nf4";
constexpr const char* kStateFp4 = ".quant_state.bitsandbytes__fp4";

at::ScalarType dtype_of(const std::string& name, const std::string& where) {
  if (name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  SHARD_FAIL(ErrorKind::data,
             where + ": dtype \"" + name + "\" is not float32, bfloat16 or float16",
             "re-save the checkpoint from a float model");
}

const at::Tensor& need(const std::string& key, const Find& find) {
  const at::Tensor* t = find(key);
  SHARD_CHECK(t != nullptr, ErrorKind::data,
              key + " is missing, but its weight is stored quantized by bitsandbytes",
              "re-save the checkpoint with transformers (save_pretrained of the 4-bit model)");
  return *t;
}

nlohmann::json quant_state(const std::string& name, const at::Tensor& bytes) {
  const at::Tensor b = bytes.to(at::kCPU).contiguous().view(at::kByte).reshape(-1);
  const auto* p = reinterpret_cast<const char*>(b.data_ptr<std::uint8_t>());
  auto json = nlohmann::json::parse(p, p + b.numel(), nullptr, false);
  SHARD_CHECK(json.is_object() && json.contains("quant_type") && json.contains("blocksize") &&
                  json.contains("shape") && json.contains("dtype"),
              ErrorKind::data,
              name + kStateNf4 +
                  " is not bitsandbytes' quant state (a JSON object with "
                  "quant_type, blocksize, dtype and shape)",
              "re-save the checkpoint with transformers (save_pretrained of the 4-bit model)");
  return json;
}

// The config must describe the checkpoint's quantization: each difference names its field.
void check_config(const std::string& name, const nlohmann::json& state, bool nested,
                  const spec::LoraSection& lora) {
  SHARD_CHECK(lora.quantize == "nf4", ErrorKind::config,
              "lora.quantize: the checkpoint stores " + name +
                  " as bitsandbytes NF4, but lora.quantize is \"" + lora.quantize + "\"",
              "set lora.quantize = \"nf4\" (with lora.enabled = true), or load an unquantized "
              "checkpoint");
  const auto block = state["blocksize"].get<std::int64_t>();
  SHARD_CHECK(block == lora.quant_block_size, ErrorKind::config,
              "lora.quant_block_size: the checkpoint quantized " + name + " in blocks of " +
                  std::to_string(block) + ", not " + std::to_string(lora.quant_block_size),
              "set lora.quant_block_size = " + std::to_string(block));
  SHARD_CHECK(nested == lora.double_quant, ErrorKind::config,
              std::string("lora.double_quant: the checkpoint's ") + name +
                  (nested ? " has" : " has no") + " double-quantized absmax, but double_quant is " +
                  (lora.double_quant ? "true" : "false"),
              std::string("set lora.double_quant = ") + (nested ? "true" : "false"));
}

}  // namespace

bool is_bnb_quantized(const std::string& name, const Find& find) {
  return find(name + kStateNf4) != nullptr || find(name + kStateFp4) != nullptr;
}

std::vector<std::pair<std::string, at::Tensor>> nf4_to_bnb(const std::string& name,
                                                           const Nf4Weight& nf4,
                                                           at::ScalarType storage) {
  nlohmann::json state = {{"quant_type", "nf4"},
                          {"blocksize", nf4.block_size},
                          {"dtype", trainer::torch_dtype_name(nf4.dtype)},
                          {"shape", nf4.shape}};
  std::vector<std::pair<std::string, at::Tensor>> out = {
      {name, nf4_as_storage(nf4.packed, storage).unsqueeze(1)},
      {name + ".absmax", nf4.absmax},
      {name + ".quant_map", nf4_code()}};
  if (nf4.double_quant) {
    state["nested_blocksize"] = kNf4NestedBlock;
    state["nested_dtype"] = "float32";
    state["nested_offset"] = static_cast<double>(nf4.offset.item<float>());
    out.emplace_back(name + ".nested_absmax", nf4.nested_absmax);
    out.emplace_back(name + ".nested_quant_map", nf4_dynamic_map());
  }
  const std::string text = state.dump();
  at::Tensor bytes = at::empty({static_cast<std::int64_t>(text.size())}, at::kByte);
  std::copy(text.begin(), text.end(), reinterpret_cast<char*>(bytes.data_ptr<std::uint8_t>()));
  out.emplace_back(name + kStateNf4, bytes);
  return out;
}

Nf4Weight nf4_from_bnb(const std::string& name, const Find& find, const spec::LoraSection& lora) {
  SHARD_CHECK(find(name + kStateFp4) == nullptr, ErrorKind::config,
              "lora.quantize: the checkpoint stores " + name +
                  " as bitsandbytes FP4; only NF4 is supported",
              "re-quantize the model with bnb_4bit_quant_type=\"nf4\", or load it unquantized");
  const nlohmann::json state = quant_state(name, need(name + kStateNf4, find));
  SHARD_CHECK(state["quant_type"] == "nf4", ErrorKind::config,
              "lora.quantize: " + name + " is quantized as " + state["quant_type"].dump() +
                  "; only NF4 is supported",
              "re-quantize the model with bnb_4bit_quant_type=\"nf4\", or load it unquantized");
  const bool nested = find(name + ".nested_absmax") != nullptr;
  check_config(name, state, nested, lora);

  Nf4Weight nf4;
  nf4.block_size = lora.quant_block_size;
  nf4.double_quant = nested;
  nf4.shape = state["shape"].get<std::vector<std::int64_t>>();
  nf4.dtype = dtype_of(state["dtype"].get<std::string>(), name + kStateNf4);
  nf4.packed = nf4_bytes(need(name, find));
  nf4.absmax = need(name + ".absmax", find).reshape(-1);
  SHARD_CHECK(at::equal(need(name + ".quant_map", find).to(at::kFloat).reshape(-1), nf4_code()),
              ErrorKind::data, name + ".quant_map is not the NF4 table",
              "the weight was quantized with another code; re-quantize it as NF4");
  std::int64_t n = 1;
  for (const auto d : nf4.shape) n *= d;
  const std::int64_t blocks = (n + nf4.block_size - 1) / nf4.block_size;
  SHARD_CHECK(nf4.packed.numel() == (n + 1) / 2 && nf4.absmax.numel() == blocks, ErrorKind::data,
              name + ": " + std::to_string(nf4.packed.numel()) + " packed bytes and " +
                  std::to_string(nf4.absmax.numel()) + " absmax values do not fit its shape " +
                  state["shape"].dump() + " in blocks of " + std::to_string(nf4.block_size) + " (" +
                  std::to_string((n + 1) / 2) + " and " + std::to_string(blocks) + ")",
              "the checkpoint's quantization metadata disagrees with its tensors; re-save it");
  if (!nested) {
    SHARD_CHECK(nf4.absmax.scalar_type() == at::kFloat, ErrorKind::data,
                name + ".absmax is not float32 and there is no nested_absmax",
                "re-save the checkpoint with transformers");
    return nf4;
  }
  SHARD_CHECK(nf4.absmax.scalar_type() == at::kByte, ErrorKind::data,
              name + ".absmax is not uint8 codes, but " + name + ".nested_absmax exists",
              "re-save the checkpoint with transformers");
  SHARD_CHECK(state.value("nested_blocksize", std::int64_t{0}) == kNf4NestedBlock &&
                  state.contains("nested_offset"),
              ErrorKind::data,
              name + kStateNf4 + " lacks nested_offset or has a nested_blocksize other than 256",
              "re-save the checkpoint with transformers");
  SHARD_CHECK(at::equal(need(name + ".nested_quant_map", find).to(at::kFloat).reshape(-1),
                        nf4_dynamic_map()),
              ErrorKind::data, name + ".nested_quant_map is not bitsandbytes' dynamic map",
              "re-quantize the weight with bitsandbytes");
  nf4.nested_absmax = need(name + ".nested_absmax", find).to(at::kFloat).reshape(-1);
  SHARD_CHECK(nf4.nested_absmax.numel() == (blocks + kNf4NestedBlock - 1) / kNf4NestedBlock,
              ErrorKind::data,
              name + ".nested_absmax has " + std::to_string(nf4.nested_absmax.numel()) +
                  " values for " + std::to_string(blocks) + " absmax codes",
              "the checkpoint's quantization metadata disagrees with its tensors; re-save it");
  // bitsandbytes stores the offset as a Python float of the fp32 mean: back to that fp32.
  nf4.offset =
      at::scalar_tensor(static_cast<float>(state["nested_offset"].get<double>()), at::kFloat);
  return nf4;
}

}  // namespace shardscope::model
