// CMA-ES: the strategy update (Hansen's tutorial, eqs. 39-47, with the active covariance update
// of eqs. 46-53: negative weights for the worst lambda - mu points), a
// Jacobi eigensolver for C = B D^2 B^T, and the replay of the strategy from the trial list.
#include "search/cmaes.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace shardscope::search {
namespace {

using Matrix = std::vector<double>;  // (n, n) row-major

// Eigen-decomposition of the symmetric `a` (n, n) by cyclic Jacobi rotations: on return `vecs`
// holds the eigenvectors as columns and `vals` the eigenvalues. n is the number of searched
// parameters (tens at most), where Jacobi is accurate and fast enough.
void jacobi_eigen(Matrix a, int n, Matrix& vecs, std::vector<double>& vals) {
  const auto at = [n](int i, int j) {
    return static_cast<std::size_t>(i) * static_cast<std::size_t>(n) + static_cast<std::size_t>(j);
  };
  vecs.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(n), 0.0);
  for (int i = 0; i < n; ++i) vecs[at(i, i)] = 1.0;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0.0;
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) off += a[at(i, j)] * a[at(i, j)];
    }
    if (off < 1e-30) break;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        if (std::abs(a[at(p, q)]) < 1e-300) continue;
        // Rotation angle that zeroes a(p, q) (Golub & Van Loan, symmetric Schur).
        const double theta = (a[at(q, q)] - a[at(p, p)]) / (2.0 * a[at(p, q)]);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::hypot(1.0, theta));
        const double c = 1.0 / std::hypot(1.0, t);
        const double s = t * c;
        for (int k = 0; k < n; ++k) {
          const double akp = a[at(k, p)];
          const double akq = a[at(k, q)];
          a[at(k, p)] = c * akp - s * akq;
          a[at(k, q)] = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {
          const double apk = a[at(p, k)];
          const double aqk = a[at(q, k)];
          a[at(p, k)] = c * apk - s * aqk;
          a[at(q, k)] = s * apk + c * aqk;
        }
        for (int k = 0; k < n; ++k) {
          const double vkp = vecs[at(k, p)];
          const double vkq = vecs[at(k, q)];
          vecs[at(k, p)] = c * vkp - s * vkq;
          vecs[at(k, q)] = s * vkp + c * vkq;
        }
      }
    }
  }
  vals.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) vals[static_cast<std::size_t>(i)] = a[at(i, i)];
}

// Rank of a trial inside its generation: complete (by signed value) first, then pruned,
// infeasible, oom and failed. Lower is better.
std::pair<int, double> rank_key(const Trial& t, Direction dir) {
  if (t.state == TrialState::Complete && !t.values.empty() && std::isfinite(t.values.front())) {
    return {0, dir == Direction::Minimize ? t.values.front() : -t.values.front()};
  }
  switch (t.state) {
    case TrialState::Pruned:
      return {1, 0.0};
    case TrialState::Infeasible:
      return {2, 0.0};
    case TrialState::Oom:
      return {3, 0.0};
    default:
      return {4, 0.0};
  }
}

// A trial's driven parameters in the unit box; shorter when one is missing (an older space).
std::vector<double> unit_point(const SearchSpace& space, const std::vector<int>& dims,
                               const Trial& t) {
  std::vector<double> x;
  for (int i : dims) {
    const Param& p = space.params[static_cast<std::size_t>(i)];
    auto v = t.params.find(p.name);
    if (v == t.params.end()) break;
    const double lo = p.internal_low();
    x.push_back(std::clamp((p.to_internal(v->second) - lo) / (p.internal_high() - lo), 0.0, 1.0));
  }
  return x;
}

