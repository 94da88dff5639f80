// tst_pbt: population-based training's decisions (search/pbt.cpp) with no processes: the bottom
// quantile exploits a member of the top quantile and explores its mutable values (a factor, or a
// redraw), the others keep theirs; a member without a value always exploits and is never a
// source; the same seed decides the same; first values lie in the space.
#include <QTest>

#include <cmath>

#include "search/pbt.h"

using namespace shardscope::search;

namespace {

SearchSpace space(double resample) {
  auto s = parse_search_space(
      "[search]\n[search.space.\"train.lr\"]\ntype = \"float\"\nlow = 1e-4\nhigh = 1e-1\n"
      "log = true\n[search.space.\"train.lr_warmup_steps\"]\ntype = \"int\"\nlow = 0\n"
      "high = 100\n[search.space.\"train.batch_size\"]\ntype = \"categorical\"\n"
      "choices = [8, 16]\n[search.pbt]\npopulation = 8\ninterval_steps = 10\nquantile = 0.25\n"
      "factors = [0.5, 2.0]\nmutable = [\"train.lr\", \"train.lr_warmup_steps\"]\n"
      "resample_probability = " +
          std::to_string(resample) + "\n",
      "pbt.toml");
  if (!s) qFatal("%s", s.message().c_str());
  return *s;
}

std::vector<TrialParams> population(const SearchSpace& s, int n) {
  std::vector<TrialParams> out;
  out.reserve(std::size_t(n));
  for (int m = 0; m < n; ++m) out.push_back(pbt_initial(s, s.seed, m));
  return out;
}

}  // namespace

class TestPbt : public QObject {
  Q_OBJECT

 private slots:
  void initialValuesLieInTheSpaceAndDifferByMember() {
    const SearchSpace s = space(0.0);
    const auto members = population(s, 8);
    for (const TrialParams& p : members) QVERIFY(s.check(p).ok());
    QVERIFY(!same_value(members[0].at("train.lr"), members[1].at("train.lr")));
    QCOMPARE(pbt_initial(s, s.seed, 3), members[3]);
  }

  // 8 members, quantile 0.25: the 2 worst take a checkpoint of one of the 2 best, their lr times
  // 0.5 or 2 and their warm-up likewise (rounded, clamped); the categorical is copied; the 6 others
  // keep their own checkpoint and values.
  void bottomQuantileExploitsTheTopAndExplores() {
    const SearchSpace s = space(0.0);
    const auto params = population(s, 8);
    const std::vector<std::optional<double>> values = {5.0, 1.0, 7.0, 2.0, 3.0, 8.0, 4.0, 6.0};
    const auto next = pbt_decide(s, params, values, true, 11, 0);
    QCOMPARE(int(next.size()), 8);
    for (int m = 0; m < 8; ++m) {
      const PbtNext& n = next[std::size_t(m)];
      const bool bottom = m == 5 || m == 2;  // values 8 and 7
      QCOMPARE(n.exploited, bottom);
      if (!bottom) {
        QCOMPARE(n.source, m);
        QCOMPARE(n.params, params[std::size_t(m)]);
        continue;
      }
      QVERIFY2(n.source == 1 || n.source == 3, qPrintable(QString::number(n.source)));
      const TrialParams& src = params[std::size_t(n.source)];
      const double lr = std::get<double>(n.params.at("train.lr"));
      const double from = std::get<double>(src.at("train.lr"));
      QVERIFY(std::abs(lr - from * 0.5) < 1e-12 * from ||
              std::abs(lr - from * 2.0) < 1e-12 * from || lr == 1e-1 || lr == 1e-4);
      const auto w = std::get<std::int64_t>(n.params.at("train.lr_warmup_steps"));
      const auto wFrom = std::get<std::int64_t>(src.at("train.lr_warmup_steps"));
      QVERIFY2(w == std::llround(wFrom * 0.5) || w == std::min<std::int64_t>(100, wFrom * 2) ||
                   (wFrom % 2 == 1 && std::abs(double(w) - wFrom * 0.5) <= 0.5),
               qPrintable(QString("%1 from %2").arg(w).arg(wFrom)));
      QVERIFY(same_value(n.params.at("train.batch_size"), src.at("train.batch_size")));
      QVERIFY(s.check(n.params).ok());
    }
    // Maximising turns the ranking over: the two lowest exploit.
    const auto up = pbt_decide(s, params, values, false, 11, 0);
    QVERIFY(up[1].exploited && up[3].exploited && !up[5].exploited);
    // The same seed and segment decide the same; another segment draws afresh.
    QCOMPARE(pbt_decide(s, params, values, true, 11, 0)[5].params, next[5].params);
  }

  // A member that failed (no value, no checkpoint) always exploits, beside the bottom quantile,
  // and is never a source.
  void aFailedMemberExploitsAndIsNoSource() {
    const SearchSpace s = space(0.0);
    const auto params = population(s, 8);
    const std::vector<std::optional<double>> values = {5.0, std::nullopt, 7.0, 2.0,
                                                       3.0, 8.0,          4.0, std::nullopt};
    const auto next = pbt_decide(s, params, values, true, 1, 2);
    for (int m : {1, 7}) {
      QVERIFY(next[std::size_t(m)].exploited);
      QVERIFY(next[std::size_t(m)].source == 3 || next[std::size_t(m)].source == 4);
    }
    for (const PbtNext& n : next) QVERIFY(n.source != 1 && n.source != 7);
  }

  // resample_probability = 1: every explored value is a fresh draw from its range.
  void resampleDrawsFromTheRange() {
    const SearchSpace s = space(1.0);
    const Param& lr = s.params[std::size_t(s.index_of("train.lr"))];
    Rng rng(4);
    bool moved = false;
    for (int i = 0; i < 50; ++i) {
      const ParamValue v = pbt_explore(lr, ParamValue(1e-3), *s.pbt, rng);
      QVERIFY(lr.contains(v));
      const double x = std::get<double>(v);
      moved = moved || (x != 5e-4 && x != 2e-3);
    }
    QVERIFY(moved);
    // A factor past the range clamps to its bound.
    const SearchSpace f = space(0.0);
    Rng rng2(9);
    for (int i = 0; i < 20; ++i) {
      const double x = std::get<double>(pbt_explore(lr, ParamValue(0.09), *f.pbt, rng2));
      QVERIFY(x == 0.045 || x == 0.1);
    }
  }
};

QTEST_GUILESS_MAIN(TestPbt)
#include "tst_pbt.moc"
