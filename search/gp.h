// Gaussian-process sampler (`sampler = "gp"`), after Optuna's GPSampler (optuna/_gp): a GP with
// a Matern-5/2 ARD kernel on the unit cube (each parameter's internal range, log applied, ints
// and stepped floats widened by half a step, mapped to [0, 1]; a categorical is its choice index
// with the Hamming distance, Optuna's categorical distance: 0 for the same choice, 1 otherwise,
// scaled by its own length scale). Objective values are standardised, then warped by a
// Yeo-Johnson power transform whose lambda (in [-2, 2]) maximises its likelihood on them (in the
// minimised sense: a long tail of bad values is compressed, the good ones spread), standardised
// again and maximised (Optuna's GP stops at standardising; the warp is HEBO's idea); the kernel
// hyperparameters (inverse squared length scales, kernel scale, noise variance above 1e-6)
// maximise the log marginal likelihood plus Optuna's default log prior, by L-BFGS on their
// logs from two starts (the previous call's fit and all ones; the better wins). Linear algebra
// is Eigen's (LLT).
//
// The next point maximises log expected improvement over the best feasible value, as Optuna's
// optimize_acqf_mixed: 2048 random points (discrete coordinates on their grid), then local
// searches from the best of them, from the best trial and from 8 more of them drawn with
// probability exp(acquisition - its maximum). A local search alternates gradient ascent on the
// continuous coordinates (the exact gradient, in x / l with l the objective's length scales;
// projected Barzilai-Borwein steps, Armijo backtracking, until the projected gradient is below
// 1e-2) with a search over each int/stepped float's grid (every value when it has at most 16,
// else +-1, 2, 4, ... steps) and over every choice of a categorical; the best end point wins.
// Constraints: infeasible and oom trials (the memory estimate or the run said the config does not
// fit) are the constraint value +1, complete trials -1; a second GP on that value gives the
// probability of feasibility P(c <= 0), and the acquisition is log EI + log P. Running trials
// (pending) join the objective GP at the worst observed value (a constant liar), with the
// hyperparameters fitted on the finished trials only. Pruned and failed trials are not
// modelled. Conditional parameters (with `when`) are drawn independently (RandomSampler).
#pragma once

#include <Eigen/Dense>
#include <utility>
#include <vector>

#include "search/sampler.h"

namespace shardscope::search {
namespace gp {

/// The floor of the noise variance every fit keeps (Optuna's DEFAULT_MINIMUM_NOISE_VAR).
inline constexpr double kMinNoiseVar = 1e-6;

/// Kernel hyperparameters, Optuna's parametrisation: k(a, b) = kernel_scale *
/// matern52(sum_k d_k(a, b)^2 * inv_sq_lengthscales[k]), plus noise_var on the diagonal.
struct Hyper {
  Eigen::VectorXd inv_sq_lengthscales;  // (dims) 1 / l_k^2
  double kernel_scale = 1.0;
  double noise_var = 1.0;
};

/// Matern-5/2 as a function of the scaled squared distance r2:
/// (1 + sqrt(5 r2) + 5/3 r2) exp(-sqrt(5 r2)).
double matern52(double r2);

/// The kernel matrix (rows of a) x (rows of b), noise not included. `categorical[k]` != 0: the
/// distance in dimension k is 0 for equal values, 1 otherwise.
Eigen::MatrixXd kernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                       const std::vector<char>& categorical, const Hyper& h);

/// Optuna's default log prior (prior.py, constants dropped): -sum(0.1 / r + 0.1 r) over the
/// inverse squared length scales r, Gamma(2, 1) on kernel_scale, Gamma(1.1, 30) on noise_var.
double log_prior(const Hyper& h);

/// A GP conditioned on data with fixed hyperparameters.
class Regressor {
 public:
  /// Factorises K + noise_var I; false when it is not positive definite.
  bool condition(Eigen::MatrixXd x, Eigen::VectorXd y, std::vector<char> categorical, Hyper h);
  /// log p(y | x, hyperparameters), the -n/2 log(2 pi) included.
  double log_marginal_likelihood() const;
  /// Posterior mean and variance (clamped at 0) of f at each row of q.
  void posterior(const Eigen::MatrixXd& q, Eigen::VectorXd& mean, Eigen::VectorXd& var) const;
  /// Posterior mean and variance (not clamped) at one point x and their gradients with respect
  /// to x's non-categorical coordinates (0 in the categorical ones).
  void posterior_grad(const Eigen::VectorXd& x, double& mean, double& var, Eigen::VectorXd& dmean,
                      Eigen::VectorXd& dvar) const;
  const Hyper& hyper() const { return m_h; }
  Eigen::Index size() const { return m_x.rows(); }

