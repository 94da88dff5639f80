// The C++ side of reference_nf4: quantizes every tensor of INPUTS.safetensors to NF4 with
// model::quantize_nf4 and writes what bitsandbytes' QuantState holds plus the dequantized
// weights, for nf4_reference.py to compare with bitsandbytes itself:
//   <name>.packed (bytes,) uint8          <name>.absmax (nb,) fp32 or uint8 codes
//   <name>.nested_absmax (nn,) fp32       <name>.offset (1,) fp32       (double quant only)
//   <name>.block_absmax (nb,) fp32        <name>.dequant.{fp32,bf16,fp16} the weight's shape
//   <name>.storage.{bf16,fp16,fp32} the packed bytes viewed as that dtype (when they divide)
// and the tables: nf4_code (16,) and dynamic_map (256,).
#include <ATen/ATen.h>

#include <iostream>
#include <string>
#include <vector>

#include "trainer/base/fatal.h"
#include "trainer/base/safetensors.h"
#include "trainer/model/nf4.h"

using namespace shardscope;

namespace {

int run(const std::string& in, const std::string& out, std::int64_t block_size, bool double_quant) {
  const auto file = ckpt::read_safetensors(in);
  ckpt::NamedTensors result = {{"nf4_code", model::nf4_code()},
                               {"dynamic_map", model::nf4_dynamic_map()}};
  for (const auto& [name, weight] : file.tensors) {
    const model::Nf4Weight q = model::quantize_nf4(weight, block_size, double_quant);
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
      result.emplace_back(name + ".dequant." + suffix, model::dequantize_nf4(q, dtype));
      if (q.packed.numel() % static_cast<std::int64_t>(c10::elementSize(dtype)) == 0) {
        const at::Tensor stored = model::nf4_as_storage(q.packed, dtype);
        SHARD_CHECK(at::equal(model::nf4_bytes(stored), q.packed), spec::ErrorKind::internal,
                    "nf4_bytes(nf4_as_storage(x)) != x", "");
        result.emplace_back(name + ".storage." + suffix, stored);
      }
    }
  }
  ckpt::write_safetensors(out, result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr
        << "usage: nf4_tool INPUTS.safetensors OUT.safetensors BLOCK_SIZE DOUBLE_QUANT(0|1)\n";
    return trainer::kExitConfig;
  }
  const std::vector<std::string> a(argv + 1, argv + argc);
  return trainer::run_guarded([&] { return run(a[0], a[1], std::stoll(a[2]), a[3] == "1"); });
}
