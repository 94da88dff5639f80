// The experiment TOML (spec/experiment_toml, experiment_validate) and its [search]
// section (spec/search_space): the input is an experiment file. Each parser must accept it
// or refuse it naming the file; an accepted experiment must write back to TOML that loads to the
// same experiment (the GUI's form saves through that writer).
#include "spec/experiment.h"
#include "spec/search_space.h"
#include "tests/fuzz/fuzz_support.h"

using namespace shardscope;

namespace {

constexpr const char* kName = "fuzz-experiment.toml";

void check_experiment(std::string_view text) {
  spec::LoadOptions options;
  options.check_paths = false;  // the paths an input names are not on this machine
  auto exp = spec::parse_experiment(text, kName, {}, options);
  if (!exp) {
    fuzz::expect_clear_error(exp.message(), kName);
    return;
  }
  const std::string written = spec::write_experiment_toml(*exp);
  auto again = spec::parse_experiment(written, "written.toml", {}, options);
  if (!again) fuzz::broken("a written experiment does not load: " + again.message());
  if (spec::write_experiment_toml(*again) != written)
    fuzz::broken("write(load(write(e))) != write(e)");
}

void check_search(std::string_view text) {
  auto space = spec::parse_search_space(text, kName);
  if (!space) {
    fuzz::expect_clear_error(space.message(), kName);
    return;
  }
  for (const auto& p : space->params)
    if (space->index_of(p.name) < 0) fuzz::broken("a parsed parameter it cannot find");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = fuzz::as_text(data, size);
  check_experiment(text);
  check_search(text);
  return 0;
}
