#include "search/gp.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

namespace shardscope::search {
namespace gp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLog2Pi = 1.8378770664093454836;  // log(2 pi)

// Squared distance of rows a and b in dimension k (categorical: 0 or 1).
double sqd(double a, double b, bool categorical) {
  if (categorical) return a == b ? 0.0 : 1.0;
  return (a - b) * (a - b);
}

// d matern52 / d r2.
double matern52_deriv(double r2) {
  const double s = std::sqrt(5.0 * r2);
  return (-5.0 / 6.0) * (1.0 + s) * std::exp(-s);
}

// The negative (log marginal likelihood without its constant + log prior) at raw parameters
// theta = (log r, log scale, log(noise - min_noise)) and its gradient; +inf when K + noise I is
// not positive definite or a value is not finite.
double loss(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const std::vector<char>& cat,
            double min_noise, const Eigen::VectorXd& theta, Eigen::VectorXd& grad) {
  const Eigen::Index n = x.rows();
  const Eigen::Index d = x.cols();
  Hyper h;
  h.inv_sq_lengthscales = theta.head(d).array().exp();
  h.kernel_scale = std::exp(theta(d));
  const double noise_extra = std::exp(theta(d + 1));
  h.noise_var = noise_extra + min_noise;
  if (!h.inv_sq_lengthscales.allFinite() || !std::isfinite(h.kernel_scale) ||
      !std::isfinite(h.noise_var)) {
    return kInf;
  }
  Eigen::MatrixXd r2 = Eigen::MatrixXd::Zero(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < i; ++j) {
      double s = 0.0;
      for (Eigen::Index k = 0; k < d; ++k) {
        s +=
            sqd(x(i, k), x(j, k), cat[static_cast<std::size_t>(k)] != 0) * h.inv_sq_lengthscales(k);
      }
      r2(i, j) = s;
      r2(j, i) = s;
    }
  }
  Eigen::MatrixXd kmat = r2.unaryExpr([](double v) { return matern52(v); }) * h.kernel_scale;
  Eigen::MatrixXd c = kmat;
  c.diagonal().array() += h.noise_var;
  Eigen::LLT<Eigen::MatrixXd> llt(c);
  if (llt.info() != Eigen::Success) return kInf;
  const Eigen::VectorXd alpha = llt.solve(y);
  const double logdet_half = llt.matrixLLT().diagonal().array().log().sum();
  const double mll = -logdet_half - 0.5 * y.dot(alpha);
  const double prior = log_prior(h);
  const double value = -(mll + prior);
  if (!std::isfinite(value)) return kInf;
  // d mll / d theta = 0.5 tr(W dC/dtheta), W = alpha alpha^T - C^-1.
  Eigen::MatrixXd w = alpha * alpha.transpose() - llt.solve(Eigen::MatrixXd::Identity(n, n));
  const Eigen::MatrixXd dk =
      w.cwiseProduct(r2.unaryExpr([](double v) { return matern52_deriv(v); })) * h.kernel_scale;
  grad.resize(d + 2);
  for (Eigen::Index k = 0; k < d; ++k) {
    double s = 0.0;
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < i; ++j) {
        s += dk(i, j) * sqd(x(i, k), x(j, k), cat[static_cast<std::size_t>(k)] != 0);
      }
    }
    // Both triangles (dk is symmetric): 0.5 * 2 * s; times dr/dtheta = r.
    const double r = h.inv_sq_lengthscales(k);
    const double dmll = s * r;
    const double dprior = -(-0.1 / r + 0.1 * r);
    grad(k) = -(dmll + dprior);
  }
  const double dmll_scale = 0.5 * w.cwiseProduct(kmat).sum();
  const double dprior_scale = (2.0 - 1.0) - 1.0 * h.kernel_scale;  // Gamma(2, 1) in log scale
  grad(d) = -(dmll_scale + dprior_scale);
  const double dmll_noise = 0.5 * w.trace() * noise_extra;
  const double dprior_noise = ((1.1 - 1.0) / h.noise_var - 30.0) * noise_extra;
  grad(d + 1) = -(dmll_noise + dprior_noise);
  if (!grad.allFinite()) return kInf;
  return value;
}

