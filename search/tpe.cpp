#include "search/tpe.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>

namespace shardscope::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double loss_of(double v, Direction d) { return d == Direction::Minimize ? v : -v; }

bool usable_complete(const Trial& t) {
  return t.state == TrialState::Complete && !t.values.empty() && std::isfinite(t.values.front());
}

}  // namespace

void AboveCache::reset(const std::vector<ParzenDim>& dims) {
  m_dims = dims;
  const std::size_t d = dims.size();
  m_incremental.assign(d, 0);
  for (std::size_t j = 0; j < d; ++j) {
    m_incremental[j] = !dims[j].categorical && !dims[j].param->discrete() ? 1 : 0;
  }
  m_count = 0;
  m_clip = -1.0;
  m_live.clear();
  m_seen.clear();
  m_sorted.assign(d, {});
  m_ties.assign(d, 0);
  m_stale.assign(d, 1);
  m_dirty.assign(d, {});
  m_version.clear();
  m_filled = nullptr;
}

void AboveCache::grow(std::size_t slots) {
  if (m_live.size() >= slots) return;
  const std::size_t d = m_dims.size();
  m_live.resize(slots, 0);
  m_seen.resize(slots, 0);
  m_lognorm.resize(slots, 0.0);
  m_lognorm_ok.resize(slots, 0);
  m_version.resize(slots, 0);
  for (auto* v : {&m_centre, &m_raw, &m_sigma, &m_inv, &m_mass}) v->resize(slots * d, 0.0);
}

// Position of `slot` in dimension j's sorted centres (equal centres are scanned).
std::size_t AboveCache::position(std::size_t j, std::size_t slot) const {
  const auto& v = m_sorted[j];
  const double c = m_centre[slot * m_dims.size() + j];
  auto it =
      std::lower_bound(v.begin(), v.end(), c, [](const auto& e, double x) { return e.first < x; });
  while (it != v.end() && it->second != slot) ++it;
  return static_cast<std::size_t>(it - v.begin());
}

void AboveCache::insert(std::size_t slot, const double* row, const std::vector<int>& group) {
  const std::size_t d = m_dims.size();
  for (std::size_t j = 0; j < d; ++j) m_centre[slot * d + j] = row[group[j]];
  m_live[slot] = 1;
  m_lognorm_ok[slot] = 0;
  ++m_version[slot];
  ++m_count;
  for (std::size_t j = 0; j < d; ++j) {
    if (m_incremental[j] == 0) continue;
    auto& v = m_sorted[j];
    const double c = m_centre[slot * d + j];
    const auto pos = static_cast<std::size_t>(
        std::upper_bound(v.begin(), v.end(), c,
                         [](double x, const auto& e) { return x < e.first; }) -
        v.begin());
    // upper_bound: nothing equal to c follows pos, so only the left neighbour can tie.
    if (pos > 0 && v[pos - 1].first == c) ++m_ties[j];
    v.insert(v.begin() + static_cast<std::ptrdiff_t>(pos), {c, slot});
    m_dirty[j].push_back(slot);
    if (pos > 0) m_dirty[j].push_back(v[pos - 1].second);
    if (pos + 1 < v.size()) m_dirty[j].push_back(v[pos + 1].second);
  }
}

void AboveCache::remove(std::size_t slot) {
  m_live[slot] = 0;
  --m_count;
  for (std::size_t j = 0; j < m_dims.size(); ++j) {
    if (m_incremental[j] == 0) continue;
    auto& v = m_sorted[j];
    const std::size_t pos = position(j, slot);
    if (pos > 0 && v[pos - 1].first == v[pos].first) --m_ties[j];
    if (pos + 1 < v.size() && v[pos + 1].first == v[pos].first) --m_ties[j];
    v.erase(v.begin() + static_cast<std::ptrdiff_t>(pos));
    if (pos > 0 && pos < v.size() && v[pos - 1].first == v[pos].first) ++m_ties[j];
    if (pos > 0) m_dirty[j].push_back(v[pos - 1].second);
    if (pos < v.size()) m_dirty[j].push_back(v[pos].second);
  }
}

