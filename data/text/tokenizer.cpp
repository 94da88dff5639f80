// Encoding and decoding with a loaded byte-level BPE (see tokenizer.h for the pipeline).
#include "data/text/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <queue>

#include "data/text/tokenizer_impl.h"

namespace shardscope::data {
namespace {

constexpr std::size_t kCacheMaxPieceBytes = 128;
constexpr std::size_t kCacheMaxEntries = 200000;

/// A segment after normalisation, with the map back to the input's byte offsets: a normalised
/// byte position p maps to [lo[p], hi[p]] (equal outside runs that NFC changed).
struct Normalized {
  std::string text;
  std::vector<std::int64_t> lo;
  std::vector<std::int64_t> hi;
  bool identity = true;  // text equals the input segment; lo/hi are unused
};

void append_identity(Normalized& out, std::string_view src, std::int64_t src_pos, std::size_t n) {
  if (!out.identity) {
    for (std::size_t i = 0; i < n; ++i) {
      out.lo.push_back(src_pos + static_cast<std::int64_t>(i));
      out.hi.push_back(src_pos + static_cast<std::int64_t>(i));
    }
  }
  out.text.append(src.substr(static_cast<std::size_t>(src_pos), n));
}

void switch_to_mapped(Normalized& out, std::int64_t seg_begin) {
  if (!out.identity) return;
  out.identity = false;
  for (std::size_t i = 0; i < out.text.size(); ++i) {
    out.lo.push_back(seg_begin + static_cast<std::int64_t>(i));
    out.hi.push_back(seg_begin + static_cast<std::int64_t>(i));
  }
}

// NFC of text[begin, end). A position before an ASCII character is a safe cut (ASCII is a
// starter that never composes with what precedes it), so each run of non-ASCII bytes is
// normalised together with the one ASCII character before it, and the rest is copied.
Normalized nfc_segment(std::string_view text, std::int64_t begin, std::int64_t end) {
  Normalized out;
  out.text.reserve(static_cast<std::size_t>(end - begin));
  std::int64_t i = begin;
  while (i < end) {
    std::int64_t j = i;
    while (j < end && static_cast<unsigned char>(text[j]) < 0x80) ++j;
    if (j == end) {
      append_identity(out, text, i, static_cast<std::size_t>(end - i));
      break;
    }
    std::int64_t chunk = j > i ? j - 1 : j;
    append_identity(out, text, i, static_cast<std::size_t>(chunk - i));
    std::int64_t k = j;
    while (k < end && static_cast<unsigned char>(text[k]) >= 0x80) ++k;
    utf8proc_uint8_t* mapped = nullptr;
    auto n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + chunk), k - chunk,
                     &mapped, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    std::string_view piece =
        text.substr(static_cast<std::size_t>(chunk), static_cast<std::size_t>(k - chunk));
    if (n < 0 || std::string_view(reinterpret_cast<char*>(mapped), n) == piece) {
      append_identity(out, text, chunk, piece.size());  // unchanged, or not valid UTF-8
    } else {
      switch_to_mapped(out, begin);
      out.text.append(reinterpret_cast<char*>(mapped), static_cast<std::size_t>(n));
      out.lo.push_back(chunk);
      out.hi.push_back(chunk);
      for (decltype(n) b = 1; b < n; ++b) {
        out.lo.push_back(chunk);
        out.hi.push_back(k);
      }
    }
    std::free(mapped);  // NOLINT(cppcoreguidelines-no-malloc): utf8proc allocates with malloc
    i = k;
  }
  if (!out.identity) {
    out.lo.push_back(end);
    out.hi.push_back(end);
  }
  return out;
}

using Piece = std::pair<std::size_t, std::size_t>;  // [begin, end) in the normalised text

// Splits each piece by one regex; matches and the gaps between them become pieces.
void split_pieces(const SplitRegex& split, std::string_view text, std::vector<Piece>& pieces,
                  pcre2_match_data* md) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (auto [begin, end] : pieces) {
    std::size_t pos = begin;
    std::size_t gap = begin;
    while (pos < end) {
      int rc = pcre2_match(split.code.get(), subject, end, pos, 0, md, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_match(split.code.get(), subject, end, pos, PCRE2_NO_JIT, md, nullptr);
      }
      if (rc < 0) break;  // no more matches (or a matching error: the rest is one piece)
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[0] > gap) out.emplace_back(gap, ov[0]);
      if (ov[1] > ov[0] && !split.remove_matches) out.emplace_back(ov[0], ov[1]);
      gap = ov[1];
      pos = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
      while (pos < end && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
    if (end > gap) out.emplace_back(gap, end);
  }
  pieces.swap(out);
}

struct MergeCandidate {
  std::int32_t rank;
  std::int32_t pos;
  std::int32_t merged;
  bool operator>(const MergeCandidate& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

struct Node {
  BpeSymbol sym;
  std::int32_t prev;
  std::int32_t next;
};

// Merges a piece's bytes by rank: always the lowest-ranked adjacent pair, leftmost first.
std::vector<BpeSymbol> bpe_merge(const Tokenizer::Impl& impl, std::string_view piece) {
  std::vector<Node> nodes;
  nodes.reserve(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) {
    std::int32_t id = impl.byte_id[static_cast<unsigned char>(piece[i])];
    if (id < 0) continue;  // no token for this byte: dropped, as tokenizers does without unk
    auto n = static_cast<std::int32_t>(nodes.size());
    nodes.push_back({{id, static_cast<std::int32_t>(i), 1}, n - 1, n + 1});
  }
  if (!nodes.empty()) nodes.back().next = -1;
  std::priority_queue<MergeCandidate, std::vector<MergeCandidate>, std::greater<>> heap;
  auto consider = [&](std::int32_t a) {
    std::int32_t b = nodes[a].next;
    if (b < 0) return;
    const MergeTable::Entry* e =
        impl.merges.find(MergeTable::key(nodes[a].sym.id, nodes[b].sym.id));
    if (e != nullptr) heap.push({e->rank, a, e->merged});
  };
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(nodes.size()); ++i) consider(i);
  while (!heap.empty()) {
    MergeCandidate top = heap.top();
    heap.pop();
    Node& left = nodes[top.pos];
    if (left.sym.length == 0 || left.next < 0) continue;
    Node& right = nodes[left.next];
    const MergeTable::Entry* e = impl.merges.find(MergeTable::key(left.sym.id, right.sym.id));
    if (e == nullptr || e->merged != top.merged) continue;  // stale
    left.sym.id = top.merged;
    left.sym.length += right.sym.length;
    right.sym.length = 0;
    left.next = right.next;
    if (left.next >= 0) nodes[left.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  std::vector<BpeSymbol> out;
  for (const Node& n : nodes) {
    if (n.sym.length > 0) out.push_back(n.sym);
  }
  return out;
}

// The piece's byte-level string, for ignore_merges lookups.
std::string byte_level_string(const Tokenizer::Impl& impl, std::string_view piece) {
  std::string s;
  for (char c : piece) append_utf8(s, impl.byte_char[static_cast<unsigned char>(c)]);
  return s;
}

// Puts the piece's symbols in `out` (from the cache when it was seen before).
void bpe_piece(const Tokenizer::Impl& impl, std::string_view piece, std::vector<BpeSymbol>& out) {
  out.clear();
  if (impl.ignore_merges) {
    auto it = impl.vocab.find(byte_level_string(impl, piece));
    if (it != impl.vocab.end()) {
      out.push_back({it->second, 0, static_cast<std::int32_t>(piece.size())});
      return;
    }
  }
  if (piece.size() == 1) {
    std::int32_t id = impl.byte_id[static_cast<unsigned char>(piece[0])];
    if (id >= 0) out.push_back({id, 0, 1});
    return;
  }
  bool cacheable = piece.size() <= kCacheMaxPieceBytes;
  if (cacheable) {
    std::lock_guard lock(impl.cache_mutex);
    auto it = impl.cache.find(piece);
    if (it != impl.cache.end()) {
      out.assign(it->second.begin(), it->second.end());
      return;
    }
  }
  out = bpe_merge(impl, piece);
  if (cacheable) {
    std::lock_guard lock(impl.cache_mutex);
    if (impl.cache.size() >= kCacheMaxEntries) impl.cache.clear();
    impl.cache.emplace(std::string(piece), out);
  }
}

struct PcreMatchData {
  pcre2_match_data* md = pcre2_match_data_create(64, nullptr);  // ovector[0..1] is all we read
  PcreMatchData() = default;
  ~PcreMatchData() { pcre2_match_data_free(md); }
  PcreMatchData(const PcreMatchData&) = delete;
  PcreMatchData& operator=(const PcreMatchData&) = delete;
};

// Normalises, pre-tokenizes and merges text[begin, end), appending tokens with input offsets.
void encode_segment(const Tokenizer::Impl& impl, std::string_view text, std::int64_t begin,
                    std::int64_t end, pcre2_match_data* md, std::vector<TokenSpan>& out) {
  Normalized norm;
  if (impl.nfc) {
    norm = nfc_segment(text, begin, end);
  } else {
    norm.text.assign(
        text.substr(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)));
  }
  std::int64_t shift = 0;  // a prefix space added by ByteLevel is not in the input
  if (impl.add_prefix_space && (norm.text.empty() || norm.text[0] != ' ')) {
    norm.text.insert(norm.text.begin(), ' ');
    shift = 1;
  }
  std::vector<Piece> pieces{{0, norm.text.size()}};
  for (const auto& split : impl.splits) split_pieces(split, norm.text, pieces, md);
  auto to_input = [&](std::size_t p, bool is_end) -> std::int64_t {
    std::int64_t q = std::max<std::int64_t>(static_cast<std::int64_t>(p) - shift, 0);
    if (norm.identity) return begin + q;
    return is_end ? norm.hi[q] : norm.lo[q];
  };
  std::vector<BpeSymbol> symbols;
  for (auto [pb, pe] : pieces) {
    bpe_piece(impl, std::string_view(norm.text.data() + pb, pe - pb), symbols);
    for (const BpeSymbol& s : symbols) {
      out.push_back(
          {s.id, to_input(pb + s.offset, false), to_input(pb + s.offset + s.length, true)});
    }
  }
}

bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// The leftmost, then longest, added token at or after `from`; returns its index or -1.
std::int32_t find_added(const Tokenizer::Impl& impl, std::string_view text, std::size_t from,
                        bool allow_special, std::size_t& at) {
  for (std::size_t i = from; i < text.size(); ++i) {
    const auto& candidates = impl.added_by_byte[static_cast<unsigned char>(text[i])];
    for (std::int32_t k : candidates) {
      const AddedToken& t = impl.added[k];
      if (t.special && !allow_special) continue;
      if (text.compare(i, t.content.size(), t.content) == 0) {
        at = i;
        return k;
      }
    }
  }
  return -1;
}

}  // namespace

std::vector<TokenSpan> Tokenizer::encode_with_offsets(std::string_view text,
                                                      bool allow_special) const {
  const Impl& impl = *m_impl;
  std::vector<TokenSpan> out;
  out.reserve(text.size() / 3 + 4);
  PcreMatchData md;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t at = text.size();
    std::int32_t k = impl.added.empty() ? -1 : find_added(impl, text, pos, allow_special, at);
    std::size_t start = at;
    std::size_t stop = k < 0 ? at : at + impl.added[k].content.size();
    if (k >= 0 && impl.added[k].lstrip) {
      while (start > pos && is_space(text[start - 1])) --start;
    }
    if (k >= 0 && impl.added[k].rstrip) {
      while (stop < text.size() && is_space(text[stop])) ++stop;
    }
    if (start > pos) {
      encode_segment(impl, text, static_cast<std::int64_t>(pos), static_cast<std::int64_t>(start),
                     md.md, out);
    }
    if (k < 0) break;
    out.push_back(
        {impl.added[k].id, static_cast<std::int64_t>(start), static_cast<std::int64_t>(stop)});
    pos = stop;
  }
  return out;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  auto spans = encode_with_offsets(text, allow_special);
  std::vector<std::int32_t> ids(spans.size());
  std::transform(spans.begin(), spans.end(), ids.begin(), [](const TokenSpan& s) { return s.id; });
  return ids;
}

std::string Tokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special) const {
  const Impl& impl = *m_impl;
  std::string out;
  for (std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= impl.tokens.size()) continue;
    const std::string& token = impl.tokens[id];
    std::uint8_t kind = impl.added_kind[id];
    if (kind == 2 && skip_special) continue;
    if (kind != 0) {
      out += token;
      continue;
    }
    // Byte-level characters are U+0021..U+017F (one or two UTF-8 bytes); map each back.
    for (std::size_t i = 0; i < token.size();) {
      auto c0 = static_cast<unsigned char>(token[i]);
      std::uint32_t cp = c0;
      std::size_t n = 1;
      if ((c0 & 0xE0) == 0xC0 && i + 1 < token.size()) {
        cp = ((c0 & 0x1Fu) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3Fu);
        n = 2;
      }
      if (cp < impl.char_byte.size() && impl.char_byte[cp] >= 0) {
        out += static_cast<char>(impl.char_byte[cp]);
      } else {
        out.append(token, i, n);
      }
      i += n;
    }
  }
  return out;
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& t : m_impl->added) {
    if (t.content == token) return t.id;
  }
  auto it = m_impl->vocab.find(std::string(token));
  if (it == m_impl->vocab.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Tokenizer::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= m_impl->tokens.size() ||
      m_impl->tokens[id].empty()) {
    return std::nullopt;
  }
  return m_impl->tokens[id];
}

std::int64_t Tokenizer::vocab_size() const {
  return static_cast<std::int64_t>(m_impl->tokens.size());
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return m_impl->added; }

}  // namespace shardscope::data
