#include "search/parzen.h"

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
#define SHARDSCOPE_INLINE __attribute__((always_inline)) inline
#else
#define SHARDSCOPE_KERNEL_LOOP
#define SHARDSCOPE_INLINE inline
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

// Kinds of a dimension in the log-density loop (bytes: the loop reads them from a table).
constexpr unsigned char kContinuous = 0;
constexpr unsigned char kDiscrete = 1;
constexpr unsigned char kCategorical = 2;

// Every dimension's term of kernel i for c candidates, added to row (c) in dimension order:
// continuous -z^2 / 2; discrete the log mass of the candidate's grid cell (cells (c, 2), plus
// log(sigma sqrt(2 pi)) since the kernel constant holds the density's normaliser); categorical
// the kernel's log probability of the candidate's choice. Returns nothing; updates top (c), the
// running maximum per candidate.
struct KernelTerms {
  const unsigned char* kind;   // (dims)
  const double* mu;            // (dims, stride)
  const double* inv;           // (dims, stride)
  const double* sigma;         // (dims, stride)
  const double* const* catlp;  // per dim: (kernels, choices) or null
  const int* choices;          // (dims)
  const double* xs;            // (dims, c)
  const double* cells;         // (dims, c, 2) discrete cells
  std::size_t dims;
  std::size_t k;
  std::size_t stride;
};