void AboveCache::rebuild_sorted() {
  const std::size_t d = m_dims.size();
  for (std::size_t j = 0; j < d; ++j) {
    if (m_incremental[j] == 0) continue;
    auto& v = m_sorted[j];
    v.clear();
    for (std::size_t s = 0; s < m_live.size(); ++s) {
      if (m_live[s] != 0) v.emplace_back(m_centre[s * d + j], s);
    }
    std::sort(v.begin(), v.end());
    m_ties[j] = 0;
    for (std::size_t r = 1; r < v.size(); ++r) m_ties[j] += v[r - 1].first == v[r].first ? 1 : 0;
    m_stale[j] = 1;
    m_dirty[j].clear();
  }
}

// The width and truncation mass of the centre at sorted position r of dimension j, as
// ParzenEstimator::fit_numeric computes them (valid while the dimension has no ties).
void AboveCache::refit_at(std::size_t j, std::size_t r, double min_sigma) {
  const ParzenDim& dim = m_dims[j];
  const auto& v = m_sorted[j];
  const std::size_t n = v.size();
  const double left = r == 0 ? dim.low : v[r - 1].first;
  const double right = r + 1 == n ? dim.high : v[r + 1].first;
  const double c = v[r].first;
  double s = std::max(c - left, right - c);
  if (n >= 2 && r == 0) s = right - c;
  if (n >= 2 && r + 1 == n) s = c - left;
  const std::size_t at = v[r].second * m_dims.size() + j;
  m_raw[at] = s;
  const double sigma = std::clamp(s, min_sigma, dim.high - dim.low);
  m_sigma[at] = sigma;
  kernel_mass(c, sigma, dim.low, dim.high, m_inv[at], m_mass[at]);
  m_lognorm_ok[v[r].second] = 0;
  ++m_version[v[r].second];
}

// Brings the live set to `items`: unchanged slots stay, the rest are removed and inserted one
// by one (or all sorted again when that is cheaper).
void AboveCache::update(const std::vector<std::pair<std::size_t, const double*>>& items,
                        const std::vector<int>& group, std::size_t stable) {
  const std::size_t d = m_dims.size();
  std::size_t top = 0;
  for (const auto& it : items) top = std::max(top, it.first + 1);
  grow(top);
  ++m_generation;
  m_insert.clear();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto [slot, row] = items[i];
    if (m_live[slot] != 0) {
      bool same = true;
      const bool known = slot % 2 == 0 && slot < 2 * stable;
      for (std::size_t j = 0; j < d && same && !known; ++j) {
        same = m_centre[slot * d + j] == row[group[j]];
      }
      if (same) {
        m_seen[slot] = m_generation;
        ++kept;
        continue;
      }
      remove(slot);
    }
    m_insert.push_back(i);
  }
  // Every live slot not kept is gone from the wanted set (the changed ones are removed above).
  const std::size_t removals = m_count - kept;
  const bool bulk = removals + m_insert.size() > std::max<std::size_t>(32, m_count / 8);
  for (std::size_t s = 0; s < m_live.size() && removals > 0; ++s) {
    if (m_live[s] == 0 || m_seen[s] == m_generation) continue;
    if (bulk) {
      m_live[s] = 0;
      --m_count;
    } else {
      remove(s);
    }
  }
  for (std::size_t i : m_insert) {
    const auto [slot, row] = items[i];
    m_seen[slot] = m_generation;
    if (!bulk) {
      insert(slot, row, group);
      continue;
    }
    for (std::size_t j = 0; j < d; ++j) m_centre[slot * d + j] = row[group[j]];
    m_live[slot] = 1;
    m_lognorm_ok[slot] = 0;
    ++m_version[slot];
    ++m_count;
  }
  if (bulk) rebuild_sorted();
}

