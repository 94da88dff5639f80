// `shardtrain tokenize --tokenizer DIR`: all of stdin is one string, encoded with the model's
// tokenizer.json (special tokens recognised, nothing added); prints one JSON array of ids.
#pragma once

#include <string>

namespace shardscope::trainer {

struct TokenizeOptions {
  std::string tokenizer;  // a model folder holding tokenizer.json, or the file itself
};

int run_tokenize(const TokenizeOptions& options);

}  // namespace shardscope::trainer
