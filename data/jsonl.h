// JSON Lines files: the training data format and the event files share it. Torch-free, so the
// GUI's data preview reads samples exactly as the trainer does.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "spec/result.h"

namespace shardscope::data {

/// Where a record came from, for messages that point at the line to fix.
struct JsonlPosition {
  std::string path;
  std::int64_t line = 0;         // 1-based
  std::int64_t byte_offset = 0;  // of the line's first byte
};

/// Called once per non-blank line; return an error to stop reading (it is prefixed with
/// "path:line: ").
using JsonlVisitor =
    std::function<Result<void>(const nlohmann::json& record, const JsonlPosition& where)>;

/// Reads every line of a JSON Lines file, in order. A line that is not a JSON object stops
/// the read with "data/train.jsonl:12: not a JSON object (...)"; blank lines are skipped.
Result<std::int64_t> read_jsonl(const std::string& path, const JsonlVisitor& visit);

}  // namespace shardscope::data
