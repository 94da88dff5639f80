#include "search/pruner.h"

#include "spec/search_names.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardscope::search {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// numpy's nanpercentile with linear interpolation (NaN when every value is NaN).
double nan_percentile(std::vector<double> v, double q) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Whether `step` is the first report at or after the latest pruning point of the interval grid
// warmup, warmup + interval, ... (Optuna's _is_first_in_interval_step).
bool first_in_interval(std::int64_t step, const Trial& trial, int warmup, int interval) {
  const std::int64_t nearest = (step - warmup) / interval * interval + warmup;
  std::int64_t second_last = -1;
  for (const auto& [s, v] : trial.intermediate) {
    if (s > second_last && s != step) second_last = s;
  }
  return second_last < nearest;
}

double best_so_far(const Trial& trial, Direction d) {
  double best = kNaN;
  for (const auto& [s, v] : trial.intermediate) {
    if (std::isnan(v)) continue;
    if (std::isnan(best) || (d == Direction::Minimize ? v < best : v > best)) best = v;
  }
  return best;
}

// The min_resource "auto" rule: 1% of the longest complete trial, at least 1.
std::optional<std::int64_t> estimate_min_resource(const std::vector<const Trial*>& trials) {
  std::int64_t last = -1;
  for (const Trial* t : trials) {
    if (t->state == TrialState::Complete && !t->intermediate.empty()) {
      last = std::max(last, t->intermediate.rbegin()->first);
    }
  }
  if (last < 0) return std::nullopt;
  return std::max<std::int64_t>(last / 100, 1);
}

