// Reading an experiment from TOML: syntax, overrides, types, enum spellings and unknown keys.
// Range and cross-field rules live in experiment_validate.cpp.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>

#include <toml++/toml.h>

#include "spec/experiment_schema.h"

namespace shardscope::spec::detail {
namespace {

std::string_view type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date/time";
  }
}

// A short rendering of a value for messages: strings quoted, tables and arrays by type.
std::string show(const toml::node& n) {
  if (const auto* s = n.as_string()) return "\"" + s->get() + "\"";
  if (const auto* i = n.as_integer()) return std::to_string(i->get());
  if (const auto* f = n.as_floating_point()) return format_double(f->get());
  if (const auto* b = n.as_boolean()) return b->get() ? "true" : "false";
  return std::string(type_name(n));
}

std::string region_text(const toml::source_region& r) {
  if (!r.path || r.path->empty()) return {};
  return *r.path + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

template <class E>
std::string enum_choices() {
  std::string out;
  for (const auto& n : enum_names(E{})) {
    if (to_string(n.value) != n.name) continue;  // aliases are accepted, not advertised
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out;
}

// Users from DeepSpeed or DDP name strategies by ZeRO stage: point them at FSDP's name.
std::string zero_hint(const std::string& value) {
  std::string v;
  for (char c : value) {
    if (c != '-' && c != '_' && c != ' ') v.push_back(c);
  }
  if (v == "zero3") return " (ZeRO-3 is FULL_SHARD)";
  if (v == "zero2") return " (ZeRO-2 is SHARD_GRAD_OP)";
  if (v == "ddp" || v == "zero0" || v == "dataparallel")
    return " (plain data parallel is NO_SHARD)";
  if (v == "hsdp") return " (HSDP is HYBRID_SHARD)";
  return {};
}

// Reads TOML values into schema fields; every problem becomes one diagnostic line.
class Reader {
 public:
  Reader(Locator& loc, Diagnostics& diag) : m_loc(loc), m_diag(diag) {}

  // Records where `dotted` is defined (nodes copied in by overrides have no region: the
  // override already registered itself).
  void remember(const std::string& dotted, const toml::source_region& r) {
    if (auto text = region_text(r); !text.empty()) m_loc.set(dotted, std::move(text));
  }

  void type_error(const std::string& dotted, const toml::node& n, std::string_view expected,
                  std::string_view fix) {
    remember(dotted, n.source());
    m_diag.field(m_loc, dotted,
                 "expected " + std::string(expected) + ", got " + std::string(type_name(n)) +
                     (n.is_string() ? " (" + show(n) + ")" : "") + "; " + std::string(fix));
  }

  void read(const toml::node& n, const std::string& dotted, std::int64_t& out) {
    read_int(n, dotted, out);
  }

  void read(const toml::node& n, const std::string& dotted, int& out) {
    std::int64_t wide = out;
    if (!read_int(n, dotted, wide)) return;
    if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
      m_diag.field(m_loc, dotted, "value " + std::to_string(wide) + " is out of range");
      return;
    }
    out = static_cast<int>(wide);
  }

  void read(const toml::node& n, const std::string& dotted, std::uint64_t& out) {
    std::int64_t wide = 0;
    if (!read_int(n, dotted, wide)) return;
    if (wide < 0) {
      m_diag.field(m_loc, dotted, "must be >= 0 (got " + std::to_string(wide) + "); use e.g. 1234");
      return;
    }
    out = static_cast<std::uint64_t>(wide);
  }

  void read(const toml::node& n, const std::string& dotted, double& out) {
    if (const auto* f = n.as_floating_point()) {
      out = f->get();
    } else if (const auto* i = n.as_integer()) {
      out = static_cast<double>(i->get());
    } else {
      type_error(dotted, n, "a number", "write it without quotes, e.g. 3e-4");
    }
  }

  void read(const toml::node& n, const std::string& dotted, bool& out) {
    if (const auto* b = n.as_boolean()) {
      out = b->get();
      return;
    }
    type_error(dotted, n, "a boolean", "write true or false without quotes");
  }

  void read(const toml::node& n, const std::string& dotted, std::string& out) {
    if (const auto* s = n.as_string()) {
      out = s->get();
      return;
    }
    type_error(dotted, n, "a string", "put the value in double quotes");
  }

  void read(const toml::node& n, const std::string& dotted, std::vector<std::string>& out) {
    const auto* arr = n.as_array();
    if (!arr) {
      type_error(dotted, n, "an array of strings", "write a list, e.g. [\"a\", \"b\"]");
      return;
    }
    std::vector<std::string> values;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const auto* s = (*arr)[i].as_string();
      if (!s) {
        type_error(dotted + "[" + std::to_string(i) + "]", (*arr)[i], "a string",
                   "put every element in double quotes");
        return;
      }
      values.push_back(s->get());
    }
    out = std::move(values);
  }

  void read(const toml::node& n, const std::string& dotted, std::vector<int>& out) {
    const auto* arr = n.as_array();
    if (!arr) {
      type_error(dotted, n, "an array of integers", "write a list, e.g. [0, 1]");
      return;
    }
    std::vector<int> values;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      int v = 0;
      if (!(*arr)[i].is_integer()) {
        type_error(dotted + "[" + std::to_string(i) + "]", (*arr)[i], "an integer",
                   "write whole numbers without quotes");
        return;
      }
      read((*arr)[i], dotted, v);
      values.push_back(v);
    }
    out = std::move(values);
  }

  void read(const toml::node& n, const std::string& dotted,
            std::map<std::string, std::string>& out) {
    const auto* tbl = n.as_table();
    if (!tbl) {
      type_error(dotted, n, "a table", "write e.g. env = { NCCL_DEBUG = \"INFO\" }");
      return;
    }
    std::map<std::string, std::string> values;
    for (const auto& [k, v] : *tbl) {
      const std::string key = dotted + "." + std::string(k.str());
      remember(key, k.source());
      if (const auto* s = v.as_string()) {
        values[std::string(k.str())] = s->get();
      } else if (v.is_integer() || v.is_boolean()) {
        values[std::string(k.str())] = show(v);  // NCCL_P2P_DISABLE = 1 means "1"
      } else {
        type_error(key, v, "a string", "write the value in double quotes");
      }
    }
    out = std::move(values);
  }

  template <class E>
  requires std::is_enum_v<E>
  void read(const toml::node& n, const std::string& dotted, E& out) {
    const auto* s = n.as_string();
    if (!s) {
      type_error(dotted, n, "a string", "use one of " + enum_choices<E>() + " in double quotes");
      return;
    }
    const std::string want = lower(s->get());
    std::vector<std::string> canon;
    for (const auto& name : enum_names(E{})) {
      if (lower(name.name) == want) {
        out = name.value;
        return;
      }
      canon.emplace_back(name.name);
    }
    std::string msg = "unknown value \"" + s->get() + "\"; use one of " + enum_choices<E>();
    if (auto near = closest(s->get(), canon); !near.empty()) {
      msg += " (did you mean \"" + near + "\"?)";
    } else if constexpr (std::is_same_v<E, ShardStrategy>) {
      msg += zero_hint(want);
    }
    m_diag.field(m_loc, dotted, msg);
  }

  void unknown(const std::string& dotted, const toml::key& k, std::string_view hint) {
    remember(dotted, k.source());
    m_diag.add(m_loc.at(dotted) + ": unknown field " + dotted + "; " + std::string(hint));
  }

  Locator& loc() { return m_loc; }
  Diagnostics& diag() { return m_diag; }

 private:
  bool read_int(const toml::node& n, const std::string& dotted, std::int64_t& out) {
    if (const auto* i = n.as_integer()) {
      out = i->get();
      return true;
    }
    // 1e4 is a float in TOML; an integral float is accepted for an integer field.
    if (const auto* f = n.as_floating_point()) {
      const double v = f->get();
      if (std::isfinite(v) && std::trunc(v) == v && std::fabs(v) < 9.2e18) {
        out = static_cast<std::int64_t>(v);
        return true;
      }
      m_diag.field(m_loc, dotted,
                   "expected an integer, got " + format_double(v) + "; write a whole number");
      return false;
    }
    type_error(dotted, n, "an integer", "write a whole number without quotes");
    return false;
  }

  Locator& m_loc;
  Diagnostics& m_diag;
};

