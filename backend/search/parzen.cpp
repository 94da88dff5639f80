#include "backend/search/parzen.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <variant>

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

// The log-density loops work on a (kernels, candidates) matrix, candidates contiguous: each
// candidate's terms see the same operations in the same order as a one-candidate loop over the
// kernels would, while the vector lanes run across candidates (so the per-candidate sums stay
// sequential over the kernels and the results do not depend on the batch).

double normal_mass(double za, double zb);

// Kinds of a dimension in the log-density loop.
enum : unsigned char { kContinuous = 0, kDiscrete = 1, kCategorical = 2 };

// Every dimension's term of kernel i for c candidates, added to row (c) in dimension order:
// continuous -z^2 / 2; discrete the log mass of the candidate's grid cell (cells (c, 2), plus
// log(sigma sqrt(2 pi)) since the kernel constant holds the density's normaliser); categorical
// the kernel's log probability of the candidate's choice. Returns nothing; updates top (c), the
// running maximum per candidate.
struct KernelTerms {
  const unsigned char* kind;   // (dims)
  const double* mu;            // (dims, kernels)
  const double* inv;           // (dims, kernels)
  const double* sigma;         // (dims, kernels)
  const double* const* catlp;  // per dim: (kernels, choices) or null
  const int* choices;          // (dims)
  const double* xs;            // (dims, c)
  const double* cells;         // (dims, c, 2) discrete cells
  std::size_t dims;
  std::size_t k;
};

SHARDSCOPE_KERNEL_LOOP void accumulate(const KernelTerms& t, const double* konst, std::size_t c,
                                       double* acc, double* top) {
  const double half_log_2pi = 0.5 * std::log(2.0 * M_PI);
  for (std::size_t a = 0; a < c; ++a) top[a] = -kInf;
  for (std::size_t i = 0; i < t.k; ++i) {
    double* row = acc + i * c;
    for (std::size_t a = 0; a < c; ++a) row[a] = konst[i];
    for (std::size_t j = 0; j < t.dims; ++j) {
      const double* x = t.xs + j * c;
      const double m = t.mu[j * t.k + i];
      const double v = t.inv[j * t.k + i];
      if (t.kind[j] == kContinuous) {
        for (std::size_t a = 0; a < c; ++a) {
          const double z = (x[a] - m) * v;
          row[a] -= 0.5 * z * z;
        }
      } else if (t.kind[j] == kDiscrete) {
        const double s = t.sigma[j * t.k + i];
        const double* cell = t.cells + j * c * 2;
        for (std::size_t a = 0; a < c; ++a) {
          row[a] += std::log(normal_mass((cell[2 * a] - m) * v, (cell[2 * a + 1] - m) * v) * s) +
                    half_log_2pi;
        }
      } else {
        const auto n = static_cast<std::size_t>(t.choices[j]);
        const double* lp = t.catlp[j] + i * n;
        for (std::size_t a = 0; a < c; ++a) row[a] += lp[static_cast<std::size_t>(x[a])];
      }
    }
    for (std::size_t a = 0; a < c; ++a) top[a] = row[a] > top[a] ? row[a] : top[a];
  }
}

// Below this log-ratio to the top a term is under half an ulp of a running sum: adding it rounds
// back to the same sum. thr(sum) = (e - 54) ln 2 for sum in [2^e, 2^(e+1)), one bit of margin
// over exp_neg's error; -inf (never skip) for a zero or subnormal sum.
inline double skip_below(double sum) {
  if (!(sum >= 0x1.0p-1000)) return -kInf;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &sum, sizeof bits);
  const auto e = static_cast<double>(static_cast<std::int64_t>((bits >> 52) & 0x7ff) - 1023);
  return (e - 54.0) * 0.69314718055994530942;
}

