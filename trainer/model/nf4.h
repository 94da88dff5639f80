// 4-bit NormalFloat (NF4) blockwise quantization as bitsandbytes computes it (QLoRA, Dettmers et
// al. 2023; bitsandbytes.functional.quantize_4bit / dequantize_4bit with quant_type="nf4"), bit
// for bit on the CPU: the same codes, absmax, double-quantized absmax, offset and dequantized
// weights. The frozen base of a QLoRA run is stored this way.
//
// Legend: n the weight's element count, bs the block size, nb = ceil(n / bs) the blocks,
// nn = ceil(nb / 256) the nested (double-quantization) blocks.
//
// Layout (bitsandbytes'): element 2i of the flattened weight is the high nibble of byte i, element
// 2i + 1 the low nibble (an odd n pads one zero code). Each block of bs weights is scaled by its
// absmax to [-1, 1] and each value takes the nearest of the 16 NF4 levels (ties to the lower).
// With double quantization the absmax values lose their mean (the offset) and are quantized to
// 8-bit codes of bitsandbytes' signed dynamic map in blocks of 256, each with an fp32 absmax.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace shardscope::model {

/// The absmax blocks of the double quantization (bitsandbytes' fixed 256).
inline constexpr std::int64_t kNf4NestedBlock = 256;

/// One weight in NF4, as bitsandbytes' quantize_4bit returns it (the tensors of its QuantState).
struct Nf4Weight {
  at::Tensor packed;         // (ceil(n / 2),) uint8: two codes per byte, high nibble first
  at::Tensor absmax;         // (nb,) fp32; with double_quant (nb,) uint8 codes of absmax - offset
  at::Tensor nested_absmax;  // (nn,) fp32; double_quant only (bitsandbytes' state2.absmax)
  at::Tensor offset;         // () fp32, the mean of the fp32 absmax; double_quant only
  std::vector<std::int64_t> shape;    // the weight's shape
  at::ScalarType dtype = at::kFloat;  // the weight's dtype before quantization
  std::int64_t block_size = 64;       // bs
  bool double_quant = false;
};

/// The 16 NF4 levels, ascending from -1 to 1: (16,) fp32 (bitsandbytes' get_4bit_type("nf4")).
at::Tensor nf4_code();
/// bitsandbytes' signed 8-bit dynamic map (create_dynamic_map()), the double quantization's code:
/// (256,) fp32, ascending.
at::Tensor nf4_dynamic_map();

/// Quantizes `weight` (fp32, bf16 or fp16, any shape, CPU) in blocks of `block_size` (a power of
/// two from 32 to 4096), double-quantizing the absmax when `double_quant`.
Nf4Weight quantize_nf4(const at::Tensor& weight, std::int64_t block_size, bool double_quant);

/// The fp32 absmax of every block, (nb,): nf4.absmax itself, or with double quantization
/// dynamic_map[codes] * nested_absmax + offset (bitsandbytes' dequantize_blockwise + offset).
at::Tensor nf4_block_absmax(const Nf4Weight& nf4);

/// The weight back in `dtype` (fp32, bf16 or fp16), shaped nf4.shape: NF4 level times its block's
/// absmax in fp32, rounded once to `dtype` (bitsandbytes' dequantize_4bit).
at::Tensor dequantize_nf4(const Nf4Weight& nf4, at::ScalarType dtype);

/// One weight's NF4 record, as a QLoRA unit's flat parameter stores and shards it
/// (spec::nf4_record_bytes bytes, uint8): with double quantization nested_absmax (fp32) and
/// offset (fp32), then the absmax codes (uint8); without, the fp32 absmax; then the packed codes;
/// zero padding to a multiple of 4 bytes.
at::Tensor nf4_record(const Nf4Weight& nf4);
/// The weight a record holds, back in `dtype` (dequantize_nf4's values, bit for bit), on the
/// record's device. `record` is a 1-D uint8 view whose first byte is 4-byte aligned.
at::Tensor dequantize_nf4_record(const at::Tensor& record, const std::vector<std::int64_t>& shape,
                                 std::int64_t block_size, bool double_quant, at::ScalarType dtype);

/// As dequantize_nf4_record, written into `out` (a contiguous tensor of the weight's element
/// count, fp32, bf16 or fp16, on the record's device). On the CPU it is one pass over the codes
/// with no temporaries beyond the block absmax (a unit's weights are dequantized at every gather);
/// elsewhere it runs dequantize_nf4's ops and copies. The values are dequantize_nf4's bit for bit.
void dequantize_nf4_record_into(const at::Tensor& record, const std::vector<std::int64_t>& shape,
                                std::int64_t block_size, bool double_quant, const at::Tensor& out);

/// `packed`'s bytes reinterpreted as `storage` (uint8, bf16, fp16 or fp32), not converted:
/// bitsandbytes' quant_storage, so the codes flatten into a flat parameter of that dtype. The
/// byte count must be a multiple of the dtype's size.
at::Tensor nf4_as_storage(const at::Tensor& packed, at::ScalarType storage);
/// The inverse: the bytes of a tensor made by nf4_as_storage, as (bytes,) uint8.
at::Tensor nf4_bytes(const at::Tensor& stored);

}  // namespace shardscope::model
