// Declaration only; see README.md in this folder. Never define these members here.
#pragma once

#include <chrono>

namespace gloo {

class Context {
 public:
  // Named by an inline member of ProcessGroupGloo that we never call; left undefined on purpose.
  void setTimeout(std::chrono::milliseconds timeout);
};

}  // namespace gloo
