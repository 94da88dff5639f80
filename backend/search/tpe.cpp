#include "backend/search/tpe.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

namespace shardscope::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// exp(x) for x <= 0 without libm: Cody-Waite reduction x = k ln2 + r, a degree-11 Taylor
// polynomial for e^r (|r| <= ln2/2, relative error < 1e-15) and 2^k built in the exponent bits.
// Branch-free so the kernel loops vectorise; below -700 it flushes to ~0.
inline double exp_neg(double x) {
  x = std::max(x, -700.0);
  constexpr double kShifter = 0x1.8p52;
  const double t = x * 1.4426950408889634 + kShifter;
  const double k = t - kShifter;
  const double r = (x - k * 0.693147180369123816490) - k * 1.90821492927058770002e-10;
  const double p =
      1.0 +
      r * (1.0 +
           r * (0.5 + r * (1.0 / 6.0 +
                           r * (1.0 / 24.0 +
                                r * (1.0 / 120.0 +
                                     r * (1.0 / 720.0 +
                                          r * (1.0 / 5040.0 +
                                               r * (1.0 / 40320.0 +
                                                    r * (1.0 / 362880.0 +
                                                         r * (1.0 / 3628800.0 +
                                                              r * (1.0 / 39916800.0)))))))))));
  std::int64_t tb = 0;
  std::int64_t sb = 0;
  std::memcpy(&tb, &t, sizeof tb);
  std::memcpy(&sb, &kShifter, sizeof sb);
  const std::int64_t bits = (tb - sb + 1023) << 52;
  double scale = 0.0;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// Q(z) = P(Z > z) for z >= 0 (Abramowitz & Stegun 7.1.26 for erfc; absolute error < 1e-7,
// ample for kernel normalisers and grid-cell masses, and several times cheaper than erfc).
inline double upper_tail(double z) {
  const double x = z * 0.70710678118654752440;
  const double t = 1.0 / (1.0 + 0.3275911 * x);
  const double poly =
      t *
      (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return 0.5 * poly * exp_neg(-x * x);
}

// P(za < Z < zb) for a standard normal, za <= zb, from qa = Q(|za|) and qb = Q(|zb|), on the
// side where the difference does not cancel.
inline double mass_from_tails(double za, double zb, double qa, double qb) {
  double m = 0.0;
  if (za >= 0.0)
    m = qa - qb;
  else if (zb <= 0.0)
    m = qb - qa;
  else
    m = 1.0 - qa - qb;
  return std::max(m, 1e-300);
}

// The kernel loops below run on every suggestion over every observation; they are compiled
// twice, for AVX2 and the baseline, and picked at load time. Same operations in the same order
// (no FMA contraction without the FMA target, sums stay sequential), so the results are
// bit-identical on both paths.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SHARDSCOPE_KERNEL_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define SHARDSCOPE_KERNEL_LOOP
#endif

// acc[i] -= z_i^2 / 2 with z_i = (x - mu[i]) / sigma[i], for i < k.
SHARDSCOPE_KERNEL_LOOP void subtract_quadratic(double* acc, const double* mu, const double* inv,
                                               double x, std::size_t k) {
  for (std::size_t i = 0; i < k; ++i) {
    const double z = (x - mu[i]) * inv[i];
    acc[i] -= 0.5 * z * z;
  }
}

// log(sum_i exp(acc[i])), overwriting acc.
SHARDSCOPE_KERNEL_LOOP double log_sum_exp(double* acc, std::size_t k) {
  double top = -kInf;
  for (std::size_t i = 0; i < k; ++i) top = acc[i] > top ? acc[i] : top;
  if (!std::isfinite(top)) return top;
  for (std::size_t i = 0; i < k; ++i) acc[i] = exp_neg(acc[i] - top);
  double sum = 0.0;
  for (std::size_t i = 0; i < k; ++i) sum += acc[i];
  return top + std::log(sum);
}

// Truncation masses of k kernels on [low, high]: inv[i] = 1 / sigma[i], mass[i] = P(low < X <
// high) for X ~ N(mu[i], sigma[i]); qa, qb are scratch (k each).
SHARDSCOPE_KERNEL_LOOP void truncation_masses(const double* mu, const double* sigma, double low,
                                              double high, std::size_t k, double* inv, double* mass,
                                              double* qa, double* qb) {
  for (std::size_t i = 0; i < k; ++i) inv[i] = 1.0 / sigma[i];
  for (std::size_t i = 0; i < k; ++i) qa[i] = upper_tail(std::abs((low - mu[i]) * inv[i]));
  for (std::size_t i = 0; i < k; ++i) qb[i] = upper_tail(std::abs((high - mu[i]) * inv[i]));
  for (std::size_t i = 0; i < k; ++i) {
    mass[i] = mass_from_tails((low - mu[i]) * inv[i], (high - mu[i]) * inv[i], qa[i], qb[i]);
  }
}

double normal_mass(double za, double zb) {
  return mass_from_tails(za, zb, upper_tail(std::abs(za)), upper_tail(std::abs(zb)));
}

double as_double(const ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return static_cast<double>(std::get<std::int64_t>(v));
}

// Grid cell of a discrete numeric value in internal coordinates.
std::pair<double, double> cell(const Param& p, double x) {
  const double v = as_double(p.from_internal(x));
  const double h = 0.5 * p.step;
  if (p.log) return {std::log(v - h), std::log(v + h)};
  return {v - h, v + h};
}

// Optuna's default weights: flat for the newest 25 observations, a linear ramp before them.
std::vector<double> ramp_weights(std::size_t n) {
  std::vector<double> w(n, 1.0);
  if (n <= 25) return w;
  const std::size_t ramp = n - 25;
  for (std::size_t i = 0; i < ramp; ++i) {
    w[i] = ramp == 1 ? 1.0 / static_cast<double>(n)
                     : 1.0 / static_cast<double>(n) + (1.0 - 1.0 / static_cast<double>(n)) *
                                                          static_cast<double>(i) /
                                                          static_cast<double>(ramp - 1);
  }
  return w;
}

double loss_of(double v, Direction d) { return d == Direction::Minimize ? v : -v; }

bool usable_complete(const Trial& t) {
  return t.state == TrialState::Complete && !t.values.empty() && std::isfinite(t.values.front());
}

}  // namespace

ParzenEstimator::ParzenEstimator(std::vector<ParzenDim> dims,
                                 const std::vector<std::vector<double>>& obs,
                                 const std::vector<double>& weights, const SamplerConfig& cfg,
                                 bool multivariate)
    : m_dims(std::move(dims)), m_kernels(static_cast<int>(weights.size()) + 1) {
  const auto k = static_cast<std::size_t>(m_kernels);
  std::vector<double> w(weights.begin(), weights.end());
  w.push_back(cfg.prior_weight);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  m_log_weight.resize(k);
  m_cum_weight.resize(k);
  double acc = 0.0;
  for (std::size_t i = 0; i < k; ++i) {
    m_log_weight[i] = std::log(w[i] / total);
    acc += w[i] / total;
    m_cum_weight[i] = acc;
  }
  m_cum_weight.back() = 1.0;
  const std::size_t d = m_dims.size();
  m_mu.assign(d * k, 0.0);
  m_sigma.assign(d * k, 1.0);
  m_inv_sigma.assign(d * k, 0.0);
  m_mass.assign(d * k, 0.0);
  m_cat_logp.resize(d);
  for (std::size_t j = 0; j < d; ++j) {
    if (m_dims[j].categorical)
      fit_categorical(j, obs[j], cfg);
    else
      fit_numeric(j, obs[j], multivariate, cfg);
  }
  finish();
}

// Kernel widths (as Optuna 4.x/5.x, univariate and multivariate alike): the distance to the
// farther neighbour among the sorted observations (the bounds count as neighbours, but the
// outermost use their inner neighbour), clipped to [range / min(100, 1 + kernels), range].
void ParzenEstimator::fit_numeric(std::size_t j, const std::vector<double>& obs, bool multivariate,
                                  const SamplerConfig& cfg) {
  const ParzenDim& dim = m_dims[j];
  const std::size_t n = obs.size();
  const std::size_t k = n + 1;
  const double range = dim.high - dim.low;
  const double prior_mu = 0.5 * (dim.low + dim.high);
  double* mu = &m_mu[j * k];
  double* sigma = &m_sigma[j * k];
  std::copy(obs.begin(), obs.end(), mu);
  mu[n] = prior_mu;
  (void)multivariate;  // Optuna 4.x+ uses the same per-dimension widths in both modes
  if (n > 0) {
    // (centre, index) pairs compared by centre only: the same comparisons, hence the same order
    // of ties, as sorting indices by mu[index], without the indirection.
    std::vector<std::pair<double, std::size_t>> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = {mu[i], i};
    std::sort(order.begin(), order.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t r = 0; r < n; ++r) {
      const double left = r == 0 ? dim.low : order[r - 1].first;
      const double right = r + 1 == n ? dim.high : order[r + 1].first;
      const double c = order[r].first;
      double s = std::max(c - left, right - c);
      if (n >= 2 && r == 0) s = right - c;  // the domain's endpoints are not neighbours
      if (n >= 2 && r + 1 == n) s = c - left;
      sigma[order[r].second] = s;
    }
  }
  const double min_sigma =
      cfg.magic_clip ? range / std::min(100.0, 1.0 + static_cast<double>(k)) : 1e-12 * range;
  for (std::size_t i = 0; i < n; ++i) sigma[i] = std::clamp(sigma[i], min_sigma, range);
  sigma[n] = range;
  // Masses are folded into the kernel constant by finish().
  std::vector<double> tails(2 * k);
  truncation_masses(mu, sigma, dim.low, dim.high, k, &m_inv_sigma[j * k], &m_mass[j * k],
                    tails.data(), tails.data() + k);
}

// Folds every dimension's normaliser (sigma * truncation mass * sqrt(2 pi)) into one constant
// per kernel, so an evaluation only adds the quadratic terms.
void ParzenEstimator::finish() {
  const auto k = static_cast<std::size_t>(m_kernels);
  m_const.assign(m_log_weight.begin(), m_log_weight.end());
  for (std::size_t i = 0; i < k; ++i) {
    double prod = 1.0;
    int numeric = 0;
    for (std::size_t j = 0; j < m_dims.size(); ++j) {
      if (m_dims[j].categorical) continue;
      ++numeric;
      const double m = m_mass[j * k + i];
      prod *= m * m_sigma[j * k + i];
    }
    if (numeric > 0) m_const[i] -= std::log(prod) + 0.5 * numeric * std::log(2.0 * M_PI);
  }
}

// Each observation's kernel puts weight 1 + prior/kernels on its own choice and prior/kernels
// on every choice (normalised); the prior kernel is uniform.
void ParzenEstimator::fit_categorical(std::size_t j, const std::vector<double>& obs,
                                      const SamplerConfig& cfg) {
  const auto c = static_cast<std::size_t>(m_dims[j].choices);
  const std::size_t k = obs.size() + 1;
  const double base = cfg.prior_weight / static_cast<double>(k);
  std::vector<double>& lp = m_cat_logp[j];
  lp.assign(k * c, std::log(1.0 / static_cast<double>(c)));
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const auto chosen =
        static_cast<std::size_t>(std::clamp(obs[i], 0.0, static_cast<double>(c - 1)));
    const double norm = 1.0 + base * static_cast<double>(c);
    for (std::size_t a = 0; a < c; ++a) {
      lp[i * c + a] = std::log(((a == chosen ? 1.0 : 0.0) + base) / norm);
    }
  }
}

