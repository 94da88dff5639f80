// Rendering follows the official Qwen2-VL Jinja template line by line (see chat.h).
#include "data/text/chat.h"

namespace shardscope::data {
namespace {

constexpr const char* kDefaultSystem = "You are a helpful assistant.";

void render_items(const ChatMessage& m, const ChatOptions& options, RenderedChat& out) {
  if (m.plain) {
    out.text += m.text;
    return;
  }
  for (const ChatItem& item : m.items) {
    if (item.kind == ChatItem::Kind::Image) {
      ++out.images;
      if (options.add_vision_id) out.text += "Picture " + std::to_string(out.images) + ": ";
      out.text += "<|vision_start|><|image_pad|><|vision_end|>";
    } else {
      out.text += item.text;
    }
  }
}

}  // namespace

RenderedChat render_qwen2vl_chat(const std::vector<ChatMessage>& messages,
                                 const ChatOptions& options) {
  RenderedChat out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (i == 0 && m.role != "system") {
      out.text += std::string("<|im_start|>system\n") + kDefaultSystem + "<|im_end|>\n";
    }
    out.text += "<|im_start|>" + m.role + "\n";
    auto begin = static_cast<std::int64_t>(out.text.size());
    render_items(m, options, out);
    out.text += "<|im_end|>";
    if (m.role == "assistant") {
      out.label_spans.emplace_back(begin, static_cast<std::int64_t>(out.text.size()));
    }
    out.text += "\n";
  }
  if (options.add_generation_prompt) out.text += "<|im_start|>assistant\n";
  return out;
}

Result<ChatSample> tokenize_chat(const Tokenizer& tokenizer,
                                 const std::vector<ChatMessage>& messages,
                                 const std::vector<std::int64_t>& image_tokens,
                                 const ChatOptions& options) {
  RenderedChat chat = render_qwen2vl_chat(messages, options);
  if (chat.images != static_cast<std::int64_t>(image_tokens.size())) {
    return fail("chat: the conversation has " + std::to_string(chat.images) +
                " images but token counts were given for " + std::to_string(image_tokens.size()));
  }
  auto pad = tokenizer.token_to_id("<|image_pad|>");
  if (chat.images > 0 && !pad) {
    return fail("tokenizer: no <|image_pad|> token; use a Qwen2-VL tokenizer for image samples");
  }
  ChatSample sample;
  std::size_t span = 0;
  std::size_t image = 0;
  std::int64_t pads = 0;
  for (const TokenSpan& t : tokenizer.encode_with_offsets(chat.text)) {
    if (pad && t.id == *pad) ++pads;
    if (pad && t.id == *pad && image < image_tokens.size()) {
      std::int64_t n = image_tokens[image++];
      if (n < 1)
        return fail("chat: image " + std::to_string(image - 1) + " has " + std::to_string(n) +
                    " tokens; it needs at least 1");
      sample.input_ids.insert(sample.input_ids.end(), n, t.id);
      sample.labels.insert(sample.labels.end(), n, -100);
      continue;
    }
    // Spans are in order: skip those that end before this token; a token overlapping one
    // (a token may straddle the start of an assistant turn's content) is labelled.
    while (span < chat.label_spans.size() && chat.label_spans[span].second <= t.begin) ++span;
    bool labelled = span < chat.label_spans.size() && t.begin < chat.label_spans[span].second &&
                    t.end > chat.label_spans[span].first;
    sample.input_ids.push_back(t.id);
    sample.labels.push_back(labelled ? t.id : -100);
  }
  if (pads != chat.images) {
    return fail(
        "chat: a message's text contains <|image_pad|> itself; remove it (images are "
        "given as {\"type\": \"image\"} items)");
  }
  return sample;
}

}  // namespace shardscope::data