// "did you mean ..." for a key that is not a field of `section`: a near key of the same
// section first, then the same key in another section.
std::string suggest_field(std::string_view section, std::string_view key) {
  std::vector<std::string> same;
  std::vector<std::string> elsewhere;
  for (const auto& path : all_field_paths()) {
    const auto dot = path.find('.');
    const std::string_view sec = std::string_view(path).substr(0, dot);
    const std::string_view name = std::string_view(path).substr(dot + 1);
    if (sec == section) same.emplace_back(name);
    if (sec != section && name == key) elsewhere.push_back(path);
  }
  if (auto near = closest(key, same); !near.empty()) {
    return "did you mean " + std::string(section) + "." + near + "?";
  }
  if (!elsewhere.empty()) {
    return "did you mean " + elsewhere.front() + "? (put it under [" +
           elsewhere.front().substr(0, elsewhere.front().find('.')) + "])";
  }
  return "remove it; docs/config.md lists the fields of [" + std::string(section) + "]";
}

template <class S>
void read_section(const toml::table& root, std::string_view name, S& section, Reader& r) {
  const toml::node* node = root.get(name);
  if (!node) return;
  const std::string sname(name);
  r.remember(sname, node->source());
  const toml::table* tbl = node->as_table();
  if (!tbl) {
    r.type_error(sname, *node, "a table", "write it as a section: [" + sname + "]");
    return;
  }
  const auto fields = section_fields(section);
  for (const auto& f : fields) {
    const toml::node* v = tbl->get(f.key);
    if (!v) continue;
    const std::string dotted = sname + "." + std::string(f.key);
    r.remember(dotted, v->source());
    std::visit([&](auto member) { r.read(*v, dotted, section.*member); }, f.member);
  }
  for (const auto& [k, v] : *tbl) {
    if (!is_field(name, k.str())) {
      r.unknown(sname + "." + std::string(k.str()), k, suggest_field(name, k.str()));
    }
  }
}