void AboveCache::build(const std::vector<ParzenDim>& dims, const std::vector<int>& group,
                       const std::vector<std::pair<std::size_t, const double*>>& items,
                       const std::vector<double>& weights, const SamplerConfig& cfg,
                       std::size_t stable, ParzenEstimator& est) {
  update(items, group, stable);
  const std::size_t d = m_dims.size();
  const std::size_t n = items.size();
  const std::size_t k = n + 1;
  const double clip = cfg.magic_clip ? std::min(100.0, 1.0 + static_cast<double>(k)) : 0.0;
  bool cached_norm = true;  // every numeric dimension's widths come from the cache
  for (std::size_t j = 0; j < d; ++j) {
    if (m_incremental[j] == 0 || m_ties[j] > 0) {
      cached_norm = cached_norm && m_dims[j].categorical;
      m_stale[j] = m_incremental[j];
      m_dirty[j].clear();
      continue;
    }
    const double range = m_dims[j].high - m_dims[j].low;
    const double min_sigma = cfg.magic_clip ? range / clip : 1e-12 * range;
    if (m_stale[j] != 0 || clip != m_clip) {
      for (std::size_t r = 0; r < m_sorted[j].size(); ++r) refit_at(j, r, min_sigma);
    } else {
      for (std::size_t s : m_dirty[j]) {
        if (m_live[s] != 0) refit_at(j, position(j, s), min_sigma);
      }
    }
    m_stale[j] = 0;
    m_dirty[j].clear();
  }
  m_clip = clip;
  gather(dims, items, weights, cfg, cached_norm, est);
}

// Writes the kernels in `items` order into `est`: cached dimensions are copied (only the kernels
// whose slot or fit changed since the last call, when `est` is the one written then), the others
// (categorical, discrete, or continuous with equal centres) are fitted from scratch.
void AboveCache::gather(const std::vector<ParzenDim>& dims,
                        const std::vector<std::pair<std::size_t, const double*>>& items,
                        const std::vector<double>& weights, const SamplerConfig& cfg,
                        bool cached_norm, ParzenEstimator& est) {
  const std::size_t d = m_dims.size();
  const std::size_t n = items.size();
  est.reset(dims, n);
  est.set_weights(weights, cfg.prior_weight, true);
  const std::size_t s = est.m_stride;
  if (m_filled != &est || m_filled_layout != est.m_layout) {
    m_filled_slot.clear();
    m_filled_dim.assign(d, 0);
  }
  m_filled = &est;
  m_filled_layout = est.m_layout;
  m_filled_slot.resize(n, std::numeric_limits<std::size_t>::max());
  m_filled_ver.resize(n, 0);
  for (std::size_t j = 0; j < d; ++j) {
    const ParzenDim& dim = m_dims[j];
    const bool cached = m_incremental[j] != 0 && m_ties[j] == 0;
    if (cached && m_filled_dim[j] == 0) {
      // Not written from the cache last time: every kernel of this dimension is written now.
      for (std::size_t i = 0; i < n; ++i)
        m_filled_slot[i] = std::numeric_limits<std::size_t>::max();
    }
    m_filled_dim[j] = cached ? 1 : 0;
    if (cached) {
      // The prior kernel, as fit_numeric makes it.
      est.m_mu[j * s + n] = 0.5 * (dim.low + dim.high);
      est.m_sigma[j * s + n] = dim.high - dim.low;
      kernel_mass(est.m_mu[j * s + n], est.m_sigma[j * s + n], dim.low, dim.high,
                  est.m_inv_sigma[j * s + n], est.m_mass[j * s + n]);
      continue;
    }
    m_obs.resize(n);
    for (std::size_t i = 0; i < n; ++i) m_obs[i] = m_centre[items[i].first * d + j];
    if (dim.categorical)
      est.fit_categorical(j, m_obs.data(), n, cfg);
    else
      est.fit_numeric(j, m_obs.data(), n, cfg);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t slot = items[i].first;
    if (m_filled_slot[i] == slot && m_filled_ver[i] == m_version[slot]) continue;
    m_filled_slot[i] = slot;
    m_filled_ver[i] = m_version[slot];
    for (std::size_t j = 0; j < d; ++j) {
      if (m_filled_dim[j] == 0) continue;
      const std::size_t at = slot * d + j;
      est.m_mu[j * s + i] = m_centre[at];
      est.m_sigma[j * s + i] = m_sigma[at];
      est.m_inv_sigma[j * s + i] = m_inv[at];
      est.m_mass[j * s + i] = m_mass[at];
    }
  }
  if (!cached_norm) {
    est.finish();
    return;
  }
  normalise(items, est);
}

