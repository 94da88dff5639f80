// Tests search/samplers.cpp and tpe.cpp: every sampler stays in the space and honours
// conditions, steps and log scales; grid visits every point once; seeds reproduce; Sobol points
// are stratified; TPE's constant liar spreads concurrent proposals on Branin; TPE draws more
// candidates for groups without a categorical, and its local candidates stay in the space and
// search near the best trial.
#include <QtTest>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <set>

#include "search/parzen.h"
#include "search/pruner.h"
#include "search/sampler.h"
#include "search/space.h"
#include "search/tpe.h"
#include "sequential.h"
#include "spec/search_names.h"

using namespace shardscope::search;

namespace {

const char* kMixed = R"([search]
seed = 5
[search.space."train.lr"]
type = "float"
low = 1e-5
high = 1e-1
log = true
[search.space."train.batch"]
type = "int"
low = 8
high = 64
step = 8
[search.space."train.warmup"]
type = "float"
low = 0.0
high = 0.3
step = 0.05
[search.space."train.optimizer"]
type = "categorical"
choices = ["adamw", "sgd", "lion"]
[search.space."lora.enabled"]
type = "bool"
[search.space."lora.r"]
type = "int"
low = 2
high = 256
log = true
when = {"lora.enabled" = true}
[search.space."lora.dropout"]
type = "float"
low = 0.0
high = 0.5
when = {"lora.enabled" = true}
[search.space."train.momentum"]
type = "float"
low = 0.5
high = 0.99
when = {"train.optimizer" = "sgd"}
)";

SearchSpace space_of(const std::string& text, const std::string& sampler) {
  auto s = parse_search_space(text, "t.toml");
  if (!s) qFatal("%s", s.message().c_str());
  s->sampler.type = sampler;
  return *s;
}

double num(const ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? 1.0 : 0.0;
  return static_cast<double>(std::get<std::string>(v).size());
}

const char* kGrid = R"([search.space.opt]
type = "categorical"
choices = ["adamw", "sgd"]
[search.space.lr]
type = "float"
low = 0.1
high = 0.5
step = 0.1
[search.space.mom]
type = "int"
low = 1
high = 3
when = {opt = "sgd"}
)";

// A smooth objective over the mixed space with its optimum inside: lr near 1e-3, batch 32, ...
double mixed_objective(const TrialParams& p) {
  if (p.count("train.lr") == 0)
    return num(p.at("lr")) + (p.count("mom") != 0 ? num(p.at("mom")) : 0.0);
  double f = std::pow(std::log10(num(p.at("train.lr"))) + 3.0, 2) +
             std::pow((num(p.at("train.batch")) - 32.0) / 16.0, 2) +
             std::abs(num(p.at("train.warmup")) - 0.1) +
             (std::get<std::string>(p.at("train.optimizer")) == "lion" ? 0.0 : 0.5);
  if (p.count("lora.r") != 0) f += 0.2 * std::abs(std::log2(num(p.at("lora.r"))) - 4.0);
  if (p.count("train.momentum") != 0) f += num(p.at("train.momentum"));
  return f;
}

// Runs `n` sequential trials of the mixed objective; returns them all.
std::vector<Trial> run(const SearchSpace& space, int n, std::uint64_t seed) {
  return searchtest::sequential_trials(
      space, n, seed, [](const TrialParams& p) { return std::vector<double>{mixed_objective(p)}; });
}

double branin(double x1, double x2) {
  const double b = 5.1 / (4.0 * M_PI * M_PI);
  const double c = 5.0 / M_PI;
  const double t = 1.0 / (8.0 * M_PI);
  return std::pow(x2 - b * x1 * x1 + c * x1 - 6.0, 2) + 10.0 * (1.0 - t) * std::cos(x1) + 10.0;
}

const char* kBranin = R"([search.space.x1]
type = "float"
low = -5.0
high = 10.0
[search.space.x2]
type = "float"
low = 0.0
high = 15.0
)";