// L-BFGS (memory 10) with a backtracking Armijo line search; stops when the largest gradient
// component is below gtol (Optuna's scipy call uses gtol 1e-2), after max_iter iterations, or
// when no step decreases f. Returns f at the end point, written into x.
double lbfgs(const std::function<double(const Eigen::VectorXd&, Eigen::VectorXd&)>& f,
             Eigen::VectorXd& x, double gtol, int max_iter) {
  Eigen::VectorXd g;
  double fx = f(x, g);
  if (!std::isfinite(fx)) return fx;
  std::deque<std::pair<Eigen::VectorXd, Eigen::VectorXd>> hist;  // (s, y), oldest first
  Eigen::VectorXd gn;
  for (int it = 0; it < max_iter; ++it) {
    if (g.lpNorm<Eigen::Infinity>() < gtol) break;
    // Two-loop recursion.
    Eigen::VectorXd q = g;
    std::vector<double> a(hist.size());
    for (std::size_t i = hist.size(); i-- > 0;) {
      const auto& [s, yv] = hist[i];
      a[i] = s.dot(q) / yv.dot(s);
      q -= a[i] * yv;
    }
    if (!hist.empty()) {
      const auto& [s, yv] = hist.back();
      q *= s.dot(yv) / yv.dot(yv);
    } else {
      q /= std::max(1.0, g.lpNorm<Eigen::Infinity>());
    }
    for (std::size_t i = 0; i < hist.size(); ++i) {
      const auto& [s, yv] = hist[i];
      const double b = yv.dot(q) / yv.dot(s);
      q += (a[i] - b) * s;
    }
    Eigen::VectorXd dir = -q;
    double slope = g.dot(dir);
    if (!(slope < 0.0)) {
      hist.clear();
      dir = -g / std::max(1.0, g.lpNorm<Eigen::Infinity>());
      slope = g.dot(dir);
    }
    double t = 1.0;
    Eigen::VectorXd xn;
    double fn = kInf;
    bool moved = false;
    for (int ls = 0; ls < 40; ++ls) {
      xn = x + t * dir;
      fn = f(xn, gn);
      if (std::isfinite(fn) && fn <= fx + 1e-4 * t * slope) {
        moved = true;
        break;
      }
      t *= 0.5;
    }
    if (!moved) break;
    Eigen::VectorXd s = xn - x;
    Eigen::VectorXd yv = gn - g;
    if (s.dot(yv) > 1e-12) {
      hist.emplace_back(std::move(s), std::move(yv));
      if (hist.size() > 10) hist.pop_front();
    }
    x = xn;
    g = gn;
    const double drop = fx - fn;
    fx = fn;
    if (drop < 1e-12 * std::max(1.0, std::abs(fx))) break;
  }
  return fx;
}

// log(1/(2u) - 3/(4u^2) + 15/(8u^3) - 105/(16u^4)) with u = x^2: the asymptotic series of
// 1 - sqrt(pi) x erfcx(x) for large x.
double log_one_minus_tail(double x) {
  const double u = x * x;
  return std::log(0.5 / u - 0.75 / (u * u) + 1.875 / (u * u * u) - 6.5625 / (u * u * u * u));
}

}  // namespace

double matern52(double r2) {
  const double s = std::sqrt(5.0 * r2);
  return std::exp(-s) * ((5.0 / 3.0) * r2 + s + 1.0);
}

Eigen::MatrixXd kernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                       const std::vector<char>& categorical, const Hyper& h) {
  Eigen::MatrixXd out(a.rows(), b.rows());
  const Eigen::Index d = a.cols();
  for (Eigen::Index i = 0; i < a.rows(); ++i) {
    for (Eigen::Index j = 0; j < b.rows(); ++j) {
      double s = 0.0;
      for (Eigen::Index k = 0; k < d; ++k) {
        s += sqd(a(i, k), b(j, k), categorical[static_cast<std::size_t>(k)] != 0) *
             h.inv_sq_lengthscales(k);
      }
      out(i, j) = h.kernel_scale * matern52(s);
    }
  }
  return out;
}

double log_prior(const Hyper& h) {
  const auto& r = h.inv_sq_lengthscales.array();
  auto gamma = [](double v, double concentration, double rate) {
    return (concentration - 1.0) * std::log(v) - rate * v;
  };
  return -(0.1 / r + 0.1 * r).sum() + gamma(h.kernel_scale, 2.0, 1.0) +
         gamma(h.noise_var, 1.1, 30.0);
}

bool Regressor::condition(Eigen::MatrixXd x, Eigen::VectorXd y, std::vector<char> categorical,
                          Hyper h) {
  m_x = std::move(x);
  m_y = std::move(y);
  m_categorical = std::move(categorical);
  m_h = std::move(h);
  Eigen::MatrixXd c = kernel(m_x, m_x, m_categorical, m_h);
  c.diagonal().array() += m_h.noise_var;
  m_llt.compute(c);
  if (m_llt.info() != Eigen::Success) return false;
  m_alpha = m_llt.solve(m_y);
  return m_alpha.allFinite();
}

double Regressor::log_marginal_likelihood() const {
  const double logdet_half = m_llt.matrixLLT().diagonal().array().log().sum();
  return -logdet_half - 0.5 * m_y.dot(m_alpha) - 0.5 * static_cast<double>(m_x.rows()) * kLog2Pi;
}

void Regressor::posterior(const Eigen::MatrixXd& q, Eigen::VectorXd& mean,
                          Eigen::VectorXd& var) const {
  const Eigen::MatrixXd ks = kernel(q, m_x, m_categorical, m_h);  // (m, n)
  mean = ks * m_alpha;
  // var = k(x, x) - k_*^T C^-1 k_* = scale - |L^-1 k_*|^2.
  const Eigen::MatrixXd v = m_llt.matrixL().solve(ks.transpose());  // (n, m)
  var = (m_h.kernel_scale - v.colwise().squaredNorm().array()).cwiseMax(0.0).matrix().transpose();
}

