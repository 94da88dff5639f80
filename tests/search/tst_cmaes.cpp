// Tests search/cmaes.cpp: CMA-ES converges on sphere and Rosenbrock within a trial
// budget, stays inside the box (ints on their grid, log scales), draws categorical and
// conditional parameters independently, and resumes from the stored trial list alone.
#include <QtTest>

#include <cmath>

#include "search/cmaes.h"
#include "search/space.h"
#include "sequential.h"

using namespace shardscope::search;

namespace {

// "x<i>" (built by append: GCC 12's -Wrestrict misfires on "x" + std::to_string(i)).
std::string xname(int i) {
  std::string key = "x";
  key += std::to_string(i);
  return key;
}

SearchSpace box_space(int dims, double lo, double hi, const std::string& extra = "") {
  std::string text = "[search]\nsampler = \"cmaes\"\n";
  for (int i = 0; i < dims; ++i) {
    text += "[search.space." + xname(i) + "]\ntype = \"float\"\nlow = " + std::to_string(lo) +
            "\nhigh = " + std::to_string(hi) + "\n";
  }
  auto s = parse_search_space(text + extra, "t.toml");
  if (!s) qFatal("%s", s.message().c_str());
  return *s;
}

std::vector<double> xs(const TrialParams& p, int dims) {
  std::vector<double> x;
  for (int i = 0; i < dims; ++i) x.push_back(std::get<double>(p.at(xname(i))));
  return x;
}

double sphere(const std::vector<double>& x) {
  double f = 0.0;
  for (double v : x) f += (v - 1.0) * (v - 1.0);  // optimum off the box centre
  return f;
}

double rosenbrock(const std::vector<double>& x) {
  double f = 0.0;
  for (std::size_t i = 0; i + 1 < x.size(); ++i) {
    f += 100.0 * std::pow(x[i + 1] - x[i] * x[i], 2) + std::pow(1.0 - x[i], 2);
  }
  return f;
}

// `n` sequential trials of `f` with a CMA-ES sampler; returns all trials.
std::vector<Trial> optimise(const SearchSpace& space, int n, std::uint64_t seed,
                            const std::function<double(const TrialParams&)>& f) {
  return searchtest::sequential_trials(
      space, n, seed, [&f](const TrialParams& p) { return std::vector<double>{f(p)}; });
}

double best(const std::vector<Trial>& trials) {
  double b = INFINITY;
  for (const Trial& t : trials) b = std::min(b, t.values.front());
  return b;
}

}  // namespace

class TstCmaEs : public QObject {
  Q_OBJECT

 private slots:
  void defaultsFollowHansen() {
    const CmaState s = CmaState::initial(10, 0, 0.0);
    QCOMPARE(s.lambda, 10);  // 4 + floor(3 ln 10)
    QCOMPARE(s.mu, 5);
    double sum = 0.0;
    for (std::size_t i = 0; i < s.weights.size(); ++i) {
      sum += s.weights[i];
      if (i > 0) QVERIFY(s.weights[i] < s.weights[i - 1]);
    }
    QVERIFY(std::abs(sum - 1.0) < 1e-12);
    QVERIFY(s.mu_eff > 3.1 && s.mu_eff < 3.3);  // 3.17 for lambda 10
    QCOMPARE(s.sigma, 1.0 / 6.0);
    // The active update's weights for the worst lambda - mu: negative, growing in size, summing
    // to -alpha_min (-1.75834 for n = lambda = 10, as the cmaes package computes it).
    QCOMPARE(s.active.size(), std::size_t(5));
    double neg = 0.0;
    for (std::size_t i = 0; i < s.active.size(); ++i) {
      QVERIFY(s.active[i] < 0.0);
      if (i > 0) QVERIFY(s.active[i] < s.active[i - 1]);
      neg += s.active[i];
    }
    QVERIFY2(std::abs(neg + 1.7583412769) < 1e-8, qPrintable(QString::number(neg, 'g', 12)));
  }

