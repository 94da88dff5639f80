#include "data/text/sft.h"

#include <filesystem>

#include <nlohmann/json.hpp>

namespace shardscope::data {
namespace {

using nlohmann::json;

Result<ChatItem> parse_item(const json& item, const std::string& where,
                            const std::filesystem::path& base, SftSample& sample) {
  if (!item.is_object()) return fail(where + ": not an object; expected {\"type\": ...}");
  if (!item.contains("type") || !item["type"].is_string()) {
    return fail(where + ".type: missing; give \"text\" or \"image\"");
  }
  std::string type = item["type"].get<std::string>();
  ChatItem out;
  if (type == "text") {
    if (!item.contains("text") || !item["text"].is_string()) {
      return fail(where + ".text: missing or not a string");
    }
    out.text = item["text"].get<std::string>();
    return out;
  }
  if (type == "image") {
    if (!item.contains("image") || !item["image"].is_string() ||
        item["image"].get<std::string>().empty()) {
      return fail(where + ".image: missing or not a path string (relative to the JSONL file)");
    }
    std::filesystem::path p(item["image"].get<std::string>());
    if (p.is_relative()) p = base / p;
    out.kind = ChatItem::Kind::Image;
    out.image = p.lexically_normal().string();
    sample.images.push_back(out.image);
    return out;
  }
  return fail(where + ".type: '" + type + "' is not one of text, image");
}

Result<ChatMessage> parse_message(const json& m, const std::string& where,
                                  const std::filesystem::path& base, SftSample& sample) {
  if (!m.is_object()) return fail(where + ": not an object; expected {\"role\", \"content\"}");
  if (!m.contains("role") || !m["role"].is_string()) {
    return fail(where + ".role: missing; give system, user or assistant");
  }
  ChatMessage out;
  out.role = m["role"].get<std::string>();
  if (out.role != "system" && out.role != "user" && out.role != "assistant") {
    return fail(where + ".role: '" + out.role + "' is not one of system, user, assistant");
  }
  if (!m.contains("content")) return fail(where + ".content: missing");
  const json& content = m["content"];
  if (content.is_string()) {
    out.plain = true;
    out.text = content.get<std::string>();
    return out;
  }
  if (!content.is_array()) {
    return fail(where + ".content: expected a string or a list of {\"type\": ...} items");
  }
  for (std::size_t i = 0; i < content.size(); ++i) {
    auto item = parse_item(content[i], where + ".content[" + std::to_string(i) + "]", base, sample);
    if (!item) return item.error();
    out.items.push_back(std::move(*item));
  }
  return out;
}

}  // namespace

Result<SftSample> parse_sft_record(const json& record, const std::string& base_dir) {
  if (!record.contains("messages") || !record["messages"].is_array()) {
    return fail("messages: missing or not a list; each line needs {\"messages\": [...]}");
  }
  const json& messages = record["messages"];
  if (messages.empty()) return fail("messages: empty; give at least a user and an assistant turn");
  SftSample sample;
  bool assistant = false;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    auto m = parse_message(messages[i], "messages[" + std::to_string(i) + "]", base_dir, sample);
    if (!m) return m.error();
    assistant = assistant || m->role == "assistant";
    sample.messages.push_back(std::move(*m));
  }
  if (!assistant) {
    return fail("messages: no assistant turn, so nothing to learn; add the expected answer");
  }
  return sample;
}

Result<std::vector<SftSample>> load_sft_jsonl(const std::string& path) {
  std::error_code ec;
  std::filesystem::path file = std::filesystem::absolute(path, ec);
  std::string base = file.parent_path().string();
  std::vector<SftSample> samples;
  auto n = read_jsonl(path, [&](const json& record, const JsonlPosition& where) -> Result<void> {
    auto s = parse_sft_record(record, base);
    if (!s) return s.error();
    s->where = where;
    samples.push_back(std::move(*s));
    return ok();
  });
  if (!n) return n.error();
  return samples;
}

}  // namespace shardscope::data