void Regressor::posterior_grad(const Eigen::VectorXd& x, double& mean, double& var,
                               Eigen::VectorXd& dmean, Eigen::VectorXd& dvar) const {
  const Eigen::Index n = m_x.rows();
  const Eigen::Index d = m_x.cols();
  Eigen::VectorXd kvec(n);
  Eigen::VectorXd dr2(n);  // d k_i / d r2_i
  for (Eigen::Index i = 0; i < n; ++i) {
    double s = 0.0;
    for (Eigen::Index k = 0; k < d; ++k) {
      s += sqd(x(k), m_x(i, k), m_categorical[static_cast<std::size_t>(k)] != 0) *
           m_h.inv_sq_lengthscales(k);
    }
    kvec(i) = m_h.kernel_scale * matern52(s);
    dr2(i) = m_h.kernel_scale * matern52_deriv(s);
  }
  const Eigen::VectorXd w = m_llt.solve(kvec);  // C^-1 k
  mean = kvec.dot(m_alpha);
  var = m_h.kernel_scale - kvec.dot(w);
  // d k_i / d x_k = dr2_i * 2 r_k (x_k - X_ik); d var = -2 w^T dk.
  const Eigen::VectorXd a = dr2.cwiseProduct(m_alpha);
  const Eigen::VectorXd b = dr2.cwiseProduct(w);
  dmean = Eigen::VectorXd::Zero(d);
  dvar = Eigen::VectorXd::Zero(d);
  for (Eigen::Index k = 0; k < d; ++k) {
    if (m_categorical[static_cast<std::size_t>(k)] != 0) continue;
    const Eigen::VectorXd diff = (x(k) - m_x.col(k).array()).matrix();
    const double two_r = 2.0 * m_h.inv_sq_lengthscales(k);
    dmean(k) = two_r * a.dot(diff);
    dvar(k) = -2.0 * two_r * b.dot(diff);
  }
}

Hyper fit_hyper(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                const std::vector<char>& categorical, const Hyper* start, double min_noise,
                double* log_posterior) {
  const Eigen::Index d = x.cols();
  auto f = [&](const Eigen::VectorXd& theta, Eigen::VectorXd& grad) {
    return loss(x, y, categorical, min_noise, theta, grad);
  };
  auto raw = [&](const Hyper& h) {
    Eigen::VectorXd theta(d + 2);
    theta.head(d) = h.inv_sq_lengthscales.array().log();
    theta(d) = std::log(h.kernel_scale);
    // Optuna starts the noise at 0.01 * min_noise above its floor.
    theta(d + 1) = std::log(std::max(h.noise_var - 0.99 * min_noise, 0.01 * min_noise));
    return theta;
  };
  Hyper ones;
  ones.inv_sq_lengthscales = Eigen::VectorXd::Ones(d);
  std::vector<Eigen::VectorXd> starts;
  if (start != nullptr && start->inv_sq_lengthscales.size() == d) starts.push_back(raw(*start));
  starts.push_back(raw(ones));
  double best = kInf;
  Eigen::VectorXd best_theta = starts.back();
  for (Eigen::VectorXd theta : starts) {
    const double v = lbfgs(f, theta, 1e-2, 200);
    if (v < best) {
      best = v;
      best_theta = theta;
    }
  }
  if (log_posterior != nullptr) *log_posterior = -best;
  if (!std::isfinite(best)) {
    ones.noise_var = 1.0 + min_noise;
    return ones;
  }
  Hyper h;
  h.inv_sq_lengthscales = best_theta.head(d).array().exp();
  h.kernel_scale = std::exp(best_theta(d));
  h.noise_var = std::exp(best_theta(d + 1)) + min_noise;
  return h;
}

double yeo_johnson(double v, double lambda) {
  constexpr double kTiny = 1e-12;
  if (v >= 0.0) {
    return std::abs(lambda) < kTiny ? std::log1p(v) : (std::pow(1.0 + v, lambda) - 1.0) / lambda;
  }
  const double l2 = 2.0 - lambda;
  return std::abs(l2) < kTiny ? -std::log1p(-v) : -(std::pow(1.0 - v, l2) - 1.0) / l2;
}

double yeo_johnson_log_jacobian(const Eigen::VectorXd& y, double lambda) {
  double s = 0.0;
  for (Eigen::Index i = 0; i < y.size(); ++i) s += std::copysign(std::log1p(std::abs(y(i))), y(i));
  return (lambda - 1.0) * s;
}

double yeo_johnson_llf(const Eigen::VectorXd& y, double lambda) {
  const auto n = static_cast<double>(y.size());
  Eigen::VectorXd t(y.size());
  for (Eigen::Index i = 0; i < y.size(); ++i) t(i) = yeo_johnson(y(i), lambda);
  const double var = (t.array() - t.mean()).square().mean();
  if (!(var > 0.0) || !std::isfinite(var)) return -kInf;
  return -0.5 * n * std::log(var) + yeo_johnson_log_jacobian(y, lambda);
}