// The warm start from the complete startup trials (at least one): the mean at the best; sigma
// and C from the spread of the best max(1, floor(10%)) about their mean, with a prior 0.1^2 I
// (the cmaes package's get_warm_start_mgd, gamma = alpha = 0.1).
void warm_start(const SearchSpace& space, const std::vector<int>& dims,
                std::vector<const Trial*> startup, Direction direction, CmaState& state) {
  std::stable_sort(startup.begin(), startup.end(), [direction](const Trial* a, const Trial* b) {
    return rank_key(*a, direction) < rank_key(*b, direction);
  });
  const auto n = static_cast<std::size_t>(state.dims);
  const std::size_t top = std::max<std::size_t>(1, startup.size() / 10);
  std::vector<std::vector<double>> xs;
  std::vector<double> centre(n, 0.0);
  for (std::size_t i = 0; i < top; ++i) {
    xs.push_back(unit_point(space, dims, *startup[i]));
    for (std::size_t j = 0; j < n; ++j) centre[j] += xs.back()[j] / static_cast<double>(top);
  }
  constexpr double kAlpha = 0.1;
  Matrix sigma_m(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double c = i == j ? kAlpha * kAlpha : 0.0;
      for (const auto& x : xs)
        c += (x[i] - centre[i]) * (x[j] - centre[j]) / static_cast<double>(top);
      sigma_m[i * n + j] = c;
    }
  }
  // det(Sigma) from its eigenvalues (positive: the prior is), in logs.
  Matrix vecs;
  std::vector<double> vals;
  jacobi_eigen(sigma_m, state.dims, vecs, vals);
  double log_det = 0.0;
  for (double v : vals) log_det += std::log(std::max(v, 1e-300));
  const double sigma0 = std::exp(log_det / (2.0 * static_cast<double>(n)));
  for (double& c : sigma_m) c /= sigma0 * sigma0;
  state.mean = xs.front();
  state.sigma = sigma0;
  state.set_covariance(std::move(sigma_m));
}

}  // namespace

CmaState CmaState::initial(int dims, int lambda, double sigma0) {
  CmaState s;
  const double n = dims;
  s.dims = dims;
  s.lambda = lambda > 1 ? lambda : 4 + static_cast<int>(std::floor(3.0 * std::log(n)));
  s.mu = s.lambda / 2;
  // w'_i = ln((lambda + 1) / 2) - ln i: positive for the best mu, negative for the rest.
  std::vector<double> prime(static_cast<std::size_t>(s.lambda));
  for (std::size_t i = 0; i < prime.size(); ++i) {
    prime[i] = std::log((s.lambda + 1) / 2.0) - std::log(static_cast<double>(i) + 1.0);
  }
  double sum = 0.0;
  double sq = 0.0;
  double neg_sum = 0.0;
  double neg_sq = 0.0;
  for (int i = 0; i < s.lambda; ++i) {
    const double w = prime[static_cast<std::size_t>(i)];
    if (i < s.mu) {
      sum += w;
      sq += w * w;
    } else {
      neg_sum += w;
      neg_sq += w * w;
    }
  }
  s.mu_eff = sum * sum / sq;
  const double mu_eff_minus = neg_sq > 0.0 ? neg_sum * neg_sum / neg_sq : 0.0;
  s.c_sigma = (s.mu_eff + 2.0) / (n + s.mu_eff + 5.0);
  s.d_sigma = 1.0 + 2.0 * std::max(0.0, std::sqrt((s.mu_eff - 1.0) / (n + 1.0)) - 1.0) + s.c_sigma;
  s.c_c = (4.0 + s.mu_eff / n) / (n + 4.0 + 2.0 * s.mu_eff / n);
  s.c_1 = 2.0 / ((n + 1.3) * (n + 1.3) + s.mu_eff);
  s.c_mu = std::min(1.0 - s.c_1 - 1e-8,
                    2.0 * (s.mu_eff - 2.0 + 1.0 / s.mu_eff) / ((n + 2.0) * (n + 2.0) + s.mu_eff));
  // Positive weights sum to 1; the negative ones to -alpha_min (eqs. 50-53).
  const double alpha_min =
      std::min({1.0 + s.c_1 / s.c_mu, 1.0 + 2.0 * mu_eff_minus / (s.mu_eff + 2.0),
                (1.0 - s.c_1 - s.c_mu) / (n * s.c_mu)});
  for (int i = 0; i < s.lambda; ++i) {
    const double w = prime[static_cast<std::size_t>(i)];
    if (i < s.mu) {
      s.weights.push_back(w / sum);
    } else {
      s.active.push_back(neg_sum < 0.0 ? alpha_min * w / -neg_sum : 0.0);
    }
  }
  s.chi_n = std::sqrt(n) * (1.0 - 1.0 / (4.0 * n) + 1.0 / (21.0 * n * n));
  s.mean.assign(static_cast<std::size_t>(dims), 0.5);
  s.sigma = sigma0 > 0.0 ? sigma0 : 1.0 / 6.0;
  s.p_sigma.assign(static_cast<std::size_t>(dims), 0.0);
  s.p_c.assign(static_cast<std::size_t>(dims), 0.0);
  s.cov.assign(static_cast<std::size_t>(dims) * static_cast<std::size_t>(dims), 0.0);
  s.basis = s.cov;
  const auto d = static_cast<std::size_t>(dims);
  for (std::size_t i = 0; i < d; ++i) {
    s.cov[i * d + i] = 1.0;
    s.basis[i * d + i] = 1.0;
  }
  s.scale.assign(static_cast<std::size_t>(dims), 1.0);
  return s;
}

