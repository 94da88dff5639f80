// Tests search/autosampler.cpp (sampler = "auto", the default): the rule (up to 6 parameters
// -> gp then tpe; more than 6 numbers -> gp for 20 then tpe; a conditional space, or a larger one
// with a categorical -> tpe from the start; several objectives -> nsga2), and the switch on real
// samplers: trial k's values are exactly what the GP, and after the switch TPE or CMA-ES (started
// at the best GP trial; the benchmark's auto@N:cmaes), propose from the same history and random
// stream. (A study stores the choice and keeps it when resumed: tests/backend/sweep/
// tst_study.cpp.)
#include <QtTest>

#include <cmath>

#include "search/autosampler.h"
#include "search/cmaes.h"
#include "search/gp.h"
#include "search/space.h"
#include "search/tpe.h"

using namespace shardscope::search;
using shardscope::spec::SamplerKind;

namespace {

SearchSpace parse(const std::string& text) {
  auto s = parse_search_space(text, "t.toml");
  if (!s) qFatal("%s", s.message().c_str());
  return *s;
}

std::string floats(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    std::string key = "x";
    key += std::to_string(i);
    text += "[search.space." + key + "]\ntype = \"float\"\nlow = -1.0\nhigh = 1.0\n";
  }
  return text;
}

const char* kCategorical =
    "[search.space.kind]\ntype = \"categorical\"\nchoices = [\"a\", \"b\", \"c\"]\n";

double num(const TrialParams& p, const std::string& k) {
  const ParamValue& v = p.at(k);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return 0.0;
}

// Off-centre quadratic over the x<i> present, plus a categorical's offset when there is one.
double objective(const TrialParams& p) {
  double f = 0.0;
  for (const auto& [name, value] : p) {
    if (name.rfind('x', 0) == 0) f += (num(p, name) - 0.4) * (num(p, name) - 0.4);
  }
  if (auto it = p.find("kind"); it != p.end())
    f += std::get<std::string>(it->second) == "b" ? 0 : 1;
  return f;
}

std::string text_of(const TrialParams& p) {
  std::string s;
  for (const auto& [k, v] : p) s += k + "=" + format_value(v) + " ";
  return s;
}

Trial complete(std::int64_t number, TrialParams params) {
  Trial t;
  t.number = number;
  t.state = TrialState::Complete;
  t.values = {objective(params)};
  t.params = std::move(params);
  return t;
}

}  // namespace

class TestAutoSampler : public QObject {
  Q_OBJECT

 private slots:
  // No sampler named: auto.
  void autoIsTheDefault() {
    const SearchSpace s = parse("[search]\n" + floats(2));
    QCOMPARE(s.sampler.type, std::string("auto"));
    auto made = make_sampler(s);
    QVERIFY(made.ok());
    QVERIFY(dynamic_cast<AutoSampler*>(made->get()) != nullptr);
  }

  void ruleByTheSpace() {
    const AutoChoice small = auto_choice(parse("[search]\n" + floats(kAutoMaxGpParams)));
    QCOMPARE(small.gp_trials, kAutoGpTrials);
    QVERIFY(small.then == SamplerKind::tpe);
    QCOMPARE(describe(small),
             std::string("gp for trials 0-99, then tpe (a space of 6 parameters)"));
    const AutoChoice categorical = auto_choice(parse("[search]\n" + floats(2) + kCategorical));
    QCOMPARE(categorical.gp_trials, kAutoGpTrials);
    QVERIFY(categorical.then == SamplerKind::tpe);
    QCOMPARE(categorical.reason, std::string("a space of 3 parameters, 1 categorical"));
    // Conditional, or large with a categorical: TPE from the start.
    const AutoChoice conditional = auto_choice(parse(
        "[search]\n" + floats(1) + kCategorical +
        "[search.space.y]\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\nwhen = {kind = \"a\"}\n"));
    QCOMPARE(conditional.gp_trials, std::int64_t{0});
    QVERIFY(conditional.then == SamplerKind::tpe);
    QCOMPARE(describe(conditional),
             std::string("tpe (a conditional space: 1 of 3 parameters with `when`)"));
    const AutoChoice large = auto_choice(parse("[search]\n" + floats(kAutoMaxGpParams + 1)));
    QCOMPARE(large.gp_trials, kAutoLargeGpTrials);
    QVERIFY(large.then == SamplerKind::tpe);
    QCOMPARE(describe(large),
             std::string("gp for trials 0-74, then tpe (a large space of 7 parameters)"));
    const AutoChoice largeCategorical =
        auto_choice(parse("[search]\n" + floats(kAutoMaxGpParams) + kCategorical));
    QCOMPARE(largeCategorical.gp_trials, std::int64_t{0});
    QVERIFY(largeCategorical.then == SamplerKind::tpe);
    QCOMPARE(describe(largeCategorical),
             std::string("tpe (a large space of 7 parameters, 1 categorical)"));
    const AutoChoice two = auto_choice(
        parse("[search]\nobjectives = {a = \"minimize\", b = \"maximize\"}\n" + floats(2)));
    QCOMPARE(two.gp_trials, std::int64_t{0});
    QVERIFY(two.then == SamplerKind::nsga2);
    QCOMPARE(describe(two), std::string("nsga2 (2 objectives)"));
    // make_sampler takes several objectives under auto (tpe, cmaes and gp refuse them).
    QVERIFY(make_sampler(
                parse("[search]\nobjectives = {a = \"minimize\", b = \"minimize\"}\n" + floats(2)))
                .ok());
  }

