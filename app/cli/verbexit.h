// The exception a verb throws to end the program with an exit code; main() catches it.
#pragma once

namespace shardscope::cli {

/// Thrown by exitWith(); carries the process exit code.
struct VerbExit {
  int code = 0;
};

}  // namespace shardscope::cli
