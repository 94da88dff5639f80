// The Qwen2-VL chat template and supervised-fine-tuning labels. render_qwen2vl_chat produces
// exactly the string transformers' apply_chat_template produces with Qwen2-VL's official
// template; tokenize_chat tokenizes it, labels each assistant turn's content and its <|im_end|>
// (-100 elsewhere), and repeats <|image_pad|> the number of merged image tokens of each image.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/text/tokenizer.h"
#include "spec/result.h"

namespace shardscope::data {

/// One content item of a message: text, or an image (its path; not read here).
struct ChatItem {
  enum class Kind { Text, Image };
  Kind kind = Kind::Text;
  std::string text;   // Kind::Text
  std::string image;  // Kind::Image: the path as resolved by the loader
};

/// A turn. `plain` marks string content (rendered as is); otherwise `items` are rendered.
struct ChatMessage {
  std::string role;  // system, user or assistant
  bool plain = false;
  std::string text;  // when plain
  std::vector<ChatItem> items;
};

struct ChatOptions {
  bool add_generation_prompt = false;  // end with "<|im_start|>assistant\n"
  bool add_vision_id = false;          // "Picture N: " before each image
};

/// The rendered conversation and the byte ranges [begin, end) that carry labels: each
/// assistant turn's content and its <|im_end|>.
struct RenderedChat {
  std::string text;
  std::vector<std::pair<std::int64_t, std::int64_t>> label_spans;
  std::int64_t images = 0;
};

RenderedChat render_qwen2vl_chat(const std::vector<ChatMessage>& messages,
                                 const ChatOptions& options = {});

/// A tokenized training sample.
struct ChatSample {
  std::vector<std::int64_t> input_ids;  // (T)
  std::vector<std::int64_t> labels;     // (T), -100 = no loss
};

/// Tokenizes the rendered conversation; `image_tokens[i]` is the number of merged tokens of
/// image i (grid_t * grid_h * grid_w / 4), each image's <|image_pad|> is repeated that many
/// times (label -100). Errors if the counts do not match the images or the tokenizer lacks
/// Qwen2-VL's special tokens.
Result<ChatSample> tokenize_chat(const Tokenizer& tokenizer,
                                 const std::vector<ChatMessage>& messages,
                                 const std::vector<std::int64_t>& image_tokens,
                                 const ChatOptions& options = {});

}  // namespace shardscope::data