// out[a] = log(sum_i exp(acc[i, a])) given top[a] = max_i acc[i, a]; sum, thr are scratch (c).
// A kernel row is skipped when every candidate's term would leave its sum unchanged, so the
// sums are exactly the sequential ones while far kernels (most of g's) cost no exp.
SHARDSCOPE_KERNEL_LOOP void log_sum_exp(const double* acc, std::size_t k, std::size_t c,
                                        const double* top, double* sum, double* thr, double* out) {
  for (std::size_t a = 0; a < c; ++a) {
    sum[a] = 0.0;
    thr[a] = -kInf;
  }
  for (std::size_t i = 0; i < k; ++i) {
    const double* row = acc + i * c;
    std::uint64_t needed = 0;  // integer OR: vectorises, unlike a bool reduction
    for (std::size_t a = 0; a < c; ++a) {
      needed |= std::max(row[a] - top[a], -700.0) < thr[a] ? 0U : 1U;
    }
    if (needed == 0) continue;
    for (std::size_t a = 0; a < c; ++a) sum[a] += exp_neg(row[a] - top[a]);
    for (std::size_t a = 0; a < c; ++a) thr[a] = skip_below(sum[a]);
  }
  for (std::size_t a = 0; a < c; ++a) {
    out[a] = std::isfinite(top[a]) ? top[a] + std::log(sum[a]) : top[a];
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

}  // namespace

// Optuna's default weights: flat for the newest 25 observations, a linear ramp before them.
void ramp_weights(std::size_t n, std::vector<double>& w) {
  w.assign(n, 1.0);
  if (n <= 25) return;
  const std::size_t ramp = n - 25;
  for (std::size_t i = 0; i < ramp; ++i) {
    w[i] = ramp == 1 ? 1.0 / static_cast<double>(n)
                     : 1.0 / static_cast<double>(n) + (1.0 - 1.0 / static_cast<double>(n)) *
                                                          static_cast<double>(i) /
                                                          static_cast<double>(ramp - 1);
  }
}

void ParzenEstimator::reset(const std::vector<ParzenDim>& dims, std::size_t n) {
  m_dims = dims;
  m_kernels = static_cast<int>(n) + 1;
  const std::size_t size = dims.size() * (n + 1);
  m_mu.resize(size);
  m_sigma.resize(size);
  m_inv_sigma.resize(size);
  m_mass.resize(size);
  m_cat_logp.resize(dims.size());
}

void ParzenEstimator::set_weights(const std::vector<double>& weights, double prior_weight,
                                  bool cumulative) {
  const std::size_t k = weights.size() + 1;
  double total = 0.0;
  for (double w : weights) total += w;
  total += prior_weight;
  m_log_weight.resize(k);
  for (std::size_t i = 0; i + 1 < k; ++i) m_log_weight[i] = std::log(weights[i] / total);
  m_log_weight[k - 1] = std::log(prior_weight / total);
  if (!cumulative) return;
  m_cum_weight.resize(k);
  double acc = 0.0;
  for (std::size_t i = 0; i < k; ++i) {
    acc += (i + 1 < k ? weights[i] : prior_weight) / total;
    m_cum_weight[i] = acc;
  }
  m_cum_weight.back() = 1.0;
}

void ParzenEstimator::fit(const std::vector<ParzenDim>& dims, const std::vector<double>& obs,
                          std::size_t n, const std::vector<double>& weights,
                          const SamplerConfig& cfg) {
  reset(dims, n);
  set_weights(weights, cfg.prior_weight, true);
  for (std::size_t j = 0; j < m_dims.size(); ++j) {
    if (m_dims[j].categorical)
      fit_categorical(j, obs.data() + j * n, n, cfg);
    else
      fit_numeric(j, obs.data() + j * n, n, cfg);
  }
  finish();
}

// Kernel widths (as Optuna 4.x/5.x, univariate and multivariate alike): the distance to the
// farther neighbour among the sorted observations (the bounds count as neighbours, but the
// outermost use their inner neighbour), clipped to [range / min(100, 1 + kernels), range].
// AboveCache::refit_at computes the same widths from its sorted centres.
void ParzenEstimator::fit_numeric(std::size_t j, const double* obs, std::size_t n,
                                  const SamplerConfig& cfg) {
  const ParzenDim& dim = m_dims[j];
  const std::size_t k = n + 1;
  const double range = dim.high - dim.low;
  double* mu = &m_mu[j * k];
  double* sigma = &m_sigma[j * k];
  std::copy(obs, obs + n, mu);
  mu[n] = 0.5 * (dim.low + dim.high);
  if (n > 0) {
    // (centre, index) pairs compared by centre only: the order of ties is std::sort's.
    m_order.resize(n);
    for (std::size_t i = 0; i < n; ++i) m_order[i] = {mu[i], i};
    std::sort(m_order.begin(), m_order.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t r = 0; r < n; ++r) {
      const double left = r == 0 ? dim.low : m_order[r - 1].first;
      const double right = r + 1 == n ? dim.high : m_order[r + 1].first;
      const double c = m_order[r].first;
      double s = std::max(c - left, right - c);
      if (n >= 2 && r == 0) s = right - c;  // the domain's endpoints are not neighbours
      if (n >= 2 && r + 1 == n) s = c - left;
      sigma[m_order[r].second] = s;
    }
  }
  const double min_sigma =
      cfg.magic_clip ? range / std::min(100.0, 1.0 + static_cast<double>(k)) : 1e-12 * range;
  for (std::size_t i = 0; i < n; ++i) sigma[i] = std::clamp(sigma[i], min_sigma, range);
  sigma[n] = range;
  m_tails.resize(2 * k);
  truncation_masses(mu, sigma, dim.low, dim.high, k, &m_inv_sigma[j * k], &m_mass[j * k],
                    m_tails.data(), m_tails.data() + k);
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
void ParzenEstimator::fit_categorical(std::size_t j, const double* obs, std::size_t n,
                                      const SamplerConfig& cfg) {
  const auto c = static_cast<std::size_t>(m_dims[j].choices);
  const std::size_t k = n + 1;
  const double base = cfg.prior_weight / static_cast<double>(k);
  const double norm = 1.0 + base * static_cast<double>(c);
  const double hit = std::log((1.0 + base) / norm);
  const double miss = std::log((0.0 + base) / norm);
  std::vector<double>& lp = m_cat_logp[j];
  lp.resize(k * c);
  for (std::size_t i = 0; i < n; ++i) {
    const auto chosen =
        static_cast<std::size_t>(std::clamp(obs[i], 0.0, static_cast<double>(c - 1)));
    for (std::size_t a = 0; a < c; ++a) lp[i * c + a] = a == chosen ? hit : miss;
  }
  std::fill(lp.begin() + static_cast<std::ptrdiff_t>(n * c), lp.end(),
            std::log(1.0 / static_cast<double>(c)));
}

void ParzenEstimator::sample(Rng& rng, double* x, std::size_t stride) const {
  const double u = rng.uniform();
  const auto pick = static_cast<std::size_t>(
      std::lower_bound(m_cum_weight.begin(), m_cum_weight.end(), u) - m_cum_weight.begin());
  const std::size_t kk = std::min(pick, static_cast<std::size_t>(m_kernels - 1));
  const auto k = static_cast<std::size_t>(m_kernels);
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
      x[j * stride] = static_cast<double>(a);
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
    x[j * stride] = v;
  }
}

void ParzenEstimator::log_pdf(const double* xs, std::size_t c, double* out) const {
  const auto k = static_cast<std::size_t>(m_kernels);
  const std::size_t d = m_dims.size();
  m_kind.resize(d);
  m_catp.resize(d);
  m_choices.resize(d);
  m_cells.resize(d * c * 2);
  for (std::size_t j = 0; j < d; ++j) {
    const ParzenDim& dim = m_dims[j];
    m_kind[j] = dim.categorical ? kCategorical : dim.param->discrete() ? kDiscrete : kContinuous;
    m_catp[j] = dim.categorical ? m_cat_logp[j].data() : nullptr;
    m_choices[j] = dim.choices;
    if (m_kind[j] != kDiscrete) continue;
    for (std::size_t a = 0; a < c; ++a) {
      const auto [lo, hi] = cell(*dim.param, xs[j * c + a]);
      m_cells[(j * c + a) * 2] = lo;
      m_cells[(j * c + a) * 2 + 1] = hi;
    }
  }
  const KernelTerms terms{m_kind.data(),
                          m_mu.data(),
                          m_inv_sigma.data(),
                          m_sigma.data(),
                          m_catp.data(),
                          m_choices.data(),
                          xs,
                          m_cells.data(),
                          d,
                          k};
  m_acc.resize(k * c);
  m_lane.resize(3 * c);
  accumulate(terms, m_const.data(), c, m_acc.data(), m_lane.data());
  log_sum_exp(m_acc.data(), k, c, m_lane.data(), m_lane.data() + c, m_lane.data() + 2 * c, out);
}

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
}

