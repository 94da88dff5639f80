// The C++ side of reference_nf4, two modes.
// `quantize IN OUT BNB_OUT BLOCK DQ`: quantizes every tensor of IN to NF4 with
// model::quantize_nf4; writes to BNB_OUT the tensors bitsandbytes would save (model::nf4_to_bnb,
// uint8 storage) and to OUT what its QuantState holds plus the dequantized weights:
//   <name>.packed (bytes,) uint8          <name>.absmax (nb,) fp32 or uint8 codes
//   <name>.nested_absmax (nn,) fp32       <name>.offset (1,) fp32       (double quant only)
//   <name>.block_absmax (nb,) fp32        <name>.dequant.{fp32,bf16,fp16} the weight's shape
//   <name>.storage.{bf16,fp16,fp32} the packed bytes viewed as that dtype (when they divide)
// and the tables: nf4_code (16,) and dynamic_map (256,). It fails (exit != 0) when the engine's
// path, dequantize_nf4_record_into of the weight's nf4_record, differs from dequantize_nf4.
// `read CKPT OUT BLOCK DQ QUANTIZE`: reads every bitsandbytes-quantized weight of CKPT with
// model::nf4_from_bnb under [lora] enabled, quantize = QUANTIZE, quant_block_size = BLOCK,
// double_quant = DQ, and writes <name>.dequant in the weight's own dtype; a quantization the
// config does not describe ends with shardtrain's config error (exit 2).
#include <ATen/ATen.h>

#include <iostream>
#include <string>
#include <vector>

#include "trainer/base/fatal.h"
#include "trainer/base/safetensors.h"
#include "trainer/model/nf4.h"
#include "trainer/model/nf4_bnb.h"

using namespace shardscope;

namespace {

int quantize(const std::string& in, const std::string& out, const std::string& bnb_out,
             std::int64_t block_size, bool double_quant) {
  const auto file = ckpt::read_safetensors(in);
  ckpt::NamedTensors bnb;
  ckpt::NamedTensors result = {{"nf4_code", model::nf4_code()},
                               {"dynamic_map", model::nf4_dynamic_map()}};
  for (const auto& [name, weight] : file.tensors) {
    const model::Nf4Weight q = model::quantize_nf4(weight, block_size, double_quant);
    for (auto& t : model::nf4_to_bnb(name, q, at::kByte)) bnb.push_back(std::move(t));
    result.emplace_back(name + ".packed", q.packed);
    result.emplace_back(name + ".absmax", q.absmax);
    if (double_quant) {
      result.emplace_back(name + ".nested_absmax", q.nested_absmax);
      result.emplace_back(name + ".offset", q.offset.reshape({1}));
    }
    result.emplace_back(name + ".block_absmax", model::nf4_block_absmax(q));
    const std::pair<const char*, at::ScalarType> dtypes[] = {
        {"fp32", at::kFloat}, {"bf16", at::kBFloat16}, {"fp16", at::kHalf}};
    for (const auto& [suffix, dtype] : dtypes) {
      const at::Tensor dequant = model::dequantize_nf4(q, dtype);
      result.emplace_back(name + ".dequant." + suffix, dequant);
      // The engine's path: the weight's record in a flat parameter, dequantized in place.
      const at::Tensor into = at::empty({dequant.numel()}, dequant.options());
      model::dequantize_nf4_record_into(model::nf4_record(q), q.shape, q.block_size, q.double_quant,
                                        into);
      SHARD_CHECK(
          at::equal(into.view(dequant.sizes()).view(at::kByte), dequant.view(at::kByte)),
          spec::ErrorKind::internal,
          name + ": dequantize_nf4_record_into differs from dequantize_nf4 (" + suffix + ")", "");
      if (q.packed.numel() % static_cast<std::int64_t>(c10::elementSize(dtype)) == 0) {
        const at::Tensor stored = model::nf4_as_storage(q.packed, dtype);
        SHARD_CHECK(at::equal(model::nf4_bytes(stored), q.packed), spec::ErrorKind::internal,
                    "nf4_bytes(nf4_as_storage(x)) != x", "");
        result.emplace_back(name + ".storage." + suffix, stored);
      }
    }
  }
  ckpt::write_safetensors(out, result);
  ckpt::write_safetensors(bnb_out, bnb);
  return 0;
}

int read(const std::string& in, const std::string& out, std::int64_t block_size, bool double_quant,
         const std::string& quantize) {
  const auto file = ckpt::read_safetensors(in);
  const auto find = [&](const std::string& name) { return file.find(name); };
  spec::LoraSection lora;
  lora.enabled = true;
  lora.quantize = quantize;
  lora.quant_block_size = block_size;
  lora.double_quant = double_quant;
  ckpt::NamedTensors result;
  const std::string state = ".quant_state.bitsandbytes__";
  for (const auto& [key, tensor] : file.tensors) {
    const auto at = key.rfind(state);
    if (at == std::string::npos) continue;
    const std::string name = key.substr(0, at);
    SHARD_CHECK(model::is_bnb_quantized(name, find), spec::ErrorKind::internal,
                "is_bnb_quantized missed " + name, "");
    const model::Nf4Weight q = model::nf4_from_bnb(name, find, lora);
    result.emplace_back(name + ".dequant", model::dequantize_nf4(q, q.dtype));
  }
  ckpt::write_safetensors(out, result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 6 && a[0] == "quantize")
    return trainer::run_guarded(
        [&] { return quantize(a[1], a[2], a[3], std::stoll(a[4]), a[5] == "1"); });
  if (a.size() == 6 && a[0] == "read")
    return trainer::run_guarded(
        [&] { return read(a[1], a[2], std::stoll(a[3]), a[4] == "1", a[5]); });
  std::cerr << "usage: nf4_tool quantize IN OUT BNB_OUT BLOCK_SIZE DOUBLE_QUANT(0|1)\n"
               "       nf4_tool read CKPT OUT BLOCK_SIZE DOUBLE_QUANT(0|1) QUANTIZE\n";
  return trainer::kExitConfig;
}