std::vector<double> ParzenEstimator::sample(Rng& rng) const {
  const double u = rng.uniform();
  const auto pick = static_cast<std::size_t>(
      std::lower_bound(m_cum_weight.begin(), m_cum_weight.end(), u) - m_cum_weight.begin());
  const std::size_t kk = std::min(pick, static_cast<std::size_t>(m_kernels - 1));
  const auto k = static_cast<std::size_t>(m_kernels);
  std::vector<double> x(m_dims.size());
  for (std::size_t j = 0; j < m_dims.size(); ++j) {
    const ParzenDim& dim = m_dims[j];
    if (dim.categorical) {
      const auto c = static_cast<std::size_t>(dim.choices);
      double r = rng.uniform();
      std::size_t a = 0;
      for (; a + 1 < c; ++a) {
        r -= std::exp(m_cat_logp[j][kk * c + a]);
        if (r < 0.0) break;
      }
      x[j] = static_cast<double>(a);
      continue;
    }
    // The centre lies inside the bounds, so rejection from the untruncated normal accepts at
    // least ~1/3 of draws; the clamp only guards against pathological rounding.
    const double mu = m_mu[j * k + kk];
    const double s = m_sigma[j * k + kk];
    double v = mu;
    for (int tries = 0; tries < 64; ++tries) {
      const double cand = mu + s * rng.normal();
      if (cand >= dim.low && cand <= dim.high) {
        v = cand;
        break;
      }
    }
    if (dim.param->discrete()) v = dim.param->to_internal(dim.param->from_internal(v));
    x[j] = v;
  }
  return x;
}

