// What the layers above need of an experiment once it is parsed, so that none of them reads TOML
// itself (only spec/ includes toml++): the number of experiment files this process read, the
// paths check on an experiment parsed without it, an experiment derived from a parsed one by
// overrides (a trial's values), a value at a dotted path of TOML text, and the [search] space a
// study stored. A narrow header: spec/experiment.h is included by hundreds of units.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spec/experiment.h"
#include "spec/result.h"
#include "spec/search_space.h"

namespace shardscope::spec {

/// How many times this process read an experiment file (load_experiment): a sweep reads its file
/// once and passes the parsed Experiment on; tests hold it to that.
std::uint64_t experiment_file_reads();

/// The checks LoadOptions::check_paths makes (data.train_path, data.eval_path and model.path
/// exist on this machine) on an experiment loaded without them, with the same messages.
Result<void> check_experiment_paths(const Experiment& exp);

/// `base` (already parsed, its paths resolved) with `overrides` ("dotted.key=value", as
/// load_experiment takes them) applied and validated again, without reading its file: what a
/// trial of a sweep runs. Relative paths in an override resolve against base.source's folder.
Result<Experiment> with_overrides(const Experiment& base, const std::vector<std::string>& overrides,
                                  const LoadOptions& options);

/// An experiment file read for its [search] section alone: the rest is not validated, so the
/// parameters may be names of the caller's own (`study create` for a driver that asks and tells
/// itself). Counts as a read (experiment_file_reads).
struct SearchFile {
  std::string text;         ///< the file as written
  std::string search_toml;  ///< its [search] table in canonical form (as Experiment::search.toml)
};
/// Reads `path`; an error names the file when it cannot be read, is no TOML or has no [search].
Result<SearchFile> load_search_file(const std::string& path);

/// The value at dotted `path` ("search.seed", "search.space.\"train.lr\"") of TOML `text`,
/// written as TOML ("3", "'tpe'", "{ type = 'median' }"); empty when it is absent or the text
/// is no TOML.
std::string toml_value_at(std::string_view text, const std::string& path);

/// The search space of a study's stored [search] text: the canonical [search] table a study
/// stores (Experiment::search.toml), or the whole experiment file's text that studies created
/// before kept (its [search] table is read). `source_name` names it in messages and gives the
/// default study name.
Result<SearchSpace> stored_search_space(std::string_view text, const std::string& source_name);

}  // namespace shardscope::spec