void AboveCache::grow(std::size_t slots) {
  if (m_live.size() >= slots) return;
  const std::size_t d = m_dims.size();
  m_live.resize(slots, 0);
  m_seen.resize(slots, 0);
  m_lognorm.resize(slots, 0.0);
  m_lognorm_ok.resize(slots, 0);
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
  const double inv = 1.0 / sigma;
  const double qa = upper_tail(std::abs((dim.low - c) * inv));
  const double qb = upper_tail(std::abs((dim.high - c) * inv));
  m_sigma[at] = sigma;
  m_inv[at] = inv;
  m_mass[at] = mass_from_tails((dim.low - c) * inv, (dim.high - c) * inv, qa, qb);
  m_lognorm_ok[v[r].second] = 0;
}

// Brings the live set to `items`: unchanged slots stay, the rest are removed and inserted one
// by one (or all sorted again when that is cheaper).
void AboveCache::update(const std::vector<std::pair<std::size_t, const double*>>& items,
                        const std::vector<int>& group) {
  const std::size_t d = m_dims.size();
  std::size_t top = 0;
  for (const auto& it : items) top = std::max(top, it.first + 1);
  grow(top);
  ++m_generation;
  m_insert.clear();
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto [slot, row] = items[i];
    if (m_live[slot] != 0) {
      bool same = true;
      for (std::size_t j = 0; j < d && same; ++j) same = m_centre[slot * d + j] == row[group[j]];
      if (same) {
        m_seen[slot] = m_generation;
        continue;
      }
      remove(slot);
    }
    m_insert.push_back(i);
  }
  std::size_t removals = 0;
  for (std::size_t s = 0; s < m_live.size(); ++s) {
    removals += m_live[s] != 0 && m_seen[s] != m_generation ? 1 : 0;
  }
  const bool bulk = removals + m_insert.size() > std::max<std::size_t>(32, m_count / 8);
  for (std::size_t s = 0; s < m_live.size(); ++s) {
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
    ++m_count;
  }
  if (bulk) rebuild_sorted();
}