// Kernel i's terms of c candidates into row (c): its constant, then every dimension's term in
// dimension order. With `theta` (c), stops early and returns false once every candidate's row is
// below its theta: from dimension `check_from` on no term is positive (continuous -z^2 / 2,
// categorical log probabilities; discrete ones come before it), and rounding is monotone, so the
// partial row bounds the final one from above.
// C > 0: exactly C candidates, known at compile time (the loops unroll, the row stays in
// registers); C = 0: c of them.
template <std::size_t C>
SHARDSCOPE_INLINE bool kernel_row(const KernelTerms& t, double konst, std::size_t i,
                                  std::size_t lanes, double* row, const double* theta,
                                  std::size_t check_from) {
  const std::size_t c = C > 0 ? C : lanes;
  const double half_log_2pi = 0.5 * std::log(2.0 * M_PI);
  for (std::size_t a = 0; a < c; ++a) row[a] = konst;
  for (std::size_t j = 0; j < t.dims; ++j) {
    const double* x = t.xs + j * c;
    const double m = t.mu[j * t.stride + i];
    const double v = t.inv[j * t.stride + i];
    if (t.kind[j] == kContinuous) {
      for (std::size_t a = 0; a < c; ++a) {
        const double z = (x[a] - m) * v;
        row[a] -= 0.5 * z * z;
      }
    } else if (t.kind[j] == kDiscrete) {
      const double s = t.sigma[j * t.stride + i];
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
    if (theta == nullptr || j < check_from) continue;
    std::uint64_t above = 0;  // NaN counts as above: it is never skipped
    for (std::size_t a = 0; a < c; ++a) above |= row[a] < theta[a] ? 0U : 1U;
    if (above == 0) return false;
  }
  return true;
}

// The (kernels, c) matrix of terms into acc and each candidate's maximum into top (c).
SHARDSCOPE_KERNEL_LOOP void accumulate(const KernelTerms& t, const double* konst, std::size_t c,
                                       double* acc, double* top) {
  for (std::size_t a = 0; a < c; ++a) top[a] = -kInf;
  for (std::size_t i = 0; i < t.k; ++i) {
    double* row = acc + i * c;
    kernel_row<0>(t, konst[i], i, c, row, nullptr, 0);
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

// The reference: out[a] = log(sum_i exp_neg(acc[i, a] - top[a])) + top[a], every term added in
// kernel order (a row is skipped only when no candidate's sum would change); sum, thr are
// scratch (c). log_sum_exp must equal it to the last bit.
SHARDSCOPE_KERNEL_LOOP void log_sum_exp_all(const double* acc, std::size_t k, std::size_t c,
                                            const double* top, double* sum, double* thr,
                                            double* out) {
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

// Which terms of the reference's sequential sum can change it. Term i of a candidate is t_i =
// exp_neg(c_i), c_i = max(r_i - T, -700) (r_i its row value, T the maximum; the clamp is
// exp_neg's), and the sum is s += t_i in kernel order:
// - a reset at row q: when the earlier terms together are below 2^-54 t_q, they are under half
//   an ulp of t_q, so s = t_q exactly after row q whatever came before. Sufficient: r_q > R_q +
//   ln q + 38.5 (R_q the maximum of the earlier rows; 38.5 > 54 ln 2 leaves room for rounding
//   and exp_neg's error) and r_q > T - 700 + ln q + 38.5 (the clamped earlier terms too);
// - after it, a term below 2^-54 of the running maximum (so of the running sum) rounds away.
// So only the terms from the last reset on within 38.5 of their running maximum count, and
// adding just those in kernel order gives the reference's bits. The rows are scanned once
// (T is not known yet): a row passing the first test starts a new run, and the rows within 38.5
// of their run's maximum are listed; after the scan the last run is kept when its start passes
// the second test (it then holds exactly the terms that count; an earlier start passing it would
// imply the last passes too). Otherwise, or on a NaN, the caller falls back to the reference.
constexpr double kResetMargin = 38.5;

// Lanes of the scan, each (c): the maximum so far, the current run's start row and first value,
// the run's maximum.
struct ScanLanes {
  double* top;
  double* start;
  double* first;
  double* run;
};

// The listed terms: row and candidate, and the raw row value.
struct TermList {
  std::uint32_t* row;
  std::uint32_t* lane;
  double* value;
};

template <std::size_t C>
SHARDSCOPE_INLINE std::size_t scan_lanes(const KernelTerms& t, const double* konst,
                                         std::size_t lanes, double* buffer, ScanLanes l,
                                         const double* theta, std::size_t check_from, TermList out,
                                         bool& bad) {
  const std::size_t c = C > 0 ? C : lanes;
  double local[C > 0 ? C : 1];
  double* row = C > 0 ? local : buffer;
  std::size_t n = 0;
  std::uint64_t nan = 0;
  for (std::size_t a = 0; a < c; ++a) {
    l.top[a] = -kInf;
    l.start[a] = 0.0;
    l.first[a] = -kInf;
    l.run[a] = -kInf;
  }
  for (std::size_t i = 0; i < t.k; ++i) {
    if (!kernel_row<C>(t, konst[i], i, c, row, theta, check_from)) continue;
    // ln i <= bit_width(i) ln 2: a cheap upper bound of the earlier rows' count.
    const double lim =
        static_cast<double>(64 - __builtin_clzll(i | 1)) * 0.69314718055994530942 + kResetMargin;
    const auto at = static_cast<double>(i);
    std::uint64_t any = 0;
    for (std::size_t a = 0; a < c; ++a) {
      const double r = row[a];
      nan |= r == r ? 0U : 1U;
      const bool fresh = r > l.top[a] + lim;
      l.start[a] = fresh ? at : l.start[a];
      l.first[a] = fresh ? r : l.first[a];
      const double m = fresh ? r : std::max(l.run[a], r);
      l.run[a] = m;
      any |= r >= m - kResetMargin ? 1U : 0U;
      l.top[a] = r > l.top[a] ? r : l.top[a];
    }
    if (any == 0) continue;
    for (std::size_t a = 0; a < c; ++a) {
      if (!(row[a] >= l.run[a] - kResetMargin)) continue;
      out.row[n] = static_cast<std::uint32_t>(i);
      out.lane[n] = static_cast<std::uint32_t>(a);
      out.value[n] = row[a];
      ++n;
    }
  }
  bad = nan != 0;
  return n;
}

// The scan, with the usual candidate counts (Optuna's 24; 32 to 64 for numeric groups) unrolled.
SHARDSCOPE_KERNEL_LOOP std::size_t scan_kernels(const KernelTerms& t, const double* konst,
                                                std::size_t c, double* row, ScanLanes l,
                                                const double* theta, std::size_t check_from,
                                                TermList out, bool& bad) {
  if (c == 24) return scan_lanes<24>(t, konst, c, row, l, theta, check_from, out, bad);
  if (c == 32) return scan_lanes<32>(t, konst, c, row, l, theta, check_from, out, bad);
  if (c == 40) return scan_lanes<40>(t, konst, c, row, l, theta, check_from, out, bad);
  if (c == 48) return scan_lanes<48>(t, konst, c, row, l, theta, check_from, out, bad);
  if (c == 64) return scan_lanes<64>(t, konst, c, row, l, theta, check_from, out, bad);
  return scan_lanes<0>(t, konst, c, row, l, theta, check_from, out, bad);
}

SHARDSCOPE_KERNEL_LOOP void exp_batch(const double* x, std::size_t n, double* out) {
  for (std::size_t p = 0; p < n; ++p) out[p] = exp_neg(x[p]);
}

// Whether every candidate's last run starts at a valid reset (see above): its maximum finite and
// the start's row above max(T - 700, theta) + ln q + 38.5 (the rows skipped below theta then
// neither break the reset nor count after it).
bool runs_valid(const ScanLanes& l, const double* theta, std::size_t c) {
  for (std::size_t a = 0; a < c; ++a) {
    const auto q = static_cast<std::uint64_t>(l.start[a]);
    const double lim =
        static_cast<double>(64 - __builtin_clzll(q | 1)) * 0.69314718055994530942 + kResetMargin;
    const double floor = std::max(l.top[a] - 700.0, theta[a]);
    if (!std::isfinite(l.top[a]) || !(l.first[a] > floor + lim)) return false;
  }
  return true;
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

void kernel_mass(double mu, double sigma, double low, double high, double& inv, double& mass) {
  inv = 1.0 / sigma;
  const double qa = upper_tail(std::abs((low - mu) * inv));
  const double qb = upper_tail(std::abs((high - mu) * inv));
  mass = mass_from_tails((low - mu) * inv, (high - mu) * inv, qa, qb);
}

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

// The tables keep their stride while the kernels fit, so an estimator refilled every call (the
// "above" one) keeps its contents; growing them (by half) starts a new layout.
void ParzenEstimator::reset(const std::vector<ParzenDim>& dims, std::size_t n) {
  const bool same_dims = dims.size() == m_dims.size();
  m_dims = dims;
  m_kernels = static_cast<int>(n) + 1;
  if (!same_dims || n + 1 > m_stride) {
    m_stride = n + 1 + (n + 1) / 2;
    const std::size_t size = dims.size() * m_stride;
    for (auto* v : {&m_mu, &m_sigma, &m_inv_sigma, &m_mass}) v->assign(size, 0.0);
    ++m_layout;
  }
  m_cat_logp.resize(dims.size());
}

void ParzenEstimator::set_weights(const std::vector<double>& weights, double prior_weight,
                                  bool cumulative) {
  // The same weights as last time (a study's "above" set between two new trials): nothing to do.
  if (weights == m_weights && prior_weight == m_prior_weight && (m_cumulative || !cumulative))
    return;
  m_weights = weights;
  m_prior_weight = prior_weight;
  m_cumulative = cumulative;
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
  double* mu = &m_mu[j * m_stride];
  double* sigma = &m_sigma[j * m_stride];
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
  truncation_masses(mu, sigma, dim.low, dim.high, k, &m_inv_sigma[j * m_stride],
                    &m_mass[j * m_stride], m_tails.data(), m_tails.data() + k);
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
      const double m = m_mass[j * m_stride + i];
      prod *= m * m_sigma[j * m_stride + i];
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

namespace {

// A draw from N(mu, s^2) truncated to the dimension's bounds, snapped to a discrete grid. The
// centre lies inside the bounds, so rejection from the untruncated normal accepts at least ~1/3
// of draws; the fallback to the centre only guards against pathological rounding.
double draw_numeric(Rng& rng, const ParzenDim& dim, double mu, double s) {
  double v = mu;
  for (int tries = 0; tries < 64; ++tries) {
    const double cand = mu + s * rng.normal();
    if (cand >= dim.low && cand <= dim.high) {
      v = cand;
      break;
    }
  }
  if (dim.param->discrete()) v = dim.param->to_internal(dim.param->from_internal(v));
  return v;
}

}  // namespace

void ParzenEstimator::sample(Rng& rng, double* x, std::size_t stride) const {
  const double u = rng.uniform();
  const auto pick = static_cast<std::size_t>(
      std::lower_bound(m_cum_weight.begin(), m_cum_weight.end(), u) - m_cum_weight.begin());
  const std::size_t kk = std::min(pick, static_cast<std::size_t>(m_kernels - 1));
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
    x[j * stride] = draw_numeric(rng, dim, m_mu[j * m_stride + kk], m_sigma[j * m_stride + kk]);
  }
}

void ParzenEstimator::sample_near(Rng& rng, std::size_t kernel, double scale, double* x,
                                  std::size_t stride) const {
  for (std::size_t j = 0; j < m_dims.size(); ++j) {
    const ParzenDim& dim = m_dims[j];
    if (dim.categorical) continue;
    x[j * stride] =
        draw_numeric(rng, dim, m_mu[j * m_stride + kernel], scale * m_sigma[j * m_stride + kernel]);
  }
}

// One scan over the kernels lists the terms that count (see scan_kernels), whose exps are then
// taken in one batch and added in kernel order: the reference's bits at a fraction of its exps.
// Rows far below the prior kernel's (theta = prior - kSkipBelow) are left half-computed; if a
// candidate's last run then starts too low for that, the scan runs again without skipping.
constexpr double kSkipBelow = 200.0;

void ParzenEstimator::log_pdf(const double* xs, std::size_t c, double* out) const {
  prepare(xs, c);
  const auto k = static_cast<std::size_t>(m_kernels);
  const KernelTerms kt{
      m_kind.data(),    m_mu.data(), m_inv_sigma.data(), m_sigma.data(), m_catp.data(),
      m_choices.data(), xs,          m_cells.data(),     m_dims.size(),  k,
      m_stride};
  m_lane.resize(6 * c);
  const ScanLanes lanes{m_lane.data(), m_lane.data() + c, m_lane.data() + 2 * c,
                        m_lane.data() + 3 * c};
  double* sum = m_lane.data() + 4 * c;
  double* theta = m_lane.data() + 5 * c;
  if (m_rows.size() < k * c) {
    m_rows.resize(k * c);
    m_lanes.resize(k * c);
    m_terms.resize(k * c);
  }
  m_acc.resize(c);
  std::size_t check_from = 0;
  for (std::size_t j = 0; j < m_dims.size(); ++j)
    check_from = m_kind[j] == kDiscrete ? j : check_from;
  kernel_row<0>(kt, m_const[k - 1], k - 1, c, m_acc.data(), nullptr, 0);
  for (std::size_t a = 0; a < c; ++a) theta[a] = m_acc[a] - kSkipBelow;
  bool bad = false;
  const TermList list{m_rows.data(), m_lanes.data(), m_terms.data()};
  std::size_t n =
      scan_kernels(kt, m_const.data(), c, m_acc.data(), lanes, theta, check_from, list, bad);
  if (!bad && !runs_valid(lanes, theta, c)) {
    for (std::size_t a = 0; a < c; ++a) theta[a] = -kInf;
    n = scan_kernels(kt, m_const.data(), c, m_acc.data(), lanes, nullptr, 0, list, bad);
  }
  if (bad || !runs_valid(lanes, theta, c)) {
    log_pdf_every_term(xs, c, out);
    return;
  }
  // Keep the terms of each candidate's last run, as exponents relative to its maximum.
  std::size_t kept = 0;
  for (std::size_t p = 0; p < n; ++p) {
    const std::uint32_t a = m_lanes[p];
    if (static_cast<double>(m_rows[p]) < lanes.start[a]) continue;
    m_lanes[kept] = a;
    m_terms[kept] = m_terms[p] - lanes.top[a];
    ++kept;
  }
  n = kept;
  exp_batch(m_terms.data(), n, m_terms.data());
  for (std::size_t a = 0; a < c; ++a) sum[a] = 0.0;
  for (std::size_t p = 0; p < n; ++p) sum[m_lanes[p]] += m_terms[p];
  for (std::size_t a = 0; a < c; ++a) out[a] = lanes.top[a] + std::log(sum[a]);
}

void ParzenEstimator::log_pdf_every_term(const double* xs, std::size_t c, double* out) const {
  prepare(xs, c);
  const auto k = static_cast<std::size_t>(m_kernels);
  const KernelTerms kt{
      m_kind.data(),    m_mu.data(), m_inv_sigma.data(), m_sigma.data(), m_catp.data(),
      m_choices.data(), xs,          m_cells.data(),     m_dims.size(),  k,
      m_stride};
  m_acc.resize(k * c);
  m_lane.resize(3 * c);
  accumulate(kt, m_const.data(), c, m_acc.data(), m_lane.data());
  log_sum_exp_all(m_acc.data(), k, c, m_lane.data(), m_lane.data() + c, m_lane.data() + 2 * c, out);
}

// The per-dimension tables of the kernel loops: kinds, categorical tables, discrete grid cells.
void ParzenEstimator::prepare(const double* xs, std::size_t c) const {
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
}

}  // namespace shardscope::search
