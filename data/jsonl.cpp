#include "data/jsonl.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

namespace shardscope::data {

Result<std::int64_t> scan_jsonl(const std::string& path, const JsonlScanVisitor& visit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(path + ": cannot open (" + std::strerror(errno) +
                "); check the path in the experiment file");
  }
  std::string text;
  JsonlPosition where{path, 0, 0};
  std::int64_t lines = 0;
  std::int64_t offset = 0;
  while (std::getline(in, text)) {
    ++where.line;
    where.byte_offset = offset;
    offset += static_cast<std::int64_t>(text.size()) + 1;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    ++lines;
    auto record = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    const bool bad = record.is_discarded() || !record.is_object();
    const std::string error =
        bad ? "not a JSON object (" + text.substr(0, 60) + "); each line must be one {...} record"
            : std::string();
    if (!visit(bad ? nullptr : &record, error, where)) return lines;
  }
  if (in.bad()) return fail(path + ": read error after line " + std::to_string(where.line));
  return lines;
}

Result<std::int64_t> read_jsonl(const std::string& path, const JsonlVisitor& visit) {
  std::string failure;
  std::int64_t records = 0;
  auto scanned = scan_jsonl(path, [&](const nlohmann::json* record, const std::string& error,
                                      const JsonlPosition& where) {
    const std::string at = path + ":" + std::to_string(where.line) + ": ";
    if (record == nullptr) {
      failure = at + error;
      return false;
    }
    if (auto r = visit(*record, where); !r) {
      failure = at + r.message();
      return false;
    }
    ++records;
    return true;
  });
  if (!scanned) return scanned.error();
  if (!failure.empty()) return fail(failure);
  return records;
}

}  // namespace shardscope::data
