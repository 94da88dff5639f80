#include "data/text/packing.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace shardscope::data {

Result<PackedRows> pack_rows(const std::vector<std::int64_t>& lengths, std::int64_t seq_len) {
  if (seq_len < 1) return fail("data.seq_len: must be at least 1");
  PackedRows out;
  out.seq_len = seq_len;
  std::vector<std::int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  // Longest first; equal lengths keep their order, so a plan depends on the lengths alone.
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return lengths[static_cast<std::size_t>(a)] > lengths[static_cast<std::size_t>(b)];
  });
  std::vector<std::int64_t> room;  // free slots of each row
  for (auto i : order) {
    const auto n = lengths[static_cast<std::size_t>(i)];
    if (n < 1 || n > seq_len) {
      return fail("sample " + std::to_string(i) + ": " + std::to_string(n) +
                  " tokens; a packed row holds 1 to data.seq_len (" + std::to_string(seq_len) +
                  ") tokens: raise data.seq_len or shorten the sample");
    }
    auto row = std::find_if(room.begin(), room.end(), [&](std::int64_t r) { return r >= n; });
    if (row == room.end()) {
      room.push_back(seq_len);
      out.rows.emplace_back();
      row = room.end() - 1;
    }
    *row -= n;
    out.rows[static_cast<std::size_t>(row - room.begin())].push_back(i);
    out.tokens += n;
  }
  for (auto& r : out.rows) std::sort(r.begin(), r.end());
  return out;
}

void split_rows(PackedRows& packed, std::size_t count) {
  while (packed.rows.size() < count) {
    auto most = std::max_element(packed.rows.begin(), packed.rows.end(),
                                 [](const auto& a, const auto& b) { return a.size() < b.size(); });
    if (most == packed.rows.end() || most->size() < 2) return;
    const auto half = static_cast<std::ptrdiff_t>(most->size() / 2);
    std::vector<std::int64_t> rest(most->begin() + half, most->end());
    most->erase(most->begin() + half, most->end());
    packed.rows.insert(most + 1, std::move(rest));
  }
}

}  // namespace shardscope::data