double mean_pairwise(const std::vector<std::pair<double, double>>& pts) {
  double sum = 0.0;
  int n = 0;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    for (std::size_t j = i + 1; j < pts.size(); ++j) {
      sum += std::hypot(pts[i].first - pts[j].first, pts[i].second - pts[j].second);
      ++n;
    }
  }
  return sum / n;
}

// 20 finished random trials on Branin, then 8 TPE proposals while the earlier ones are pending;
// the mean pairwise distance of the 8 in unit coordinates.
// `n` complete trials on Branin (numbers 0..n-1) at random points of `space` drawn from `rng`.
std::vector<Trial> random_branin_trials(const SearchSpace& space, int n, Rng& rng) {
  RandomSampler random;
  std::vector<Trial> finished;
  for (int i = 0; i < n; ++i) {
    Trial t;
    t.number = i;
    t.state = TrialState::Complete;
    t.params = *random.sample(space, finished, {}, rng);
    t.values = {branin(num(t.params["x1"]), num(t.params["x2"]))};
    finished.push_back(std::move(t));
  }
  return finished;
}

double liar_spread(bool liar, std::uint64_t seed) {
  SearchSpace space = space_of(kBranin, "tpe");
  space.sampler.constant_liar = liar;
  Rng rng(seed);
  const std::vector<Trial> finished = random_branin_trials(space, 20, rng);
  TpeSampler tpe(space.sampler, Direction::Minimize);
  std::vector<Trial> pending;
  std::vector<std::pair<double, double>> pts;
  for (int i = 0; i < 8; ++i) {
    Trial t;
    t.number = 20 + i;
    t.params = *tpe.sample(space, finished, pending, rng);
    pts.emplace_back((num(t.params["x1"]) + 5.0) / 15.0, num(t.params["x2"]) / 15.0);
    pending.push_back(std::move(t));
  }
  return mean_pairwise(pts);
}

// A history edited the way a study's can be: appends, pending trials that finish, pruned and
// infeasible trials, duplicated parameters (equal centres), a value or state changed in place,
// a trial removed, the order shuffled. Each step asks a long-lived TpeSampler (its caches see
// every step) and a fresh one (no cache) with the same random state: the proposals must be equal
// to the last bit, so the incremental caches are exactly the from-scratch fit.
double objective(const TrialParams& p) {
  if (p.count("x1") != 0) return branin(num(p.at("x1")), num(p.at("x2")));
  return mixed_objective(p);
}

// One categorical and one continuous parameter in the same (joint) group.
const char* kCatFloat = R"([search.space.opt]
type = "categorical"
choices = ["adamw", "sgd"]
[search.space.lr]
type = "float"
low = 0.1
high = 0.5
)";

// The parameters of 40 sequential TPE trials with these candidate counts.
std::vector<TrialParams> tpe_proposals(const char* text, int ei, int ei_numeric) {
  SearchSpace space = space_of(text, "tpe");
  space.sampler.n_ei_candidates = ei;
  space.sampler.n_ei_candidates_numeric = ei_numeric;
  std::vector<TrialParams> out;
  for (const Trial& t : searchtest::sequential_trials(
           space, 40, 9, [](const TrialParams& p) { return std::vector<double>{objective(p)}; })) {
    out.push_back(t.params);
  }
  return out;
}

