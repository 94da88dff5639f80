#include "data/text/packing.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "data/tokens.h"

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

std::vector<std::int64_t> rank_samples(SampleOrder& order, std::int64_t base, std::int64_t batch,
                                       int rank, int world) {
  std::vector<std::int64_t> out;
  for (std::int64_t k = rank; k < batch; k += world) out.push_back(order.at(base + k));
  return out;
}

std::vector<std::vector<std::int64_t>> step_shares(SampleOrder& order, std::int64_t base,
                                                   std::int64_t batch, int world) {
  std::vector<std::vector<std::int64_t>> shares;
  shares.reserve(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) shares.push_back(rank_samples(order, base, batch, r, world));
  return shares;
}

Result<double> pack_efficiency(const std::vector<std::int64_t>& lengths, std::int64_t seq_len,
                               const PackPlan& plan) {
  const auto n = static_cast<std::int64_t>(lengths.size());
  if (n == 0 || plan.batch_size < 1 || plan.world < 1) return 1.0;
  SampleOrder order(n, plan.seed, plan.shuffle);
  const auto batch = plan.batch_size;
  const auto steps = std::min(plan.max_steps, (n + batch - 1) / batch);
  double tokens = 0;
  double slots = 0;
  std::vector<std::int64_t> part;
  for (std::int64_t step = 0; step < steps; ++step) {
    for (const auto& share : step_shares(order, step * batch, batch, plan.world)) {
      part.clear();
      for (auto i : share) part.push_back(lengths[static_cast<std::size_t>(i)]);
      auto rows = pack_rows(part, seq_len);
      if (!rows) return rows.error();
      tokens += static_cast<double>(rows->tokens);
      slots += static_cast<double>(rows->rows.size()) * static_cast<double>(rows->seq_len);
    }
  }
  return slots > 0 ? tokens / slots : 1.0;
}

}  // namespace shardscope::data
