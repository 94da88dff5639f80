// The names of the search's samplers and pruners: the one list that the [search] parser
// (search_space.cpp), the search library's factories (search/samplers.cpp, search/pruner.cpp) and
// the builder's combo boxes read. A name added here without a factory case fails to compile
// (the factories switch over the kinds, with every enumerator handled).
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace shardscope::spec {

/// The objective read from people's verdicts on a trial's probe answers (good / marked, schema 11
/// of the run log; backend/store/verdicts.h), maximized. The only `probes.` objective.
inline constexpr std::string_view kGoodRateObjective = "probes.good_rate";

enum class SamplerKind { auto_, tpe, random, grid, qmc, cmaes, nsga2, gp };
enum class PrunerKind { none, median, percentile, asha, hyperband };

/// One registered name: what `[search] sampler = "NAME"` (or `pruner`) says, and a line for menus.
template <typename Kind>
struct SearchName {
  Kind kind;
  std::string_view name;
  std::string_view summary;
};

/// Every sampler, the default (auto) first.
inline constexpr std::array<SearchName<SamplerKind>, 8> kSamplers{{
    {SamplerKind::auto_, "auto",
     "the default: gp for the first 100 trials, then tpe (gp for 20 in a space of more than 6 "
     "numbers; tpe from the start for a conditional or a large categorical space; nsga2 for "
     "several objectives)"},
    {SamplerKind::tpe, "tpe", "Tree-structured Parzen Estimator, one objective"},
    {SamplerKind::random, "random", "independent uniform draws"},
    {SamplerKind::grid, "grid", "every combination of the grid, in order"},
    {SamplerKind::qmc, "qmc", "scrambled Sobol points, up to 21 parameters"},
    {SamplerKind::cmaes, "cmaes", "CMA-ES over the float and int parameters, one objective"},
    {SamplerKind::nsga2, "nsga2", "NSGA-II, for several objectives"},
    {SamplerKind::gp, "gp", "Gaussian process with log expected improvement, one objective"},
}};

/// Every pruner, the default (none) first.
inline constexpr std::array<SearchName<PrunerKind>, 5> kPruners{{
    {PrunerKind::none, "none", "every trial runs to its end"},
    {PrunerKind::median, "median", "stop a trial worse than the median of the others at a step"},
    {PrunerKind::percentile, "percentile", "the same against another percentile"},
    {PrunerKind::asha, "asha", "asynchronous successive halving over rungs of steps"},
    {PrunerKind::hyperband, "hyperband", "successive halving in several brackets"},
}};

/// The kind a registered name stands for; nullopt for a name not in `names`.
template <typename Kind, std::size_t N>
constexpr std::optional<Kind> kind_of(const std::array<SearchName<Kind>, N>& names,
                                      std::string_view name) {
  for (const SearchName<Kind>& n : names) {
    if (n.name == name) return n.kind;
  }
  return std::nullopt;
}

}  // namespace shardscope::spec