void check_sections(const toml::table& root, Reader& r) {
  std::vector<std::string> names;
  for (auto s : section_names()) names.emplace_back(s);
  for (const auto& [k, v] : root) {
    const std::string key(k.str());
    if (std::find(names.begin(), names.end(), key) != names.end()) continue;
    r.remember(key, k.source());
    std::string msg = r.loc().at(key) + (v.is_table() ? ": unknown section [" + key + "]"
                                                      : ": unknown top-level key " + key);
    const std::string near = closest(key, names);
    const std::string field_hint = suggest_field("", key);
    const bool is_field_name = field_hint.rfind("did you mean", 0) == 0;
    if (!near.empty() && (v.is_table() || !is_field_name)) {
      msg += "; did you mean [" + near + "]?";
    } else if (is_field_name) {
      msg += "; every field belongs in a section: " + field_hint;
    } else {
      msg +=
          "; the sections are [experiment] [model] [data] [train] [shard] [lora] [eval] "
          "[trace] [launch] [notify] [search]";
    }
    r.diag().add(msg);
  }
}

// True when section.key holds a string (a bare word or a number given to it on the command line
// is then taken as the string the user typed), or a value of launch.env.
bool takes_string(const std::vector<std::string>& parts) {
  if (parts.size() == 3 && parts[0] == "launch" && parts[1] == "env") return true;
  if (parts.size() != 2) return false;
  bool result = false;
  const Experiment exp;
  for_each_section(exp, [&](std::string_view name, const auto& section) {
    using Section = std::remove_cvref_t<decltype(section)>;
    if (name != parts[0]) return;
    for (const auto& f : section_fields(section)) {
      if (f.key != parts[1]) continue;
      result = std::holds_alternative<std::string Section::*>(f.member);
    }
  });
  return result;
}