double yeo_johnson_lambda(const Eigen::VectorXd& y) {
  // The profile likelihood is unimodal in practice (scipy brackets and runs Brent on it); a
  // golden section on [-2, 2] keeps lambda where the powers stay finite for standardised y.
  // Above 1 the transform compresses the good end of the losses: it helps where most trials sit
  // on a plateau and a few in a deep well (Hartmann-6, Ackley-5), and costs where a few are far
  // better than the rest on a smooth slope (bbob's f5; bench/search/README.md, "The GP's output
  // warping", has both).
  constexpr double kLo = -2.0;
  constexpr double kHi = 2.0;
  const double ratio = 0.5 * (std::sqrt(5.0) - 1.0);
  double a = kLo;
  double b = kHi;
  double c = b - ratio * (b - a);
  double e = a + ratio * (b - a);
  double fc = yeo_johnson_llf(y, c);
  double fe = yeo_johnson_llf(y, e);
  while (b - a > 1e-5) {
    if (fc >= fe) {
      b = e;
      e = c;
      fe = fc;
      c = b - ratio * (b - a);
      fc = yeo_johnson_llf(y, c);
    } else {
      a = c;
      c = e;
      fc = fe;
      e = a + ratio * (b - a);
      fe = yeo_johnson_llf(y, e);
    }
  }
  // A maximum at an end of the interval (a long tail wants lambda past it) is the end itself.
  double best = 0.5 * (a + b);
  double best_llf = yeo_johnson_llf(y, best);
  for (const double end : {kLo, kHi}) {
    const double v = yeo_johnson_llf(y, end);
    if (v > best_llf) {
      best = end;
      best_llf = v;
    }
  }
  return best;
}

Eigen::VectorXd standardise(const Eigen::VectorXd& v, double& mean, double& sd) {
  mean = v.mean();
  sd = std::sqrt((v.array() - mean).square().mean());
  return ((v.array() - mean) / std::max(1e-10, sd)).matrix();
}

ObjectiveFit fit_objective(const Eigen::MatrixXd& x, const Eigen::VectorXd& values,
                           const std::vector<char>& categorical, const Hyper* raw_start,
                           const Hyper* warped_start) {
  const Eigen::Index d = x.cols();
  const double min_noise = kMinNoiseVar;
  ObjectiveFit out;
  double mean = 0.0;
  double sd = 0.0;
  out.y = standardise(values, mean, sd);
  if (raw_start != nullptr && raw_start->inv_sq_lengthscales.size() != d) raw_start = nullptr;
  double evidence = -kInf;
  out.raw_fit = fit_hyper(x, out.y, categorical, raw_start, min_noise, &evidence);
  out.hyper = out.raw_fit;
  if (out.y.size() < 3 || !(sd > 1e-10)) return out;
  const Eigen::VectorXd loss = -out.y;
  out.lambda = yeo_johnson_lambda(loss);
  Eigen::VectorXd w(loss.size());
  for (Eigen::Index i = 0; i < loss.size(); ++i) w(i) = -yeo_johnson(loss(i), out.lambda);
  double w_mean = 0.0;
  double w_sd = 0.0;
  const Eigen::VectorXd w_std = standardise(w, w_mean, w_sd);
  if (!(w_sd > 1e-10)) return out;
  if (warped_start == nullptr || warped_start->inv_sq_lengthscales.size() != d) {
    warped_start = raw_start != nullptr ? &out.raw_fit : nullptr;
  }
  double w_evidence = -kInf;
  out.warped_fit = fit_hyper(x, w_std, categorical, warped_start, min_noise, &w_evidence);
  // The density of the standardised values under the warped model: that of w_std times
  // |d w_std / d y| = yeo_johnson'(loss) / w_sd per value.
  w_evidence += yeo_johnson_log_jacobian(loss, out.lambda) -
                static_cast<double>(loss.size()) * std::log(w_sd);
  if (w_evidence > evidence) {
    out.y = w_std;
    out.hyper = out.warped_fit;
    out.warped = true;
  }
  return out;
}

double log_ndtr(double z) {
  if (z > -20.0) return std::log(0.5 * std::erfc(-z * M_SQRT1_2));
  // Phi(z) = 0.5 erfc(x), x = -z / sqrt 2: erfc(x) ~ exp(-x^2) / (x sqrt(pi)) (1 - 1/(2x^2) + ...).
  const double x = -z * M_SQRT1_2;
  const double u = x * x;
  const double series = 1.0 - 0.5 / u + 0.75 / (u * u) - 1.875 / (u * u * u);
  return std::log(0.5) - u - std::log(x * std::sqrt(M_PI)) + std::log(series);
}

double log_ei(double mean, double var, double best) {
  const double sigma = std::sqrt(std::max(var, 1e-300));
  const double z = (mean - best) / sigma;
  double out = 0.0;
  if (z >= -25.0) {
    // z Phi(z) + phi(z)
    out = std::log(0.5 * z * std::erfc(-M_SQRT1_2 * z) +
                   std::exp(-0.5 * z * z) * (0.5 * M_2_SQRTPI * M_SQRT1_2));
  } else {
    out = -0.5 * z * z - 0.5 * kLog2Pi + log_one_minus_tail(-M_SQRT1_2 * z);
  }
  return out + std::log(sigma);
}

