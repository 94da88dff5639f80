// Reads tokenizer.json into Tokenizer::Impl, refusing what the encoder does not implement with
// a message that names the file and the field.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/text/tokenizer_impl.h"

namespace shardscope::data {
namespace {

using nlohmann::json;

// GPT-2's pre-tokenizer regex, used by ByteLevel when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Error field_error(const Tokenizer::Impl& impl, const std::string& field, const std::string& what) {
  return fail(impl.origin + ": " + field + ": " + what);
}

// The GPT-2 byte-to-unicode map: printable Latin-1 bytes stand for themselves, the others
// are shifted to code points from 256 on, so every byte is one visible character.
std::uint32_t byte_level_code_point(std::uint32_t b) {
  auto printable = [](std::uint32_t x) {
    return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
  };
  if (printable(b)) return b;
  std::uint32_t shifted = 0;
  for (std::uint32_t x = 0; x < b; ++x) shifted += printable(x) ? 0U : 1U;
  return 256 + shifted;
}

void build_byte_tables(Tokenizer::Impl& impl) {
  impl.char_byte.fill(-1);
  for (std::uint32_t b = 0; b < 256; ++b) {
    impl.byte_char[b] = byte_level_code_point(b);
    impl.char_byte[impl.byte_char[b]] = static_cast<std::int16_t>(b);
  }
}

std::string utf8(std::uint32_t cp) {
  std::string out;
  append_utf8(out, cp);
  return out;
}

// Token ids index a table: one past the largest id sizes it. Real vocabularies stay far below
// 2^24 (Qwen2: 151,646 + added tokens); a larger or negative id is a broken file, refused before
// anything is allocated (an id of -1 wrote before the table, 2e9 asked for 2e9 strings).
constexpr std::int64_t kMaxTokenId = std::int64_t{1} << 24;

bool id_in_range(const json& id) {
  return id.is_number_integer() && id.get<std::int64_t>() >= 0 &&
         id.get<std::int64_t>() < kMaxTokenId;
}

std::string id_range_error(const json& id) {
  return "id " + id.dump() + " is not an integer in [0, " + std::to_string(kMaxTokenId) + ")";
}

void put_token(Tokenizer::Impl& impl, std::int32_t id, const std::string& token,
               std::uint8_t kind) {
  if (static_cast<std::size_t>(id) >= impl.tokens.size()) {
    impl.tokens.resize(id + 1);
    impl.added_kind.resize(id + 1, 0);
  }
  impl.tokens[id] = token;
  impl.added_kind[id] = kind;
}

Result<void> load_vocab_and_merges(Tokenizer::Impl& impl, const json& model) {
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return field_error(impl, "model.vocab", "missing or not an object of token -> id");
  }
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id_in_range(id)) {
      return field_error(impl, "model.vocab[\"" + token + "\"]", id_range_error(id));
    }
    impl.vocab.emplace(token, id.get<std::int32_t>());
    put_token(impl, id.get<std::int32_t>(), token, 0);
  }
  static const json kNone = json::array();
  const json& merges = model.contains("merges") ? model["merges"] : kNone;
  if (!merges.is_array()) return field_error(impl, "model.merges", "not a list");
  impl.merges.reserve(merges.size());
  std::int32_t rank = 0;
  for (const auto& merge : merges) {
    std::string left;
    std::string right;
    if (merge.is_string()) {  // the older "a b" form
      auto text = merge.get<std::string>();
      auto space = text.find(' ');
      if (space == std::string::npos) {
        return field_error(impl, "model.merges[" + std::to_string(rank) + "]",
                           "'" + text + "' is not two tokens separated by a space");
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return field_error(impl, "model.merges[" + std::to_string(rank) + "]",
                         "expected \"a b\" or [\"a\", \"b\"]");
    }
    auto l = impl.vocab.find(left);
    auto r = impl.vocab.find(right);
    auto m = impl.vocab.find(left + right);
    if (l == impl.vocab.end() || r == impl.vocab.end() || m == impl.vocab.end()) {
      std::string what = "merge '";
      what.append(left).append("' + '").append(right).append(
          "' uses or makes a token missing from model.vocab; the file is inconsistent, re-save "
          "it with the tokenizers library");
      return field_error(impl, "model.merges[" + std::to_string(rank) + "]", what);
    }
    impl.merges.insert(MergeTable::key(l->second, r->second), rank, m->second);
    ++rank;
  }
  return ok();
}

