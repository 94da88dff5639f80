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

/// Called once per non-blank line with its record, or with `record` null and `error` saying why
/// the line is not a JSON object (read_jsonl's words, without the "path:line: " prefix). Return
/// false to stop reading.
using JsonlScanVisitor = std::function<bool(const nlohmann::json* record, const std::string& error,
                                            const JsonlPosition& where)>;

/// Reads a JSON Lines file one line at a time (memory bounded by the longest line), bad lines
/// included: read_jsonl reads through it. Returns the non-blank lines visited; fails only when
/// the file cannot be opened or read.
Result<std::int64_t> scan_jsonl(const std::string& path, const JsonlScanVisitor& visit);

}  // namespace shardscope::data
