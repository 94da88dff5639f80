// The form catalogue: walks the schema's field tables (experiment_schema.h) once, and reuses the
// --set machinery of the TOML reader for writing a field, so forms, files and the CLI agree.
#include "spec/field_catalog.h"

#include <filesystem>
#include <set>
#include <type_traits>

#include "spec/experiment_schema.h"

namespace shardscope::spec {
namespace {

template <class T>
inline constexpr bool kIsEnum = std::is_enum_v<T>;

template <class T>
FieldType type_of(FieldInfo& info) {
  if constexpr (std::is_same_v<T, bool>) {
    return FieldType::boolean;
  } else if constexpr (std::is_same_v<T, double>) {
    return FieldType::floating;
  } else if constexpr (std::is_integral_v<T>) {
    info.is_unsigned = std::is_unsigned_v<T>;
    return FieldType::integer;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return FieldType::string;
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return FieldType::list;
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    info.list_of_int = true;
    return FieldType::list;
  } else if constexpr (kIsEnum<T>) {
    for (const auto& n : detail::enum_names(T{})) {
      if (to_string(n.value) == n.name) info.choices.emplace_back(n.name);
    }
    return FieldType::enumeration;
  } else {
    return FieldType::map;
  }
}

std::string toml_quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

template <class T>
std::string text_of(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, double>) {
    return detail::format_double(v);
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (std::is_same_v<T, std::vector<std::string>> ||
                       std::is_same_v<T, std::vector<int>>) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      if constexpr (std::is_same_v<T, std::vector<int>>) {
        out += std::to_string(v[i]);
      } else {
        out += toml_quoted(v[i]);
      }
    }
    return out + "]";
  } else if constexpr (kIsEnum<T>) {
    return std::string(to_string(v));
  } else {
    if (v.empty()) return "{}";
    std::string out = "{ ";
    bool first = true;
    for (const auto& [key, value] : v) {
      out += first ? "" : ", ";
      out += toml_quoted(key) + " = " + toml_quoted(value);
      first = false;
    }
    return out + " }";
  }
}

std::vector<FieldInfo> build_catalog() {
  std::vector<FieldInfo> out;
  const Experiment defaults;
  detail::for_each_section(defaults, [&](std::string_view name, const auto& section) {
    for (const auto& f : detail::section_fields(section)) {
      FieldInfo info;
      info.section = std::string(name);
      info.key = std::string(f.key);
      info.path = info.section + "." + info.key;
      info.doc = std::string(f.doc);
      std::visit(
          [&](auto member) {
            using T = std::remove_cvref_t<decltype(section.*member)>;
            info.type = type_of<T>(info);
            info.default_text = text_of(section.*member);
          },
          f.member);
      // String fields with a fixed vocabulary offer it too (they stay strings: a file may hold
      // any text, which validation then names).
      if (info.path == "lora.quantize") info.choices = lora_quantize_values();
      if (info.path == "lora.quant_storage") info.choices = lora_quant_storage_values();
      out.push_back(std::move(info));
    }
  });
  return out;
}

std::string base_dir_of(const std::string& source) {
  std::error_code ec;
  if (source.empty()) return std::filesystem::current_path(ec).string();
  return std::filesystem::absolute(std::filesystem::path(source), ec).parent_path().string();
}

// The field a diagnostic line names: the earliest "section.key:" in it.
std::string field_named(const std::string& line) {
  std::string best;
  std::size_t best_pos = std::string::npos;
  for (const auto& f : field_catalog()) {
    const auto pos = line.find(f.path + ":");
    if (pos == std::string::npos || pos >= best_pos) continue;
    best_pos = pos;
    best = f.path;
  }
  return best;
}

void add_lines(const std::string& text, std::set<std::string>& seen, std::vector<FieldIssue>& out) {
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty() || !seen.insert(line).second) continue;
    FieldIssue issue;
    issue.field = field_named(line);
    const auto at = issue.field.empty() ? std::string::npos : line.find(issue.field + ":");
    issue.message = at == std::string::npos ? line : line.substr(at);
    out.push_back(std::move(issue));
  }
}

}  // namespace

std::string_view to_string(FieldType t) {
  switch (t) {
    case FieldType::integer:
      return "int";
    case FieldType::floating:
      return "float";
    case FieldType::boolean:
      return "bool";
    case FieldType::string:
      return "string";
    case FieldType::list:
      return "list";
    case FieldType::enumeration:
      return "enum";
    case FieldType::map:
      return "map";
  }
  return "?";
}

const std::vector<FieldInfo>& field_catalog() {
  static const std::vector<FieldInfo> catalog = build_catalog();
  return catalog;
}

const FieldInfo* find_field(std::string_view path) {
  for (const auto& f : field_catalog()) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

std::vector<std::string> catalog_sections() {
  std::vector<std::string> out;
  for (const auto& f : field_catalog()) {
    if (out.empty() || out.back() != f.section) out.push_back(f.section);
  }
  return out;
}

Result<std::string> get_field(const Experiment& exp, std::string_view path) {
  std::string out;
  bool found = false;
  detail::for_each_section(exp, [&](std::string_view name, const auto& section) {
    for (const auto& f : detail::section_fields(section)) {
      if (path.size() != name.size() + 1 + f.key.size() || !path.starts_with(name) ||
          path[name.size()] != '.' || !path.ends_with(f.key))
        continue;
      std::visit([&](auto member) { out = text_of(section.*member); }, f.member);
      found = true;
    }
  });
  if (!found) {
    return fail(std::string(path) +
                ": unknown field; docs/config.md lists the fields of every section");
  }
  return out;
}

Result<void> set_field(Experiment& exp, std::string_view path, std::string_view text) {
  if (!find_field(path)) {
    return fail(std::string(path) +
                ": unknown field; docs/config.md lists the fields of every section");
  }
  // An empty document plus one override reads exactly that field into a copy, with --set's
  // parsing and the reader's type and spelling checks; every other field keeps its value.
  Experiment copy = exp;
  detail::Locator loc(exp.source);
  detail::Diagnostics diag;
  const std::string override_text = std::string(path) + "=" + std::string(text);
  detail::read_experiment_toml("", exp.source, {override_text}, copy, loc, diag);
  if (!diag.empty()) return fail(diag.text());
  exp = std::move(copy);
  return ok();
}

Result<Experiment> read_experiment_unvalidated(std::string_view toml_text,
                                               const std::string& source_name) {
  Experiment exp;
  exp.source = source_name;
  detail::Locator loc(source_name, true);
  detail::Diagnostics diag;
  detail::read_experiment_toml(toml_text, source_name, {}, exp, loc, diag);
  if (!diag.empty()) return fail(diag.text());
  detail::resolve_paths(exp, base_dir_of(source_name), false, loc, diag);
  return exp;
}

std::vector<FieldIssue> check_experiment(const Experiment& exp, bool check_paths) {
  std::vector<FieldIssue> out;
  std::set<std::string> seen;
  Experiment copy = exp;
  detail::Locator loc(exp.source);
  detail::Diagnostics diag;
  detail::resolve_paths(copy, base_dir_of(exp.source), check_paths, loc, diag);
  add_lines(diag.text(), seen, out);
  if (auto launch = validate_for_launch(copy); !launch) add_lines(launch.message(), seen, out);
  return out;
}

}  // namespace shardscope::spec
