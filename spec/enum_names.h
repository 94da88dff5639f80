// One table of an enum's names, read both ways: the name of a value and the value of a name. Every
// name/parse pair of the project reads such a table instead of a switch and a loop of its own.
#pragma once

#include <iterator>
#include <optional>
#include <string_view>
#include <type_traits>

namespace shardscope::spec {

/// A spelling of an enum value. A value may have several; the first is its canonical name.
template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

/// The first name `names` gives `value`; `missing` when the table lacks it.
template <class Names, class E>
constexpr std::string_view name_of(const Names& names, E value, std::string_view missing = "?") {
  for (const auto& n : names) {
    if (n.value == value) return n.name;
  }
  return missing;
}

/// The value spelt `name` in `names`; nullopt for any other text.
template <class Names>
constexpr auto value_of(const Names& names, std::string_view name)
    -> std::optional<std::remove_cvref_t<decltype(std::begin(names)->value)>> {
  for (const auto& n : names) {
    if (n.name == name) return n.value;
  }
  return std::nullopt;
}

}  // namespace shardscope::spec
