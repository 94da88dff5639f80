// The reference test's driver of data/text.
//   tokenize_tool TOKENIZER_DIR [--no-special] < text
//     all of stdin is one string; prints its ids as one JSON array, and the throughput on stderr.
//   tokenize_tool TOKENIZER_DIR --chat FILE.jsonl [--image-tokens N1,N2,...]
//     per SFT line, {"text", "input_ids", "labels"}; image i of a sample gets N[i % count] tokens.
#include <cstdio>
#include <ctime>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/text/chat.h"
#include "data/text/sft.h"
#include "data/text/tokenizer.h"

namespace {

using shardscope::data::Tokenizer;

int tokenize_stdin(const Tokenizer& tok, bool special) {
  std::string text;
  std::vector<char> buffer(1 << 16);
  for (std::size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), stdin)) > 0;) {
    text.append(buffer.data(), n);
  }
  // CPU time, not wall time: the figure stays meaningful on a shared, loaded machine.
  std::clock_t t0 = std::clock();
  auto ids = tok.encode(text, special);
  double s = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fprintf(stderr, "encoded %zu bytes into %zu tokens in %.3f s CPU: %.2f MB/s\n", text.size(),
               ids.size(), s, static_cast<double>(text.size()) / 1e6 / s);
  return 0;
}

int chat(const Tokenizer& tok, const std::string& path, const std::string& counts_arg) {
  std::vector<std::int64_t> counts;
  std::stringstream in(counts_arg);
  for (std::string item; std::getline(in, item, ',');) counts.push_back(std::stoll(item));
  if (counts.empty()) counts.push_back(1);
  auto samples = shardscope::data::load_sft_jsonl(path);
  if (!samples) {
    std::cerr << samples.message() << "\n";
    return 1;
  }
  for (const auto& s : *samples) {
    std::vector<std::int64_t> image_tokens;
    for (std::size_t i = 0; i < s.images.size(); ++i)
      image_tokens.push_back(counts[i % counts.size()]);
    auto sample = shardscope::data::tokenize_chat(tok, s.messages, image_tokens);
    if (!sample) {
      std::cerr << path << ":" << s.where.line << ": " << sample.message() << "\n";
      return 1;
    }
    nlohmann::json line = {{"text", shardscope::data::render_qwen2vl_chat(s.messages).text},
                           {"input_ids", sample->input_ids},
                           {"labels", sample->labels}};
    std::cout << line.dump() << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: tokenize_tool TOKENIZER_DIR [--no-special | --chat FILE.jsonl "
                 "[--image-tokens N,...]] < text\n";
    return 2;
  }
  auto tok = Tokenizer::load(argv[1]);
  if (!tok) {
    std::cerr << tok.message() << "\n";
    return 1;
  }
  std::string mode = argc > 2 ? argv[2] : "";
  if (mode == "--chat" && argc > 3) {
    std::string counts = argc > 5 && std::string(argv[4]) == "--image-tokens" ? argv[5] : "1";
    return chat(*tok, argv[3], counts);
  }
  return tokenize_stdin(*tok, mode != "--no-special");
}
