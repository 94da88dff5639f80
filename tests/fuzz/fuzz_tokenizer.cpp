// tokenizer.json loading and encoding (data/text/tokenizer*). An input that starts with
// '{' is a tokenizer.json: it must load or be refused naming the file; one that loads encodes a
// few texts. Any other input is text, encoded by a small Qwen2-style tokenizer with and without
// special tokens: every token id must be in the vocabulary and every span inside the text, in
// order, and the ids must decode (the byte-level BPE covers every byte).
#include <cstdint>
#include <string>
#include <vector>

#include "data/text/tokenizer.h"
#include "tests/data/text/tiny_loaded.h"
#include "tests/fuzz/fuzz_support.h"

using namespace shardscope;

namespace {

void check_encoding(const data::Tokenizer& tok, std::string_view text, bool allow_special) {
  const auto spans = tok.encode_with_offsets(text, allow_special);
  std::vector<std::int32_t> ids;
  std::int64_t last_begin = 0;
  for (const auto& s : spans) {
    if (s.id < 0 || s.id >= tok.vocab_size()) fuzz::broken("a token id outside the vocabulary");
    if (s.begin < last_begin || s.end < s.begin || s.end > std::int64_t(text.size()))
      fuzz::broken("a token span outside the text or out of order");
    last_begin = s.begin;
    ids.push_back(s.id);
  }
  if (ids != tok.encode(text, allow_special)) fuzz::broken("encode and its offsets disagree");
  (void)tok.decode(ids, /*skip_special=*/true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = fuzz::as_text(data, size);
  if (!text.empty() && text.front() == '{') {
    auto loaded = data::Tokenizer::from_json(std::string(text), "fuzz-tokenizer.json");
    if (!loaded) {
      fuzz::expect_clear_error(loaded.message(), "fuzz-tokenizer.json");
      return 0;
    }
    for (const char* sample : {"Hello world's 123 <|im_start|>x", "\xE1\x80 \r\n\t  a", ""})
      check_encoding(*loaded, sample, true);
    return 0;
  }
  const auto& loaded = tiny::tokenizer([](const std::string& why) { fuzz::broken(why); });
  check_encoding(loaded, text, true);
  check_encoding(loaded, text, false);
  return 0;
}
