// Fixed-length rows from tokenized samples, as flat row-major arrays (torch-free): padding (one
// sample per row) or packing (several samples per row, each attending only to itself).
//
// Legend: R rows, L = seq_len. Packed samples restart their positions at 0, and the first
// token of every sample has label -100 (with labels unshifted, it would otherwise be predicted
// from the previous sample's last token).
#pragma once

#include <cstdint>
#include <vector>

#include "data/text/chat.h"
#include "spec/result.h"

namespace shardscope::data {

struct TokenRows {
  std::int64_t rows = 0;
  std::int64_t seq_len = 0;
  std::vector<std::int64_t> input_ids;       // (R, L), pad_id at padding
  std::vector<std::int64_t> labels;          // (R, L), -100 = no loss
  std::vector<std::int64_t> attention_mask;  // (R, L), 1 = token, 0 = padding
  std::vector<std::int64_t> position_ids;    // (R, L), from 0 in each sample; 0 at padding
  std::vector<std::int64_t> segment_ids;     // (R, L), 1, 2, ... per sample in the row; 0 = pad
  std::vector<std::vector<std::int64_t>> row_samples;  // (R, samples in the row): sample indices

  /// Whether the token at `query` may attend to `key` in `row`: causal and same sample.
  bool attends(std::int64_t row, std::int64_t query, std::int64_t key) const;
};

/// One sample per row, padded with pad_id to seq_len. A sample longer than seq_len is an error
/// unless `truncate` (then its tail is cut).
Result<TokenRows> pad_samples(const std::vector<ChatSample>& samples, std::int64_t seq_len,
                              std::int64_t pad_id, bool truncate = false);

/// Samples in order, each appended to the current row while it fits, else to a new row.
Result<TokenRows> pack_samples(const std::vector<ChatSample>& samples, std::int64_t seq_len,
                               std::int64_t pad_id, bool truncate = false);

}  // namespace shardscope::data
