// The tiny tokenizer (tiny_tokenizer.h) loaded through data::Tokenizer once per process, for the
// unit tests (tokenizer(): a load failure aborts) and the fuzzers (they pass fuzz::broken).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "data/text/tokenizer.h"
#include "tests/data/text/tiny_tokenizer.h"

namespace tiny {

/// The loaded tokenizer; `fail(message)` must not return when the document does not load.
template <class Fail>
const shardscope::data::Tokenizer& tokenizer(Fail fail) {
  static const shardscope::data::Tokenizer loaded = [&] {
    auto tok = shardscope::data::Tokenizer::from_json(document().dump(), "tiny.json");
    if (!tok) fail("the tiny tokenizer does not load: " + tok.message());
    return std::move(tok).value();
  }();
  return loaded;
}

/// The loaded tokenizer for the unit tests: a document that does not load ends the process with
/// the reason on stderr.
inline const shardscope::data::Tokenizer& tokenizer() {
  return tokenizer([](const std::string& why) {
    std::fprintf(stderr, "%s\n", why.c_str());
    std::abort();
  });
}

}  // namespace tiny