// ParzenEstimator::finish(), with each observation's normaliser kept until one of its widths
// changes.
void AboveCache::normalise(const std::vector<std::pair<std::size_t, const double*>>& items,
                           ParzenEstimator& est) {
  const std::size_t d = m_dims.size();
  const std::size_t n = items.size();
  const std::size_t s = est.m_stride;
  int numeric = 0;
  for (const ParzenDim& dim : m_dims) numeric += dim.categorical ? 0 : 1;
  est.m_const.assign(est.m_log_weight.begin(), est.m_log_weight.end());
  if (numeric == 0) return;
  for (std::size_t i = 0; i <= n; ++i) {
    const std::size_t slot = i < n ? items[i].first : 0;
    if (i < n && m_lognorm_ok[slot] != 0) {
      est.m_const[i] -= m_lognorm[slot];
      continue;
    }
    double prod = 1.0;
    for (std::size_t j = 0; j < d; ++j) {
      if (m_dims[j].categorical) continue;
      const double m = est.m_mass[j * s + i];
      prod *= m * est.m_sigma[j * s + i];
    }
    const double norm = std::log(prod) + 0.5 * numeric * std::log(2.0 * M_PI);
    est.m_const[i] -= norm;
    if (i < n) {
      m_lognorm[slot] = norm;
      m_lognorm_ok[slot] = 1;
    }
  }
}

