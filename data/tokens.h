// Token samples ([data] format = "tokens"): {"input_ids":[...], "labels":[...]} per JSONL line,
// labels optional (default: the ids; -100 masks a position). Samples are padded (id 0, label
// -100) or truncated to data.seq_len. SampleOrder maps a global sample offset to a sample: epoch
// e = offset / n is a permutation of the samples drawn from (seed, e), so a run resumed at any
// offset sees the same order, whatever the world size.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "spec/result.h"

namespace shardscope::data {

struct TokenSample {
  std::vector<std::int64_t> input_ids;  // (T)
  std::vector<std::int64_t> labels;     // (T), -100 = no loss
};

/// One record, unpadded: input_ids, and labels (default: the ids); errors name the field. The
/// loader and the data inspector (data/inspect.h) read a line with it.
Result<TokenSample> parse_token_record(const nlohmann::json& record, std::int64_t vocab_size);

/// Reads and pads/truncates every sample; errors name file:line and the field.
Result<std::vector<TokenSample>> load_token_samples(const std::string& path, std::int64_t seq_len,
                                                    std::int64_t vocab_size);

/// Loss tokens of a sample: positions t >= 1 whose label is not -100 (position 0 has no
/// prediction).
std::int64_t loss_tokens(const TokenSample& sample);

class SampleOrder {
 public:
  SampleOrder(std::int64_t samples, std::uint64_t seed, bool shuffle);
  /// Index of the sample at global offset `offset`.
  std::int64_t at(std::int64_t offset);

 private:
  std::int64_t m_samples;
  std::uint64_t m_seed;
  bool m_shuffle;
  std::int64_t m_epoch = -1;
  std::vector<std::int64_t> m_perm;
};

/// Writes `count` demo samples: arithmetic progressions modulo `vocab` with a random start and a
/// stride from a small set, a pattern a small model learns within a few hundred steps.
Result<void> write_demo_tokens(const std::string& path, std::int64_t count, std::int64_t seq_len,
                               std::int64_t vocab, std::uint64_t seed);

}  // namespace shardscope::data
