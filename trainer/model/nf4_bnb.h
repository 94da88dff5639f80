// bitsandbytes' serialized 4-bit layout (what transformers saves for a model loaded with
// BitsAndBytesConfig(load_in_4bit=True), QuantState.as_dict(packed=True)) for one Linear weight
// NAME ("model.layers.0.self_attn.q_proj.weight"):
//   NAME                                   the packed codes, (bytes, 1) in the quant_storage dtype
//   NAME.absmax                            (nb,) fp32, or (nb,) uint8 with double quantization
//   NAME.quant_map                         (16,) fp32, the NF4 levels
//   NAME.nested_absmax, .nested_quant_map  (nn,) fp32 and (256,) fp32: double quantization only
//   NAME.quant_state.bitsandbytes__nf4     uint8 bytes of a JSON object: quant_type, blocksize,
//                                          dtype, shape (and nested_blocksize, nested_dtype,
//                                          nested_offset with double quantization)
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "spec/experiment.h"
#include "trainer/model/nf4.h"

namespace shardscope::model {

/// True when `name` + ".quant_state.bitsandbytes__nf4" or "...__fp4" is among the tensors.
bool is_bnb_quantized(const std::string& name,
                      const std::function<const at::Tensor*(const std::string&)>& find);

/// The tensors bitsandbytes saves for weight `name` quantized as `nf4`, the codes stored as
/// `storage` (uint8, bf16, fp16 or fp32).
std::vector<std::pair<std::string, at::Tensor>> nf4_to_bnb(const std::string& name,
                                                           const Nf4Weight& nf4,
                                                           at::ScalarType storage);

/// Reads weight `name` from bitsandbytes' tensors (`find` returns nullptr for a missing one) and
/// checks them against `lora`: a quantization the config does not describe (another quant type,
/// block size or double quantization, or lora.quantize = "none") is a config error naming the
/// field and the value the checkpoint needs; inconsistent tensors are a data error.
Nf4Weight nf4_from_bnb(const std::string& name,
                       const std::function<const at::Tensor*(const std::string&)>& find,
                       const spec::LoraSection& lora);

}  // namespace shardscope::model