double ParzenEstimator::log_pdf(const std::vector<double>& x) const {
  const auto k = static_cast<std::size_t>(m_kernels);
  std::vector<double>& acc = m_scratch;
  acc.assign(m_const.begin(), m_const.end());
  for (std::size_t j = 0; j < m_dims.size(); ++j) {
    const ParzenDim& dim = m_dims[j];
    if (dim.categorical) {
      const auto c = static_cast<std::size_t>(dim.choices);
      const auto a = static_cast<std::size_t>(x[j]);
      for (std::size_t i = 0; i < k; ++i) acc[i] += m_cat_logp[j][i * c + a];
      continue;
    }
    const double* mu = &m_mu[j * k];
    const double* inv = &m_inv_sigma[j * k];
    if (dim.param->discrete()) {
      // Mass of the grid cell instead of the density at its centre: the kernel constant holds
      // the density's normaliser, so add back log(sigma sqrt(2 pi)).
      const auto [a, b] = cell(*dim.param, x[j]);
      for (std::size_t i = 0; i < k; ++i) {
        acc[i] +=
            std::log(normal_mass((a - mu[i]) * inv[i], (b - mu[i]) * inv[i]) * m_sigma[j * k + i]) +
            0.5 * std::log(2.0 * M_PI);
      }
      continue;
    }
    subtract_quadratic(acc.data(), mu, inv, x[j], k);
  }
  return log_sum_exp(acc.data(), k);
}