void AboveCache::build(const std::vector<ParzenDim>& dims, const std::vector<int>& group,
                       const std::vector<std::pair<std::size_t, const double*>>& items,
                       const std::vector<double>& weights, const SamplerConfig& cfg,
                       ParzenEstimator& est) {
  update(items, group);
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

// Writes the kernels in `items` order into `est`: cached dimensions are copied, the others
// (categorical, discrete, or continuous with equal centres) are fitted from scratch.
void AboveCache::gather(const std::vector<ParzenDim>& dims,
                        const std::vector<std::pair<std::size_t, const double*>>& items,
                        const std::vector<double>& weights, const SamplerConfig& cfg,
                        bool cached_norm, ParzenEstimator& est) {
  const std::size_t d = m_dims.size();
  const std::size_t n = items.size();
  const std::size_t k = n + 1;
  est.reset(dims, n);
  est.set_weights(weights, cfg.prior_weight, true);
  for (std::size_t j = 0; j < d; ++j) {
    const ParzenDim& dim = m_dims[j];
    if (m_incremental[j] == 0 || m_ties[j] > 0) {
      m_obs.resize(n);
      for (std::size_t i = 0; i < n; ++i) m_obs[i] = m_centre[items[i].first * d + j];
      if (dim.categorical)
        est.fit_categorical(j, m_obs.data(), n, cfg);
      else
        est.fit_numeric(j, m_obs.data(), n, cfg);
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t at = items[i].first * d + j;
      est.m_mu[j * k + i] = m_centre[at];
      est.m_sigma[j * k + i] = m_sigma[at];
      est.m_inv_sigma[j * k + i] = m_inv[at];
      est.m_mass[j * k + i] = m_mass[at];
    }
    // The prior kernel, as fit_numeric makes it.
    est.m_mu[j * k + n] = 0.5 * (dim.low + dim.high);
    est.m_sigma[j * k + n] = dim.high - dim.low;
    double tails[2];
    truncation_masses(&est.m_mu[j * k + n], &est.m_sigma[j * k + n], dim.low, dim.high, 1,
                      &est.m_inv_sigma[j * k + n], &est.m_mass[j * k + n], tails, tails + 1);
  }
  if (!cached_norm) {
    est.finish();
    return;
  }
  // finish(), with each observation's normaliser kept until one of its widths changes.
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
      const double m = est.m_mass[j * k + i];
      prod *= m * est.m_sigma[j * k + i];
    }
    const double norm = std::log(prod) + 0.5 * numeric * std::log(2.0 * M_PI);
    est.m_const[i] -= norm;
    if (i < n) {
      m_lognorm[slot] = norm;
      m_lognorm_ok[slot] = 1;
    }
  }
}

}  // namespace shardscope::search