void log_ei_grad(double mean, double var, double best, double& d_mean, double& d_var) {
  const double sigma = std::sqrt(var);
  const double z = (mean - best) / sigma;
  // log_ei = log sigma + log h(z), h(z) = z Phi(z) + phi(z), h'(z) = Phi(z).
  const double log_h = log_ei(mean, var, best) - std::log(sigma);
  const double log_phi = -0.5 * z * z - 0.5 * kLog2Pi;
  const double dz = std::exp(log_ndtr(z) - log_h);  // d log h / dz
  d_mean = dz / sigma;
  // d/d sigma = 1/sigma - dz z / sigma = phi(z) / (h(z) sigma); d sigma / d var = 1 / (2 sigma).
  d_var = std::exp(log_phi - log_h) / sigma / (2.0 * sigma);
}

}  // namespace gp

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool violated(const Trial& t) {
  return t.state == TrialState::Infeasible || t.state == TrialState::Oom;
}

bool usable_complete(const Trial& t) {
  return t.state == TrialState::Complete && !t.values.empty() && std::isfinite(t.values.front());
}

// One coordinate of the unit cube.
struct Coord {
  const Param* param = nullptr;
  bool categorical = false;
  std::vector<double> grid;  // discrete numeric: every value's unit coordinate, ascending
  double lo = 0.0;           // internal range (numeric)
  double hi = 1.0;
  int choices = 0;  // categorical
};

