#include "backend/search/tpe.h"

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
  for (std::size_t i = 0; i < m_entries.size() && same; ++i) {
    same = entry_of(finished[i]) == m_entries[i];
  }
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
  for (std::size_t r = 0; r < n_below; ++r) {
    const std::size_t c = m_complete.size();
    const std::size_t p = m_pruned.size();
    m_below.push_back(r < c       ? m_complete[r].pos
                      : r < c + p ? m_pruned[r - c].pos
                                  : m_violated[r - c - p]);
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
  ramp_weights(nb, m_weights);
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
  m_above_cache[g].build(dims, group, m_items, m_weights, m_cfg, m_g);
  // A group without a categorical draws more candidates (see SamplerConfig).
  bool categorical = false;
  for (const ParzenDim& dim : dims) categorical = categorical || dim.categorical;
  const int wanted = categorical || m_cfg.n_ei_candidates_numeric <= 0
                         ? m_cfg.n_ei_candidates
                         : m_cfg.n_ei_candidates_numeric;
  const auto c = static_cast<std::size_t>(wanted);
  m_candidates.resize(d * c);
  for (std::size_t a = 0; a < c; ++a) m_l.sample(rng, &m_candidates[a], c);
  m_score_l.resize(c);
  m_score_g.resize(c);
  m_l.log_pdf(m_candidates.data(), c, m_score_l.data());
  m_g.log_pdf(m_candidates.data(), c, m_score_g.data());
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
