// The C++ side of reference_gp.py: reads one GP problem (data, hyperparameters, query points)
// and prints what search/gp.h computes on it, every number %.17g.
//   gp_reference FILE
// FILE:
//   dims D
//   categorical C_1 .. C_D          (0 or 1)
//   hyper R_1 .. R_D SCALE NOISE    (inverse squared length scales, kernel scale, noise variance)
//   train N                         then N lines: X_1 .. X_D Y
//   query M                         then M lines: X_1 .. X_D
// Prints:
//   kernel N  then N lines of N values (the kernel matrix of the training rows, no noise)
//   mll V     (log marginal likelihood, -N/2 log(2 pi) included)
//   prior V   (gp::log_prior)
//   post M    then M lines: MEAN VAR LOG_EI (log EI over the largest Y)
//   grad M    then M lines: D values, d LOG_EI / d x at each query point (posterior_grad and
//             log_ei_grad; 0 in categorical dimensions)
//   fit R_1 .. R_D SCALE NOISE  (gp::fit_hyper from all ones)
//
//   gp_reference --warp FILE
// FILE: values N V_1 .. V_N. Prints the Yeo-Johnson output warping's pieces on those values:
//   lambda L                    (gp::yeo_johnson_lambda)
//   llf K  then K lines: LAMBDA LLF T_1 .. T_N at fixed lambdas (gp::yeo_johnson_llf and
//          gp::yeo_johnson of each value)
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "search/gp.h"

using namespace shardscope::search;

namespace {

bool expect(std::istream& in, const char* word) {
  std::string w;
  in >> w;
  if (w != word) {
    std::fprintf(stderr, "gp_reference: expected \"%s\", got \"%s\"\n", word, w.c_str());
    return false;
  }
  return true;
}

int warp(const char* path) {
  std::ifstream in(path);
  Eigen::Index n = 0;
  if (!in || !expect(in, "values") || !(in >> n) || n < 2) return 2;
  Eigen::VectorXd v(n);
  for (Eigen::Index i = 0; i < n; ++i) in >> v(i);
  if (!in) {
    std::fprintf(stderr, "gp_reference: %s ends early or holds a non-number\n", path);
    return 2;
  }
  std::printf("lambda %.17g\n", gp::yeo_johnson_lambda(v));
  const double lambdas[] = {-1.5, 0.0, 0.7, 1.0, 2.0, 2.5};
  std::printf("llf %zu\n", std::size(lambdas));
  for (const double l : lambdas) {
    std::printf("%.17g %.17g", l, gp::yeo_johnson_llf(v, l));
    for (Eigen::Index i = 0; i < n; ++i) std::printf(" %.17g", gp::yeo_johnson(v(i), l));
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--warp") return warp(argv[2]);
  if (argc != 2) {
    std::fprintf(stderr, "usage: gp_reference FILE | gp_reference --warp FILE\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "gp_reference: cannot read %s\n", argv[1]);
    return 2;
  }
  Eigen::Index d = 0;
  if (!expect(in, "dims") || !(in >> d) || d < 1) return 2;
  std::vector<char> cat(static_cast<std::size_t>(d));
  if (!expect(in, "categorical")) return 2;
  for (auto& c : cat) {
    int v = 0;
    in >> v;
    c = static_cast<char>(v != 0 ? 1 : 0);
  }
  gp::Hyper h;
  h.inv_sq_lengthscales.resize(d);
  if (!expect(in, "hyper")) return 2;
  for (Eigen::Index k = 0; k < d; ++k) in >> h.inv_sq_lengthscales(k);
  in >> h.kernel_scale >> h.noise_var;
  Eigen::Index n = 0;
  if (!expect(in, "train") || !(in >> n) || n < 1) return 2;
  Eigen::MatrixXd x(n, d);
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index k = 0; k < d; ++k) in >> x(i, k);
    in >> y(i);
  }
  Eigen::Index m = 0;
  if (!expect(in, "query") || !(in >> m) || m < 1) return 2;
  Eigen::MatrixXd q(m, d);
  for (Eigen::Index i = 0; i < m; ++i) {
    for (Eigen::Index k = 0; k < d; ++k) in >> q(i, k);
  }
  if (!in) {
    std::fprintf(stderr, "gp_reference: %s ends early or holds a non-number\n", argv[1]);
    return 2;
  }

  const Eigen::MatrixXd kmat = gp::kernel(x, x, cat, h);
  std::printf("kernel %ld\n", static_cast<long>(n));
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) std::printf("%s%.17g", j > 0 ? " " : "", kmat(i, j));
    std::printf("\n");
  }
  gp::Regressor r;
  if (!r.condition(x, y, cat, h)) {
    std::fprintf(stderr, "gp_reference: K + noise I is not positive definite\n");
    return 1;
  }
  std::printf("mll %.17g\n", r.log_marginal_likelihood());
  std::printf("prior %.17g\n", gp::log_prior(h));
  Eigen::VectorXd mean;
  Eigen::VectorXd var;
  r.posterior(q, mean, var);
  const double best = y.maxCoeff();
  std::printf("post %ld\n", static_cast<long>(m));
  for (Eigen::Index i = 0; i < m; ++i) {
    std::printf("%.17g %.17g %.17g\n", mean(i), var(i), gp::log_ei(mean(i), var(i), best));
  }
  std::printf("grad %ld\n", static_cast<long>(m));
  for (Eigen::Index i = 0; i < m; ++i) {
    double mu = 0.0;
    double v = 0.0;
    Eigen::VectorXd dmean;
    Eigen::VectorXd dvar;
    r.posterior_grad(q.row(i).transpose(), mu, v, dmean, dvar);
    double a = 0.0;
    double b = 0.0;
    gp::log_ei_grad(mu, v, best, a, b);
    const Eigen::VectorXd g = a * dmean + b * dvar;
    for (Eigen::Index k = 0; k < d; ++k) std::printf("%s%.17g", k > 0 ? " " : "", g(k));
    std::printf("\n");
  }
  const gp::Hyper fit = gp::fit_hyper(x, y, cat, nullptr);
  std::printf("fit");
  for (Eigen::Index k = 0; k < d; ++k) std::printf(" %.17g", fit.inv_sq_lengthscales(k));
  std::printf(" %.17g %.17g\n", fit.kernel_scale, fit.noise_var);
  return 0;
}