TpeSampler::Split TpeSampler::split(const std::vector<Trial>& finished,
                                    const std::vector<Trial>& pending) const {
  std::vector<std::pair<double, const Trial*>> complete;
  std::vector<std::pair<std::pair<double, double>, const Trial*>> pruned;
  std::vector<const Trial*> violated;
  for (const Trial& t : finished) {
    if (usable_complete(t)) {
      complete.emplace_back(loss_of(t.values.front(), m_direction), &t);
    } else if (t.state == TrialState::Pruned) {
      if (t.intermediate.empty()) {
        pruned.push_back({{1.0, 0.0}, &t});
      } else {
        const auto& [step, v] = *t.intermediate.rbegin();
        pruned.push_back(
            {{-static_cast<double>(step), std::isnan(v) ? kInf : loss_of(v, m_direction)}, &t});
      }
    } else if (t.state == TrialState::Infeasible || t.state == TrialState::Oom) {
      violated.push_back(&t);
    }
  }
  auto by_key = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second->number < b.second->number;
  };
  std::sort(complete.begin(), complete.end(), by_key);
  std::sort(pruned.begin(), pruned.end(), by_key);
  std::vector<const Trial*> ranked;
  ranked.reserve(complete.size() + pruned.size() + violated.size());
  for (const auto& c : complete) ranked.push_back(c.second);
  for (const auto& p : pruned) ranked.push_back(p.second);
  for (const Trial* v : violated) ranked.push_back(v);
  Split s;
  s.finished = static_cast<int>(ranked.size());
  const auto n_below = std::min<std::size_t>(
      static_cast<std::size_t>(std::ceil(0.1 * static_cast<double>(ranked.size()))), 25);
  s.below.assign(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(n_below));
  s.above.assign(ranked.begin() + static_cast<std::ptrdiff_t>(n_below), ranked.end());
  auto by_number = [](const Trial* a, const Trial* b) { return a->number < b->number; };
  std::sort(s.below.begin(), s.below.end(), by_number);
  std::sort(s.above.begin(), s.above.end(), by_number);
  if (m_cfg.constant_liar) {
    for (const Trial& t : pending) s.above.push_back(&t);
  }
  return s;
}

// Multivariate + group: parameters with the same conditions are always active together and form
// one joint group; multivariate without group: the unconditional ones form one group; otherwise
// every parameter is its own group.
std::vector<std::vector<int>> TpeSampler::groups(const SearchSpace& space) const {
  std::map<std::string, std::vector<int>> by_key;
  std::vector<std::vector<int>> out;
  for (std::size_t i = 0; i < space.params.size(); ++i) {
    const Param& p = space.params[i];
    std::string key;
    for (const Condition& c : p.when) key += c.param + "=" + format_value(c.value) + ";";
    const bool joint = m_cfg.multivariate && (m_cfg.group || p.when.empty());
    if (!joint) {
      out.push_back({static_cast<int>(i)});
      continue;
    }
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      by_key[key] = {static_cast<int>(out.size())};
      out.push_back({static_cast<int>(i)});
    } else {
      out[static_cast<std::size_t>(it->second.front())].push_back(static_cast<int>(i));
    }
  }
  return out;
}

