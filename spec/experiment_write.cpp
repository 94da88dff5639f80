// The resolved experiment as TOML (trial.toml): every section and field in schema order, each
// with a comment that gives its meaning, unit and default. load(write(x)) == x, and the text is
// what config_hash hashes, so its layout is part of the contract: change it deliberately.
#include <sstream>

#include "spec/experiment_schema.h"
#include "spec/sha256.h"

namespace shardscope::spec {
namespace detail {
namespace {

std::string toml_string(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += "\\u00";
          out += kHex[u >> 4];
          out += kHex[u & 0xf];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// A table key: bare when it can be, quoted otherwise.
std::string toml_key(std::string_view k) {
  const bool bare = !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  return bare ? std::string(k) : toml_string(k);
}

std::string value_text(std::int64_t v) { return std::to_string(v); }
std::string value_text(int v) { return std::to_string(v); }
std::string value_text(std::uint64_t v) { return std::to_string(v); }
std::string value_text(double v) { return format_double(v); }
std::string value_text(bool v) { return v ? "true" : "false"; }
std::string value_text(const std::string& v) { return toml_string(v); }

template <class T>
std::string list_text(const std::vector<T>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + value_text(values[i]);
  return out + "]";
}
std::string value_text(const std::vector<std::string>& v) { return list_text(v); }
std::string value_text(const std::vector<int>& v) { return list_text(v); }

std::string value_text(const std::map<std::string, std::string>& v) {
  if (v.empty()) return "{}";
  std::string out = "{ ";
  bool first = true;
  for (const auto& [key, value] : v) {
    out += (first ? "" : ", ") + toml_key(key) + " = " + toml_string(value);
    first = false;
  }
  return out + " }";
}

template <class E>
requires std::is_enum_v<E> std::string value_text(E v) { return toml_string(to_string(v)); }

// `key = value` padded to a column, then `# meaning (default: X)`.
template <class S>
void write_section(std::ostringstream& out, std::string_view name, const S& section) {
  static const S defaults;
  out << "\n[" << name << "]\n";
  for (const auto& f : section_fields(section)) {
    std::string line;
    std::string def;
    std::visit(
        [&](auto member) {
          line = std::string(f.key) + " = " + value_text(section.*member);
          def = value_text(defaults.*member);
        },
        f.member);
    constexpr std::size_t kCommentColumn = 44;
    line += std::string(line.size() < kCommentColumn ? kCommentColumn - line.size() : 1, ' ');
    out << line << "# " << f.doc << " (default: " << def << ")\n";
  }
}

}  // namespace
}  // namespace detail

std::string write_experiment_toml(const Experiment& exp) {
  std::ostringstream out;
  out << "# Shardscope experiment, resolved: every field with its value; docs/config.md has the\n"
         "# units and rules. Paths are absolute.\n";
  detail::for_each_section(exp, [&](std::string_view name, const auto& section) {
    detail::write_section(out, name, section);
  });
  if (exp.search.present) out << "\n" << exp.search.toml;
  return out.str();
}

std::string config_hash(const Experiment& exp) { return sha256_hex(write_experiment_toml(exp)); }

}  // namespace shardscope::spec
