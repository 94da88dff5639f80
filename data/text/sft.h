// Supervised fine-tuning data: one conversation per JSONL line,
//   {"messages": [{"role": "user", "content": [{"type": "image", "image": "rel/path.png"},
//                                              {"type": "text", "text": "..."}]}, ...]}
// or with plain-string content. Image paths are resolved against the JSONL file's folder (the
// images are not read here; data/image decodes them).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/jsonl.h"
#include "data/text/chat.h"
#include "spec/result.h"

namespace shardscope::data {

struct SftSample {
  std::vector<ChatMessage> messages;
  std::vector<std::string> images;  // absolute paths, in the order the images appear
  JsonlPosition where;              // the line it came from
};

/// Validates one record; `base_dir` resolves relative image paths. Errors name the field,
/// e.g. "messages[1].content[0].type: 'audio' is not one of text, image".
Result<SftSample> parse_sft_record(const nlohmann::json& record, const std::string& base_dir);

/// Reads every line; a bad line stops the read with "file:line: field: what to fix".
Result<std::vector<SftSample>> load_sft_jsonl(const std::string& path);

}  // namespace shardscope::data