void TpeSampler::sample_group(const SearchSpace& space, const std::vector<int>& group,
                              const Split& s, Rng& rng, TrialParams& out) const {
  std::vector<ParzenDim> dims;
  for (int i : group) {
    const Param& p = space.params[static_cast<std::size_t>(i)];
    ParzenDim d{&p, !p.numeric(), p.internal_low(), p.internal_high(),
                static_cast<int>(p.numeric() ? 0 : p.choices.size())};
    dims.push_back(d);
  }
  // Rows of the cached internal coordinates; a trial joins when the whole group was active.
  // Columns (one per group member) of the cached internal coordinates; a trial joins when the
  // whole group was active in it.
  auto observe = [&](const std::vector<const std::vector<double>*>& rows) {
    std::vector<std::vector<double>> cols(group.size());
    for (auto& c : cols) c.reserve(rows.size());
    for (const std::vector<double>* row : rows) {
      bool all = true;
      for (std::size_t j = 0; j < group.size() && all; ++j) {
        all = !std::isnan((*row)[static_cast<std::size_t>(group[j])]);
      }
      if (!all) continue;
      for (std::size_t j = 0; j < group.size(); ++j) {
        cols[j].push_back((*row)[static_cast<std::size_t>(group[j])]);
      }
    }
    return cols;
  };
  const auto below = observe(s.below_x);
  const auto above = observe(s.above_x);
  const ParzenEstimator l(dims, below, ramp_weights(below.front().size()), m_cfg,
                          m_cfg.multivariate);
  const ParzenEstimator g(dims, above, ramp_weights(above.front().size()), m_cfg,
                          m_cfg.multivariate);
  std::vector<double> best;
  double best_score = -kInf;
  for (int c = 0; c < m_cfg.n_ei_candidates; ++c) {
    std::vector<double> x = l.sample(rng);
    const double score = l.log_pdf(x) - g.log_pdf(x);
    if (best.empty() || score > best_score) {
      best_score = score;
      best = std::move(x);
    }
  }
  for (std::size_t j = 0; j < dims.size(); ++j) {
    out[dims[j].param->name] = dims[j].param->from_internal(best[j]);
  }
}

// A trial's parameters never change, so each trial is converted to internal coordinates once
// (NaN where a parameter was inactive or is not in the space); a new space clears the cache.
void TpeSampler::internal_rows(const SearchSpace& space, Split& s) {
  std::string key;
  for (const Param& p : space.params) key += p.name + ";";
  if (key != m_cache_key) {
    m_cache.clear();
    m_cache_key = key;
  }
  auto rows = [&](const std::vector<const Trial*>& trials) {
    std::vector<const std::vector<double>*> out;
    out.reserve(trials.size());
    for (const Trial* t : trials) {
      auto [it, fresh] = m_cache.try_emplace(t->number);
      if (fresh) {
        it->second.assign(space.params.size(), std::numeric_limits<double>::quiet_NaN());
        for (std::size_t i = 0; i < space.params.size(); ++i) {
          auto v = t->params.find(space.params[i].name);
          if (v != t->params.end() && space.params[i].contains(v->second)) {
            it->second[i] = space.params[i].to_internal(v->second);
          }
        }
      }
      out.push_back(&it->second);
    }
    return out;
  };
  s.below_x = rows(s.below);
  s.above_x = rows(s.above);
}

Result<TrialParams> TpeSampler::sample(const SearchSpace& space, const std::vector<Trial>& finished,
                                       const std::vector<Trial>& pending, Rng& rng) {
  Split s = split(finished, pending);
  if (s.finished < m_cfg.n_startup_trials) return m_random.sample(space, finished, pending, rng);
  internal_rows(space, s);
  const auto all_groups = groups(space);
  std::vector<int> group_of(space.params.size(), -1);
  for (std::size_t g = 0; g < all_groups.size(); ++g) {
    for (int i : all_groups[g]) group_of[static_cast<std::size_t>(i)] = static_cast<int>(g);
  }
  // Parameters are in dependency order and a group shares its conditions, so when the walk
  // reaches a group's first member everything its conditions name is already decided.
  std::vector<bool> done(all_groups.size(), false);
  TrialParams out;
  for (std::size_t i = 0; i < space.params.size(); ++i) {
    const auto g = static_cast<std::size_t>(group_of[i]);
    if (done[g]) continue;
    done[g] = true;
    if (!space.active(space.params[i], out)) continue;
    sample_group(space, all_groups[g], s, rng, out);
  }
  return out;
}

}  // namespace shardscope::search
