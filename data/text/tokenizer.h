// Byte-level BPE tokenizer read from a Hugging Face tokenizer.json (Qwen2's layout: an NFC
// normaliser, a Split pre-tokenizer with Qwen2's regex followed by ByteLevel, a BPE model with
// merges, and added/special tokens). Torch-free: the GUI previews samples with it.
//
// Encoding follows the `tokenizers` library: added tokens are split out first (leftmost,
// longest match, on the raw text), each remaining segment is NFC-normalised, split by the
// pre-tokenizer regex (PCRE2, UTF + UCP), mapped byte -> unicode, and merged by rank.
// Arbitrary bytes (even invalid UTF-8) encode: every byte has a token of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spec/result.h"

namespace shardscope::data {

/// A token and the byte range [begin, end) of the text it came from (in encode's input).
struct TokenSpan {
  std::int32_t id = 0;
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

/// An entry of tokenizer.json's "added_tokens".
struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool special = false;  // special tokens are not matched when allow_special is false
  bool lstrip = false;   // the match takes the whitespace on its left
  bool rstrip = false;   // the match takes the whitespace on its right
};

class Tokenizer {
 public:
  /// Loads `path`: a tokenizer.json file, or a directory holding one. Errors name the file and
  /// the field (an unknown model type, pre-tokenizer or normaliser, a merge of unknown tokens).
  static Result<Tokenizer> load(const std::string& path);
  /// Parses tokenizer.json text; `origin` names it in error messages.
  static Result<Tokenizer> from_json(const std::string& json_text, const std::string& origin);

  /// Token ids of `text`; with allow_special false, special tokens are encoded as plain text.
  std::vector<std::int32_t> encode(std::string_view text, bool allow_special = true) const;
  /// As encode, with each token's byte range in `text` (a token inside a run that NFC changed
  /// gets the range of that run).
  std::vector<TokenSpan> encode_with_offsets(std::string_view text,
                                             bool allow_special = true) const;
  /// The bytes the ids stand for (not checked to be valid UTF-8).
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special = false) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  /// The token's string as tokenizer.json spells it (byte-level form); nullopt if unknown.
  std::optional<std::string> id_to_token(std::int32_t id) const;
  /// Largest id + 1, over the BPE vocabulary and the added tokens.
  std::int64_t vocab_size() const;
  const std::vector<AddedToken>& added_tokens() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> m_impl;
};

/// The character that stands for byte `b` in a byte-level vocabulary, UTF-8 encoded: GPT-2's
/// byte-to-unicode map (printable Latin-1 bytes stand for themselves, the others for code points
/// from 256 on), which tokenizer.json files of byte-level BPE models spell their tokens in.
std::string byte_level_char(unsigned char b);

}  // namespace shardscope::data
