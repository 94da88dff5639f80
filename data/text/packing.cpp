#include "data/text/packing.h"

#include <algorithm>
#include <string>

namespace shardscope::data {
namespace {

void add_row(TokenRows& rows, std::int64_t pad_id) {
  auto n = static_cast<std::size_t>(rows.seq_len);
  rows.input_ids.insert(rows.input_ids.end(), n, pad_id);
  rows.labels.insert(rows.labels.end(), n, -100);
  rows.attention_mask.insert(rows.attention_mask.end(), n, 0);
  rows.position_ids.insert(rows.position_ids.end(), n, 0);
  rows.segment_ids.insert(rows.segment_ids.end(), n, 0);
  rows.row_samples.emplace_back();
  ++rows.rows;
}

// Writes sample `index` (its first `length` tokens) at `column` of the last row.
void place(TokenRows& rows, const ChatSample& s, std::int64_t index, std::int64_t column,
           std::int64_t length, bool packed) {
  std::int64_t base = (rows.rows - 1) * rows.seq_len + column;
  auto segment = static_cast<std::int64_t>(rows.row_samples.back().size()) + 1;
  for (std::int64_t t = 0; t < length; ++t) {
    auto at = static_cast<std::size_t>(base + t);
    rows.input_ids[at] = s.input_ids[t];
    rows.labels[at] = (packed && t == 0) ? -100 : s.labels[t];
    rows.attention_mask[at] = 1;
    rows.position_ids[at] = t;
    rows.segment_ids[at] = segment;
  }
  rows.row_samples.back().push_back(index);
}

Result<std::int64_t> usable_length(const ChatSample& s, std::size_t index, std::int64_t seq_len,
                                   bool truncate) {
  auto n = static_cast<std::int64_t>(s.input_ids.size());
  if (s.labels.size() != s.input_ids.size()) {
    return fail("sample " + std::to_string(index) + ": labels and input_ids differ in length");
  }
  if (n > seq_len && !truncate) {
    return fail("sample " + std::to_string(index) + ": " + std::to_string(n) +
                " tokens, more than data.seq_len (" + std::to_string(seq_len) +
                "); raise data.seq_len or allow truncation");
  }
  return std::min(n, seq_len);
}

}  // namespace

bool TokenRows::attends(std::int64_t row, std::int64_t query, std::int64_t key) const {
  if (key > query) return false;
  auto q = segment_ids[static_cast<std::size_t>(row * seq_len + query)];
  auto k = segment_ids[static_cast<std::size_t>(row * seq_len + key)];
  return q != 0 && q == k;
}

Result<TokenRows> pad_samples(const std::vector<ChatSample>& samples, std::int64_t seq_len,
                              std::int64_t pad_id, bool truncate) {
  if (seq_len < 1) return fail("data.seq_len: must be at least 1");
  TokenRows rows;
  rows.seq_len = seq_len;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    auto n = usable_length(samples[i], i, seq_len, truncate);
    if (!n) return n.error();
    add_row(rows, pad_id);
    place(rows, samples[i], static_cast<std::int64_t>(i), 0, *n, false);
  }
  return rows;
}

Result<TokenRows> pack_samples(const std::vector<ChatSample>& samples, std::int64_t seq_len,
                               std::int64_t pad_id, bool truncate) {
  if (seq_len < 1) return fail("data.seq_len: must be at least 1");
  TokenRows rows;
  rows.seq_len = seq_len;
  std::int64_t used = seq_len;  // columns used in the last row (none open yet)
  for (std::size_t i = 0; i < samples.size(); ++i) {
    auto n = usable_length(samples[i], i, seq_len, truncate);
    if (!n) return n.error();
    if (*n == 0) continue;
    if (used + *n > seq_len) {
      add_row(rows, pad_id);
      used = 0;
    }
    place(rows, samples[i], static_cast<std::int64_t>(i), used, *n, true);
    used += *n;
  }
  return rows;
}

}  // namespace shardscope::data