bool TpeSampler::Entry::operator==(const Entry& o) const {
  // Bitwise, so a NaN-free value compares equal to itself and nothing else.
  auto bits = [](double v) {
    std::uint64_t b = 0;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  return number == o.number && kind == o.kind && bits(key0) == bits(o.key0) &&
         bits(key1) == bits(o.key1);
}

TpeSampler::Entry TpeSampler::entry_of(const Trial& t) const {
  Entry e;
  e.number = t.number;
  if (usable_complete(t)) {
    e.kind = 0;
    e.key0 = loss_of(t.values.front(), m_direction);
  } else if (t.state == TrialState::Pruned) {
    e.kind = 1;
    e.key0 = 1.0;
    if (!t.intermediate.empty()) {
      const auto& [step, v] = *t.intermediate.rbegin();
      e.key0 = -static_cast<double>(step);
      e.key1 = std::isnan(v) ? kInf : loss_of(v, m_direction);
    }
  } else if (t.state == TrialState::Infeasible || t.state == TrialState::Oom) {
    e.kind = 2;
  } else {
    e.kind = 3;
  }
  return e;
}

// Whether the trial at position i still gives the entry stored there: entry_of(t) ==
// m_entries[i], with a short path for the usual complete trial (no Entry built).
bool TpeSampler::unchanged(const Trial& t, std::size_t i) const {
  const Entry& e = m_entries[i];
  if (e.kind == 0 && t.state == TrialState::Complete && t.number == e.number && !t.values.empty()) {
    // e.key0 is finite (kind 0), so equal bits also mean t's value is usable.
    const double loss = loss_of(t.values.front(), m_direction);
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    std::memcpy(&a, &loss, sizeof a);
    std::memcpy(&b, &e.key0, sizeof b);
    return a == b;
  }
  return entry_of(t) == e;
}

namespace {

// The ranking's order: by key (complete: loss; pruned: (-step, loss)), then trial number.
template <typename R>
bool ranks_before(const R& a, const R& b) {
  if (a.key0 != b.key0) return a.key0 < b.key0;
  if (a.key1 != b.key1) return a.key1 < b.key1;
  return a.number < b.number;
}

// A trial's values in internal coordinates, NaN where a parameter was inactive or illegal.
void internal_row(const SearchSpace& space, const Trial& t, double* row) {
  for (std::size_t i = 0; i < space.params.size(); ++i) {
    row[i] = std::numeric_limits<double>::quiet_NaN();
    auto v = t.params.find(space.params[i].name);
    if (v != t.params.end() && space.params[i].contains(v->second)) {
      row[i] = space.params[i].to_internal(v->second);
    }
  }
}

}  // namespace

// Keeps the ranking of finished trials: when the history is the last one plus trials appended
// at its end, only those are ranked; any other change ranks everything again.
void TpeSampler::update_history(const SearchSpace& space, const std::vector<Trial>& finished) {
  const std::size_t n = finished.size();
  bool same = m_entries.size() <= n;
  for (std::size_t i = 0; i < m_entries.size() && same; ++i) same = unchanged(finished[i], i);
  if (!same || m_entries.empty()) ++m_epoch;  // every row is computed again below
  if (!same) {
    m_entries.clear();
    m_complete.clear();
    m_pruned.clear();
    m_violated.clear();
    m_by_number = true;
  }
  const std::size_t start = m_entries.size();
  const std::size_t width = space.params.size();
  m_rows.resize(n * width);
  const bool bulk = n - start > 16;
  for (std::size_t i = start; i < n; ++i) {
    const Entry e = entry_of(finished[i]);
    m_entries.push_back(e);
    internal_row(space, finished[i], &m_rows[i * width]);
    if (i > 0 && finished[i].number <= finished[i - 1].number) m_by_number = false;
    if (e.kind == 2) m_violated.push_back(i);
    if (e.kind != 0 && e.kind != 1) continue;
    auto& list = e.kind == 0 ? m_complete : m_pruned;
    const Ranked r{e.key0, e.key1, e.number, i};
    if (bulk) {
      list.push_back(r);
    } else {
      list.insert(std::upper_bound(list.begin(), list.end(), r, ranks_before<Ranked>), r);
    }
  }
  if (bulk) {
    std::sort(m_complete.begin(), m_complete.end(), ranks_before<Ranked>);
    std::sort(m_pruned.begin(), m_pruned.end(), ranks_before<Ranked>);
  }
  m_ranked = static_cast<int>(m_complete.size() + m_pruned.size() + m_violated.size());
}

// below = the best min(ceil(n/10), 25) ranked trials, above = the other ranked ones; both by
// trial number.
void TpeSampler::split(const std::vector<Trial>& finished) {
  const auto n_below = std::min<std::size_t>(
      static_cast<std::size_t>(std::ceil(0.1 * static_cast<double>(m_ranked))), 25);
  m_below.clear();
  m_rank.resize(finished.size());
  for (std::size_t r = 0; r < n_below; ++r) {
    const std::size_t c = m_complete.size();
    const std::size_t p = m_pruned.size();
    m_below.push_back(r < c       ? m_complete[r].pos
                      : r < c + p ? m_pruned[r - c].pos
                                  : m_violated[r - c - p]);
    m_rank[m_below.back()] = r;
  }
  auto by_number = [&](std::size_t a, std::size_t b) {
    return finished[a].number < finished[b].number;
  };
  std::sort(m_below.begin(), m_below.end(), by_number);
  m_is_below.assign(finished.size(), 0);
  for (std::size_t pos : m_below) m_is_below[pos] = 1;
  m_above.clear();
  for (std::size_t i = 0; i < finished.size(); ++i) {
    if (m_entries[i].kind != 3 && m_is_below[i] == 0) m_above.push_back(i);
  }
  if (!m_by_number) std::sort(m_above.begin(), m_above.end(), by_number);
}

// Multivariate + group: parameters with the same conditions are always active together and form
// one joint group; multivariate without group: the unconditional ones form one group; otherwise
// every parameter is its own group. A new space resets every cache.
void TpeSampler::prepare_space(const SearchSpace& space) {
  auto same_param = [](const Param& a, const Param& b) {
    if (a.name != b.name || a.type != b.type || a.low != b.low || a.high != b.high ||
        a.log != b.log || a.step != b.step || a.choices.size() != b.choices.size() ||
        a.when.size() != b.when.size())
      return false;
    for (std::size_t i = 0; i < a.choices.size(); ++i) {
      if (!same_value(a.choices[i], b.choices[i])) return false;
    }
    for (std::size_t i = 0; i < a.when.size(); ++i) {
      if (a.when[i].param != b.when[i].param || !same_value(a.when[i].value, b.when[i].value))
        return false;
    }
    return true;
  };
  bool same = m_space.size() == space.params.size();
  for (std::size_t i = 0; i < m_space.size() && same; ++i)
    same = same_param(m_space[i], space.params[i]);
  bool fresh = false;
  if (!same) {
    m_space = space.params;
    std::map<std::string, std::size_t> by_key;
    m_groups.clear();
    for (std::size_t i = 0; i < space.params.size(); ++i) {
      const Param& p = space.params[i];
      std::string when;
      for (const Condition& c : p.when) when += c.param + "=" + format_value(c.value) + ";";
      const bool joint = m_cfg.multivariate && (m_cfg.group || p.when.empty());
      auto it = by_key.find(when);
      if (joint && it != by_key.end()) {
        m_groups[it->second].push_back(static_cast<int>(i));
        continue;
      }
      if (joint) by_key[when] = m_groups.size();
      m_groups.push_back({static_cast<int>(i)});
    }
    // Rows and ranks are recomputed for the new space.
    m_entries.clear();
    m_complete.clear();
    m_pruned.clear();
    m_violated.clear();
    m_by_number = true;
    m_group_dims.assign(m_groups.size(), {});
    m_above_cache.assign(m_groups.size(), AboveCache());
    m_cache_epoch.assign(m_groups.size(), 0);
    m_cache_rows.assign(m_groups.size(), 0);
    m_g.assign(m_groups.size(), ParzenEstimator());
    fresh = true;
  }
  // The space may be a new object with the same content: point the dimensions at it.
  for (std::size_t g = 0; g < m_groups.size(); ++g) {
    auto& dims = m_group_dims[g];
    dims.clear();
    for (int i : m_groups[g]) {
      const Param& p = space.params[static_cast<std::size_t>(i)];
      dims.push_back({&p, !p.numeric(), p.internal_low(), p.internal_high(),
                      static_cast<int>(p.numeric() ? 0 : p.choices.size())});
    }
    if (fresh) m_above_cache[g].reset(dims);
  }
}

// The "below" observations' weights into m_weights (m_items holds them, by trial number): with
// rank_weights, the q-th best (q from 0) of the n gets (n - q) / n, else Optuna's (all 1 for the
// at most 25 of "below"). Returns the best one's index.
std::size_t TpeSampler::below_weights(std::size_t nb) {
  m_order.resize(nb);
  for (std::size_t i = 0; i < nb; ++i) m_order[i] = i;
  std::sort(m_order.begin(), m_order.end(), [&](std::size_t a, std::size_t b) {
    return m_rank[m_items[a].first / 2] < m_rank[m_items[b].first / 2];
  });
  ramp_weights(nb, m_weights);
  if (m_cfg.rank_weights) {
    for (std::size_t q = 0; q < nb; ++q)
      m_weights[m_order[q]] = static_cast<double>(nb - q) / static_cast<double>(nb);
  }
  return nb > 0 ? m_order[0] : 0;
}

void TpeSampler::sample_group(std::size_t g, const std::vector<Trial>& pending, Rng& rng,
                              TrialParams& out) {
  const std::vector<int>& group = m_groups[g];
  const std::vector<ParzenDim>& dims = m_group_dims[g];
  const std::size_t d = group.size();
  const std::size_t stride = m_row_width;
  // A trial joins a group's estimators when the whole group was active in it.
  auto active = [&](const double* row) {
    for (int i : group) {
      if (std::isnan(row[i])) return false;
    }
    return true;
  };
  m_items.clear();
  for (std::size_t pos : m_below) {
    const double* row = &m_rows[pos * stride];
    if (active(row)) m_items.emplace_back(2 * pos, row);
  }
  const std::size_t nb = m_items.size();
  m_obs.resize(d * nb);
  for (std::size_t i = 0; i < nb; ++i) {
    for (std::size_t j = 0; j < d; ++j) m_obs[j * nb + i] = m_items[i].second[group[j]];
  }
  const std::size_t top = below_weights(nb);
  m_l.fit(dims, m_obs, nb, m_weights, m_cfg);
  m_items.clear();
  for (std::size_t pos : m_above) {
    const double* row = &m_rows[pos * stride];
    if (active(row)) m_items.emplace_back(2 * pos, row);
  }
  if (m_cfg.constant_liar) {
    for (std::size_t p = 0; p < pending.size(); ++p) {
      const double* row = &m_pending_rows[p * stride];
      if (active(row)) m_items.emplace_back(2 * p + 1, row);
    }
  }
  ramp_weights(m_items.size(), m_weights);
  const std::size_t stable = m_cache_epoch[g] == m_epoch ? m_cache_rows[g] : 0;
  m_above_cache[g].build(dims, group, m_items, m_weights, m_cfg, stable, m_g[g]);
  m_cache_epoch[g] = m_epoch;
  m_cache_rows[g] = m_entries.size();
  // A group without a categorical draws more candidates (see SamplerConfig).
  bool categorical = false;
  for (const ParzenDim& dim : dims) categorical = categorical || dim.categorical;
  const int wanted = categorical || m_cfg.n_ei_candidates_numeric <= 0
                         ? m_cfg.n_ei_candidates
                         : m_cfg.n_ei_candidates_numeric;
  const auto drawn = static_cast<std::size_t>(wanted);
  const std::size_t c = drawn + (nb > 0 ? static_cast<std::size_t>(m_cfg.n_local_candidates) : 0);
  m_candidates.resize(d * c);
  for (std::size_t a = 0; a < drawn; ++a) m_l.sample(rng, &m_candidates[a], c);
  // Local candidates: the best "below" trial's values, its numeric ones redrawn from its own
  // kernel in l(x) at local_width of its widths. l(x) spreads its draws over every "below"
  // trial; these search closer to the best one, and the same l/g decides whether they win.
  for (std::size_t a = drawn; a < c; ++a) {
    for (std::size_t j = 0; j < d; ++j) m_candidates[j * c + a] = m_obs[j * nb + top];
    m_l.sample_near(rng, top, m_cfg.local_width, &m_candidates[a], c);
  }
  m_score_l.resize(c);
  m_score_g.resize(c);
  m_l.log_pdf(m_candidates.data(), c, m_score_l.data());
  m_g[g].log_pdf(m_candidates.data(), c, m_score_g.data());
  std::size_t best = 0;
  double best_score = m_score_l[0] - m_score_g[0];
  for (std::size_t a = 1; a < c; ++a) {
    const double score = m_score_l[a] - m_score_g[a];
    if (score > best_score) {
      best_score = score;
      best = a;
    }
  }
  for (std::size_t j = 0; j < d; ++j) {
    out[dims[j].param->name] = dims[j].param->from_internal(m_candidates[j * c + best]);
  }
}

Result<TrialParams> TpeSampler::sample(const SearchSpace& space, const std::vector<Trial>& finished,
                                       const std::vector<Trial>& pending, Rng& rng) {
  prepare_space(space);
  update_history(space, finished);
  if (m_ranked < m_cfg.n_startup_trials) return m_random.sample(space, finished, pending, rng);
  split(finished);
  m_row_width = space.params.size();
  m_pending_rows.resize(pending.size() * m_row_width);
  for (std::size_t p = 0; p < pending.size(); ++p) {
    internal_row(space, pending[p], &m_pending_rows[p * m_row_width]);
  }
  std::vector<int> group_of(space.params.size(), -1);
  for (std::size_t g = 0; g < m_groups.size(); ++g) {
    for (int i : m_groups[g]) group_of[static_cast<std::size_t>(i)] = static_cast<int>(g);
  }
  // Parameters are in dependency order and a group shares its conditions, so when the walk
  // reaches a group's first member everything its conditions name is already decided.
  std::vector<bool> done(m_groups.size(), false);
  TrialParams out;
  for (std::size_t i = 0; i < space.params.size(); ++i) {
    const auto g = static_cast<std::size_t>(group_of[i]);
    if (done[g]) continue;
    done[g] = true;
    if (!space.active(space.params[i], out)) continue;
    sample_group(g, pending, rng, out);
  }
  return out;
}

}  // namespace shardscope::search
