// A fixed environment for the torch-free rendezvous code's tests: the variables a test names,
// nothing else (dist::EnvLookup).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "trainer/dist/rendezvous.h"

namespace shardscope::testing {

inline dist::EnvLookup envOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace shardscope::testing
