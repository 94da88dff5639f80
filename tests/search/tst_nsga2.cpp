// Tests search/nsga2.cpp: non-dominated sorting with constraints, crowding distance,
// the Pareto front and 2-D hypervolume on hand-made points; NSGA-II's hypervolume on ZDT1 and
// ZDT2 clearly above random search's with the same budget; resuming from the trial list.
#include <QtTest>

#include <cmath>

#include "search/nsga2.h"
#include "search/space.h"
#include "sequential.h"

using namespace shardscope::search;

namespace {

constexpr int kZdtDims = 10;
const std::vector<double> kZdtReference = {1.1, 11.0};  // f1 <= 1; f2 <= 1 + 9 = 10 (ZDT1)

std::string xname(int i) {
  std::string key = "x";
  key += std::to_string(i);
  return key;
}

SearchSpace zdt_space(const std::string& sampler) {
  std::string text = "[search]\nsampler = \"" + sampler +
                     "\"\nobjectives = {f1 = \"minimize\", f2 = \"minimize\"}\n";
  for (int i = 0; i < kZdtDims; ++i) {
    text += "[search.space." + xname(i) + "]\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n";
  }
  auto s = parse_search_space(text, "zdt.toml");
  if (!s) qFatal("%s", s.message().c_str());
  return *s;
}

// ZDT1 (convex front f2 = 1 - sqrt(f1)) or ZDT2 (concave front f2 = 1 - f1^2).
std::vector<double> zdt(const TrialParams& p, int which) {
  const double f1 = std::get<double>(p.at("x0"));
  double g = 0.0;
  for (int i = 1; i < kZdtDims; ++i) g += std::get<double>(p.at(xname(i)));
  g = 1.0 + 9.0 * g / (kZdtDims - 1);
  const double r = f1 / g;
  return {f1, g * (1.0 - (which == 1 ? std::sqrt(r) : r * r))};
}

double run_hv(const std::string& sampler_name, int which, std::uint64_t seed, int n) {
  const SearchSpace space = zdt_space(sampler_name);
  const auto done = searchtest::sequential_trials(
      space, n, seed, [which](const TrialParams& p) { return zdt(p, which); });
  std::vector<std::vector<double>> front;
  for (std::size_t i : pareto_front(done, space.objectives)) front.push_back(done[i].values);
  return hypervolume_2d(front, kZdtReference);
}

Trial complete(std::int64_t number, std::vector<double> values) {
  Trial t;
  t.number = number;
  t.state = TrialState::Complete;
  t.values = std::move(values);
  return t;
}

}  // namespace

class TstNsga2 : public QObject {
  Q_OBJECT

 private slots:
  void paretoFrontOfHandMadePoints() {
    const std::vector<Objective> obj = {{"loss", Direction::Minimize},
                                        {"acc", Direction::Maximize}};
    std::vector<Trial> t = {
        complete(0, {1.0, 0.5}),   // front
        complete(1, {2.0, 0.4}),   // dominated by 0
        complete(2, {0.5, 0.3}),   // front (lowest loss)
        complete(3, {3.0, 0.9}),   // front (highest accuracy)
        complete(4, {1.0, 0.5}),   // equal to 0: neither dominates, both on the front
        complete(5, {1.0, 0.45}),  // dominated by 0 (same loss, lower accuracy)
    };
    Trial failed = complete(6, {0.0, 1.0});  // would dominate everything, but failed
    failed.state = TrialState::Failed;
    t.push_back(failed);
    Trial oom = complete(7, {});
    oom.state = TrialState::Oom;
    t.push_back(oom);
    t.push_back(complete(8, {NAN, 2.0}));  // non-finite: not a result
    const auto front = pareto_front(t, obj);
    QCOMPARE(front, (std::vector<std::size_t>{0, 2, 3, 4}));
  }

  void ranksWithConstraints() {
    const std::vector<std::vector<double>> pts = {{1, 5}, {2, 4}, {3, 3}, {2, 5},
                                                  {3, 5}, {0, 0}, {0, 0}};
    const std::vector<bool> feasible = {true, true, true, true, true, false, false};
    const auto r = nondominated_ranks(pts, feasible);
    QCOMPARE(r, (std::vector<int>{0, 0, 0, 1, 2, 3, 3}));
  }

