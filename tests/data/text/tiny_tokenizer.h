// A small byte-level BPE tokenizer.json written by hand for the unit tests: the 256 byte tokens
// (id = byte value), a few merges and Qwen2-VL's special tokens, with Qwen2's normaliser and
// pre-tokenizer. Ids: he 256, ll 257, hell 258, hello 259, bc 260 (rank 4), ab 261 (rank 5),
// "Ġá" 262 (a space and the byte 0xE1).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "data/text/tokenizer.h"

namespace tiny {

inline constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

inline nlohmann::json added(int id, const char* content, bool special) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", special}};
}

/// The tokenizer.json document; tests edit it to make bad variants.
inline nlohmann::json document() {
  nlohmann::json vocab = nlohmann::json::object();
  for (unsigned b = 0; b < 256; ++b) {
    vocab[shardscope::data::byte_level_char(static_cast<unsigned char>(b))] = b;
  }
  const char* merged[][2] = {{"h", "e"},
                             {"l", "l"},
                             {"he", "ll"},
                             {"hell", "o"},
                             {"b", "c"},
                             {"a", "b"},
                             {"\xc4\xa0", "\xc3\xa1"}};
  nlohmann::json merges = nlohmann::json::array();
  int id = 256;
  for (auto& m : merged) {
    vocab[std::string(m[0]) + m[1]] = id++;
    merges.push_back({m[0], m[1]});
  }
  nlohmann::json added_tokens = nlohmann::json::array(
      {added(300, "<|endoftext|>", true), added(301, "<|im_start|>", true),
       added(302, "<|im_end|>", true), added(303, "<|vision_start|>", true),
       added(304, "<|vision_end|>", true), added(305, "<|image_pad|>", true),
       added(306, "<tool_call>", false), added(307, "<|x|>", true), added(308, "<|x|>y", true)});
  return {
      {"version", "1.0"},
      {"added_tokens", added_tokens},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", kQwen2Pattern}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}}};
}

}  // namespace tiny
