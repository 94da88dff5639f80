#include "search/pbt.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace shardscope::search {
namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27U)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31U);
}

// A stream of its own per (seed, what, a, b): the initial draw of a member and the decisions
// after a segment never share random numbers.
Rng stream(std::uint64_t seed, std::uint64_t what, std::uint64_t a, std::uint64_t b = 0) {
  return Rng(splitmix(seed ^ splitmix(what ^ splitmix(a ^ splitmix(b)))));
}

}  // namespace

TrialParams pbt_initial(const SearchSpace& space, std::uint64_t seed, int member) {
  Rng rng = stream(seed, 1, static_cast<std::uint64_t>(member));
  TrialParams out;
  for (const Param& p : space.params) {
    const double u = rng.uniform();  // drawn for every parameter: conditions never shift streams
    if (space.active(p, out)) out[p.name] = p.from_unit(u);
  }
  return out;
}

int pbt_quantile_count(const PbtConfig& config, int n) {
  return std::max(1, static_cast<int>(std::floor(config.quantile * n)));
}

ParamValue pbt_explore(const Param& p, const ParamValue& value, const PbtConfig& config, Rng& rng) {
  const double resample = rng.uniform();
  const std::size_t pick = rng.below(config.factors.size());
  const double u = rng.uniform();
  if (resample < config.resample_probability) return p.from_unit(u);
  const double x = std::holds_alternative<double>(value)
                       ? std::get<double>(value)
                       : static_cast<double>(std::get<std::int64_t>(value));
  double scaled = std::clamp(x * config.factors[pick], p.low, p.high);
  // A continuous float is the product itself (no round trip through the log scale).
  if (p.type == ParamType::Float && p.step <= 0.0) return scaled;
  // A grid value rounds to its nearest step (from_internal takes the internal coordinate).
  if (p.log) scaled = std::log(scaled);
  return p.from_internal(scaled);
}

std::vector<PbtNext> pbt_decide(const SearchSpace& space, const std::vector<TrialParams>& params,
                                const std::vector<std::optional<double>>& values, bool minimize,
                                std::uint64_t seed, int segment) {
  const int n = static_cast<int>(values.size());
  const PbtConfig& config = *space.pbt;
  // Members ranked best first; a member without a value ranks below every other.
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto& va = values[static_cast<std::size_t>(a)];
    const auto& vb = values[static_cast<std::size_t>(b)];
    if (!va || !vb) return va.has_value() && !vb.has_value();
    return minimize ? *va < *vb : *va > *vb;
  });
  const int with_value = static_cast<int>(std::count_if(
      values.begin(), values.end(), [](const std::optional<double>& v) { return v.has_value(); }));
  const int q = pbt_quantile_count(config, n);
  const int top = std::max(1, std::min(q, with_value));
  // The bottom q, and every member without a value (it has no checkpoint to go on from).
  const int bottom_from = std::min(n - q, with_value);
  std::vector<PbtNext> next(static_cast<std::size_t>(n));
  for (int m = 0; m < n; ++m) {
    next[static_cast<std::size_t>(m)] = PbtNext{m, params[static_cast<std::size_t>(m)], false};
  }
  for (int rank = std::max(bottom_from, top); rank < n; ++rank) {
    const int m = order[static_cast<std::size_t>(rank)];
    Rng rng = stream(seed, 2, static_cast<std::uint64_t>(segment), static_cast<std::uint64_t>(m));
    const int source = order[static_cast<std::size_t>(rng.below(static_cast<std::uint64_t>(top)))];
    PbtNext& out = next[static_cast<std::size_t>(m)];
    out.source = source;
    out.exploited = true;
    out.params = params[static_cast<std::size_t>(source)];
    for (const std::string& name : config.mutable_params) {
      const int i = space.index_of(name);
      auto it = out.params.find(name);
      if (i < 0 || it == out.params.end()) continue;
      it->second = pbt_explore(space.params[static_cast<std::size_t>(i)], it->second, config, rng);
    }
  }
  return next;
}

}  // namespace shardscope::search
