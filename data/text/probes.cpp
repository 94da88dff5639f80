#include "data/text/probes.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

namespace shardscope::data {
namespace {

using nlohmann::json;

// The text items of the last user turn, joined: what a person reads as the question.
std::string last_user_text(const std::vector<ChatMessage>& messages) {
  for (auto m = messages.rbegin(); m != messages.rend(); ++m) {
    if (m->role != "user") continue;
    if (m->plain) return m->text;
    std::string out;
    for (const auto& item : m->items)
      if (item.kind == ChatItem::Kind::Text) out += item.text;
    return out;
  }
  return {};
}

Result<Probe> parse_probe(const json& record, const JsonlPosition& where, const std::string& base) {
  Probe probe;
  probe.id = std::to_string(where.line);
  if (auto id = record.find("id"); id != record.end()) {
    if (id->is_string() && !id->get<std::string>().empty())
      probe.id = id->get<std::string>();
    else if (id->is_number_integer())
      probe.id = std::to_string(id->get<std::int64_t>());
    else
      return fail(
          "id: expected a non-empty string or an integer; name the probe, or leave id "
          "out to use the line number");
  }
  if (auto ref = record.find("reference"); ref != record.end()) {
    if (!ref->is_string() || ref->get<std::string>().empty())
      return fail(
          "reference: expected the expected answer as a non-empty string; leave it out "
          "for a probe without one");
    probe.reference = ref->get<std::string>();
  }
  auto messages = record.find("messages");
  if (messages == record.end() || !messages->is_array() || messages->empty())
    return fail(
        "messages: missing or not a non-empty list; each probe needs {\"messages\": "
        "[{\"role\": \"user\", ...}]}");
  const json& last = messages->back();
  if (last.is_object() && last.value("role", "") == "assistant")
    return fail("messages[" + std::to_string(messages->size() - 1) +
                "]: the last turn is an assistant's, but a probe ends where the model answers; "
                "move that answer to \"reference\"");
  // An empty assistant turn: its only label is the <|im_end|> after "<|im_start|>assistant\n",
  // so the tokens before it are the generation prompt.
  json conversation = json::object();
  conversation["messages"] = *messages;
  conversation["messages"].push_back({{"role", "assistant"}, {"content", ""}});
  auto sample = parse_sft_record(conversation, base);
  if (!sample) return sample.error();
  sample->where = where;
  probe.prompt = last_user_text(sample->messages);
  probe.sample = std::move(*sample);
  return probe;
}

// Code points of UTF-8 `s`; a byte that starts no valid sequence is one code point of its own.
std::vector<std::uint32_t> code_points(const std::string& s) {
  std::vector<std::uint32_t> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80           ? 1
                          : (c >> 5) == 0x6  ? 2
                          : (c >> 4) == 0xE  ? 3
                          : (c >> 3) == 0x1E ? 4
                                             : 0;
    bool valid = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; valid && k < n; ++k)
      valid = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (!valid) {
      out.push_back(0x110000U + c);  // outside Unicode: never equal to a real code point
      ++i;
      continue;
    }
    std::uint32_t cp = n == 1 ? c : c & (0x7FU >> n);
    for (std::size_t k = 1; k < n; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3FU);
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  const char* ws = " \t\n\r\f\v";
  for (auto b = s.find_first_not_of(ws); b != std::string::npos;) {
    const auto e = s.find_first_of(ws, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    b = e == std::string::npos ? e : s.find_first_not_of(ws, e);
  }
  return out;
}

std::string stripped(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const auto b = s.find_first_not_of(ws);
  return b == std::string::npos ? std::string() : s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

Result<std::vector<Probe>> load_probes(const std::string& path) {
  std::error_code ec;
  const std::string base = std::filesystem::absolute(path, ec).parent_path().string();
  std::vector<Probe> probes;
  std::map<std::string, std::int64_t> seen;  // id -> line
  auto n = read_jsonl(path, [&](const json& record, const JsonlPosition& where) -> Result<void> {
    auto probe = parse_probe(record, where, base);
    if (!probe) return probe.error();
    if (auto [it, fresh] = seen.emplace(probe->id, where.line); !fresh)
      return fail("id: \"" + probe->id + "\" is also the id of line " + std::to_string(it->second) +
                  "; give every probe its own id");
    probes.push_back(std::move(*probe));
    return ok();
  });
  if (!n) return n.error();
  if (probes.empty()) return fail(path + ": no probes; add at least one JSONL line");
  return probes;
}

bool text_exact_match(const std::string& text, const std::string& reference) {
  return stripped(text) == stripped(reference);
}

double token_f1(const std::string& text, const std::string& reference) {
  const auto got = words(text);
  const auto want = words(reference);
  if (got.empty() || want.empty()) return got.empty() && want.empty() ? 1.0 : 0.0;
  std::map<std::string, std::int64_t> counts;
  for (const auto& w : want) ++counts[w];
  std::int64_t common = 0;
  for (const auto& w : got) {
    if (auto it = counts.find(w); it != counts.end() && it->second > 0) {
      --it->second;
      ++common;
    }
  }
  if (common == 0) return 0.0;
  const double precision = static_cast<double>(common) / static_cast<double>(got.size());
  const double recall = static_cast<double>(common) / static_cast<double>(want.size());
  return 2 * precision * recall / (precision + recall);
}

double char_error_rate(const std::string& text, const std::string& reference) {
  const auto a = code_points(text);
  const auto b = code_points(reference);
  if (b.empty()) return a.empty() ? 0.0 : 1.0;
  // Two rows of the edit-distance table: row[j] = distance(a[:i], b[:j]).
  std::vector<std::size_t> prev(b.size() + 1);
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      row[j] =
          std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
    std::swap(prev, row);
  }
  return static_cast<double>(prev[b.size()]) / static_cast<double>(b.size());
}

ProbeScores score_answer(const std::string& text, const std::string& reference) {
  return {text_exact_match(text, reference), token_f1(text, reference),
          char_error_rate(text, reference)};
}

}  // namespace shardscope::data
