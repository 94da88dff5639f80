// The [search] section of an experiment as a typed search space: parameters (float, int,
// categorical, bool; log, step, conditions), objectives, sampler and pruner settings, and the
// trial program. spec owns this schema like every other section's (its parser and its
// messages live here); the search library (search/space.h) and the backend consume the types. Every
// sampler works in one internal space: numeric parameters are mapped to [internal_low,
// internal_high] (log applied, int/step widened by half a step so rounding gives each grid value an
// equal share), categoricals to their index; `from_unit` maps [0,1] there.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "spec/result.h"

namespace shardscope::spec {

/// A sampled value: float, int, categorical string, or bool (categoricals may hold any of these).
using ParamValue = std::variant<double, std::int64_t, std::string, bool>;
/// Dotted parameter name -> value, for the active parameters of one trial only.
using TrialParams = std::map<std::string, ParamValue>;

enum class ParamType { Float, Int, Categorical, Bool };
enum class Direction { Minimize, Maximize };
/// search.on_oom: what a sweep does with a shardtrain trial that ran out of memory. replan: it runs
/// again with the same values in the next plan of the ladder that fits (spec/replan.h); record:
/// it ends `oom`.
enum class OnOom { replan, record };

/// `when = {"lora.enabled" = true}`: the parameter is active when `param` has `value`.
struct Condition {
  std::string param;
  ParamValue value;
};

/// One searched field, `[search.space."train.lr"]`.
struct Param {
  std::string name;  // dotted experiment field, e.g. "train.lr"
  ParamType type = ParamType::Float;
  double low = 0.0;                 // float/int lower bound (inclusive)
  double high = 1.0;                // float/int upper bound (inclusive)
  bool log = false;                 // sample log(value) uniformly; needs low > 0
  double step = 0.0;                // grid spacing; 0 = continuous float; int defaults to 1
  std::vector<ParamValue> choices;  // categorical (bool: {false, true})
  std::vector<Condition> when;      // all must hold for the parameter to be active

  bool numeric() const { return type == ParamType::Float || type == ParamType::Int; }
  /// Int, stepped float, categorical, bool: a finite set of values.
  bool discrete() const { return !numeric() || step > 0.0; }
  /// Number of distinct values of a discrete parameter (0 for a continuous float).
  std::int64_t cardinality() const;
  /// Internal bounds: log applied, discrete numerics widened by step/2; categoricals [0, n).
  double internal_low() const;
  double internal_high() const;
  /// Value -> internal coordinate (categorical: its index; -1 when not a choice).
  double to_internal(const ParamValue& v) const;
  /// Internal coordinate -> the nearest legal value (rounded to the step grid, clamped).
  ParamValue from_internal(double x) const;
  /// u in [0,1) -> value, uniform in the internal space.
  ParamValue from_unit(double u) const;
  /// Whether `v` is a legal value of this parameter (type, bounds, grid, choices).
  bool contains(const ParamValue& v) const;
  /// Every value of a discrete parameter, ascending (choices in declared order).
  std::vector<ParamValue> values() const;
};

struct Objective {
  std::string metric;  // "eval.loss", "objective", ...
  Direction direction = Direction::Minimize;
};

/// `sampler = "tpe"` or `[search.sampler] type = "tpe" ...`.
struct SamplerConfig {
  std::string type = "auto";        // a name of kSamplers (spec/search_names.h)
  int n_startup_trials = 10;        // tpe, gp (default 10), cmaes (default 1): random first
  int n_ei_candidates = 24;         // tpe: candidates drawn from l(x) per suggestion
  int n_ei_candidates_numeric = 0;  // tpe: the same for a group without a categorical; 0 = above
  int n_local_candidates = 8;       // tpe: more, drawn around the best "below" trial; 0 = none
  double local_width = 0.5;         // tpe: their widths, times that trial's kernel's in l(x)
  bool rank_weights = true;         // tpe: "below" weighted by rank (best 1, last 1/n); else 1
  bool multivariate = true;         // tpe: joint Parzen estimator per group of co-active params
  bool group = true;                // tpe: split conditional params into groups (multivariate)
  bool constant_liar = true;        // tpe, gp: pending trials count as the worst observed
  double prior_weight = 1.0;        // tpe: weight of the uniform prior kernel
  bool magic_clip = true;           // tpe: lower-bound kernel widths by range / min(100, 1 + n)
  int population_size = 0;          // cmaes: 0 = 4 + floor(3 ln dims); nsga2: 0 = 50
  double sigma0 = 0.0;              // cmaes: initial step size in the unit box; 0 = 1/6
  double crossover_prob = 0.9;      // nsga2: chance a child comes from crossover (else a copy)
  double swapping_prob = 0.5;       // nsga2: uniform crossover's chance to take the second parent
  double mutation_prob = 0.0;       // nsga2: chance a value is redrawn; 0 = 1 / parameters
};

/// `pruner = "median"` or `[search.pruner] type = "asha" ...`.
struct PrunerConfig {
  std::string type = "none";  // a name of kPruners (spec/search_names.h)
  double percentile = 50.0;   // percentile: keep trials better than this percentile
  int n_startup_trials = 5;   // median/percentile: complete trials before pruning starts
  int n_warmup_steps = 0;     // median/percentile: never prune before this step
  int interval_steps = 1;     // median/percentile: check once per this many steps
  int n_min_trials = 1;       // median/percentile: reports at a step needed to compare
  std::optional<std::int64_t> min_resource;  // asha/hyperband: first rung step; auto if unset
  std::optional<std::int64_t> max_resource;  // hyperband: longest run; auto if unset
  int reduction_factor = 4;                  // asha/hyperband: keep 1/eta per rung (>= 2)
  int min_early_stopping_rate = 0;           // asha: skip this many first rungs
  int bootstrap_count = 0;                   // asha: rung size before promotions start
};

/// The fields population-based training may change between segments of a trial (`[search.pbt]
/// mutable`): what a resumed trainer reads again from its configuration at every step or, for the
/// LoRA dropout, at every forward. Each must also be a numeric parameter of the search space.
inline constexpr std::array<std::string_view, 4> kPbtMutable{
    "train.lr", "train.weight_decay", "lora.dropout", "train.lr_warmup_steps"};

/// `[search.pbt]`: population-based training. `population` trials train side by side in segments
/// of `interval_steps` optimizer steps; after each segment the bottom `quantile` of them go on
/// from the sharded checkpoint of one of the top `quantile` (exploit) with their `mutable` values
/// perturbed (explore): each multiplied by one of `factors`, or, with `resample_probability`,
/// drawn again from its parameter's range.
struct PbtConfig {
  int population = 4;                        // trials trained side by side (>= 2)
  std::int64_t interval_steps = 0;           // steps per segment; required (>= 1)
  double quantile = 0.25;                    // bottom/top fraction, in (0, 0.5]; at least 1 each
  std::vector<double> factors = {0.8, 1.2};  // explore: a mutable value times one of these (> 0)
  std::vector<std::string> mutable_params;   // names of kPbtMutable; required, not empty
  double resample_probability = 0.25;        // explore: chance to redraw instead, in [0, 1]