  // Trials 0-11 are the GP's (its first 10 random), 12 on TPE's: each is exactly what that
  // sampler proposes from the same history and random stream (seeded per trial, as a study
  // does).
  void categoricalSpaceSwitchesFromGpToTpe() {
    const SearchSpace space = parse("[search]\n" + floats(2) + kCategorical);
    AutoSampler sampler(space, AutoChoice{12, SamplerKind::tpe, "test"});
    GpSampler gp(space.sampler, Direction::Minimize);
    TpeSampler tpe(space.sampler, Direction::Minimize);
    std::vector<Trial> done;
    for (int k = 0; k < 16; ++k) {
      QVERIFY(sampler.proposer(k) == (k < 12 ? SamplerKind::gp : SamplerKind::tpe));
      Rng a(1000 + static_cast<std::uint64_t>(k));
      Rng b(1000 + static_cast<std::uint64_t>(k));
      auto got = sampler.sample(space, done, {}, a);
      QVERIFY(got.ok());
      auto want = k < 12 ? gp.sample(space, done, {}, b) : tpe.sample(space, done, {}, b);
      QVERIFY(want.ok());
      QCOMPARE(text_of(*got), text_of(*want));
      done.push_back(complete(k, *got));
    }
  }

  // A stored choice of CMA-ES after the GP (the benchmark's auto@N:cmaes): its mean starts at the
  // best GP trial (not at the box's centre) and whose first proposal is that strategy's draw.
  void continuousSpaceSwitchesToCmaesAtTheBestGpTrial() {
    const SearchSpace space = parse("[search]\n" + floats(3));
    const AutoChoice choice{12, SamplerKind::cmaes, "test"};
    AutoSampler sampler(space, choice);
    std::vector<Trial> done;
    for (int k = 0; k < 12; ++k) {
      QVERIFY(sampler.proposer(k) == SamplerKind::gp);
      Rng rng(7 + static_cast<std::uint64_t>(k));
      auto got = sampler.sample(space, done, {}, rng);
      QVERIFY(got.ok());
      done.push_back(complete(k, *got));
    }
    QVERIFY(sampler.proposer(12) == SamplerKind::cmaes);
    const Trial* best = &done.front();
    for (const Trial& t : done) {
      if (t.values.front() < best->values.front()) best = &t;
    }
    SamplerConfig cfg = space.sampler;
    cfg.n_startup_trials = 12;
    CmaEsSampler cmaes(cfg, Direction::Minimize, true);
    const CmaState state = cmaes.replay(space, done, {});
    QCOMPARE(state.generation, 0);
    for (int i = 0; i < 3; ++i) {
      std::string key = "x";
      key += std::to_string(i);
      QCOMPARE(state.mean[static_cast<std::size_t>(i)], (num(best->params, key) + 1.0) / 2.0);
    }
    Rng a(99);
    Rng b(99);
    auto got = sampler.sample(space, done, {}, a);
    auto want = cmaes.sample(space, done, {}, b);
    QVERIFY(got.ok() && want.ok());
    QCOMPARE(text_of(*got), text_of(*want));
  }

  // The default switch: the GP proposes trial 99, TPE trial 100; in a large space of numbers
  // the GP trial 49, TPE trial 50.
  void defaultSwitchPoint() {
    const SearchSpace small = parse("[search]\n" + floats(2) + kCategorical);
    AutoSampler a(small, auto_choice(small));
    QVERIFY(a.proposer(0) == SamplerKind::gp);
    QVERIFY(a.proposer(kAutoGpTrials - 1) == SamplerKind::gp);
    QVERIFY(a.proposer(kAutoGpTrials) == SamplerKind::tpe);
    const SearchSpace large = parse("[search]\n" + floats(kAutoMaxGpParams + 1));
    AutoSampler b(large, auto_choice(large));
    QVERIFY(b.proposer(0) == SamplerKind::gp);
    QVERIFY(b.proposer(kAutoLargeGpTrials - 1) == SamplerKind::gp);
    QVERIFY(b.proposer(kAutoLargeGpTrials) == SamplerKind::tpe);
  }
};

QTEST_APPLESS_MAIN(TestAutoSampler)
#include "tst_autosampler.moc"
