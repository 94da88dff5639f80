// The TOML queries of experiment_query.h that need the TOML reader (the rest live beside
// load_experiment in experiment.cpp and the [search] schema in search_space.cpp).
#include <cerrno>
#include <fstream>
#include <sstream>
#include <system_error>

#include <toml++/toml.h>

#include "spec/experiment_query.h"
#include "spec/experiment_schema.h"

namespace shardscope::spec {

Result<SearchFile> load_search_file(const std::string& path) {
  detail::note_experiment_file_read();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(path + ": cannot open the experiment file (" +
                std::error_code(errno, std::generic_category()).message() + "); check the path");
  }
  std::ostringstream read;
  read << in.rdbuf();
  SearchFile file;
  file.text = read.str();
  toml::table root;
  try {
    root = toml::parse(file.text, path);
  } catch (const toml::parse_error& e) {
    return fail(path + ":" + std::to_string(e.source().begin.line) +
                ": TOML syntax error: " + std::string(e.description()) +
                "; fix the file at that place (TOML syntax: https://toml.io)");
  }
  const toml::table* search = root.get_as<toml::table>("search");
  if (search == nullptr) {
    return fail(path +
                ": no [search] section: a study needs one (objectives, sampler and "
                "[search.space.\"<field>\"] tables; see docs/config.md)");
  }
  // The form the experiment reader keeps (experiment_toml.cpp, read_search).
  toml::table wrapper;
  wrapper.insert("search", *search);
  std::ostringstream out;
  out << toml::toml_formatter(wrapper);
  file.search_toml = out.str();
  if (!file.search_toml.empty() && file.search_toml.back() != '\n') file.search_toml += '\n';
  return file;
}

std::string toml_value_at(std::string_view text, const std::string& path) {
  try {
    const toml::table root = toml::parse(text);
    const toml::node_view<const toml::node> node = root.at_path(path);
    if (!node) return {};
    std::ostringstream out;
    out << node;
    return out.str();
  } catch (const toml::parse_error&) {
    return {};
  }
}

}  // namespace shardscope::spec