void CmaState::set_covariance(std::vector<double> c) {
  cov = std::move(c);
  std::vector<double> vals;
  jacobi_eigen(cov, dims, basis, vals);
  scale.resize(static_cast<std::size_t>(dims));
  for (std::size_t i = 0; i < scale.size(); ++i) scale[i] = std::sqrt(std::max(vals[i], 1e-20));
}

std::vector<double> CmaState::sample(Rng& rng) const {
  const auto n = static_cast<std::size_t>(dims);
  std::vector<double> z(n);
  std::vector<double> x(n);
  for (int attempt = 0; attempt < 100; ++attempt) {
    for (std::size_t i = 0; i < n; ++i) z[i] = scale[i] * rng.normal();
    bool inside = true;
    for (std::size_t i = 0; i < n; ++i) {
      double y = 0.0;
      for (std::size_t j = 0; j < n; ++j) y += basis[i * n + j] * z[j];
      x[i] = mean[i] + sigma * y;
      inside = inside && x[i] >= 0.0 && x[i] <= 1.0;
    }
    if (inside) return x;
  }
  for (double& v : x) v = std::clamp(v, 0.0, 1.0);
  return x;
}

void CmaState::update(const std::vector<std::vector<double>>& ranked) {
  const auto n = static_cast<std::size_t>(dims);
  const std::size_t parents = std::min(ranked.size(), static_cast<std::size_t>(mu));
  if (parents == 0) return;
  double wsum = 0.0;
  for (std::size_t i = 0; i < parents; ++i) wsum += weights[i];
  // Steps y_i = (x_i - m) / sigma of the selected points and their weighted mean y_w.
  std::vector<std::vector<double>> ys(parents, std::vector<double>(n));
  std::vector<double> y_w(n, 0.0);
  for (std::size_t i = 0; i < parents; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      ys[i][j] = (ranked[i][j] - mean[j]) / sigma;
      y_w[j] += weights[i] / wsum * ys[i][j];
    }
  }
  const std::vector<double> old_mean = mean;
  for (std::size_t j = 0; j < n; ++j) mean[j] += sigma * y_w[j];
  // C^{-1/2} y_w = B D^{-1} B^T y_w.
  std::vector<double> bt(n, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    for (std::size_t j = 0; j < n; ++j) bt[k] += basis[j * n + k] * y_w[j];
    bt[k] /= scale[k];
  }
  const double cs = std::sqrt(c_sigma * (2.0 - c_sigma) * mu_eff);
  double ps_norm = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    double v = 0.0;
    for (std::size_t k = 0; k < n; ++k) v += basis[i * n + k] * bt[k];
    p_sigma[i] = (1.0 - c_sigma) * p_sigma[i] + cs * v;
    ps_norm += p_sigma[i] * p_sigma[i];
  }
  ps_norm = std::sqrt(ps_norm);
  ++generation;
  const double decay = 1.0 - std::pow(1.0 - c_sigma, 2.0 * generation);
  const bool h_sigma = ps_norm / std::sqrt(decay) < (1.4 + 2.0 / (dims + 1.0)) * chi_n;
  const double cc = std::sqrt(c_c * (2.0 - c_c) * mu_eff);
  for (std::size_t i = 0; i < n; ++i) p_c[i] = (1.0 - c_c) * p_c[i] + (h_sigma ? cc * y_w[i] : 0.0);
  const double delta = h_sigma ? 0.0 : c_c * (2.0 - c_c);
  // The worst points (past mu) with the active weights, each rescaled by n / |C^{-1/2} y|^2 (eq.
  // 46) so that a long step cannot shrink C by much.
  const std::size_t worst = std::min(ranked.size(), static_cast<std::size_t>(lambda)) - parents;
  std::vector<std::vector<double>> ws(worst, std::vector<double>(n));
  std::vector<double> w_io(worst);
  double active_sum = 0.0;
  for (std::size_t i = 0; i < worst; ++i) {
    std::vector<double> proj(n, 0.0);  // D^{-1} B^T y
    for (std::size_t j = 0; j < n; ++j) {
      ws[i][j] = (ranked[parents + i][j] - old_mean[j]) / sigma;
    }
    double norm2 = 0.0;
    for (std::size_t k = 0; k < n; ++k) {
      for (std::size_t j = 0; j < n; ++j) proj[k] += basis[j * n + k] * ws[i][j];
      proj[k] /= scale[k];
      norm2 += proj[k] * proj[k];
    }
    w_io[i] = active[i] * static_cast<double>(n) / (norm2 + 1e-8);
    active_sum += active[i];
  }
  const double keep = 1.0 + c_1 * delta - c_1 - c_mu * (1.0 + active_sum);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j <= i; ++j) {
      double rank_mu = 0.0;
      for (std::size_t k = 0; k < parents; ++k) rank_mu += weights[k] / wsum * ys[k][i] * ys[k][j];
      for (std::size_t k = 0; k < worst; ++k) rank_mu += w_io[k] * ws[k][i] * ws[k][j];
      const double c = keep * cov[i * n + j] + c_1 * p_c[i] * p_c[j] + c_mu * rank_mu;
      cov[i * n + j] = c;
      cov[j * n + i] = c;
    }
  }
  sigma *= std::exp(std::min(1.0, (c_sigma / d_sigma) * (ps_norm / chi_n - 1.0)));
  std::vector<double> vals;
  jacobi_eigen(cov, dims, basis, vals);
  for (std::size_t i = 0; i < n; ++i) scale[i] = std::sqrt(std::max(vals[i], 1e-20));
}

