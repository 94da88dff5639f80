// Internal state of Tokenizer, shared by the loader (tokenizer_load.cpp) and the encoder
// (tokenizer.cpp). Not part of the public API.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/text/tokenizer.h"

namespace shardscope::data {

/// One pre-tokenizer split: a compiled regex and what happens to its matches.
struct SplitRegex {
  struct Free {
    void operator()(pcre2_code* code) const { pcre2_code_free(code); }
  };
  std::unique_ptr<pcre2_code, Free> code;
  bool remove_matches = false;  // behavior "Removed"; otherwise "Isolated"
};

/// A BPE output symbol: its id and byte range inside the pre-tokenized piece.
struct BpeSymbol {
  std::int32_t id = 0;
  std::int32_t offset = 0;
  std::int32_t length = 0;
};

/// Merge rules by (left id, right id): open addressing, as the lookup is the encoder's hot path.
class MergeTable {
 public:
  struct Entry {
    std::uint64_t key = kEmpty;
    std::int32_t rank = 0;
    std::int32_t merged = 0;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

  static std::uint64_t key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }
  /// Sizes the table for `count` entries (call before insert).
  void reserve(std::size_t count) {
    std::size_t capacity = 16;
    while (capacity < 2 * count) capacity *= 2;
    m_entries.assign(capacity, Entry{});
    m_mask = capacity - 1;
  }
  /// A repeated key takes the later entry, as tokenizers' map from the merge list does.
  void insert(std::uint64_t k, std::int32_t rank, std::int32_t merged) {
    std::size_t i = slot(k);
    while (m_entries[i].key != kEmpty && m_entries[i].key != k) i = (i + 1) & m_mask;
    m_entries[i] = {k, rank, merged};
  }
  const Entry* find(std::uint64_t k) const {
    if (m_entries.empty()) return nullptr;
    for (std::size_t i = slot(k);; i = (i + 1) & m_mask) {
      if (m_entries[i].key == k) return &m_entries[i];
      if (m_entries[i].key == kEmpty) return nullptr;
    }
  }

 private:
  std::size_t slot(std::uint64_t k) const {
    return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> 32) & m_mask;
  }
  std::vector<Entry> m_entries;
  std::size_t m_mask = 0;
};

/// Hash for string keys looked up by string_view without a copy.
struct PieceHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Tokenizer::Impl {
  std::string origin;  // the file, for messages
  std::unordered_map<std::string, std::int32_t> vocab;
  std::vector<std::string> tokens;       // by id; empty = no such id
  std::vector<std::uint8_t> added_kind;  // by id: 0 BPE, 1 added, 2 special
  MergeTable merges;
  std::array<std::int32_t, 256> byte_id{};     // the token of each single byte, -1 if none
  std::array<std::uint32_t, 256> byte_char{};  // byte -> code point (GPT-2 byte-to-unicode)
  std::array<std::int16_t, 512> char_byte{};   // code point -> byte, -1 if not a byte char
  bool ignore_merges = false;  // model.ignore_merges: a piece in the vocab is one token
  bool nfc = false;            // normalizer is NFC
  bool add_prefix_space = false;
  std::vector<SplitRegex> splits;  // applied in order
  std::vector<AddedToken> added;
  std::array<std::vector<std::int32_t>, 256> added_by_byte;  // indices into added, longest first

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<BpeSymbol>, PieceHash, std::equal_to<>>
      cache;  // piece -> symbols
};

/// Appends code point `cp` (below 0x10000) to `out` as UTF-8.
void append_utf8(std::string& out, std::uint32_t cp);

}  // namespace shardscope::data
