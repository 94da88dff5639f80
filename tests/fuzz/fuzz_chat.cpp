// The Qwen2-VL chat template (data/text/chat, sft): the input is one SFT record
// {"messages": [...]}. A valid record renders with every option, its label spans lie inside the
// text in order, and it tokenizes with one image size per image: labels match the ids one to one.
#include <nlohmann/json.hpp>

#include "data/text/chat.h"
#include "data/text/sft.h"
#include "tests/data/text/tiny_loaded.h"
#include "tests/fuzz/fuzz_support.h"

using namespace shardscope;

namespace {

const data::Tokenizer& tiny_tokenizer() {
  return tiny::tokenizer([](const std::string& why) { fuzz::broken(why); });
}

void check_render(const std::vector<data::ChatMessage>& messages, const data::ChatOptions& opt) {
  const auto chat = data::render_qwen2vl_chat(messages, opt);
  std::int64_t last_end = 0;
  for (const auto& [begin, end] : chat.label_spans) {
    if (begin < last_end || end < begin || end > std::int64_t(chat.text.size()))
      fuzz::broken("a label span outside the rendered text or out of order");
    last_end = end;
  }
  std::vector<std::int64_t> image_tokens(static_cast<std::size_t>(chat.images), 3);
  auto sample = data::tokenize_chat(tiny_tokenizer(), messages, image_tokens, opt);
  if (!sample) {
    fuzz::expect_clear_error(sample.message());
    return;
  }
  if (sample->input_ids.size() != sample->labels.size())
    fuzz::broken("labels and input ids differ in length");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto record = nlohmann::json::parse(fuzz::as_text(data, size), nullptr, false);
  if (record.is_discarded()) return 0;
  auto sample = data::parse_sft_record(record, "/data");
  if (!sample) {
    fuzz::expect_clear_error(sample.message());
    return 0;
  }
  for (bool generation : {false, true})
    for (bool vision_id : {false, true}) check_render(sample->messages, {generation, vision_id});
  return 0;
}