std::vector<int> CmaEsSampler::driven(const SearchSpace& space) {
  std::vector<int> out;
  for (std::size_t i = 0; i < space.params.size(); ++i) {
    const Param& p = space.params[i];
    if (p.numeric() && p.when.empty()) out.push_back(static_cast<int>(i));
  }
  return out;
}

CmaState CmaEsSampler::replay(const SearchSpace& space, const std::vector<Trial>& finished,
                              const std::vector<Trial>& pending) const {
  const std::vector<int> dims = driven(space);
  CmaState state =
      CmaState::initial(static_cast<int>(dims.size()), m_cfg.population_size, m_cfg.sigma0);
  // Trials by number; after the startup ones, trial k goes to generation k / lambda.
  std::map<std::int64_t, const Trial*> ordered;
  for (const Trial& t : finished) ordered[t.number] = &t;
  for (const Trial& t : pending) ordered[t.number] = &t;
  std::map<int, std::vector<const Trial*>> generations;
  std::int64_t index = 0;
  std::vector<const Trial*> startup;  // the complete startup trials (start_at_best)
  for (const auto& [number, t] : ordered) {
    const std::int64_t k = index++ - m_cfg.n_startup_trials;
    if (k >= 0) {
      generations[static_cast<int>(k / state.lambda)].push_back(t);
    } else if (m_start_at_best && rank_key(*t, m_direction).first == 0 &&
               unit_point(space, dims, *t).size() == dims.size()) {
      startup.push_back(t);
    }
  }
  if (!startup.empty()) warm_start(space, dims, std::move(startup), m_direction, state);
  const std::vector<double> start = state.mean;
  const double start_sigma = state.sigma;
  const std::vector<double> start_cov = state.cov;
  for (int g = 0;; ++g) {
    auto it = generations.find(g);
    if (it == generations.end() || static_cast<int>(it->second.size()) < state.lambda) break;
    std::vector<const Trial*>& members = it->second;
    const bool running = std::any_of(members.begin(), members.end(), [](const Trial* t) {
      return t->state == TrialState::Running;
    });
    if (running) break;  // later generations wait: their steps are measured from this update
    std::stable_sort(members.begin(), members.end(), [this](const Trial* a, const Trial* b) {
      return rank_key(*a, m_direction) < rank_key(*b, m_direction);
    });
    std::vector<std::vector<double>> ranked;
    // The start (a startup trial may finish later and move it; later generations follow from
    // generation 0's memo) and the members.
    std::string key;
    if (g == 0) {
      for (double v : start) key.append(reinterpret_cast<const char*>(&v), sizeof v);
      key.append(reinterpret_cast<const char*>(&start_sigma), sizeof start_sigma);
      for (double v : start_cov) key.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    for (const Trial* t : members) {
      std::vector<double> x = unit_point(space, dims, *t);
      if (x.size() != dims.size()) continue;
      key += std::to_string(t->number) + ":" + std::to_string(static_cast<int>(t->state));
      for (double v : t->values) key.append(reinterpret_cast<const char*>(&v), sizeof v);
      for (double v : x) key.append(reinterpret_cast<const char*>(&v), sizeof v);
      ranked.push_back(std::move(x));
    }
    const auto gi = static_cast<std::size_t>(g);
    if (gi < m_memo.size() && m_memo[gi].first == key && m_memo[gi].second.dims == state.dims) {
      state = m_memo[gi].second;
      continue;
    }
    m_memo.resize(gi);  // later generations were measured from a state that is now different
    state.update(ranked);
    m_memo.emplace_back(std::move(key), state);
  }
  return state;
}

Result<TrialParams> CmaEsSampler::sample(const SearchSpace& space,
                                         const std::vector<Trial>& finished,
                                         const std::vector<Trial>& pending, Rng& rng) {
  const std::vector<int> dims = driven(space);
  const auto seen = static_cast<std::int64_t>(finished.size() + pending.size());
  if (dims.empty() || seen < m_cfg.n_startup_trials) {
    return m_random.sample(space, finished, pending, rng);
  }
  const CmaState state = replay(space, finished, pending);
  const std::vector<double> x = state.sample(rng);
  TrialParams out;
  std::size_t j = 0;
  for (std::size_t i = 0; i < space.params.size(); ++i) {
    const Param& p = space.params[i];
    if (j < dims.size() && dims[j] == static_cast<int>(i)) {
      out[p.name] = p.from_unit(x[j++]);
    } else if (space.active(p, out)) {
      out[p.name] = p.from_unit(rng.uniform());
    }
  }
  return out;
}

}  // namespace shardscope::search