  bool operator==(const PbtConfig&) const = default;
};

/// The parsed [search] section.
struct SearchSpace {
  std::string name;                   // default: the experiment file's stem
  SamplerConfig sampler;              // default auto
  std::uint64_t seed = 0;             // sampler seed
  std::int64_t n_trials = 100;        // trials to finish (default 100)
  double timeout_s = 0.0;             // wall-clock budget, 0 = none
  int concurrency = 1;                // trials running at once (default 1)
  double stop_grace_s = 30.0;         // SIGTERM -> SIGKILL delay for a pruned run (default 30)
  bool retry_from_checkpoint = true;  // a retry resumes from the failed attempt's newest
                                      // sharded checkpoint (default true; not after oom/config)
  OnOom on_oom = OnOom::replan;       // an oom trial: replanned (default) or recorded
  std::vector<Objective> objectives;  // default: `objective`, minimize
  PrunerConfig pruner;                // default none
  std::vector<std::string> program;   // trial program argv; empty = shardtrain
  std::vector<Param> params;          // ordered so a conditional comes after what it names
  std::optional<PbtConfig> pbt;       // [search.pbt]: population-based training; none = a search

  /// Index of a parameter in `params`, or -1.
  int index_of(std::string_view name) const;
  /// Whether `p` is active given the values already chosen (conditions on absent params fail).
  bool active(const Param& p, const TrialParams& chosen) const;
  /// Checks a trial's values: exactly the active params present, each inside its range.
  Result<void> check(const TrialParams& values) const;
};

/// Parses the [search] TOML text (with or without the `[search]` header). `source_name`
/// prefixes messages and gives the default study name (its stem).
Result<SearchSpace> parse_search_space(std::string_view toml_text,
                                       const std::string& source_name = "");
/// The same, with each message prefixed by `where(field)` instead of the source name: the
/// experiment loader passes the place ("FILE:LINE:COL") where the field was written, since the
/// text it parses is the section re-serialised and its lines are not the file's.
Result<SearchSpace> parse_search_space(
    std::string_view toml_text, const std::string& source_name,
    const std::function<std::string(std::string_view field)>& where);

/// Whether two values are equal, comparing int and float numerically.
bool same_value(const ParamValue& a, const ParamValue& b);
/// A value as the program contract writes it: floats %.17g, ints decimal, bools true/false.
std::string format_value(const ParamValue& v);
/// `--<dotted.name>=<value>` for every active parameter, in space order.
std::vector<std::string> program_arguments(const SearchSpace& space, const TrialParams& params);
/// `<name>=<value>` as an experiment override (`--set`): the value a TOML literal, a float with
/// 17 digits and a decimal point (so a float field never receives a TOML integer), a string
/// quoted.
std::string experiment_override(const std::string& name, const ParamValue& value);

}  // namespace shardscope::spec
