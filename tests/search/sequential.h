// Test helper shared by the sampler tests: a study run one trial at a time, every trial complete.
#pragma once

#include <QtGlobal>

#include <cstdint>
#include <functional>
#include <vector>

#include "search/sampler.h"
#include "search/space.h"

namespace searchtest {

using namespace shardscope::search;

/// `n` sequential trials of `space`'s sampler (seeded by `seed`), each told the objective
/// values `f` gives for its parameters; returns them all.
inline std::vector<Trial> sequential_trials(
    const SearchSpace& space, int n, std::uint64_t seed,
    const std::function<std::vector<double>(const TrialParams&)>& f) {
  auto sampler = make_sampler(space);
  if (!sampler) qFatal("%s", sampler.message().c_str());
  Rng rng(seed);
  std::vector<Trial> done;
  for (int i = 0; i < n; ++i) {
    auto p = (*sampler)->sample(space, done, {}, rng);
    if (!p) qFatal("%s", p.message().c_str());
    Trial t;
    t.number = i;
    t.state = TrialState::Complete;
    t.params = *p;
    t.values = f(*p);
    done.push_back(std::move(t));
  }
  return done;
}

}  // namespace searchtest
