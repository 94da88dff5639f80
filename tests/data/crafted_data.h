// The data inspector's crafted chat data set (tst_inspect, tst_inspectpanel): a model folder (the
// tiny tokenizer, an image processor of 4-pixel patches, Qwen2-VL-2B's config.json) and a
// train.jsonl whose lines are, by number:
//   1 text-only, 2 img.png (24x16: a 4x6 grid, 6 tokens), 3 not JSON, 4 no messages,
//   5 a missing image, 6 an unreadable image (not a PNG), 7 a long answer (over data.seq_len
//   when seq_len is the longest of lines 1, 2 and 9), 8 blank, 9 big.png (48x32: 8x12, 24 tokens).
// good.jsonl holds lines 1, 2, 9 and 7, in that order, for the trainer's own loader.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/image/image.h"
#include "tests/data/text/tiny_tokenizer.h"
#include "tests/support/paths.h"

namespace crafted {

struct Files {
  std::string model;  // the model folder
  std::string train;  // train.jsonl (9 lines)
  std::string good;   // good.jsonl (the loadable lines 1, 2, 9, 7)
};

inline std::string chat(const std::string& image, const std::string& question,
                        const std::string& answer) {
  nlohmann::json user = nlohmann::json::array();
  if (!image.empty()) user.push_back({{"type", "image"}, {"image", image}});
  user.push_back({{"type", "text"}, {"text", question}});
  return nlohmann::json{
      {"messages",
       {{{"role", "user"}, {"content", user}}, {{"role", "assistant"}, {"content", answer}}}}}
      .dump();
}

/// Writes the set into `dir`, with the checkout's examples/models/qwen2-vl-2b/config.json as the
/// model's. Returns false when a file cannot be written.
inline bool write(const std::string& dir, Files& files) {
  const std::string qwen_config =
      (shardscope::testing::sourceDir() + "/examples/models/qwen2-vl-2b/config.json").toStdString();
  namespace fs = std::filesystem;
  auto put = [&](const std::string& name, const std::string& body) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out << body;
    return static_cast<bool>(out);
  };
  std::error_code ec;
  fs::create_directories(dir + "/model", ec);
  if (ec) return false;
  bool ok = put("model/tokenizer.json", tiny::document().dump()) &&
            put("model/preprocessor_config.json", nlohmann::json{{"min_pixels", 64},
                                                                 {"max_pixels", 4096},
                                                                 {"patch_size", 4},
                                                                 {"temporal_patch_size", 2},
                                                                 {"merge_size", 2}}
                                                      .dump());
  fs::copy_file(qwen_config, dir + "/model/config.json", fs::copy_options::overwrite_existing, ec);
  ok = ok && !ec;
  ok = ok && shardscope::data::write_png(dir + "/img.png",
                                         {24, 16, std::vector<std::uint8_t>(24 * 16 * 3, 90)})
                 .ok();
  ok = ok && shardscope::data::write_png(dir + "/big.png",
                                         {48, 32, std::vector<std::uint8_t>(48 * 32 * 3, 40)})
                 .ok();
  ok = ok && put("bad.png", "this is not an image");
  const std::vector<std::string> lines = {chat("", "hello", "bc"),
                                          chat("img.png", "hello", "abc"),
                                          "{not json",
                                          R"({"text": "no messages"})",
                                          chat("missing.png", "where", "x"),
                                          chat("bad.png", "what", "y"),
                                          chat("", "long", std::string(200, 'z')),
                                          "",
                                          chat("big.png", "hello", "ab")};
  std::string body;
  for (const auto& l : lines) body += l + "\n";
  ok = ok && put("train.jsonl", body) &&
       put("good.jsonl", lines[0] + "\n" + lines[1] + "\n" + lines[8] + "\n" + lines[6] + "\n");
  files = {dir + "/model", dir + "/train.jsonl", dir + "/good.jsonl"};
  return ok;
}

}  // namespace crafted