  void crowdingOfHandMadeFront() {
    const auto d = crowding_distance({{0, 4}, {1, 2}, {2, 1}, {4, 0}});
    QVERIFY(std::isinf(d[0]) && std::isinf(d[3]));
    QCOMPARE(d[1], 2.0 / 4.0 + 3.0 / 4.0);
    QCOMPARE(d[2], 3.0 / 4.0 + 2.0 / 4.0);
  }

  void hypervolumeOfHandMadePoints() {
    // Union of [1,3]x[2,3] and [2,3]x[1,3]: 2 + 2 - 1 = 3; the third point is dominated and the
    // fourth lies outside the reference box.
    QCOMPARE(hypervolume_2d({{1, 2}, {2, 1}, {2, 2}, {4, 0}}, {3, 3}), 3.0);
    QCOMPARE(hypervolume_2d({}, {3, 3}), 0.0);
  }

  // NSGA-II against random search at the same budget on ZDT1 and ZDT2 (10 dims, 1,000 trials,
  // 3 seeds each). Random's hypervolume stays far from the front (g ~ 5 at random points);
  // every NSGA-II seed must beat the best random seed by 10%.
  void beatsRandomOnZdt() {
    for (int which : {1, 2}) {
      double best_random = 0.0;
      double worst_nsga = INFINITY;
      for (std::uint64_t seed : {1, 2, 3}) {
        best_random = std::max(best_random, run_hv("random", which, seed, 1000));
        worst_nsga = std::min(worst_nsga, run_hv("nsga2", which, seed, 1000));
      }
      qInfo("ZDT%d hypervolume after 1000 trials: nsga2 worst %.3f, random best %.3f", which,
            worst_nsga, best_random);
      QVERIFY2(worst_nsga > 1.1 * best_random,
               qPrintable(QString("ZDT%1: %2 vs %3").arg(which).arg(worst_nsga).arg(best_random)));
    }
  }

  // Infeasible trials never become parents while feasible ones fill the population, and a
  // fresh sampler rebuilds the same parents from the same trials.
  void parentsFromTrialsOnly() {
    const SearchSpace space = zdt_space("nsga2");
    SamplerConfig cfg = space.sampler;
    cfg.population_size = 10;
    Nsga2Sampler a(cfg, space.objectives);
    Rng rng(4);
    std::vector<Trial> done;
    for (int i = 0; i < 45; ++i) {
      Trial t;
      t.number = i;
      t.params = a.sample(space, done, {}, rng).value();
      if (i % 4 == 3) {
        t.state = TrialState::Infeasible;
      } else {
        t.state = TrialState::Complete;
        t.values = zdt(t.params, 1);
      }
      QVERIFY(space.check(t.params).ok());
      done.push_back(std::move(t));
    }
    const auto pa = a.parents(done, {});
    Nsga2Sampler b(cfg, space.objectives);
    const auto pb = b.parents(done, {});
    QCOMPARE(pa.size(), std::size_t(10));
    QCOMPARE(pb.size(), pa.size());
    for (std::size_t i = 0; i < pa.size(); ++i) {
      QCOMPARE(pa[i].trial->number, pb[i].trial->number);
      QCOMPARE(pa[i].trial->state, TrialState::Complete);
    }
  }

  void acceptsOneObjectiveAndMaximize() {
    SearchSpace space = zdt_space("nsga2");
    space.objectives = {{"score", Direction::Maximize}};
    auto sampler = make_sampler(space);
    QVERIFY(sampler.ok());
    Rng rng(2);
    std::vector<Trial> done;
    double first_gen = -INFINITY;
    double best = -INFINITY;
    for (int i = 0; i < 500; ++i) {
      Trial t = complete(i, {});
      t.params = (*sampler)->sample(space, done, {}, rng).value();
      t.values = {-zdt(t.params, 1)[1]};  // maximise -f2
      if (i < 50) first_gen = std::max(first_gen, t.values[0]);
      best = std::max(best, t.values[0]);
      done.push_back(std::move(t));
    }
    QVERIFY2(best > first_gen + 1.0, qPrintable(QString("%1 vs %2").arg(best).arg(first_gen)));
  }
};

QTEST_GUILESS_MAIN(TstNsga2)
#include "tst_nsga2.moc"