bool promotable(double value, std::vector<double> competing, int eta, Direction d) {
  std::ptrdiff_t idx = static_cast<std::ptrdiff_t>(competing.size()) / eta - 1;
  if (idx < 0) idx = 0;  // fewer than eta values so far: only the best continues
  std::sort(competing.begin(), competing.end());
  if (d == Direction::Maximize) {
    return value >= competing[competing.size() - 1 - static_cast<std::size_t>(idx)];
  }
  return value <= competing[static_cast<std::size_t>(idx)];
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

PruneDecision PercentilePruner::should_prune(const Trial& trial, const std::vector<Trial>& trials,
                                             Direction direction) {
  std::vector<const Trial*> complete;
  for (const Trial& t : trials) {
    if (t.state == TrialState::Complete && t.number != trial.number) complete.push_back(&t);
  }
  if (complete.empty() || static_cast<int>(complete.size()) < m_cfg.n_startup_trials) return {};
  if (trial.intermediate.empty()) return {};
  const std::int64_t step = trial.intermediate.rbegin()->first;
  if (step < m_cfg.n_warmup_steps) return {};
  if (!first_in_interval(step, trial, m_cfg.n_warmup_steps, m_cfg.interval_steps)) return {};
  const double best = best_so_far(trial, direction);
  if (std::isnan(best)) return {true, {}};
  std::vector<double> at_step;
  for (const Trial* t : complete) {
    auto it = t->intermediate.find(step);
    if (it != t->intermediate.end()) at_step.push_back(it->second);
  }
  if (static_cast<int>(at_step.size()) < m_cfg.n_min_trials) return {};
  const double q = direction == Direction::Maximize ? 100.0 - m_cfg.percentile : m_cfg.percentile;
  const double p = nan_percentile(at_step, q);
  if (std::isnan(p)) return {};
  return {direction == Direction::Maximize ? best < p : best > p, {}};
}

PruneDecision SuccessiveHalvingPruner::should_prune(const Trial& trial,
                                                    const std::vector<Trial>& trials,
                                                    Direction direction) {
  std::vector<const Trial*> peers;
  for (const Trial& t : trials) {
    if (t.number != trial.number) peers.push_back(&t);
  }
  return decide(trial, peers, direction);
}

PruneDecision SuccessiveHalvingPruner::decide(const Trial& trial,
                                              const std::vector<const Trial*>& peers,
                                              Direction direction) {
  PruneDecision out;
  if (trial.intermediate.empty()) return out;
  const auto& [step, value] = *trial.intermediate.rbegin();
  int rung = static_cast<int>(trial.rungs.size());
  if (!m_cfg.min_resource) {
    m_cfg.min_resource = estimate_min_resource(peers);  // fixed once known, as in Optuna
    if (!m_cfg.min_resource) return out;
  }
  const double eta = m_cfg.reduction_factor;
  while (true) {
    const double promotion = static_cast<double>(*m_cfg.min_resource) *
                             std::pow(eta, m_cfg.min_early_stopping_rate + rung);
    if (static_cast<double>(step) < promotion) return out;
    if (std::isnan(value)) {
      out.prune = true;
      return out;
    }
    out.rungs.emplace_back(rung, value);
    std::vector<double> competing;
    for (const Trial* t : peers) {
      auto it = t->rungs.find(rung);
      if (it != t->rungs.end()) competing.push_back(it->second);
    }
    competing.push_back(value);
    if (m_cfg.bootstrap_count > 0 && static_cast<int>(competing.size()) <= m_cfg.bootstrap_count) {
      out.prune = true;
      return out;
    }
    if (!promotable(value, competing, m_cfg.reduction_factor, direction)) {
      out.prune = true;
      return out;
    }
    ++rung;
  }
}

bool HyperbandPruner::init(const std::vector<Trial>& trials) {
  if (!m_brackets.empty()) return true;
  if (!m_cfg.max_resource) {
    std::int64_t last = -1;
    for (const Trial& t : trials) {
      if (t.state == TrialState::Complete && !t.intermediate.empty()) {
        last = std::max(last, t.intermediate.rbegin()->first);
      }
    }
    if (last < 1) return false;
    m_cfg.max_resource = last;
  }
  const std::int64_t min_r = m_cfg.min_resource.value_or(1);
  const double eta = m_cfg.reduction_factor;
  const int n = static_cast<int>(std::floor(std::log(static_cast<double>(*m_cfg.max_resource) /
                                                     static_cast<double>(min_r)) /
                                                std::log(eta) +
                                            1e-9)) +
                1;
  std::int64_t total = 0;
  for (int b = 0; b < std::max(n, 1); ++b) {
    PrunerConfig c = m_cfg;
    c.min_resource = min_r;
    c.min_early_stopping_rate = b;
    m_brackets.push_back(std::make_unique<SuccessiveHalvingPruner>(c));
    total += static_cast<std::int64_t>(std::ceil(n * std::pow(eta, n - 1 - b) / (n - b)));
    m_budget.push_back(total);
  }
  return true;
}

int HyperbandPruner::bracket_of(std::int64_t number) const {
  if (m_budget.empty()) return -1;
  const auto slot = static_cast<std::int64_t>(mix(static_cast<std::uint64_t>(number)) %
                                              static_cast<std::uint64_t>(m_budget.back()));
  return static_cast<int>(std::upper_bound(m_budget.begin(), m_budget.end(), slot) -
                          m_budget.begin());
}

PruneDecision HyperbandPruner::should_prune(const Trial& trial, const std::vector<Trial>& trials,
                                            Direction direction) {
  if (!init(trials)) return {};
  const int b = bracket_of(trial.number);
  std::vector<const Trial*> peers;
  for (const Trial& t : trials) {
    if (t.number != trial.number && bracket_of(t.number) == b) peers.push_back(&t);
  }
  return m_brackets[static_cast<std::size_t>(b)]->decide(trial, peers, direction);
}

std::unique_ptr<Pruner> make_pruner(const PrunerConfig& cfg) {
  // The parser let only registered names through (spec/search_names.h); every kind has its case.
  switch (spec::kind_of(spec::kPruners, cfg.type).value_or(spec::PrunerKind::none)) {
    case spec::PrunerKind::none:
      return std::make_unique<NopPruner>();
    case spec::PrunerKind::median:
    case spec::PrunerKind::percentile:
      return std::make_unique<PercentilePruner>(cfg);
    case spec::PrunerKind::asha:
      return std::make_unique<SuccessiveHalvingPruner>(cfg);
    case spec::PrunerKind::hyperband:
      return std::make_unique<HyperbandPruner>(cfg);
  }
  return std::make_unique<NopPruner>();
}

}  // namespace shardscope::search