Result<void> load_model(Tokenizer::Impl& impl, const json& root) {
  if (!root.contains("model") || !root["model"].is_object()) {
    return field_error(impl, "model", "missing; not a Hugging Face tokenizer.json");
  }
  const json& model = root["model"];
  std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") {
    return field_error(impl, "model.type",
                       "'" + type +
                           "' is not supported; only byte-level BPE tokenizers "
                           "(Qwen2, GPT-2 style) are");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() &&
        !(model[key].is_string() && model[key].get<std::string>().empty())) {
      return field_error(impl, std::string("model.") + key,
                         "set, but byte-level BPE does not use it; not supported");
    }
  }
  if (model.contains("dropout") && !model["dropout"].is_null()) {
    return field_error(impl, "model.dropout", "BPE dropout is for training only; set it to null");
  }
  impl.ignore_merges = model.value("ignore_merges", false);
  return load_vocab_and_merges(impl, model);
}

Result<void> load_normalizer(Tokenizer::Impl& impl, const json& root) {
  const json& norm = root.value("normalizer", json());
  if (norm.is_null()) return ok();
  std::vector<std::pair<std::string, json>> steps;
  std::string type = norm.value("type", std::string());
  if (type == "Sequence") {
    std::int64_t i = 0;
    for (const auto& step : norm.value("normalizers", json::array())) {
      steps.emplace_back("normalizer.normalizers[" + std::to_string(i++) + "]", step);
    }
  } else {
    steps.emplace_back("normalizer", norm);
  }
  for (const auto& [where, step] : steps) {
    std::string t = step.value("type", std::string());
    if (t != "NFC") {
      return field_error(impl, where + ".type",
                         "'" + t + "' is not supported; only NFC (Qwen2's normaliser) is");
    }
    impl.nfc = true;
  }
  return ok();
}

// Oniguruma (which tokenizers uses) reads \s as Unicode White_Space; PCRE2's UCP \s also takes
// U+180E and leaves out nothing else, so \s is spelled out here to give the same pieces.
constexpr const char* kWhiteSpace =
    R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string spell_out_spaces(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char e = pattern[++i];
      if (e == 's' || (e == 'S' && !in_class)) {
        if (!in_class) out.append(e == 's' ? "[" : "[^");
        out.append(kWhiteSpace);
        if (!in_class) out.append("]");
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

Result<void> add_split(Tokenizer::Impl& impl, const std::string& where, const std::string& pattern,
                       bool literal, bool remove_matches) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  std::uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
  if (literal) options |= PCRE2_LITERAL;
  std::string spelled = literal ? pattern : spell_out_spaces(pattern);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(spelled.c_str()), spelled.size(),
                                   options, &error, &offset, nullptr);
  if (code == nullptr) {
    std::array<PCRE2_UCHAR, 256> text{};
    pcre2_get_error_message(error, text.data(), text.size());
    return field_error(impl, where,
                       "the regex does not compile at offset " + std::to_string(offset) + ": " +
                           reinterpret_cast<const char*>(text.data()));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT (unsupported CPU) it still works
  SplitRegex split;
  split.code.reset(code);
  split.remove_matches = remove_matches;
  impl.splits.push_back(std::move(split));
  return ok();
}

Result<void> load_pre_step(Tokenizer::Impl& impl, const std::string& where, const json& step,
                           bool& byte_level) {
  std::string type = step.value("type", std::string());
  if (type == "ByteLevel") {
    byte_level = true;
    impl.add_prefix_space = step.value("add_prefix_space", false);
    if (step.value("use_regex", true)) return add_split(impl, where, kGpt2Pattern, false, false);
    return ok();
  }
  if (type != "Split") {
    return field_error(impl, where + ".type",
                       "'" + type + "' is not supported; only Split and ByteLevel are");
  }
  const json& pattern = step.value("pattern", json::object());
  std::string behavior = step.value("behavior", std::string("Isolated"));
  if (step.value("invert", false)) {
    return field_error(impl, where + ".invert", "true is not supported");
  }
  if (behavior != "Isolated" && behavior != "Removed") {
    return field_error(impl, where + ".behavior",
                       "'" + behavior + "' is not supported; only Isolated and Removed are");
  }
  bool removed = behavior == "Removed";
  if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
    return add_split(impl, where + ".pattern.Regex", pattern["Regex"].get<std::string>(), false,
                     removed);
  }
  if (pattern.contains("String") && pattern["String"].is_string()) {
    return add_split(impl, where + ".pattern.String", pattern["String"].get<std::string>(), true,
                     removed);
  }
  return field_error(impl, where + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
}

Result<void> load_pre_tokenizer(Tokenizer::Impl& impl, const json& root) {
  const json& pre = root.value("pre_tokenizer", json());
  if (!pre.is_object()) {
    return field_error(impl, "pre_tokenizer",
                       "missing; a byte-level BPE tokenizer needs a ByteLevel pre-tokenizer");
  }
  bool byte_level = false;
  if (pre.value("type", std::string()) == "Sequence") {
    std::int64_t i = 0;
    for (const auto& step : pre.value("pretokenizers", json::array())) {
      auto r = load_pre_step(impl, "pre_tokenizer.pretokenizers[" + std::to_string(i++) + "]", step,
                             byte_level);
      if (!r) return r;
    }
  } else {
    auto r = load_pre_step(impl, "pre_tokenizer", pre, byte_level);
    if (!r) return r;
  }
  if (!byte_level) {
    return field_error(impl, "pre_tokenizer",
                       "has no ByteLevel step; only byte-level BPE tokenizers are supported");
  }
  return ok();
}

Result<void> load_added_tokens(Tokenizer::Impl& impl, const json& root) {
  std::int64_t i = 0;
  for (const auto& entry : root.value("added_tokens", json::array())) {
    std::string where = "added_tokens[" + std::to_string(i++) + "]";
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_integer() ||
        !entry.contains("content") || !entry["content"].is_string() ||
        entry["content"].get<std::string>().empty()) {
      return field_error(impl, where, "needs an integer id and a non-empty content string");
    }
    if (!id_in_range(entry["id"]))
      return field_error(impl, where + ".id", id_range_error(entry["id"]));
    AddedToken token;
    token.content = entry["content"].get<std::string>();
    token.id = entry["id"].get<std::int32_t>();
    token.special = entry.value("special", false);
    token.lstrip = entry.value("lstrip", false);
    token.rstrip = entry.value("rstrip", false);
    put_token(impl, token.id, token.content, token.special ? 2 : 1);
    impl.added.push_back(token);
  }
  for (std::size_t k = 0; k < impl.added.size(); ++k) {
    auto first = static_cast<unsigned char>(impl.added[k].content[0]);
    impl.added_by_byte[first].push_back(static_cast<std::int32_t>(k));
  }
  for (auto& list : impl.added_by_byte) {
    std::stable_sort(list.begin(), list.end(), [&](std::int32_t a, std::int32_t b) {
      return impl.added[a].content.size() > impl.added[b].content.size();
    });
  }
  return ok();
}

