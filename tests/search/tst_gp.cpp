// Tests search/gp.cpp: the GP's building blocks (an exact fit through noise-free data, the
// fitted hyperparameters at a stationary point, log EI's gradient), and the sampler: lower regret
// than random on a 2-D quadratic in 20 trials on fixed seeds, the infeasible region avoided, int
// and categorical parameters on their grids and the categorical optimum found, running trials not
// proposed twice (constant liar), conditional parameters drawn, several objectives refused; the
// output warping (Yeo-Johnson), its fitted lambda, and the choice between the warped and the
// plain model by the likelihood of the values.
// (tests/search/reference_gp.py checks the same blocks against Optuna's GP.)
#include <QtTest>

#include <cmath>
#include <limits>

#include "search/gp.h"
#include "search/space.h"
#include "sequential.h"

using namespace shardscope::search;

namespace {

SearchSpace parse(const std::string& text) {
  auto s = parse_search_space(text, "t.toml");
  if (!s) qFatal("%s", s.message().c_str());
  return *s;
}

double num(const TrialParams& p, const std::string& k) {
  const ParamValue& v = p.at(k);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return static_cast<double>(std::get<std::int64_t>(v));
}

// A quadratic with its minimum 0 at (0.3, -0.6) in [-1, 1]^2, not at the box centre.
double quadratic(const TrialParams& p) {
  const double a = num(p, "x") - 0.3;
  const double b = num(p, "y") + 0.6;
  return a * a + 3.0 * b * b;
}

const char* kBox =
    "[search.space.x]\ntype = \"float\"\nlow = -1.0\nhigh = 1.0\n"
    "[search.space.y]\ntype = \"float\"\nlow = -1.0\nhigh = 1.0\n";

double best_of(const std::vector<Trial>& trials) {
  double b = INFINITY;
  for (const Trial& t : trials) {
    if (t.state == TrialState::Complete) b = std::min(b, t.values.front());
  }
  return b;
}

std::vector<Trial> run(const SearchSpace& space, int n, std::uint64_t seed) {
  return searchtest::sequential_trials(
      space, n, seed, [](const TrialParams& p) { return std::vector<double>{quadratic(p)}; });
}

}  // namespace

class TstGp : public QObject {
  Q_OBJECT

 private slots:
  // With tiny noise the posterior mean interpolates the data and its variance vanishes there;
  // far from the data the variance returns to the kernel scale.
  void posteriorInterpolates() {
    Eigen::MatrixXd x(4, 2);
    x << 0.1, 0.2, 0.8, 0.3, 0.5, 0.9, 0.3, 0.6;
    Eigen::VectorXd y(4);
    y << 1.0, -0.5, 0.25, 2.0;
    gp::Hyper h;
    h.inv_sq_lengthscales = Eigen::VectorXd::Constant(2, 4.0);
    h.kernel_scale = 1.5;
    h.noise_var = 1e-10;
    gp::Regressor r;
    QVERIFY(r.condition(x, y, {0, 0}, h));
    Eigen::VectorXd mean;
    Eigen::VectorXd var;
    r.posterior(x, mean, var);
    for (int i = 0; i < 4; ++i) {
      QVERIFY(std::abs(mean(i) - y(i)) < 1e-6);
      QVERIFY(var(i) < 1e-6);
    }
    Eigen::MatrixXd far(1, 2);
    far << 40.0, -40.0;
    r.posterior(far, mean, var);
    QVERIFY(std::abs(var(0) - 1.5) < 1e-9);
    QVERIFY(std::abs(mean(0)) < 1e-9);
  }

