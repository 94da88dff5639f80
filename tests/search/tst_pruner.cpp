// Tests search/pruner.cpp on hand-built curves; the decision-for-decision comparison
// with Optuna is reference_pruners.py.
#include <QtTest>

#include "search/pruner.h"

using namespace shardscope::search;

namespace {

Trial curve(std::int64_t number, TrialState state, std::vector<double> values) {
  Trial t;
  t.number = number;
  t.state = state;
  for (std::size_t s = 0; s < values.size(); ++s)
    t.intermediate[static_cast<std::int64_t>(s)] = values[s];
  if (state == TrialState::Complete) t.values = {values.back()};
  return t;
}

PrunerConfig config(const std::string& type) {
  PrunerConfig c;
  c.type = type;
  return c;
}

}  // namespace

class TestPruner : public QObject {
  Q_OBJECT

 private slots:
  void medianPrunesWorseThanMedian() {
    std::vector<Trial> trials;
    for (int i = 0; i < 5; ++i)
      trials.push_back(curve(i, TrialState::Complete, {1.0 + i, 1.0 + i}));
    auto p = make_pruner(config("median"));
    // median of {1..5} at step 1 is 3: 3.5 is worse, 2.5 better; maximize flips it.
    QVERIFY(p->should_prune(curve(9, TrialState::Running, {9.0, 3.5}), trials, Direction::Minimize)
                .prune);
    QVERIFY(!p->should_prune(curve(9, TrialState::Running, {9.0, 2.5}), trials, Direction::Minimize)
                 .prune);
    QVERIFY(!p->should_prune(curve(9, TrialState::Running, {9.0, 3.5}), trials, Direction::Maximize)
                 .prune);
    // The trial's best so far counts, not its latest value.
    QVERIFY(!p->should_prune(curve(9, TrialState::Running, {2.0, 3.5}), trials, Direction::Minimize)
                 .prune);
    // Fewer complete trials than n_startup_trials (5): never.
    trials.pop_back();
    QVERIFY(!p->should_prune(curve(9, TrialState::Running, {9.0, 3.5}), trials, Direction::Minimize)
                 .prune);
  }

  void warmupAndInterval() {
    std::vector<Trial> trials;
    for (int i = 0; i < 5; ++i)
      trials.push_back(curve(i, TrialState::Complete, std::vector<double>(12, 1.0)));
    PrunerConfig c = config("median");
    c.n_warmup_steps = 4;
    c.interval_steps = 3;
    auto p = make_pruner(c);
    std::vector<double> bad;
    std::vector<int> pruned_at;
    for (int s = 0; s < 12; ++s) {
      bad.push_back(5.0);
      if (p->should_prune(curve(9, TrialState::Running, bad), trials, Direction::Minimize).prune)
        pruned_at.push_back(s);
    }
    // Checks happen at steps 4, 7, 10 only (warm-up 4, then every 3).
    QCOMPARE(pruned_at, (std::vector<int>{4, 7, 10}));
  }

  void ashaRecordsRungsAndPromotesBestFraction() {
    PrunerConfig c = config("asha");
    c.min_resource = 1;
    c.reduction_factor = 2;
    auto p = make_pruner(c);
    std::vector<Trial> trials;
    // First trial: alone at every rung, so it is the best and goes on; it records rungs 0 and 1
    // at steps 1 and 2 (min_resource * eta^rung).
    Trial a = curve(0, TrialState::Running, {0.5, 0.4});
    auto d = p->should_prune(a, trials, Direction::Minimize);
    QVERIFY(!d.prune);
    QCOMPARE(d.rungs.size(), std::size_t{1});
    QCOMPARE(d.rungs[0].first, 0);
    QCOMPARE(d.rungs[0].second, 0.4);
    a.rungs[0] = 0.4;
    trials.push_back(a);
    // A worse second trial at rung 0: competing {0.4, 0.6}, keep the best 2/2 - 1 = index 0.
    const Trial b = curve(1, TrialState::Running, {0.9, 0.6});
    QVERIFY(p->should_prune(b, trials, Direction::Minimize).prune);
    // A better one is promoted.
    QVERIFY(!p->should_prune(curve(2, TrialState::Running, {0.9, 0.3}), trials, Direction::Minimize)
                 .prune);
    // Before the first rung (step 0 < 1): no decision, no rung.
    const auto early =
        p->should_prune(curve(3, TrialState::Running, {99.0}), trials, Direction::Minimize);
    QVERIFY(!early.prune);
    QVERIFY(early.rungs.empty());
  }

  void hyperbandBracketsFollowBudget() {
    PrunerConfig c = config("hyperband");
    c.min_resource = 1;
    c.max_resource = 81;
    c.reduction_factor = 3;
    HyperbandPruner p(c);
    std::vector<Trial> none;
    (void)p.should_prune(curve(0, TrialState::Running, {1.0}), none, Direction::Minimize);
    std::vector<int> counts(5, 0);
    for (int n = 0; n < 10000; ++n) {
      const int b = p.bracket_of(n);
      QVERIFY(b >= 0 && b < 5);  // log3(81) + 1 = 5 brackets
      counts[static_cast<std::size_t>(b)]++;
      QCOMPARE(p.bracket_of(n), b);  // stable: a restarted study puts trials back where they were
    }
    // Budgets ceil(5 * 3^(4-b) / (5-b)) = 81, 34, 15, 7, 5 of 142.
    QVERIFY(counts[0] > counts[1] && counts[1] > counts[2] && counts[2] > counts[4]);
    QVERIFY(std::abs(counts[0] - 10000 * 81 / 142) < 300);
  }

  void hyperbandWaitsForMaxResource() {
    auto p = make_pruner(config("hyperband"));
    std::vector<Trial> trials;
    QVERIFY(!p->should_prune(curve(1, TrialState::Running, {5.0, 5.0}), trials, Direction::Minimize)
                 .prune);
  }
};

QTEST_GUILESS_MAIN(TestPruner)
#include "tst_pruner.moc"
