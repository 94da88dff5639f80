// The search library from a plain C++ program: no Qt, no test framework, only shardscope_search.
// It builds a two-parameter space in code, runs TPE on a function with a known minimum and checks
// that the model-based trials find better points than the random start-up trials did; the exit
// status is the verdict (CTest: tst_search_plain).
#include <cmath>
#include <cstdio>
#include <limits>
#include <variant>
#include <vector>

#include "search/sampler.h"
#include "search/space.h"
#include "search/trial.h"

namespace {

using namespace shardscope::search;

// Minimum 0 at x = 0.3, lr = 1e-3; the log-scale parameter makes TPE's log transform matter.
double objective(const TrialParams& p) {
  const double x = std::get<double>(p.at("x"));
  const double lr = std::get<double>(p.at("train.lr"));
  const double d = std::log10(lr) + 3.0;
  return (x - 0.3) * (x - 0.3) + d * d;
}

SearchSpace make_space() {
  SearchSpace space;
  space.name = "plain";
  space.objectives = {{"objective", Direction::Minimize}};
  space.sampler.type = "tpe";
  space.sampler.n_startup_trials = 10;
  Param x;
  x.name = "x";
  x.low = -2.0;
  x.high = 2.0;
  Param lr;
  lr.name = "train.lr";
  lr.low = 1e-6;
  lr.high = 1e-1;
  lr.log = true;
  space.params = {x, lr};
  return space;
}

}  // namespace

int main() {
  const SearchSpace space = make_space();
  auto sampler = make_sampler(space);
  if (!sampler) {
    std::fprintf(stderr, "plain_tpe: %s\n", sampler.message().c_str());
    return 1;
  }
  constexpr int kTrials = 60;
  const int startup = space.sampler.n_startup_trials;
  Rng rng(7);
  std::vector<Trial> done;
  double best_startup = std::numeric_limits<double>::infinity();
  double best_model = std::numeric_limits<double>::infinity();
  for (int i = 0; i < kTrials; ++i) {
    auto params = (*sampler)->sample(space, done, {}, rng);
    if (!params) {
      std::fprintf(stderr, "plain_tpe: trial %d: %s\n", i, params.message().c_str());
      return 1;
    }
    if (auto inside = space.check(*params); !inside) {
      std::fprintf(stderr, "plain_tpe: trial %d: %s\n", i, inside.message().c_str());
      return 1;
    }
    Trial t;
    t.number = i;
    t.state = TrialState::Complete;
    t.params = *params;
    t.values = {objective(*params)};
    double& best = i < startup ? best_startup : best_model;
    best = std::min(best, t.values[0]);
    done.push_back(std::move(t));
  }
  std::printf("plain_tpe: best of %d random start-up trials %.4g, of %d TPE trials %.4g\n", startup,
              best_startup, kTrials - startup, best_model);
  // TPE must improve on its random start: better than the start-up's best, and close to the
  // minimum (below 0.05 covers 0.8% of the space: one random trial in about 130 lands there).
  if (!(best_model < best_startup) || !(best_model < 0.05)) {
    std::fprintf(stderr, "plain_tpe: TPE did not improve on random search\n");
    return 1;
  }
  return 0;
}
