// sampler = "auto": the rule and the switch from the GP to the sampler after it.
#include "search/autosampler.h"

#include <algorithm>
#include <utility>

#include "search/cmaes.h"
#include "search/nsga2.h"
#include "search/tpe.h"

namespace shardscope::search {

AutoChoice auto_choice(const SearchSpace& space) {
  AutoChoice c;
  if (space.objectives.size() != 1) {
    c.then = spec::SamplerKind::nsga2;
    c.reason = std::to_string(space.objectives.size()) + " objectives";
    return c;
  }
  const auto n = static_cast<int>(space.params.size());
  const auto categorical = std::count_if(space.params.begin(), space.params.end(),
                                         [](const Param& p) { return !p.numeric(); });
  const auto conditional = std::count_if(space.params.begin(), space.params.end(),
                                         [](const Param& p) { return !p.when.empty(); });
  const std::string of = " of " + std::to_string(n) + " parameters";
  if (conditional > 0) {
    c.reason = "a conditional space: " + std::to_string(conditional) + of + " with `when`";
  } else if (n > kAutoMaxGpParams && categorical > 0) {
    c.reason = "a large space" + of + ", " + std::to_string(categorical) + " categorical";
  } else if (n > kAutoMaxGpParams) {
    c.gp_trials = kAutoLargeGpTrials;
    c.reason = "a large space" + of;
  } else {
    c.gp_trials = kAutoGpTrials;
    c.reason = categorical > 0
                   ? "a space" + of + ", " + std::to_string(categorical) + " categorical"
                   : "a space" + of;
  }
  return c;
}

std::string describe(const AutoChoice& choice) {
  std::string then = "?";
  for (const auto& s : spec::kSamplers) {
    if (s.kind == choice.then) then = std::string(s.name);
  }
  const std::string head =
      choice.gp_trials > 0
          ? "gp for trials 0-" + std::to_string(choice.gp_trials - 1) + ", then " + then
          : then;
  return choice.reason.empty() ? head : head + " (" + choice.reason + ")";
}

AutoSampler::AutoSampler(const SearchSpace& space, AutoChoice choice)
    : m_choice(std::move(choice)) {
  const Direction direction =
      space.objectives.empty() ? Direction::Minimize : space.objectives.front().direction;
  if (m_choice.gp_trials > 0) m_gp = std::make_unique<GpSampler>(space.sampler, direction);
  switch (m_choice.then) {
    case spec::SamplerKind::cmaes: {
      // The GP's trials are CMA-ES's startup trials; its mean starts at their best.
      SamplerConfig cfg = space.sampler;
      cfg.n_startup_trials = static_cast<int>(std::max<std::int64_t>(m_choice.gp_trials, 1));
      m_then = std::make_unique<CmaEsSampler>(cfg, direction, m_choice.gp_trials > 0);
      break;
    }
    case spec::SamplerKind::nsga2:
      m_then = std::make_unique<Nsga2Sampler>(space.sampler, space.objectives);
      break;
    default:
      m_then = std::make_unique<TpeSampler>(space.sampler, direction);
      break;
  }
}

spec::SamplerKind AutoSampler::proposer(std::int64_t asked) const {
  return asked < m_choice.gp_trials ? spec::SamplerKind::gp : m_choice.then;
}

Result<TrialParams> AutoSampler::sample(const SearchSpace& space,
                                        const std::vector<Trial>& finished,
                                        const std::vector<Trial>& pending, Rng& rng) {
  const auto asked = static_cast<std::int64_t>(finished.size() + pending.size());
  if (proposer(asked) == spec::SamplerKind::gp) return m_gp->sample(space, finished, pending, rng);
  return m_then->sample(space, finished, pending, rng);
}

}  // namespace shardscope::search
