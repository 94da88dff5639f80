// POSIX shell quoting for every argument that crosses a shell: remote commands over SSH and the
// lines of generated Slurm scripts. A quoted word is taken literally by sh, dash and bash.
#pragma once

#include <string>
#include <string_view>

namespace shardscope::backend {

/// `text` as one single-quoted shell word: `it's` becomes `'it'\''s'`; "" becomes `''`.
inline std::string shellQuote(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  quoted += '\'';
  return quoted;
}

/// True for a name a shell accepts in `NAME=value` ([A-Za-z_][A-Za-z0-9_]*).
inline bool isShellVariableName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) return false;
  }
  return true;
}

}  // namespace shardscope::backend