  // start_at_best: the mean at the best startup trial, sigma and C from the best 10% of them
  // about their mean with the prior 0.1^2 I. Top two at (0.3, 0.3) and (0.5, 0.3): Sigma =
  // diag(0.02, 0.01), sigma0 = det^(1/4) = 0.118921, C = diag(1.41421, 0.707107).
  void warmStartFromTheTopTrials() {
    const SearchSpace space = box_space(2, 0.0, 1.0);
    std::vector<Trial> trials;
    for (int k = 0; k < 20; ++k) {
      Trial t;
      t.number = k;
      t.state = TrialState::Complete;
      const double x = k == 0 ? 0.3 : k == 1 ? 0.5 : 0.9;
      const double y = k < 2 ? 0.3 : 0.05 * k;
      t.params[xname(0)] = x;
      t.params[xname(1)] = y;
      t.values = {k == 0 ? 0.0 : k == 1 ? 1.0 : 2.0 + k};
      trials.push_back(t);
    }
    SamplerConfig cfg = space.sampler;
    cfg.n_startup_trials = 20;
    const CmaState s = CmaEsSampler(cfg, Direction::Minimize, true).replay(space, trials, {});
    QCOMPARE(s.generation, 0);
    QVERIFY(std::abs(s.mean[0] - 0.3) < 1e-12 && std::abs(s.mean[1] - 0.3) < 1e-12);
    QVERIFY2(std::abs(s.sigma - std::pow(2e-4, 0.25)) < 1e-9, qPrintable(QString::number(s.sigma)));
    QVERIFY(std::abs(s.cov[0] - std::sqrt(2.0)) < 1e-9 &&
            std::abs(s.cov[3] - std::sqrt(0.5)) < 1e-9);
    QVERIFY(std::abs(s.cov[1]) < 1e-12);
    // Without start_at_best: the box's centre, sigma0 1/6, C = I.
    const CmaState plain = CmaEsSampler(cfg, Direction::Minimize).replay(space, trials, {});
    QCOMPARE(plain.mean, std::vector<double>({0.5, 0.5}));
    QCOMPARE(plain.sigma, 1.0 / 6.0);
  }

  void convergesOnSphere() {
    for (int dims : {2, 5}) {
      const SearchSpace space = box_space(dims, -5.0, 5.0);
      for (std::uint64_t seed : {1, 2, 3}) {
        const auto trials = optimise(space, dims == 2 ? 200 : 400, seed,
                                     [dims](const TrialParams& p) { return sphere(xs(p, dims)); });
        qInfo("sphere %d-D seed %d: best %.3g", dims, int(seed), best(trials));
        QVERIFY2(
            best(trials) < 1e-3,
            qPrintable(QString("dims %1 seed %2: best %3").arg(dims).arg(seed).arg(best(trials))));
      }
    }
  }

  void convergesOnRosenbrock() {
    for (int dims : {2, 4}) {
      const SearchSpace space = box_space(dims, -2.0, 2.0);
      // Budgets with a margin: every seed was below 1e-5 at them when written.
      for (std::uint64_t seed : {1, 2, 3}) {
        const auto trials =
            optimise(space, dims == 2 ? 1000 : 1500, seed,
                     [dims](const TrialParams& p) { return rosenbrock(xs(p, dims)); });
        qInfo("rosenbrock %d-D seed %d: best %.3g", dims, int(seed), best(trials));
        QVERIFY2(
            best(trials) < 1e-3,
            qPrintable(QString("dims %1 seed %2: best %3").arg(dims).arg(seed).arg(best(trials))));
      }
    }
  }

  // Ints land on their step grid, log parameters inside their bounds, a categorical and a
  // conditional parameter are drawn independently and the conditional only when active.
  void staysInsideMixedSpace() {
    const SearchSpace space = box_space(2, -1.0, 1.0, R"([search.space.n]
type = "int"
low = 8
high = 64
step = 8
[search.space.lr]
type = "float"
low = 1e-5
high = 1e-1
log = true
[search.space.opt]
type = "categorical"
choices = ["adamw", "sgd"]
[search.space.mom]
type = "float"
low = 0.5
high = 0.99
when = {opt = "sgd"}
)");
    QCOMPARE(CmaEsSampler::driven(space).size(), std::size_t(4));
    int sgd = 0;
    const auto trials = optimise(space, 200, 7, [&](const TrialParams& p) {
      const double lr = std::get<double>(p.at("lr"));
      return sphere(xs(p, 2)) + std::pow(std::log10(lr) + 3.0, 2) +
             std::abs(static_cast<double>(std::get<std::int64_t>(p.at("n"))) - 40.0);
    });
    for (const Trial& t : trials) {
      QVERIFY2(space.check(t.params).ok(), space.check(t.params).message().c_str());
      sgd += std::get<std::string>(t.params.at("opt")) == "sgd" ? 1 : 0;
    }
    QVERIFY(sgd > 60 && sgd < 140);  // independent uniform draws: 100 +- 5 sd
    // The log parameter converges on log scale: the best trials sit near 1e-3.
    double lr_best = 0.0;
    double f_best = INFINITY;
    for (const Trial& t : trials) {
      if (t.values.front() < f_best) {
        f_best = t.values.front();
        lr_best = std::get<double>(t.params.at("lr"));
      }
    }
    QVERIFY2(std::abs(std::log10(lr_best) + 3.0) < 0.2, qPrintable(QString::number(lr_best)));
  }