  // The fitted hyperparameters maximise log marginal likelihood + log prior: moving any one of
  // them by 5% either way does not improve it.
  void fittedHyperparametersAreAMaximum() {
    Rng rng(3);
    Eigen::MatrixXd x(25, 3);
    Eigen::VectorXd y(25);
    for (int i = 0; i < 25; ++i) {
      for (int k = 0; k < 3; ++k) x(i, k) = rng.uniform();
      x(i, 2) = std::floor(x(i, 2) * 3.0);  // a categorical with 3 choices
      y(i) = std::sin(6.0 * x(i, 0)) + 0.2 * x(i, 1) + (x(i, 2) == 1.0 ? 0.5 : 0.0);
    }
    y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
    const std::vector<char> cat{0, 0, 1};
    const gp::Hyper h = gp::fit_hyper(x, y, cat, nullptr);
    auto objective = [&](const gp::Hyper& hh) {
      gp::Regressor r;
      if (!r.condition(x, y, cat, hh)) return -std::numeric_limits<double>::infinity();
      return r.log_marginal_likelihood() + gp::log_prior(hh);
    };
    const double at = objective(h);
    QVERIFY(std::isfinite(at));
    for (int k = 0; k < 5; ++k) {
      for (double f : {0.95, 1.05}) {
        gp::Hyper moved = h;
        if (k < 3) moved.inv_sq_lengthscales(k) *= f;
        if (k == 3) moved.kernel_scale *= f;
        if (k == 4) moved.noise_var = 1e-6 + (h.noise_var - 1e-6) * f;
        QVERIFY2(objective(moved) <= at + 1e-3, qPrintable(QString::number(k)));
      }
    }
    // The first dimension matters most: its length scale is the shortest.
    QVERIFY(h.inv_sq_lengthscales(0) > h.inv_sq_lengthscales(1));
  }

