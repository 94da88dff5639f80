// The search space as the search library uses it. The [search] schema (parameters, objectives,
// sampler and pruner settings) is spec's, parsed and validated there with every other
// section; these names make it this library's vocabulary, so samplers and the backend write
// search::Param and search::parse_search_space.
#pragma once

#include "spec/search_space.h"

namespace shardscope::search {

using spec::Condition;
using spec::Direction;
using spec::Objective;
using spec::Param;
using spec::ParamType;
using spec::ParamValue;
using spec::PbtConfig;
using spec::PrunerConfig;
using spec::SamplerConfig;
using spec::SearchSpace;
using spec::TrialParams;

using spec::experiment_override;
using spec::format_value;
using spec::parse_search_space;
using spec::program_arguments;
using spec::same_value;

}  // namespace shardscope::search
