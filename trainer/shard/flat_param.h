// A flat parameter: the parameters of one wrap unit that share dtype and requires-grad,
// concatenated into one 1-D buffer, padded to a multiple of the shard group size and split in
// equal shards. Each rank keeps its shard as fp32 master weights (the optimizer's parameter)
// plus its sharded gradient; the full buffer exists only while gathered.
//
// Legend: P padded numel (multiple of S), S shard group size, N = P / S shard numel.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace shardscope::shard {

/// Where one model parameter sits inside its flat parameter.
struct FlatSlot {
  int layer = 0;     // model layer index
  int index = 0;     // parameter index within the layer
  std::string name;  // HF name
  std::vector<std::int64_t> shape;
  std::int64_t numel = 0;
  std::int64_t offset = 0;  // element offset in the unpadded flat buffer
  bool decay = true;
  /// NF4 flats: the storage elements of the slot's NF4 record (model::nf4_record); 0 for others,
  /// whose numel is the shape's.
  std::int64_t record = 0;
};

struct FlatParam {
  std::string name;  // "<unit>/trainable", "<unit>/frozen" or "<unit>/nf4"
  std::vector<FlatSlot> slots;
  bool trainable = true;
  /// QLoRA: the unit's NF4 base weights (ParamShape::nf4), frozen. Its elements are the bytes of
  /// each slot's NF4 record seen as `storage` (lora.quant_storage), so master is the (N) shard of
  /// the records and a gather moves packed bytes; `packed` holds the gathered (P) records until
  /// they are dequantized into `full`, here the (D) weights in the param dtype (D the sum of the
  /// slots' shapes), which the layers' views use while the unit is live.
  bool nf4 = false;
  at::ScalarType storage = at::kFloat;  // master's dtype (fp32 but for NF4 flats)
  std::int64_t nf4_block_size = 64;
  bool nf4_double_quant = true;
  at::Tensor packed;
  std::int64_t numel = 0;         // sum of slot numels
  std::int64_t padded = 0;        // P
  std::int64_t shard_numel = 0;   // N
  std::int64_t shard_offset = 0;  // shard rank * N: first element of this rank's shard

  at::Tensor master;  // (N) fp32 leaf; requires grad when trainable (optimizer parameter)
  at::Tensor grad;    // (N) fp32 sharded gradient; undefined before the first reduction
  /// [begin, end) element ranges of this rank's shard where weight decay applies (slots with
  /// decay, clipped to the shard, adjacent ranges merged); norms, biases and padding are outside.
  std::vector<std::pair<std::int64_t, std::int64_t>> decay_ranges;
  at::Tensor accum;  // (P) reduce dtype: gradients of micro-steps not yet reduced

  // Gathered state of the current micro-step.
  at::Tensor full;            // (P) param dtype, the autograd output the views come from
  at::Tensor full_data;       // same storage, own version counter: gathers write through it
  bool storage_live = false;  // full's storage currently holds the gathered values
  bool grad_traced = false;   // the trace has a placement record of `grad`

  /// Sizes for split_with_sizes of `full`: every slot, then the padding (if any); NF4 flats: the
  /// slots' weights (no padding).
  std::vector<std::int64_t> split_sizes() const;
  /// Elements of `full` while gathered: P, or D for an NF4 flat.
  std::int64_t full_numel() const;
};

/// Lays out `slots` (offsets filled in) for a shard group of `group_size`, this rank at
/// `group_rank`, and computes the shard's decay ranges.
void layout_flat(FlatParam& flat, int group_size, int group_rank);

/// Frees a tensor's storage (its bytes go back to the allocator; views and autograd's saved
/// tensors keep pointing at the empty storage).
void free_storage(const at::Tensor& t);
/// Re-allocates a freed storage to `nbytes`; every tensor sharing it sees the new memory.
void alloc_storage(const at::Tensor& t, std::size_t nbytes);

}  // namespace shardscope::shard
