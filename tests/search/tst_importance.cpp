// Tests search/importance.cpp: on synthetic objectives where one parameter dominates it
// ranks first and an irrelevant parameter gets < 5%; categorical, log and conditional parameters;
// maximised objectives; invalid input.
#include <QtTest>

#include <cmath>

#include "search/importance.h"
#include "search/sampler.h"

using namespace shardscope::search;

namespace {

const char* kSpace = R"([search]
sampler = "random"
[search.space.x]
type = "float"
low = -1.0
high = 1.0
[search.space.lr]
type = "float"
low = 1e-5
high = 1e-1
log = true
[search.space.n]
type = "int"
low = 1
high = 8
[search.space.opt]
type = "categorical"
choices = ["adamw", "sgd", "lion"]
[search.space.noise]
type = "float"
low = 0.0
high = 1.0
[search.space.mom]
type = "float"
low = 0.0
high = 1.0
when = {opt = "sgd"}
)";

SearchSpace space_of(const std::string& text) {
  auto s = parse_search_space(text, "t.toml");
  if (!s) qFatal("%s", s.message().c_str());
  return *s;
}

double num(const TrialParams& p, const std::string& k) {
  const ParamValue& v = p.at(k);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return static_cast<double>(std::get<std::int64_t>(v));
}

std::vector<Trial> random_trials(const SearchSpace& space, int n, std::uint64_t seed,
                                 const std::function<double(const TrialParams&)>& f) {
  RandomSampler random;
  Rng rng(seed);
  std::vector<Trial> out;
  for (int i = 0; i < n; ++i) {
    Trial t;
    t.number = i;
    t.state = TrialState::Complete;
    t.params = random.sample(space, out, {}, rng).value();
    t.values = {f(t.params)};
    out.push_back(std::move(t));
  }
  return out;
}

double share(const std::vector<ParamImportance>& imp, const std::string& name) {
  for (const auto& p : imp) {
    if (p.name == name) return p.importance;
  }
  return -1.0;
}

}  // namespace

class TstImportance : public QObject {
  Q_OBJECT

 private slots:
  void dominantParameterRanksFirst_data() {
    QTest::addColumn<QString>("dominant");
    QTest::newRow("float") << "x";
    QTest::newRow("log float") << "lr";
    QTest::newRow("int") << "n";
    QTest::newRow("categorical") << "opt";
  }

  // The dominant parameter decides the objective; the others add a little; `noise` nothing.
  void dominantParameterRanksFirst() {
    QFETCH(QString, dominant);
    const SearchSpace space = space_of(kSpace);
    const std::string d = dominant.toStdString();
    const auto f = [&](const TrialParams& p) {
      const double x = std::pow(num(p, "x") - 0.3, 2);
      const double lr = std::pow(std::log10(num(p, "lr")) + 3.0, 2) / 4.0;
      const double n = std::abs(num(p, "n") - 5.0) / 4.0;
      const double opt = std::get<std::string>(p.at("opt")) == "lion" ? 0.0 : 1.0;
      const double parts[4] = {x, lr, n, opt};
      const char* names[4] = {"x", "lr", "n", "opt"};
      double total = 0.0;
      for (int i = 0; i < 4; ++i) total += (d == names[i] ? 10.0 : 0.5) * parts[i];
      return total;
    };
    for (std::uint64_t seed : {1, 2, 3}) {
      const auto trials = random_trials(space, d == "opt" ? 1000 : 300, seed, f);
      // A 3-way categorical differs from its region by a Pearson divergence of at most 2, a
      // 50-cell float by up to 49: with the top 10% (a third of the "lion" trials) PED-ANOVA
      // credits the floats that pick the best trials inside "lion" (x 43%, opt 25%). Asked about
      // the top third, the categorical alone decides and ranks first; 1,000 trials keep the
      // irrelevant float's sampling noise below its share.
      ImportanceOptions options;
      if (d == "opt") options.target_quantile = 0.3;
      auto imp = param_importance(space, trials, options);
      QVERIFY2(imp.ok(), imp.ok() ? "" : imp.message().c_str());
      QCOMPARE(imp->size(), space.params.size());
      QString shares;
      for (const auto& p : *imp)
        shares += QString(" %1=%2").arg(p.name.c_str()).arg(p.importance, 0, 'f', 3);
      QVERIFY2(QString::fromStdString(imp->front().name) == dominant, qPrintable(shares));
      QVERIFY2(share(*imp, "noise") < 0.05,
               qPrintable(QString("noise share %1").arg(share(*imp, "noise"))));
      double sum = 0.0;
      for (const auto& p : *imp) sum += p.importance;
      QVERIFY(std::abs(sum - 1.0) < 1e-9);
    }
  }

  // A conditional parameter that decides the result when active is measured in its regime.
  void conditionalParameter() {
    const SearchSpace space = space_of(kSpace);
    const auto trials = random_trials(space, 400, 5, [](const TrialParams& p) {
      const double base = 0.05 * std::abs(num(p, "x"));
      return p.count("mom") != 0 ? base + 20.0 * std::pow(num(p, "mom") - 0.9, 2) : base + 1.0;
    });
    auto imp = param_importance(space, trials);
    QVERIFY2(imp.ok(), imp.ok() ? "" : imp.message().c_str());
    QVERIFY2(share(*imp, "mom") > share(*imp, "noise") && share(*imp, "mom") > 0.2,
             qPrintable(QString("mom %1").arg(share(*imp, "mom"))));
  }

  // Maximising the same objective negated gives the same importances.
  void maximizeMirrorsMinimize() {
    SearchSpace space = space_of(kSpace);
    const auto f = [](const TrialParams& p) { return std::pow(num(p, "x") - 0.3, 2); };
    const auto trials = random_trials(space, 200, 9, f);
    auto neg = trials;
    for (Trial& t : neg) t.values[0] = -t.values[0];
    const auto a = param_importance(space, trials).value();
    space.objectives = {{"objective", Direction::Maximize}};
    const auto b = param_importance(space, neg).value();
    QCOMPARE(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      QCOMPARE(a[i].name, b[i].name);
      QCOMPARE(a[i].importance, b[i].importance);
    }
  }

  void rejectsTooFewTrials() {
    const SearchSpace space = space_of(kSpace);
    auto trials = random_trials(space, 1, 1, [](const TrialParams&) { return 1.0; });
    Trial failed = trials.front();
    failed.number = 1;
    failed.state = TrialState::Failed;
    trials.push_back(failed);
    auto imp = param_importance(space, trials);
    QVERIFY(!imp.ok());
    QVERIFY2(QString::fromStdString(imp.message()).contains("at least 2 complete"),
             imp.message().c_str());
    ImportanceOptions bad;
    bad.target_quantile = 0.5;
    bad.region_quantile = 0.4;
    QVERIFY(!param_importance(space, trials, bad).ok());
  }
};

QTEST_GUILESS_MAIN(TstImportance)
#include "tst_importance.moc"
