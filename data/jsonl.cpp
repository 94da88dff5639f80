#include "data/jsonl.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

namespace shardscope::data {

Result<std::int64_t> read_jsonl(const std::string& path, const JsonlVisitor& visit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(path + ": cannot open (" + std::strerror(errno) +
                "); check the path in the experiment file");
  }
  std::string text;
  JsonlPosition where{path, 0, 0};
  std::int64_t records = 0;
  std::int64_t offset = 0;
  while (std::getline(in, text)) {
    ++where.line;
    where.byte_offset = offset;
    offset += static_cast<std::int64_t>(text.size()) + 1;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    auto record = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    const std::string at = path + ":" + std::to_string(where.line) + ": ";
    if (record.is_discarded() || !record.is_object()) {
      return fail(at + "not a JSON object (" + text.substr(0, 60) +
                  "); each line must be one {...} record");
    }
    if (auto r = visit(record, where); !r) return fail(at + r.message());
    ++records;
  }
  if (in.bad()) return fail(path + ": read error after line " + std::to_string(where.line));
  return records;
}

}  // namespace shardscope::data