  // The strategy is a function of the trial list: a fresh sampler (a restarted backend) replays
  // the same state and, from the same random state, proposes the same next point.
  void resumesFromTrials() {
    const SearchSpace space = box_space(3, -5.0, 5.0);
    const auto trials =
        optimise(space, 77, 11, [](const TrialParams& p) { return sphere(xs(p, 3)); });
    CmaEsSampler a(space.sampler, Direction::Minimize);
    CmaEsSampler b(space.sampler, Direction::Minimize);
    const CmaState sa = a.replay(space, trials, {});
    const CmaState sb = b.replay(space, trials, {});
    QCOMPARE(sa.generation, (77 - 1) / sa.lambda);
    QCOMPARE(sa.mean, sb.mean);
    QCOMPARE(sa.cov, sb.cov);
    QVERIFY(sa.sigma < 1.0 / 6.0);  // it has contracted towards the optimum
    Rng ra(99);
    Rng rb(99);
    QCOMPARE(a.sample(space, trials, {}, ra)->at("x0"), b.sample(space, trials, {}, rb)->at("x0"));
    // A changed early result (a stored trial rewritten) is seen: `a` (which has replayed the old
    // list) agrees with a sampler that never saw it.
    auto changed = trials;
    for (int i = 1; i <= sa.lambda; ++i) changed[i].values[0] *= -1.0;  // generation 0 reversed
    CmaEsSampler c(space.sampler, Direction::Minimize);
    const CmaState sa2 = a.replay(space, changed, {});
    QCOMPARE(sa2.mean, c.replay(space, changed, {}).mean);
    // (The mean is the weighted average of the last generation's best points, so the paths,
    // step size and covariance carry the memory of earlier generations.)
    QCOMPARE(sa2.cov, c.replay(space, changed, {}).cov);
    QVERIFY(sa2.cov != sa.cov);
    QVERIFY(sa2.sigma != sa.sigma);
  }

  // A generation with a running member does not update; failed members rank last.
  void pendingAndFailedTrials() {
    const SearchSpace space = box_space(2, -5.0, 5.0);
    auto trials = optimise(space, 1 + 6, 3, [](const TrialParams& p) { return sphere(xs(p, 2)); });
    CmaEsSampler s(space.sampler, Direction::Minimize);
    QCOMPARE(s.replay(space, trials, {}).generation, 1);  // lambda = 6 in 2-D
    std::vector<Trial> pending = {trials.back()};
    pending.back().state = TrialState::Running;
    trials.pop_back();
    QCOMPARE(s.replay(space, trials, pending).generation, 0);
    // The best member failing changes the update (it is no longer recombined).
    std::vector<Trial> all = trials;
    all.push_back(pending.back());
    all.back().state = TrialState::Complete;
    auto best_it = std::min_element(all.begin() + 1, all.end(), [](const Trial& x, const Trial& y) {
      return x.values.front() < y.values.front();
    });
    const CmaState with_best = s.replay(space, all, {});
    best_it->state = TrialState::Failed;
    const CmaState without_best = s.replay(space, all, {});
    QVERIFY(with_best.mean != without_best.mean);
  }

  void rejectsSpacesItCannotDrive() {
    auto s = parse_search_space(
        "[search]\nsampler = \"cmaes\"\n[search.space.o]\ntype = \"categorical\"\nchoices = "
        "[\"a\", \"b\"]\n",
        "t.toml");
    QVERIFY(s.ok());
    auto sampler = make_sampler(*s);
    QVERIFY(!sampler.ok());
    QVERIFY2(QString::fromStdString(sampler.message()).contains("float or int"),
             sampler.message().c_str());
    SearchSpace two = box_space(2, 0.0, 1.0);
    two.objectives.push_back({"b", Direction::Maximize});
    QVERIFY(QString::fromStdString(make_sampler(two).message()).contains("nsga2"));
  }
};

QTEST_GUILESS_MAIN(TstCmaEs)
#include "tst_cmaes.moc"