// Candidates whose fast log density (ParzenEstimator::log_pdf, which adds only the terms that can
// change the sum) differs in any bit from the sum of every kernel's term, over estimators fitted
// to n observations of `text`'s parameters (clustered, so kernels overlap and some centres
// repeat), for batches of c candidates drawn from the estimator or on a centre.
int log_pdf_mismatches(const char* text, std::size_t n, std::size_t c, std::uint64_t seed) {
  const SearchSpace space = space_of(text, "tpe");
  std::vector<ParzenDim> dims;
  for (const Param& p : space.params) {
    dims.push_back({&p, !p.numeric(), p.internal_low(), p.internal_high(),
                    static_cast<int>(p.numeric() ? 0 : p.choices.size())});
  }
  const std::size_t d = dims.size();
  Rng rng(seed);
  std::vector<double> obs(d * n);
  for (std::size_t i = 0; i < n; ++i) {
    const bool repeat = i > 0 && rng.below(10) == 0;
    const std::size_t from = repeat ? rng.below(i) : i;
    for (std::size_t j = 0; j < d; ++j) {
      const ParzenDim& dim = dims[j];
      double x = dim.low + (dim.high - dim.low) *
                               (rng.below(2) == 0 ? 0.3 + 0.05 * rng.uniform() : rng.uniform());
      if (dim.categorical)
        x = static_cast<double>(rng.below(static_cast<std::uint64_t>(dim.choices)));
      if (!dim.categorical && dim.param->discrete())
        x = dim.param->to_internal(dim.param->from_internal(x));
      obs[j * n + i] = repeat ? obs[j * n + from] : x;
    }
  }
  std::vector<double> weights;
  ramp_weights(n, weights);
  ParzenEstimator est;
  est.fit(dims, obs, n, weights, space.sampler);
  std::vector<double> xs(d * c);
  for (std::size_t a = 0; a < c; ++a) {
    if (a % 3 == 2) {  // exactly on the first observation's centre
      for (std::size_t j = 0; j < d; ++j) xs[j * c + a] = obs.empty() ? 0.0 : obs[j * n];
      continue;
    }
    est.sample(rng, &xs[a], c);
  }
  std::vector<double> fast(c);
  std::vector<double> every(c);
  est.log_pdf(xs.data(), c, fast.data());
  est.log_pdf_every_term(xs.data(), c, every.data());
  int bad = 0;
  for (std::size_t a = 0; a < c; ++a) {
    bad += std::bit_cast<std::uint64_t>(fast[a]) != std::bit_cast<std::uint64_t>(every[a]) ? 1 : 0;
  }
  return bad;
}

const char* kBox6 = R"([search.space.x0]
type = "float"
low = 0.0
high = 1.0
[search.space.x1]
type = "float"
low = 0.0
high = 1.0
[search.space.x2]
type = "float"
low = -3.0
high = 2.0
[search.space.x3]
type = "float"
low = 1e-4
high = 1.0
log = true
[search.space.x4]
type = "float"
low = 0.0
high = 1.0
[search.space.x5]
type = "float"
low = 0.0
high = 1.0
)";

int cache_divergences(const std::string& space_text, std::uint64_t seed, int steps) {
  const SearchSpace space = space_of(space_text, "tpe");
  TpeSampler kept(space.sampler, Direction::Minimize);
  std::vector<Trial> finished;
  std::vector<Trial> pending;
  Rng edits(seed);
  std::int64_t next = 0;
  int diverged = 0;
  for (int step = 0; step < steps; ++step) {
    Rng a(seed * 1000 + static_cast<std::uint64_t>(step));
    Rng b(seed * 1000 + static_cast<std::uint64_t>(step));
    TpeSampler fresh(space.sampler, Direction::Minimize);
    const auto p = kept.sample(space, finished, pending, a);
    const auto q = fresh.sample(space, finished, pending, b);
    if (!p.ok() || !q.ok() || *p != *q) ++diverged;
    Trial t;
    t.number = next++;
    t.params = *p;
    const std::uint64_t op = edits.below(20);
    if (op < 3 && !finished.empty()) {  // an earlier trial's parameters again: equal centres
      t.params = finished[edits.below(finished.size())].params;
    }
    const double value = objective(t.params);
    if (op == 3) {
      pending.push_back(t);  // running; finishes at a later step
      continue;
    }
    if (op == 4 && !pending.empty()) {  // the oldest pending trial finishes
      Trial done = pending.front();
      pending.erase(pending.begin());
      done.state = TrialState::Complete;
      done.values = {objective(done.params)};
      finished.push_back(done);
    }
    t.state = op == 5   ? TrialState::Pruned
              : op == 6 ? TrialState::Infeasible
                        : TrialState::Complete;
    if (op == 5)
      t.intermediate = {{1, value}, {static_cast<std::int64_t>(edits.below(5)) + 2, value}};
    if (op != 5 && op != 6) t.values = {value};
    finished.push_back(t);
    const std::size_t at = edits.below(finished.size());
    if (op == 7) finished[at].values = {finished[at].values.empty() ? 0.0 : -1.0};  // changed
    if (op == 8) finished[at].state = TrialState::Failed;
    if (op == 9 && finished.size() > 2)
      finished.erase(finished.begin() + static_cast<std::ptrdiff_t>(at));
    if (op == 10) std::swap(finished[at], finished.back());
  }
  return diverged;
}

}  // namespace

