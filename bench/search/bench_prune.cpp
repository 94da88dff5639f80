// bench_prune: our pruners on replayed learning curves. A benchmark, not a test: it prints
// figures; bench_prune.py drives it and replays the same curves through Optuna's pruners.
//
// The curves are a generated family, deterministic from the seed (not recorded from shardtrain):
// trial i of seed s draws lr log-uniform in [1e-5, 1e-1] and wd log-uniform in [1e-4, 1e-1]
// from Rng(s * 1000003 + i) and reports an eval loss at steps 1..S (one step = one evaluation
// interval):
//   loss(t) = floor + (3 - floor) / (1 + t / tau)^0.8  + divergence + noise
//   d = log10(lr) + 3 (0 at the best lr), floor = 0.8 + 0.12 d^2 + 0.05 (log10(wd) + 2)^2,
//   tau = 2 * 10^(-d)  (a small lr learns slowly, a large one fast but to a higher floor,
//   so curves cross and early leaders are not the final winners),
//   divergence = 0.04 (t - t0) for t > t0 = 30 / (d - 1.2) when d > 1.2 (lr too large blows up),
//   noise ~ N(0, 0.02) per report.
//
//   bench_prune run --pruner TOML --seeds A B [--trials N] [--steps S]
//       one line per seed: "SEED TOTAL_STEPS BEST_TRUE_FINAL PRUNED_TRIALS"
//   bench_prune curves --seed S [--trials N] [--steps S]
//       one line per trial: "TRIAL TRUE_FINAL v1 ... vS" (observed values, %.17g)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "search/pruner.h"
#include "search/space.h"
#include "search/trial.h"

using namespace shardscope::search;

namespace {

struct Curve {
  std::vector<double> observed;  // (steps) value reported at step t + 1
  double true_final = 0.0;       // the noise-free value at the last step
};

double clean_loss(double lr, double wd, double t) {
  const double d = std::log10(lr) + 3.0;
  const double floor = 0.8 + 0.12 * d * d + 0.05 * std::pow(std::log10(wd) + 2.0, 2);
  const double tau = 2.0 * std::pow(10.0, -d);
  double v = floor + (3.0 - floor) / std::pow(1.0 + t / tau, 0.8);
  if (d > 1.2) {
    const double t0 = 30.0 / (d - 1.2);
    if (t > t0) v += 0.04 * (t - t0);
  }
  return v;
}

Curve make_curve(std::uint64_t seed, int trial, int steps) {
  Rng rng(seed * 1000003ULL + static_cast<std::uint64_t>(trial));
  const double lr = std::pow(10.0, -5.0 + 4.0 * rng.uniform());
  const double wd = std::pow(10.0, -4.0 + 3.0 * rng.uniform());
  Curve c;
  for (int t = 1; t <= steps; ++t) {
    c.observed.push_back(clean_loss(lr, wd, t) + 0.02 * rng.normal());
  }
  c.true_final = clean_loss(lr, wd, steps);
  return c;
}

struct Outcome {
  long long total_steps = 0;
  double best_true = std::numeric_limits<double>::infinity();
  int pruned = 0;
};

// Trials run one after another; each reports step by step and asks the pruner after each report.
// The best trial is the complete one with the best observed final value (as a study picks it);
// its noise-free final value is what the search found.
Outcome replay(const PrunerConfig& cfg, std::uint64_t seed, int n_trials, int steps) {
  auto pruner = make_pruner(cfg);
  std::vector<Trial> trials;
  trials.reserve(static_cast<std::size_t>(n_trials));
  Outcome out;
  double best_obs = std::numeric_limits<double>::infinity();
  for (int i = 0; i < n_trials; ++i) {
    const Curve c = make_curve(seed, i, steps);
    trials.push_back(Trial{});
    Trial& t = trials.back();
    t.number = i;
    for (int s = 1; s <= steps; ++s) {
      t.intermediate[s] = c.observed[static_cast<std::size_t>(s - 1)];
      ++out.total_steps;
      const PruneDecision d = pruner->should_prune(t, trials, Direction::Minimize);
      for (const auto& [rung, value] : d.rungs) t.rungs[rung] = value;
      if (d.prune) {
        t.state = TrialState::Pruned;
        ++out.pruned;
        break;
      }
    }
    if (t.state == TrialState::Pruned) continue;
    t.state = TrialState::Complete;
    t.values = {c.observed.back()};
    if (c.observed.back() < best_obs) {
      best_obs = c.observed.back();
      out.best_true = c.true_final;
    }
  }
  return out;
}

struct Args {
  std::string pruner = "pruner = \"none\"";
  std::uint64_t seed0 = 0;
  std::uint64_t seed1 = 1;
  int trials = 100;
  int steps = 100;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--pruner") {
      a.pruner = argv[i + 1];
    } else if (k == "--trials") {
      a.trials = std::atoi(argv[i + 1]);
    } else if (k == "--steps") {
      a.steps = std::atoi(argv[i + 1]);
    } else if (k == "--seed") {
      a.seed0 = std::strtoull(argv[i + 1], nullptr, 10);
      a.seed1 = a.seed0 + 1;
    } else if (k == "--seeds" && i + 2 < argc) {
      a.seed0 = std::strtoull(argv[i + 1], nullptr, 10);
      a.seed1 = std::strtoull(argv[i + 2], nullptr, 10);
      ++i;
    }
  }
  return a;
}

int cmd_run(const Args& a) {
  auto space = parse_search_space("[search]\n" + a.pruner + "\n[search.space.x]\ntype = \"bool\"\n",
                                  "bench_prune");
  if (!space) {
    std::fprintf(stderr, "bench_prune: %s\n", space.message().c_str());
    return 2;
  }
  for (std::uint64_t seed = a.seed0; seed < a.seed1; ++seed) {
    const Outcome o = replay(space->pruner, seed, a.trials, a.steps);
    std::printf("%llu %lld %.17g %d\n", static_cast<unsigned long long>(seed), o.total_steps,
                o.best_true, o.pruned);
    std::fflush(stdout);
  }
  return 0;
}

int cmd_curves(const Args& a) {
  for (int i = 0; i < a.trials; ++i) {
    const Curve c = make_curve(a.seed0, i, a.steps);
    std::printf("%d %.17g", i, c.true_final);
    for (double v : c.observed) std::printf(" %.17g", v);
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  const Args a = parse_args(argc, argv);
  if (cmd == "run") return cmd_run(a);
  if (cmd == "curves") return cmd_curves(a);
  std::fprintf(stderr, "usage: bench_prune run|curves ... (see bench_prune.py)\n");
  return 2;
}