  void logEiMatchesClosedForm() {
    // E[max(0, f - 0)] for f ~ N(0.3, 0.25): sigma (z Phi(z) + phi(z)), z = 0.6.
    const double z = 0.6;
    const double ei = 0.5 * (z * 0.5 * std::erfc(-z / std::sqrt(2.0)) +
                             std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI));
    QVERIFY(std::abs(gp::log_ei(0.3, 0.25, 0.0) - std::log(ei)) < 1e-12);
    // Far below the best the value stays finite and decreasing (no log(0)).
    const double a = gp::log_ei(-30.0, 1.0, 0.0);
    const double b = gp::log_ei(-40.0, 1.0, 0.0);
    QVERIFY(std::isfinite(a) && std::isfinite(b) && b < a);
    QVERIFY(std::abs(gp::log_ndtr(0.0) - std::log(0.5)) < 1e-15);
    QVERIFY(std::isfinite(gp::log_ndtr(-60.0)));
  }

  // The output warping: Yeo-Johnson is the identity at lambda 1, increasing at every lambda
  // (continuous across 0 and at the log branches), its log Jacobian the log of its derivative,
  // and the fitted lambda undoes a known warp:
  // values whose Yeo-Johnson transform at lambda 0.5 is a normal sample give back about 0.5;
  // a long right tail (losses far worse than the rest) gives lambda < 1, a left one > 1.
  void yeoJohnsonWarp() {
    for (const double v : {-3.0, -0.5, 0.0, 0.25, 4.0}) QCOMPARE(gp::yeo_johnson(v, 1.0), v);
    for (const double l : {-2.0, -0.5, 0.0, 0.7, 2.0}) {
      double last = -INFINITY;
      for (double v = -4.0; v <= 4.0; v += 0.125) {
        const double t = gp::yeo_johnson(v, l);
        QVERIFY2(std::isfinite(t) && t > last,
                 qPrintable(QString("lambda %1 at %2").arg(l).arg(v)));
        last = t;
      }
      QVERIFY(std::abs(gp::yeo_johnson(1e-9, l) - gp::yeo_johnson(-1e-9, l)) < 1e-8);
    }
    QVERIFY(std::abs(gp::yeo_johnson(1e-7, 1e-13) - gp::yeo_johnson(1e-7, 0.0)) < 1e-12);
    // Its log Jacobian (the warped model's likelihood uses it) is the log of the derivative.
    for (const double l : {-1.5, 0.0, 0.6, 1.0, 2.0}) {
      for (const double v : {-2.5, -0.3, 0.4, 3.0}) {
        const double h = 1e-6;
        const double fd = (gp::yeo_johnson(v + h, l) - gp::yeo_johnson(v - h, l)) / (2.0 * h);
        const Eigen::VectorXd one = Eigen::VectorXd::Constant(1, v);
        QVERIFY2(std::abs(gp::yeo_johnson_log_jacobian(one, l) - std::log(fd)) < 1e-7,
                 qPrintable(QString("lambda %1 at %2").arg(l).arg(v)));
      }
    }
    // Normal quantiles at (i + 0.5) / n by bisection on erfc: a sample with no randomness.
    const int n = 200;
    Eigen::VectorXd z(n);
    for (int i = 0; i < n; ++i) {
      const double p = (i + 0.5) / n;
      double lo = -10.0;
      double hi = 10.0;
      for (int k = 0; k < 100; ++k) {
        const double mid = 0.5 * (lo + hi);
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
      }
      z(i) = 0.5 * (lo + hi);
    }
    // The inverse of the transform at lambda 0.5 (non-negative branch: (1 + v)^0.5 - 1) / 0.5;
    // negative branch: -((1 - v)^1.5 - 1) / 1.5).
    Eigen::VectorXd y(n);
    for (int i = 0; i < n; ++i) {
      const double t = z(i) + 1.0;  // shifted so both branches occur
      y(i) =
          t >= 0.0 ? std::pow(0.5 * t + 1.0, 2.0) - 1.0 : 1.0 - std::pow(1.0 - 1.5 * t, 1.0 / 1.5);
    }
    const double fitted = gp::yeo_johnson_lambda(y);
    QVERIFY2(std::abs(fitted - 0.5) < 0.05, qPrintable(QString::number(fitted)));
    QVERIFY(gp::yeo_johnson_llf(y, fitted) >= gp::yeo_johnson_llf(y, 0.5));
    Eigen::VectorXd tail = z.array().exp();
    QVERIFY(gp::yeo_johnson_lambda(tail) < 0.5);
    QVERIFY(gp::yeo_johnson_lambda(-tail) > 1.5);
    QVERIFY(std::abs(gp::yeo_johnson_lambda(z) - 1.0) < 0.05);
  }

  // The warp is kept only where the values are likelier under it (fit_objective): a linear
  // function sampled where few points are good has a skewed histogram (lambda far from 1) but
  // is smoothest unwarped; an exponential of a quadratic bowl is a long tail of losses that the
  // warp (lambda < 1) turns back into the bowl. The kept model's values and fit are returned,
  // the other fit too (the next call's warm start).
  void warpKeptWhereTheValuesAreLikelier() {
    Rng rng(11);
    const int n = 30;
    Eigen::MatrixXd x(n, 2);
    Eigen::VectorXd slope(n);
    Eigen::VectorXd bowl(n);
    for (int i = 0; i < n; ++i) {
      x(i, 0) = std::pow(rng.uniform(), 4.0);  // most points far from the good end, x0 = 1
      x(i, 1) = rng.uniform();
      slope(i) = x(i, 0) + 0.1 * x(i, 1);  // maximised
    }
    const std::vector<char> cat{0, 0};
    const gp::ObjectiveFit linear = gp::fit_objective(x, slope, cat, nullptr, nullptr);
    QVERIFY2(std::abs(linear.lambda - 1.0) > 0.3, qPrintable(QString::number(linear.lambda)));
    QVERIFY(!linear.warped);
    QCOMPARE(linear.hyper.kernel_scale, linear.raw_fit.kernel_scale);
    QCOMPARE(linear.warped_fit.inv_sq_lengthscales.size(), Eigen::Index{2});
    QVERIFY(std::abs(linear.y.mean()) < 1e-12 && std::abs(linear.y.norm() - std::sqrt(n)) < 1e-9);
    for (int i = 0; i < n; ++i) {
      x(i, 0) = rng.uniform();
      x(i, 1) = rng.uniform();
      const double g = std::pow(x(i, 0) - 0.3, 2.0) + std::pow(x(i, 1) - 0.6, 2.0);
      bowl(i) = -std::exp(8.0 * g);  // maximised: losses exp(8 g), a long bad tail
    }
    const gp::ObjectiveFit tail = gp::fit_objective(x, bowl, cat, nullptr, nullptr);
    QVERIFY2(tail.lambda < 0.5, qPrintable(QString::number(tail.lambda)));
    QVERIFY(tail.warped);
    QCOMPARE(tail.hyper.kernel_scale, tail.warped_fit.kernel_scale);
    // The kept values are the warp, standardised, and in the same order as the bowl's.
    QVERIFY(std::abs(tail.y.mean()) < 1e-12 && std::abs(tail.y.norm() - std::sqrt(n)) < 1e-9);
    for (int i = 1; i < n; ++i) QVERIFY((tail.y(i) > tail.y(0)) == (bowl(i) > bowl(0)));
  }

  // log_ei_grad equals central differences of log_ei in mean and in var, on both sides of the
  // asymptotic branch (z = -25) and where EI is large; the local search climbs this gradient.
  void logEiGradientMatchesDifferences() {
    for (const double z : {3.0, 0.0, -5.0, -24.0, -26.0, -40.0}) {
      const double var = 0.49;
      const double mean = z * std::sqrt(var);  // best = 0
      double d_mean = 0.0;
      double d_var = 0.0;
      gp::log_ei_grad(mean, var, 0.0, d_mean, d_var);
      const double h = 1e-6;
      const double fd_mean =
          (gp::log_ei(mean + h, var, 0.0) - gp::log_ei(mean - h, var, 0.0)) / (2.0 * h);
      const double fd_var =
          (gp::log_ei(mean, var + h, 0.0) - gp::log_ei(mean, var - h, 0.0)) / (2.0 * h);
      QVERIFY2(
          std::abs(d_mean - fd_mean) <= 1e-5 * std::max(1.0, std::abs(fd_mean)),
          qPrintable(
              QStringLiteral("z %1: d mean %2, differences %3").arg(z).arg(d_mean).arg(fd_mean)));
      QVERIFY2(std::abs(d_var - fd_var) <= 1e-5 * std::max(1.0, std::abs(fd_var)),
               qPrintable(
                   QStringLiteral("z %1: d var %2, differences %3").arg(z).arg(d_var).arg(fd_var)));
    }
  }

  // 20 trials (10 random, then 10 from the GP) on fixed seeds: the GP's best is lower than
  // random search's on every seed, and much lower on average.
  void beatsRandomOnAQuadratic() {
    const SearchSpace gp_space = parse(std::string("[search]\nsampler = \"gp\"\n") + kBox);
    const SearchSpace random_space = parse(std::string("[search]\nsampler = \"random\"\n") + kBox);
    double gp_sum = 0.0;
    double random_sum = 0.0;
    for (std::uint64_t seed : {1U, 2U, 3U, 4U}) {
      const double g = best_of(run(gp_space, 20, seed));
      const double r = best_of(run(random_space, 20, seed));
      QVERIFY2(g < r, qPrintable(QString("seed %1: gp %2, random %3").arg(seed).arg(g).arg(r)));
      gp_sum += g;
      random_sum += r;
    }
    QVERIFY2(gp_sum < 0.2 * random_sum,
             qPrintable(QString("%1 vs %2").arg(gp_sum).arg(random_sum)));
  }

  // Trials with x > 0 never fit (infeasible: never launched); the optimum of the objective lies
  // there (at x = 0.3). After the 10 random startup trials the GP proposes along the boundary
  // x = 0 (its feasibility model is smooth, so about half of those land just past it) and rarely
  // deep inside the infeasible half (x > 0.1), where random search would put half its trials.
  void avoidsTheInfeasibleRegion() {
    const SearchSpace space = parse(std::string("[search]\nsampler = \"gp\"\n") + kBox);
    auto sampler = make_sampler(space);
    QVERIFY(sampler.ok());
    Rng rng(7);
    std::vector<Trial> done;
    int deep = 0;
    for (int i = 0; i < 25; ++i) {
      auto p = (*sampler)->sample(space, done, {}, rng);
      QVERIFY(p.ok());
      Trial t;
      t.number = i;
      t.params = *p;
      if (num(*p, "x") > 0.0) {
        t.state = TrialState::Infeasible;
        deep += i >= 10 && num(*p, "x") > 0.1 ? 1 : 0;
      } else {
        t.state = TrialState::Complete;
        t.values = {quadratic(*p)};
      }
      done.push_back(std::move(t));
    }
    QVERIFY2(deep <= 3, qPrintable(QString::number(deep)));
    // The best feasible point is near the constrained optimum (0, -0.6), whose value is 0.09.
    QVERIFY2(best_of(done) < 0.1, qPrintable(QString::number(best_of(done))));
  }

  // An int (log scale) and a categorical: proposals lie on their grids and the GP finds the
  // categorical choice and the int that minimise the objective.
  void intAndCategorical() {
    const SearchSpace space = parse(
        "[search]\nsampler = \"gp\"\n"
        "[search.space.n]\ntype = \"int\"\nlow = 1\nhigh = 64\nlog = true\n"
        "[search.space.opt]\ntype = \"categorical\"\nchoices = [\"sgd\", \"adam\", \"lion\"]\n"
        "[search.space.x]\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n");
    auto f = [](const TrialParams& p) {
      const double n = std::log2(num(p, "n"));
      const std::string& o = std::get<std::string>(p.at("opt"));
      const double shift = o == "adam" ? 0.0 : o == "lion" ? 1.0 : 2.0;
      const double x = num(p, "x") - 0.5;
      return std::vector<double>{(n - 3.0) * (n - 3.0) + shift + 4.0 * x * x};
    };
    const std::vector<Trial> trials = searchtest::sequential_trials(space, 30, 11, f);
    for (const Trial& t : trials) {
      QVERIFY(space.check(t.params).ok());
      QVERIFY(std::holds_alternative<std::int64_t>(t.params.at("n")));
    }
    const Trial* best = &trials.front();
    for (const Trial& t : trials) {
      if (t.values.front() < best->values.front()) best = &t;
    }
    QCOMPARE(std::get<std::string>(best->params.at("opt")), std::string("adam"));
    QVERIFY2(std::abs(num(best->params, "n") - 8.0) <= 2.0,
             qPrintable(QString::number(num(best->params, "n"))));
  }

  // Running trials join the model at the worst value (a constant liar), so a batch of proposals
  // spreads out instead of repeating the most promising point.
  void constantLiarSpreadsABatch() {
    const SearchSpace space = parse(std::string("[search]\nsampler = \"gp\"\n") + kBox);
    const std::vector<Trial> done = run(space, 12, 5);
    auto sampler = make_sampler(space);
    QVERIFY(sampler.ok());
    Rng rng(9);
    std::vector<Trial> pending;
    for (int i = 0; i < 4; ++i) {
      auto p = (*sampler)->sample(space, done, pending, rng);
      QVERIFY(p.ok());
      for (const Trial& other : pending) {
        const double dx = num(*p, "x") - num(other.params, "x");
        const double dy = num(*p, "y") - num(other.params, "y");
        QVERIFY2(std::hypot(dx, dy) > 1e-3, "a running trial's point was proposed again");
      }
      Trial t;
      t.number = 12 + i;
      t.state = TrialState::Running;
      t.params = *p;
      pending.push_back(std::move(t));
    }
  }

  void conditionalParametersAreDrawn() {
    const SearchSpace space =
        parse(std::string("[search]\nsampler = \"gp\"\n") + kBox +
              "[search.space.lora]\ntype = \"bool\"\n"
              "[search.space.rank]\ntype = \"int\"\nlow = 4\nhigh = 64\nwhen = {lora = true}\n");
    const std::vector<Trial> trials = run(space, 15, 2);
    int with_rank = 0;
    for (const Trial& t : trials) {
      QVERIFY(space.check(t.params).ok());
      with_rank += t.params.count("rank") > 0 ? 1 : 0;
    }
    QVERIFY(with_rank > 0);
  }

  void severalObjectivesAreRefused() {
    const SearchSpace space = parse(std::string("[search]\nsampler = \"gp\"\n") +
                                    "objectives = {a = \"minimize\", b = \"minimize\"}\n" + kBox);
    auto sampler = make_sampler(space);
    QVERIFY(!sampler.ok());
    QVERIFY(sampler.message().find("gp optimises one objective") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TstGp)
#include "tst_gp.moc"
