// Packing: which samples share a row of seq_len tokens (torch-free). The trainer lays the rows out
// (trainer/run/sft_batch.h): each sample keeps its own positions and attends only to itself.
//
// First-fit decreasing by length: the longest sample first, each into the first row with room,
// else a new row. No sample is split, dropped or placed twice.
#pragma once

#include <cstdint>
#include <vector>

#include "spec/result.h"

namespace shardscope::data {

/// Rows of packed items: each row lists the positions (in the `lengths` passed to pack_rows) of
/// its items in increasing order, and its items' lengths sum to at most seq_len.
struct PackedRows {
  std::vector<std::vector<std::int64_t>> rows;
  std::int64_t tokens = 0;   ///< the items' lengths summed
  std::int64_t seq_len = 0;  ///< a row's capacity
  /// Real tokens over row slots (rows x seq_len), in (0, 1]; 1 with no rows.
  double efficiency() const {
    return rows.empty() ? 1.0
                        : static_cast<double>(tokens) /
                              (static_cast<double>(rows.size()) * static_cast<double>(seq_len));
  }
};

/// Packs items of `lengths` (each at least 1) into rows of `seq_len`. An item longer than a row
/// is an error naming its position and data.seq_len (the loaders refuse such samples first).
Result<PackedRows> pack_rows(const std::vector<std::int64_t>& lengths, std::int64_t seq_len);

/// Splits the row with the most items into two (its first half of items, then the rest) until
/// there are `count` rows or every row holds one item: so that each of `count` micro-batches
/// gets a row.
void split_rows(PackedRows& packed, std::size_t count);

class SampleOrder;

/// Samples of rank r of W for the step starting at global offset `base`: base + r + k W.
std::vector<std::int64_t> rank_samples(SampleOrder& order, std::int64_t base, std::int64_t batch,
                                       int rank, int world);

/// Samples of each rank for the step at global offset `base` (rank_samples for every rank).
std::vector<std::vector<std::int64_t>> step_shares(SampleOrder& order, std::int64_t base,
                                                   std::int64_t batch, int world);

/// How a run takes its samples, for pack_efficiency: train.batch_size, train.max_steps, the world
/// size, train.seed and data.shuffle.
struct PackPlan {
  std::int64_t batch_size = 8;
  std::int64_t max_steps = 100;
  int world = 1;
  std::uint64_t seed = 0;
  bool shuffle = true;
};

/// data.pack's efficiency over a run's first epoch (or its steps, if fewer): every rank's share
/// of each step packed on its own (pack_rows), real tokens over row slots (rows x seq_len). The
/// trainer's `hello.pack_efficiency` and the data inspector's figure are this function. `lengths`
/// holds each sample's tokens (each 1 to seq_len, else pack_rows' error).
Result<double> pack_efficiency(const std::vector<std::int64_t>& lengths, std::int64_t seq_len,
                               const PackPlan& plan);

}  // namespace shardscope::data