std::vector<std::string> split_key(std::string_view key) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto dot = key.find('.', start);
    parts.emplace_back(key.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

bool bare_key(std::string_view part) {
  if (part.empty()) return false;
  for (char c : part) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

// The override's value as a TOML node under key "v": a TOML value when it parses as one, else
// the raw text as a string (so `shard.strategy=no_shard` and `data.train_path=/x.jsonl` work).
// A string field takes the text as typed unless it is quoted (`experiment.name=007`).
toml::table override_value(const std::string& raw, bool string_field) {
  if (!string_field || (!raw.empty() && raw.front() == '"')) {
    try {
      toml::table parsed = toml::parse("v = " + raw);
      if (parsed.size() == 1 && parsed.contains("v")) return parsed;
    } catch (const toml::parse_error&) {
      // not a TOML value: taken as a string below
    }
  }
  toml::table holder;
  holder.insert("v", raw);
  return holder;
}

void apply_override(toml::table& root, const std::string& text, Reader& r) {
  const std::string where = "--set " + text;
  const auto eq = text.find('=');
  const std::string key = trim(std::string_view(text).substr(0, eq));
  const auto parts = split_key(key);
  if (eq == std::string::npos || parts.size() < 2 ||
      !std::all_of(parts.begin(), parts.end(), bare_key)) {
    r.diag().add(where + ": expected SECTION.FIELD=VALUE, e.g. --set train.lr=1e-3");
    return;
  }
  // Only [search] and launch.env nest deeper than SECTION.FIELD.
  const bool nested = parts[0] == "search" || (parts[0] == "launch" && parts[1] == "env");
  if (parts.size() > 2 && !nested && is_field(parts[0], parts[1])) {
    r.diag().add(where + ": " + parts[0] + "." + parts[1] + " is not a table, so it has no field " +
                 parts[2] + "; check the key");
    return;
  }
  const std::string raw = trim(std::string_view(text).substr(eq + 1));
  toml::table holder = override_value(raw, takes_string(parts));
  toml::table* table = &root;
  std::string dotted;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    dotted += (i ? "." : "") + parts[i];
    toml::node* next = table->get(parts[i]);
    if (!next) {
      next = &table->insert(parts[i], toml::table{}).first->second;
      r.loc().set(dotted, where);  // a table this override created is reported at the override
    }
    table = next->as_table();
    if (!table) {
      std::string msg = where;
      msg +=
          ": " + dotted + " is not a table, so it has no field " + parts[i + 1] + "; check the key";
      r.diag().add(std::move(msg));
      return;
    }
  }
  r.loc().set(key, where);
  table->insert_or_assign(parts.back(), *holder.get("v"));
}

// A key as the search schema's messages write it: quoted under space and objectives (whose keys
// are dotted field and metric names) and wherever it is not a bare TOML key.
std::string search_key(const std::string& parent, std::string_view key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
  });
  const bool quoted = !bare || parent == "search.space" || parent == "search.objectives";
  std::string out = parent;
  out += '.';
  if (quoted) out += '"';
  out += key;
  if (quoted) out += '"';
  return out;
}

// Remembers where every key under [search] was written, so the schema's messages name the line.
void remember_search_keys(const toml::node& node, const std::string& dotted, Reader& r) {
  if (const auto* tbl = node.as_table()) {
    for (const auto& [key, child] : *tbl) {
      const std::string name = search_key(dotted, key.str());
      r.remember(name, key.source());
      remember_search_keys(child, name, r);
    }
  }
}

// The [search] table kept as TOML text, header included, for parse_search_space to parse.
void read_search(const toml::table& root, SearchSection& search, Reader& r) {
  const toml::node* node = root.get("search");
  if (!node) return;
  r.remember("search", node->source());
  remember_search_keys(*node, "search", r);
  const auto* tbl = node->as_table();
  if (!tbl) {
    r.type_error("search", *node, "a table", "write it as a section: [search]");
    return;
  }
  toml::table wrapper;
  wrapper.insert("search", *tbl);
  std::ostringstream out;
  out << toml::toml_formatter(wrapper);
  search.present = true;
  search.toml = out.str();
  if (!search.toml.empty() && search.toml.back() != '\n') search.toml += '\n';
}

}  // namespace

void read_experiment_toml(std::string_view text, const std::string& source_name,
                          const std::vector<std::string>& overrides, Experiment& exp, Locator& loc,
                          Diagnostics& diag) {
  Reader reader(loc, diag);
  toml::table root;
  try {
    root = toml::parse(text, source_name.empty() ? std::string("experiment") : source_name);
  } catch (const toml::parse_error& e) {
    std::string where = region_text(e.source());
    if (where.empty()) where = loc.at("");
    diag.add(where + ": TOML syntax error: " + std::string(e.description()) +
             "; fix the file at that place (TOML syntax: https://toml.io)");
    return;
  }
  for (const auto& text_override : overrides) apply_override(root, text_override, reader);
  check_sections(root, reader);
  for_each_section(exp, [&](std::string_view name, auto& section) {
    read_section(root, name, section, reader);
  });
  read_search(root, exp.search, reader);
}

}  // namespace shardscope::spec::detail