class TestSamplers : public QObject {
  Q_OBJECT

 private slots:
  // One list of names (spec/search_names.h): each registered sampler and pruner is accepted by
  // the [search] parser, under its own name, and made by the factory.
  void everyRegisteredNameParsesAndIsMade() {
    // An int parameter: every sampler takes it, grid included (a float without a step is no grid).
    const std::string space = "[search.space.x]\ntype = \"int\"\nlow = 0\nhigh = 3\n";
    for (const auto& n : shardscope::spec::kSamplers) {
      const std::string name(n.name);
      auto s = parse_search_space("[search]\nsampler = \"" + name + "\"\n" + space, "t.toml");
      QVERIFY2(s.ok(), s.ok() ? "" : s.message().c_str());
      QCOMPARE(s->sampler.type, name);
      auto made = make_sampler(*s);
      QVERIFY2(made.ok() && *made, name.c_str());
    }
    for (const auto& n : shardscope::spec::kPruners) {
      const std::string name(n.name);
      auto s = parse_search_space("[search]\npruner = \"" + name + "\"\n" + space, "t.toml");
      QVERIFY2(s.ok(), s.ok() ? "" : s.message().c_str());
      QCOMPARE(s->pruner.type, name);
      QVERIFY2(make_pruner(s->pruner) != nullptr, name.c_str());
    }
    auto unknown = parse_search_space("[search]\nsampler = \"bogus\"\n" + space, "t.toml");
    QVERIFY(!unknown.ok());
  }

  void staysInSpaceAndHonoursConditions_data() {
    QTest::addColumn<QString>("sampler");
    for (const char* s : {"random", "qmc", "tpe"}) QTest::newRow(s) << s;
  }
  void staysInSpaceAndHonoursConditions() {
    QFETCH(QString, sampler);
    const SearchSpace space = space_of(kMixed, sampler.toStdString());
    const auto trials = run(space, 120, 11);
    int lora_on = 0;
    int sgd = 0;
    for (const Trial& t : trials) {
      // check(): exactly the active parameters, each legal (type, bounds, step grid, choices).
      auto ok = space.check(t.params);
      QVERIFY2(ok.ok(), ok.message().c_str());
      lora_on += std::get<bool>(t.params.at("lora.enabled")) ? 1 : 0;
      sgd += std::get<std::string>(t.params.at("train.optimizer")) == "sgd" ? 1 : 0;
    }
    // Both branches of each condition were explored.
    QVERIFY(lora_on > 5 && lora_on < 115);
    QVERIFY(sgd > 3);
  }

  // Log scale: the first 20 (random / qmc) trials put about as many lr values in [1e-5, 1e-3]
  // as in [1e-3, 1e-1]; a linear sampler would put 1% there.
  void honoursLogScale_data() {
    QTest::addColumn<QString>("sampler");
    for (const char* s : {"random", "qmc"}) QTest::newRow(s) << s;
  }
  void honoursLogScale() {
    QFETCH(QString, sampler);
    const SearchSpace space = space_of(kMixed, sampler.toStdString());
    const auto trials = run(space, 64, 2);
    int low = 0;
    for (const Trial& t : trials) low += num(t.params.at("train.lr")) < 1e-3 ? 1 : 0;
    QVERIFY2(low > 20 && low < 44, qPrintable(QString::number(low)));
  }