std::vector<Coord> coords_of(const SearchSpace& space) {
  std::vector<Coord> out;
  for (const Param& p : space.params) {
    // Conditional parameters are drawn independently; a single-valued one needs no model.
    if (!p.when.empty() || (p.numeric() && !(p.internal_high() > p.internal_low()))) continue;
    Coord c;
    c.param = &p;
    c.categorical = !p.numeric();
    if (c.categorical) {
      c.choices = static_cast<int>(p.choices.size());
    } else {
      c.lo = p.internal_low();
      c.hi = p.internal_high();
      if (p.discrete() && p.cardinality() <= 100000) {
        for (const ParamValue& v : p.values()) {
          c.grid.push_back((p.to_internal(v) - c.lo) / (c.hi - c.lo));
        }
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

// A trial's point in the unit cube; false when a driven parameter is missing or illegal.
bool unit_point(const std::vector<Coord>& coords, const Trial& t, double* row) {
  for (std::size_t k = 0; k < coords.size(); ++k) {
    const Param& p = *coords[k].param;
    auto v = t.params.find(p.name);
    if (v == t.params.end() || !p.contains(v->second)) return false;
    const double x = p.to_internal(v->second);
    row[k] = coords[k].categorical ? x : (x - coords[k].lo) / (coords[k].hi - coords[k].lo);
  }
  return true;
}

// The acquisition: log EI under the objective GP (when there is one) + log P(feasible) under the
// constraint GP (when there is one).
struct Acquisition {
  const gp::Regressor* objective = nullptr;
  double best = 0.0;
  const gp::Regressor* constraint = nullptr;
  double threshold = 0.0;  // standardised constraint value at 0

  Eigen::VectorXd operator()(const Eigen::MatrixXd& q) const {
    Eigen::VectorXd out = Eigen::VectorXd::Zero(q.rows());
    Eigen::VectorXd mean;
    Eigen::VectorXd var;
    if (objective != nullptr) {
      objective->posterior(q, mean, var);
      for (Eigen::Index i = 0; i < q.rows(); ++i) out(i) += gp::log_ei(mean(i), var(i), best);
    }
    if (constraint != nullptr) {
      constraint->posterior(q, mean, var);
      for (Eigen::Index i = 0; i < q.rows(); ++i) {
        const double sigma = std::sqrt(std::max(var(i), 1e-300));
        out(i) += gp::log_ndtr((threshold - mean(i)) / sigma);
      }
    }
    return out;
  }

  // The value at one point x (as operator()) and its gradient in the non-categorical
  // coordinates.
  double value_grad(const Eigen::VectorXd& x, Eigen::VectorXd& g) const {
    constexpr double kMinVar = 1e-12;  // below it, no gradient through the variance
    g = Eigen::VectorXd::Zero(x.size());
    double out = 0.0;
    double mean = 0.0;
    double var = 0.0;
    Eigen::VectorXd dmean;
    Eigen::VectorXd dvar;
    if (objective != nullptr) {
      objective->posterior_grad(x, mean, var, dmean, dvar);
      out += gp::log_ei(mean, std::max(var, 0.0), best);
      double a = 0.0;
      double b = 0.0;
      gp::log_ei_grad(mean, std::max(var, kMinVar), best, a, b);
      g += a * dmean;
      if (var > kMinVar) g += b * dvar;
    }
    if (constraint != nullptr) {
      constraint->posterior_grad(x, mean, var, dmean, dvar);
      const double sigma = std::sqrt(std::max(var, 1e-300));
      const double u = (threshold - mean) / sigma;
      const double lp = gp::log_ndtr(u);
      out += lp;
      const double dl = std::exp(-0.5 * u * u - 0.5 * std::log(2.0 * M_PI) - lp);
      g -= (dl / sigma) * dmean;
      if (var > kMinVar) g -= (dl * u / (2.0 * var)) * dvar;
    }
    return out;
  }
};

// Index of the grid value nearest u.
std::size_t nearest(const std::vector<double>& grid, double u) {
  auto it = std::lower_bound(grid.begin(), grid.end(), u);
  if (it == grid.end()) return grid.size() - 1;
  const auto i = static_cast<std::size_t>(it - grid.begin());
  if (i > 0 && u - grid[i - 1] < *it - u) return i - 1;
  return i;
}

// Gradient ascent on the continuous coordinates `cont` of x, from value fx, preconditioned as
// Optuna's (in z = x / l, l the objective's length scale, so that every coordinate looks alike):
// projected steps with Barzilai-Borwein lengths and an Armijo backtrack, until the projected
// gradient in z is below 1e-2 (Optuna's pgtol), no step gains, or 200 steps. Returns the value.
double ascend(const Acquisition& acq, const std::vector<Eigen::Index>& cont,
              const Eigen::VectorXd& lsq, Eigen::VectorXd& x, double fx) {
  Eigen::VectorXd g;
  const double f0 = acq.value_grad(x, g);
  if (!std::isfinite(f0) || !g.allFinite()) return fx;
  fx = f0;
  double scale = 0.0;
  for (Eigen::Index k : cont) scale = std::max(scale, lsq(k) * std::abs(g(k)));
  if (!(scale > 0.0)) return fx;
  double t = 0.1 / scale;  // the first step moves at most 0.1 of the box
  Eigen::VectorXd y = x;
  Eigen::VectorXd gy;
  for (int it = 0; it < 200; ++it) {
    double pg = 0.0;  // projected gradient in z (inf-norm)
    for (Eigen::Index k : cont) {
      const double l = std::sqrt(lsq(k));
      const double z = x(k) / l;
      pg = std::max(pg, std::abs(std::clamp(z + g(k) * l, 0.0, 1.0 / l) - z));
    }
    if (pg < 1e-2) break;
    bool moved = false;
    double fy = -kInf;
    for (int ls = 0; ls < 30; ++ls) {
      double gain = 0.0;
      for (Eigen::Index k : cont) {
        y(k) = std::clamp(x(k) + t * lsq(k) * g(k), 0.0, 1.0);
        gain += g(k) * (y(k) - x(k));
      }
      if (!(gain > 0.0)) break;
      fy = acq.value_grad(y, gy);
      if (std::isfinite(fy) && gy.allFinite() && fy >= fx + 1e-4 * gain) {
        moved = true;
        break;
      }
      t *= 0.5;
    }
    if (!moved) break;
    double ss = 0.0;
    double sy = 0.0;
    for (Eigen::Index k : cont) {
      const double sk = y(k) - x(k);
      ss += sk * sk / lsq(k);
      sy -= sk * (gy(k) - g(k));
    }
    t = sy > 0.0 ? std::clamp(ss / sy, 1e-12, 1e12) : t * 2.0;
    const double gained = fy - fx;
    x = y;
    g = gy;
    fx = fy;
    if (gained < 1e-12) break;
  }
  return fx;
}

// Local search from x: rounds of (gradient ascent on the continuous coordinates; each discrete
// numeric coordinate set to every grid value when it has at most 16, else moved by +-1, 2, 4, ...
// grid steps; each categorical set to every choice), until a round gains less than tol (1e-4,
// Optuna's). Returns the value at x.
double local_search(const Acquisition& acq, const std::vector<Coord>& coords,
                    const Eigen::VectorXd& lsq, Eigen::VectorXd& x, double fx) {
  const auto d = static_cast<Eigen::Index>(coords.size());
  std::vector<Eigen::Index> cont;
  for (Eigen::Index k = 0; k < d; ++k) {
    const Coord& c = coords[static_cast<std::size_t>(k)];
    if (!c.categorical && c.grid.empty()) cont.push_back(k);
  }
  constexpr double kTol = 1e-4;
  for (int round = 0; round < 50; ++round) {
    const double start = fx;
    if (!cont.empty()) fx = ascend(acq, cont, lsq, x, fx);
    for (Eigen::Index k = 0; k < d; ++k) {
      const Coord& c = coords[static_cast<std::size_t>(k)];
      if (c.categorical) {
        Eigen::MatrixXd probe(c.choices, d);
        for (int i = 0; i < c.choices; ++i) {
          probe.row(i) = x.transpose();
          probe(i, k) = i;
        }
        const Eigen::VectorXd v = acq(probe);
        Eigen::Index arg = 0;
        if (v.maxCoeff(&arg) > fx) {
          x(k) = static_cast<double>(arg);
          fx = v(arg);
        }
      } else if (!c.grid.empty()) {
        const std::size_t at = nearest(c.grid, x(k));
        std::vector<std::size_t> cand;
        if (c.grid.size() <= 16) {
          for (std::size_t i = 0; i < c.grid.size(); ++i) {
            if (i != at) cand.push_back(i);
          }
        } else {
          for (std::size_t step = 1; step < c.grid.size(); step *= 2) {
            if (at >= step) cand.push_back(at - step);
            if (at + step < c.grid.size()) cand.push_back(at + step);
          }
        }
        if (cand.empty()) continue;
        Eigen::MatrixXd probe(static_cast<Eigen::Index>(cand.size()), d);
        for (std::size_t i = 0; i < cand.size(); ++i) {
          probe.row(static_cast<Eigen::Index>(i)) = x.transpose();
          probe(static_cast<Eigen::Index>(i), k) = c.grid[cand[i]];
        }
        const Eigen::VectorXd v = acq(probe);
        Eigen::Index arg = 0;
        if (v.maxCoeff(&arg) > fx) {
          x(k) = c.grid[cand[static_cast<std::size_t>(arg)]];
          fx = v(arg);
        }
      }
    }
    if (fx - start < kTol) break;
  }
  return fx;
}

// A uniform point of the cube, discrete coordinates on their grid.
void random_point(const std::vector<Coord>& coords, Rng& rng, Eigen::MatrixXd& m, Eigen::Index r) {
  for (std::size_t k = 0; k < coords.size(); ++k) {
    const Coord& c = coords[k];
    const auto i = static_cast<Eigen::Index>(k);
    if (c.categorical) {
      m(r, i) = static_cast<double>(rng.below(static_cast<std::uint64_t>(c.choices)));
    } else if (!c.grid.empty()) {
      m(r, i) = c.grid[nearest(c.grid, rng.uniform())];  // uniform in the cube, snapped
    } else {
      m(r, i) = rng.uniform();
    }
  }
}

}  // namespace

Result<TrialParams> GpSampler::sample(const SearchSpace& space, const std::vector<Trial>& finished,
                                      const std::vector<Trial>& pending, Rng& rng) {
  const std::vector<Coord> coords = coords_of(space);
  const auto d = static_cast<Eigen::Index>(coords.size());
  // Rows of the objective GP (complete trials) and of the constraint GP (complete + violated).
  std::vector<double> obj_rows;
  std::vector<double> obj_y;
  std::vector<double> con_rows;
  std::vector<double> con_c;
  std::vector<double> row(coords.size());
  for (const Trial& t : finished) {
    const bool complete = usable_complete(t);
    if (!complete && !violated(t)) continue;
    if (!unit_point(coords, t, row.data())) continue;
    con_rows.insert(con_rows.end(), row.begin(), row.end());
    con_c.push_back(complete ? -1.0 : 1.0);
    if (complete) {
      obj_rows.insert(obj_rows.end(), row.begin(), row.end());
      const double v = t.values.front();
      obj_y.push_back(m_direction == Direction::Minimize ? -v : v);  // maximised
    }
  }
  const auto n_con = static_cast<Eigen::Index>(con_c.size());
  if (d == 0 || n_con < std::max(1, m_cfg.n_startup_trials)) {
    return m_random.sample(space, finished, pending, rng);
  }
  std::vector<char> categorical(coords.size());
  for (std::size_t k = 0; k < coords.size(); ++k) categorical[k] = coords[k].categorical ? 1 : 0;
  auto matrix = [d](const std::vector<double>& rows) {
    const Eigen::Index n = static_cast<Eigen::Index>(rows.size()) / std::max<Eigen::Index>(d, 1);
    return Eigen::MatrixXd(
        Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
            rows.data(), n, d));
  };
  if (m_objective_fit.inv_sq_lengthscales.size() != d) m_objective_fit = gp::Hyper{};
  if (m_constraint_fit.inv_sq_lengthscales.size() != d) m_constraint_fit = gp::Hyper{};

  Acquisition acq;
  gp::Regressor objective;
  gp::Hyper objective_fit;  // the fit the objective's model uses: raw or warped
  Eigen::MatrixXd x_obj;
  Eigen::VectorXd y_std;
  Eigen::Index best_row = -1;
  if (!obj_y.empty()) {
    x_obj = matrix(obj_rows);
    const gp::ObjectiveFit fit = gp::fit_objective(
        x_obj,
        Eigen::Map<const Eigen::VectorXd>(obj_y.data(), static_cast<Eigen::Index>(obj_y.size())),
        categorical, &m_objective_fit, &m_warped_fit);
    m_objective_fit = fit.raw_fit;
    if (fit.warped_fit.inv_sq_lengthscales.size() == d) m_warped_fit = fit.warped_fit;
    objective_fit = fit.hyper;
    y_std = fit.y;
    acq.best = y_std.maxCoeff(&best_row);
    // Constant liar: running trials join at the worst observed value (fit unchanged).
    Eigen::MatrixXd x_all = x_obj;
    Eigen::VectorXd y_all = y_std;
    if (m_cfg.constant_liar && !pending.empty()) {
      std::vector<double> lie_rows;
      for (const Trial& t : pending) {
        if (unit_point(coords, t, row.data()))
          lie_rows.insert(lie_rows.end(), row.begin(), row.end());
      }
      const Eigen::MatrixXd x_lie = matrix(lie_rows);
      if (x_lie.rows() > 0) {
        x_all.conservativeResize(x_obj.rows() + x_lie.rows(), d);
        x_all.bottomRows(x_lie.rows()) = x_lie;
        y_all.conservativeResize(x_all.rows());
        y_all.tail(x_lie.rows()).setConstant(y_std.minCoeff());
      }
    }
    if (objective.condition(x_all, y_all, categorical, objective_fit)) acq.objective = &objective;
  }
  gp::Regressor constraint;
  const bool any_violated = std::any_of(con_c.begin(), con_c.end(), [](double c) { return c > 0; });
  if (any_violated) {
    double mean = 0.0;
    double sd = 0.0;
    const Eigen::VectorXd c_std =
        gp::standardise(Eigen::Map<const Eigen::VectorXd>(con_c.data(), n_con), mean, sd);
    acq.threshold = -mean / std::max(1e-10, sd);
    const Eigen::MatrixXd x_con = matrix(con_rows);
    const gp::Hyper* start =
        m_constraint_fit.inv_sq_lengthscales.size() == d ? &m_constraint_fit : nullptr;
    m_constraint_fit = gp::fit_hyper(x_con, c_std, categorical, start);
    if (constraint.condition(x_con, c_std, categorical, m_constraint_fit))
      acq.constraint = &constraint;
  }
  if (acq.objective == nullptr && acq.constraint == nullptr) {
    return m_random.sample(space, finished, pending, rng);
  }

  // Preliminary random points, then local searches (Optuna's optimize_acqf_mixed): from the
  // best of them, from the best trial, and from points of the rest drawn without replacement
  // with probability proportional to exp(acquisition - its maximum) (Optuna's roulette).
  constexpr Eigen::Index kPreliminary = 2048;
  constexpr int kLocal = 10;
  Eigen::MatrixXd pre(kPreliminary, d);
  for (Eigen::Index i = 0; i < kPreliminary; ++i) random_point(coords, rng, pre, i);
  const Eigen::VectorXd pre_v = acq(pre);
  Eigen::Index max_i = 0;
  double max_v = -kInf;
  for (Eigen::Index i = 0; i < kPreliminary; ++i) {
    if (std::isfinite(pre_v(i)) && pre_v(i) > max_v) {
      max_v = pre_v(i);
      max_i = i;
    }
  }
  std::vector<Eigen::VectorXd> starts;
  starts.emplace_back(pre.row(max_i).transpose());
  if (best_row >= 0) starts.emplace_back(x_obj.row(best_row).transpose());
  if (std::isfinite(max_v)) {
    std::vector<double> weight(static_cast<std::size_t>(kPreliminary), 0.0);
    double total = 0.0;
    for (Eigen::Index i = 0; i < kPreliminary; ++i) {
      if (i == max_i || !std::isfinite(pre_v(i))) continue;
      weight[static_cast<std::size_t>(i)] = std::exp(pre_v(i) - max_v);
      total += weight[static_cast<std::size_t>(i)];
    }
    while (static_cast<int>(starts.size()) < kLocal && total > 0.0) {
      double u = rng.uniform() * total;
      std::size_t pick = weight.size();
      for (std::size_t i = 0; i < weight.size(); ++i) {
        if (weight[i] <= 0.0) continue;
        pick = i;
        u -= weight[i];
        if (u <= 0.0) break;
      }
      if (pick == weight.size()) break;
      starts.emplace_back(pre.row(static_cast<Eigen::Index>(pick)).transpose());
      total -= weight[pick];
      weight[pick] = 0.0;
    }
  }
  // The preconditioner: the objective's squared length scales (the constraint's without one).
  const gp::Hyper& shape = acq.objective != nullptr ? objective_fit : m_constraint_fit;
  const Eigen::VectorXd lsq = shape.inv_sq_lengthscales.cwiseInverse();
  Eigen::VectorXd best_x = starts.front();
  double best_v = -kInf;
  for (Eigen::VectorXd x : starts) {
    double fx = acq(Eigen::MatrixXd(x.transpose()))(0);
    if (!std::isfinite(fx)) fx = -kInf;
    fx = local_search(acq, coords, lsq, x, fx);
    if (fx > best_v) {
      best_v = fx;
      best_x = x;
    }
  }

  TrialParams out;
  for (std::size_t k = 0; k < coords.size(); ++k) {
    const Coord& c = coords[k];
    const double u = best_x(static_cast<Eigen::Index>(k));
    out[c.param->name] =
        c.categorical ? c.param->from_internal(u)
                      : c.param->from_internal(c.lo + std::clamp(u, 0.0, 1.0) * (c.hi - c.lo));
  }
  // The rest (conditional, single-valued): drawn independently, in order (what a condition
  // names is decided before it).
  for (const Param& p : space.params) {
    if (out.count(p.name) == 0 && space.active(p, out)) out[p.name] = p.from_unit(rng.uniform());
  }
  return out;
}

}  // namespace shardscope::search
