// sampler = "auto", the default: a Gaussian process (GpSampler, its own n_startup_trials random
// ones first) proposes the first 100 trials, then TPE (bench/search/README.md, "sampler = auto"
// and "COCO bbob"): on bbob at 100 trials the GP throughout had a lower regret than the GP then
// TPE (switching at 50) and the GP then warm-started CMA-ES, and on the search benchmark's
// functions the three tied at 100; past 100 trials (not measured) TPE keeps the cost of a
// suggestion flat, the GP's grows with the cube of the trials. The GP lost to TPE on the
// conditional space (it draws parameters with `when` at random), which gets TPE from the start.
// A space of more than 6 numbers gets the GP for its first 75 trials, then TPE (bbob at d = 10,
// with the warp chosen by likelihood: 0.80x the regret of switching at 50 at 100 trials, the GP
// throughout 0.75x; on the search benchmark's two large functions the switch at 75 costs 1.1x
// (Styblinski-Tang-8) and 1.5x (Rosenbrock-10) against 50, the GP throughout 1.3x and 2.4x); a
// large one with a categorical parameter TPE from the start (not measured). Several
// objectives get NSGA-II. The choice is a function of the space alone (auto_choice); a study stores
// it when it is created and keeps it when resumed (backend/sweep/study.cpp), so a later change of
// the rule never switches a running study. A stored choice may also name cmaes after the GP (the
// benchmark's auto@N:cmaes): CMA-ES then starts warm from the GP's trials (CmaEsSampler's
// start_at_best).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "search/gp.h"
#include "search/sampler.h"
#include "spec/search_names.h"

namespace shardscope::search {

/// What sampler = "auto" does in one space.
struct AutoChoice {
  /// The GP proposes trials 0 .. gp_trials - 1 (by count of trials asked); 0 = none.
  std::int64_t gp_trials = 0;
  /// The sampler after them (or from the start): tpe, cmaes or nsga2.
  spec::SamplerKind then = spec::SamplerKind::tpe;
  /// Why, in words ("a space of 3 parameters").
  std::string reason;
};

/// Trials the GP proposes before the switch to TPE (the benchmark's choice; docs/config.md).
inline constexpr std::int64_t kAutoGpTrials = 100;
/// More parameters than this make a space "large".
inline constexpr int kAutoMaxGpParams = 6;
/// Trials the GP proposes in a large space of numbers before TPE.
inline constexpr std::int64_t kAutoLargeGpTrials = 75;

/// The rule: several objectives -> nsga2 from the start; a parameter with `when`, or more than
/// kAutoMaxGpParams parameters with one categorical -> tpe from the start; more than
/// kAutoMaxGpParams numeric parameters -> gp for the first kAutoLargeGpTrials, then tpe; else gp
/// for the first kAutoGpTrials, then tpe.
AutoChoice auto_choice(const SearchSpace& space);

/// "gp for trials 0-99, then tpe (a space of 3 parameters)", "tpe (a large space of 8
/// parameters, 2 categorical)".
std::string describe(const AutoChoice& choice);

class AutoSampler : public Sampler {
 public:
  /// `choice` from auto_choice() or as a study stored it; `then` must be tpe, cmaes or nsga2.
  AutoSampler(const SearchSpace& space, AutoChoice choice);
  Result<TrialParams> sample(const SearchSpace& space, const std::vector<Trial>& finished,
                             const std::vector<Trial>& pending, Rng& rng) override;
  const AutoChoice& choice() const { return m_choice; }
  /// The sampler that proposes the next trial once `asked` trials (finished and running) exist.
  spec::SamplerKind proposer(std::int64_t asked) const;

 private:
  AutoChoice m_choice;
  std::unique_ptr<GpSampler> m_gp;
  std::unique_ptr<Sampler> m_then;
};

}  // namespace shardscope::search