  // TPE concentrates near the optimum: its last 40 of 120 trials beat random's on average.
  void tpeBeatsRandom() {
    double tpe_sum = 0.0;
    double rnd_sum = 0.0;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      for (const auto& [name, sum] : {std::pair{"tpe", &tpe_sum}, std::pair{"random", &rnd_sum}}) {
        const auto trials = run(space_of(kMixed, name), 120, seed);
        for (std::size_t i = 80; i < trials.size(); ++i) *sum += trials[i].values[0];
      }
    }
    qInfo("mean of the last 40 trials: tpe %.3f, random %.3f", tpe_sum / 120, rnd_sum / 120);
    QVERIFY(tpe_sum < 0.6 * rnd_sum);
  }

  void sameSeedSameSequence_data() {
    QTest::addColumn<QString>("sampler");
    for (const char* s : {"random", "qmc", "tpe", "grid"}) QTest::newRow(s) << s;
  }
  void sameSeedSameSequence() {
    QFETCH(QString, sampler);
    const SearchSpace space = space_of(sampler == "grid" ? kGrid : kMixed, sampler.toStdString());
    const int n = sampler == "grid" ? 20 : 40;
    const auto a = run(space, n, 77);
    const auto b = run(space, n, 77);
    const auto c = run(space, n, 78);
    bool differs = false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      QVERIFY(a[i].params == b[i].params);
      differs = differs || a[i].params != c[i].params;
    }
    if (sampler != "qmc") QVERIFY(differs);  // qmc's scramble is fixed by space.seed instead
  }

  void qmcScrambleFollowsSeed() {
    QmcSampler a(1);
    QmcSampler b(2);
    QVERIFY(a.point(3, 4, true) != b.point(3, 4, true));
    QVERIFY(a.point(3, 4, false) == b.point(3, 4, false));
  }

  // The first 2^m Sobol points put exactly one point in each of 2^m equal intervals of every
  // dimension, and (dims 1-2) in each elementary box; a linear scramble with a digital shift
  // keeps both properties. Wrong direction numbers or a broken scramble fail this.
  void sobolIsStratified() {
    QmcSampler q(12345);
    const int m = 8;
    const int n = 1 << m;
    for (bool scramble : {false, true}) {
      std::vector<std::vector<double>> pts;
      pts.reserve(n);
      for (int i = 0; i < n; ++i)
        pts.push_back(q.point(static_cast<std::uint64_t>(i), QmcSampler::kMaxDims, scramble));
      for (int d = 0; d < QmcSampler::kMaxDims; ++d) {
        std::set<int> cells;
        for (const auto& p : pts) {
          QVERIFY(p[static_cast<std::size_t>(d)] >= 0.0 && p[static_cast<std::size_t>(d)] < 1.0);
          cells.insert(static_cast<int>(p[static_cast<std::size_t>(d)] * n));
        }
        QVERIFY2(static_cast<int>(cells.size()) == n, qPrintable(QString("dim %1").arg(d)));
      }
      for (int a = 0; a <= m; ++a) {  // boxes 2^-a x 2^-(m-a)
        std::set<std::pair<int, int>> boxes;
        for (const auto& p : pts)
          boxes.insert(
              {static_cast<int>(p[0] * (1 << a)), static_cast<int>(p[1] * (1 << (m - a)))});
        QCOMPARE(static_cast<int>(boxes.size()), n);
      }
    }
  }

  void gridVisitsEveryPointOnce() {
    const SearchSpace space = space_of(kGrid, "grid");
    const auto pts = GridSampler::points(space);
    QVERIFY(pts.ok());
    QCOMPARE(pts->size(), std::size_t{5 + 5 * 3});  // adamw x 5 lr, sgd x 5 lr x 3 mom
    auto sampler = make_sampler(space).value();
    Rng rng(1);
    std::vector<Trial> finished;
    std::vector<Trial> pending;
    std::set<std::string> seen;
    for (std::size_t i = 0; i < pts->size(); ++i) {
      auto p = sampler->sample(space, finished, pending, rng);
      QVERIFY(p.ok());
      QVERIFY(space.check(*p).ok());
      std::string key;
      for (const auto& [k, v] : *p) key += k + "=" + format_value(v) + ";";
      QVERIFY2(seen.insert(key).second, key.c_str());
      Trial t;
      t.number = static_cast<std::int64_t>(i);
      t.params = *p;
      // Half stay pending: they count as taken too.
      (i % 2 == 0 ? pending : finished).push_back(t);
    }
    auto extra = sampler->sample(space, finished, pending, rng);
    QVERIFY(!extra.ok());
    QVERIFY(QString::fromStdString(extra.message()).contains("n_trials"));
  }

  void gridRejectsContinuous() {
    auto s = make_sampler(space_of(kBranin, "grid"));
    QVERIFY(!s.ok());
    QVERIFY2(QString::fromStdString(s.message()).contains("search.space.\"x1\""),
             s.message().c_str());
  }

  void tpeRejectsSeveralObjectives() {
    SearchSpace space = space_of(kBranin, "tpe");
    space.objectives.push_back({"b", Direction::Maximize});
    auto s = make_sampler(space);
    QVERIFY(!s.ok());
    QVERIFY(QString::fromStdString(s.message()).contains("nsga2"));
  }

  // Infeasible / oom trials are constraint violations: TPE keeps away from the region where
  // they happened even though it has no objective value there.
  void tpeLearnsConstraints() {
    const SearchSpace space = space_of(kBranin, "tpe");
    Rng rng(4);
    TpeSampler tpe(space.sampler, Direction::Minimize);
    std::vector<Trial> done;
    int late_bad = 0;
    for (int i = 0; i < 80; ++i) {
      Trial t;
      t.number = i;
      t.params = *tpe.sample(space, done, {}, rng);
      const double x1 = num(t.params["x1"]);
      // Branin's optima: (-pi, 12.275), (pi, 2.275), (9.42, 2.475); x1 > 0 runs "out of memory".
      if (x1 > 0.0) {
        t.state = i % 2 == 0 ? TrialState::Oom : TrialState::Infeasible;
        late_bad += i >= 40 ? 1 : 0;
      } else {
        t.state = TrialState::Complete;
        t.values = {branin(x1, num(t.params["x2"]))};
      }
      done.push_back(t);
    }
    QVERIFY2(late_bad < 12, qPrintable(QString::number(late_bad)));  // random: ~27 of 40
  }

  // 8 pending TPE proposals on Branin after 20 random trials spread to at least half of
  // random sampling's mean pairwise distance with the constant liar, and collapse without it
  // (to the spread between the few best trials: under 60% of the liar's spread).
  void constantLiarSpreadsProposals() {
    double random_spread = 0.0;
    Rng rng(99);
    const int sets = 200;
    for (int s = 0; s < sets; ++s) {
      std::vector<std::pair<double, double>> pts;
      pts.reserve(8);
      for (int i = 0; i < 8; ++i) pts.emplace_back(rng.uniform(), rng.uniform());
      random_spread += mean_pairwise(pts) / sets;
    }
    double with = 0.0;
    double without = 0.0;
    const int seeds = 10;
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
      with += liar_spread(true, seed) / seeds;
      without += liar_spread(false, seed) / seeds;
    }
    qInfo("mean pairwise distance: random %.3f, tpe+liar %.3f, tpe without liar %.3f",
          random_spread, with, without);
    QVERIFY(with >= 0.5 * random_spread);
    // Without the liar the 8 proposals pile onto the few "below" points: clearly less spread.
    QVERIFY(without < 0.6 * with);
  }
  // A group without a categorical draws n_ei_candidates_numeric candidates, one with a
  // categorical n_ei_candidates: each setting proposes what the plain count it stands for does.
  void tpeNumericGroupsDrawMoreCandidates() {
    QVERIFY(tpe_proposals(kBranin, 24, 48) == tpe_proposals(kBranin, 48, 0));
    QVERIFY(tpe_proposals(kBranin, 24, 48) != tpe_proposals(kBranin, 24, 0));
    QVERIFY(tpe_proposals(kCatFloat, 24, 48) == tpe_proposals(kCatFloat, 24, 0));
    QVERIFY(tpe_proposals(kCatFloat, 24, 48) != tpe_proposals(kCatFloat, 48, 0));
  }
  // Local candidates (the best "below" trial's values, its numeric ones redrawn near it)
  // stay in the space, on its step grids and log scales, honour conditions and follow the seed.
  // Nearly every candidate is a local one here, so one off the grid or out of bounds would show.
  void tpeLocalCandidatesStayInSpace() {
    SearchSpace space = space_of(kMixed, "tpe");
    space.sampler.n_ei_candidates = 1;
    space.sampler.n_local_candidates = 31;
    space.sampler.local_width = 0.2;
    const auto a = run(space, 120, 11);
    const auto b = run(space, 120, 11);
    for (std::size_t i = 0; i < a.size(); ++i) {
      auto ok = space.check(a[i].params);
      QVERIFY2(ok.ok(), ok.message().c_str());
      QVERIFY(a[i].params == b[i].params);
    }
  }
  // Local candidates are drawn near the best trial. The same 40 random trials on Branin,
  // 200 proposals from independent random states: with nearly every candidate a local one (1 from
  // l(x), 31 local) they lie closer to the best of the 40 (mean distance in unit coordinates)
  // than with 32 from l(x) and none local.
  void tpeLocalCandidatesSearchNearTheBest() {
    const SearchSpace space = space_of(kBranin, "tpe");
    Rng rng(3);
    const std::vector<Trial> finished = random_branin_trials(space, 40, rng);
    const Trial& best =
        *std::min_element(finished.begin(), finished.end(),
                          [](const Trial& a, const Trial& b) { return a.values[0] < b.values[0]; });
    const double bx = num(best.params.at("x1"));
    const double by = num(best.params.at("x2"));
    auto mean_distance = [&](int n_local) {
      SamplerConfig cfg = space.sampler;
      cfg.n_ei_candidates = 32 - n_local;
      cfg.n_local_candidates = n_local;
      double sum = 0.0;
      for (std::uint64_t r = 0; r < 200; ++r) {
        TpeSampler tpe(cfg, Direction::Minimize);
        Rng draws(100 + r);
        const TrialParams p = *tpe.sample(space, finished, {}, draws);
        sum += std::hypot((num(p.at("x1")) - bx) / 15.0, (num(p.at("x2")) - by) / 15.0);
      }
      return sum / 200.0;
    };
    const double with = mean_distance(31);
    const double without = mean_distance(0);
    qInfo("mean distance to the best trial: %.4f with local candidates, %.4f without", with,
          without);
    QVERIFY(with < 0.7 * without);
  }
  // The log density that adds only the terms able to change the sum equals the sum of every
  // kernel's term to the last bit, for any candidate count (24, 32, 40, 48 and 64 have unrolled
  // scans, the others the generic one), few or many kernels (the far ones skipped), continuous,
  // discrete and categorical dimensions.
  void logPdfEqualsEveryTermSum_data() {
    QTest::addColumn<QString>("space");
    QTest::newRow("box6") << kBox6;
    QTest::newRow("mixed") << kMixed;
  }
  void logPdfEqualsEveryTermSum() {
    QFETCH(QString, space);
    const std::string text = space.toStdString();
    int candidates = 0;
    for (std::size_t n : {0, 1, 5, 30, 300, 2000}) {
      for (std::size_t c : {1, 7, 8, 24, 32, 33, 40, 48, 64}) {
        for (std::uint64_t seed = 1; seed <= 3; ++seed) {
          QCOMPARE(log_pdf_mismatches(text.c_str(), n, c, seed * 100 + n + c), 0);
          candidates += static_cast<int>(c);
        }
      }
    }
    qInfo("%d candidates compared", candidates);
  }
  // The incremental ranking and "above" estimators give the from-scratch proposals, bit for bit,
  // on a continuous space and on one with categoricals, steps, ints, logs and conditions.
  void tpeCachesEqualFreshFit_data() {
    QTest::addColumn<QString>("space");
    QTest::newRow("branin") << kBranin;
    QTest::newRow("mixed") << kMixed;
  }
  void tpeCachesEqualFreshFit() {
    QFETCH(QString, space);
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      QCOMPARE(cache_divergences(space.toStdString(), seed, 160), 0);
    }
  }
};

QTEST_GUILESS_MAIN(TestSamplers)
#include "tst_samplers.moc"
