// The tiny tokenizer (tiny_tokenizer.h) loaded through data::Tokenizer once per process, for the
// unit tests and the fuzzers alike; each passes how a load failure ends it (qFatal, fuzz::broken).
#pragma once

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

}  // namespace tiny