 private:
  Eigen::MatrixXd m_x;
  Eigen::VectorXd m_y;
  std::vector<char> m_categorical;
  Hyper m_h;
  Eigen::LLT<Eigen::MatrixXd> m_llt;
  Eigen::VectorXd m_alpha;  // (K + noise I)^-1 y
};

/// Hyperparameters maximising log marginal likelihood + log_prior for (x, y), by L-BFGS on
/// (log r, log kernel_scale, log(noise_var - min_noise)) from `start` (when given and of the
/// right size) and from all ones; the better end point wins. `log_posterior`, when given,
/// receives that maximum (log marginal likelihood + log_prior, constants dropped): comparable
/// between fits of the same points.
Hyper fit_hyper(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                const std::vector<char>& categorical, const Hyper* start,
                double min_noise = kMinNoiseVar, double* log_posterior = nullptr);

/// The Yeo-Johnson power transform of v (Yeo and Johnson 2000), monotone increasing for every
/// lambda: ((v + 1)^lambda - 1) / lambda for v >= 0, -((1 - v)^(2 - lambda) - 1) / (2 - lambda)
/// below (logs at lambda 0 and 2).
double yeo_johnson(double v, double lambda);
/// log |d yeo_johnson(v, lambda) / dv| summed over y: (lambda - 1) sum sign(y) log(1 + |y|).
double yeo_johnson_log_jacobian(const Eigen::VectorXd& y, double lambda);
/// Yeo-Johnson's profile log-likelihood of lambda for the values y (scipy.stats.yeojohnson_llf):
/// -n/2 log(variance of the transformed values) + yeo_johnson_log_jacobian(y, lambda).
double yeo_johnson_llf(const Eigen::VectorXd& y, double lambda);
/// The lambda in [-2, 2] maximising yeo_johnson_llf: a golden-section search to 1e-5, then its
/// end point against the interval's two ends (a long tail wants lambda past them).
double yeo_johnson_lambda(const Eigen::VectorXd& y);

/// (v - mean) / max(1e-10, sd), Optuna's _standardize_values; mean and sd (population) returned.
Eigen::VectorXd standardise(const Eigen::VectorXd& v, double& mean, double& sd);

/// The objective's model, for values to maximise: a GP fitted on the standardised values, and
/// one on their Yeo-Johnson warp (lambda by yeo_johnson_lambda on the losses, the negated
/// values, whose long tail is the bad side; re-standardised). The one under which the values
/// themselves are likelier is kept: the warped fit's log posterior plus the log Jacobian of
/// the warp (a warped GP, Snelson et al. 2004). A warp that suits the values' histogram but not
/// a smooth function of the parameters (bbob's linear slope) loses to the plain fit.
struct ObjectiveFit {
  Eigen::VectorXd y;    // what the GP models: the standardised values or their warp
  Hyper hyper;          // its fit
  double lambda = 1.0;  // the warp's lambda, fitted whether kept or not
  bool warped = false;  // y is the warp
  Hyper raw_fit;        // both fits, warm starts for the next call (warped_fit empty when no
  Hyper warped_fit;     // warp was tried: fewer than 3 values, or all equal)
};
/// Starts: the last call's fits, when given and of the right size (the warped fit falls back
/// to this call's plain fit when there was a plain start).
ObjectiveFit fit_objective(const Eigen::MatrixXd& x, const Eigen::VectorXd& values,
                           const std::vector<char>& categorical, const Hyper* raw_start,
                           const Hyper* warped_start);

/// log E[max(0, f - best)] for f ~ N(mean, var) (Ament et al. 2023's stable form, as Optuna).
double log_ei(double mean, double var, double best);
/// log Phi(z), stable for very negative z.
double log_ndtr(double z);
/// d log_ei / d mean and d log_ei / d var at (mean, var, best); var > 0.
void log_ei_grad(double mean, double var, double best, double& d_mean, double& d_var);

}  // namespace gp

class GpSampler : public Sampler {
 public:
  GpSampler(SamplerConfig cfg, Direction direction)
      : m_cfg(std::move(cfg)), m_direction(direction) {}
  Result<TrialParams> sample(const SearchSpace& space, const std::vector<Trial>& finished,
                             const std::vector<Trial>& pending, Rng& rng) override;

 private:
  SamplerConfig m_cfg;
  Direction m_direction;
  RandomSampler m_random;
  // The last fits, warm starts for the next call (cleared when the dimensions change): the
  // objective's GP on the standardised values and on the warped ones.
  gp::Hyper m_objective_fit;
  gp::Hyper m_warped_fit;
  gp::Hyper m_constraint_fit;
};

}  // namespace shardscope::search