Result<void> check_decoder(Tokenizer::Impl& impl, const json& root) {
  const json& decoder = root.value("decoder", json());
  if (decoder.is_null()) return ok();
  std::string type = decoder.value("type", std::string());
  if (type != "ByteLevel") {
    return field_error(impl, "decoder.type",
                       "'" + type + "' is not supported; a byte-level BPE uses ByteLevel");
  }
  return ok();
}

}  // namespace

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string byte_level_char(unsigned char b) { return utf8(byte_level_code_point(b)); }

Tokenizer::Tokenizer(std::shared_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Result<Tokenizer> Tokenizer::from_json(const std::string& json_text, const std::string& origin) {
  auto impl = std::make_shared<Impl>();
  impl->origin = origin;
  json root = json::parse(json_text, nullptr, false);
  if (root.is_discarded() || !root.is_object()) {
    return fail(origin + ": not a JSON object; expected a Hugging Face tokenizer.json");
  }
  build_byte_tables(*impl);
  using Step = Result<void> (*)(Tokenizer::Impl&, const json&);
  const std::pair<const char*, Step> steps[] = {{"model", load_model},
                                                {"normalizer", load_normalizer},
                                                {"pre_tokenizer", load_pre_tokenizer},
                                                {"added_tokens", load_added_tokens},
                                                {"decoder", check_decoder}};
  for (const auto& [section, step] : steps) {
    // The steps read optional fields with json::value() and get<>(), which throw when a field
    // has another type ({"model": {"type": 1}} ended the process); that is a broken file too.
    try {
      auto r = step(*impl, root);
      if (!r) return r.error();
    } catch (const json::exception& e) {
      return fail(origin + ": " + section + ": a field has the wrong type (" + e.what() +
                  "); re-save the file with the tokenizers library");
    }
  }
  for (std::uint32_t b = 0; b < 256; ++b) {
    auto it = impl->vocab.find(utf8(impl->byte_char[b]));
    impl->byte_id[b] = it == impl->vocab.end() ? -1 : it->second;
  }
  return Tokenizer(std::move(impl));
}

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  std::filesystem::path file(path);
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) file /= "tokenizer.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return fail(file.string() +
                ": cannot open; give a tokenizer.json or the model directory holding it");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return from_json(text.str(), file.string());
}

}  // namespace shardscope::data
