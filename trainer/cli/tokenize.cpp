#include "trainer/cli/tokenize.h"

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "data/text/tokenizer.h"
#include "trainer/base/fatal.h"

namespace shardscope::trainer {

int run_tokenize(const TokenizeOptions& options) {
  auto tokenizer = data::Tokenizer::load(options.tokenizer);
  SHARD_CHECK_OK(tokenizer, spec::ErrorKind::config,
                 "point --tokenizer at a Hugging Face model folder with a byte-level BPE "
                 "tokenizer.json");
  std::string text;
  std::vector<char> chunk(1 << 16);
  std::size_t n = 0;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), stdin)) > 0) text.append(chunk.data(), n);
  SHARD_CHECK(std::ferror(stdin) == 0, spec::ErrorKind::io, "cannot read stdin",
              "pipe the text to tokenize into shardtrain tokenize");
  std::string out = "[";
  bool first = true;
  for (auto id : tokenizer->encode(text, true)) {
    if (!first) out += ',';
    out += std::to_string(id);
    first = false;
  }
  out += "]\n";
  std::cout << out << std::flush;
  return kExitOk;
}

}  // namespace shardscope::trainer
