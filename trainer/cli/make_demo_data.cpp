#include "trainer/cli/make_demo_data.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/image/shapes.h"
#include "data/text/tokenizer.h"
#include "spec/events.h"
#include "trainer/base/fatal.h"
#include "trainer/base/safetensors.h"
#include "trainer/model/qwen2vl.h"

namespace shardscope::trainer {
namespace {

using spec::ErrorKind;
using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kSpace = "\xc4\xa0";  // byte-level "Ġ": a space
constexpr std::int64_t kVocab = 768;        // config vocab_size; specials at kSpecialBase..
constexpr std::int64_t kSpecialBase = 752;
const char* const kSpecials[] = {"<|endoftext|>",    "<|im_start|>",   "<|im_end|>",
                                 "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
                                 "<|image_pad|>",    "<|video_pad|>"};
// Words of the chat template and the shapes questions and answers (get whole-word tokens).
const char* const kWords[] = {
    "system", "user",     "assistant", "You",    "are",   "a",      "helpful", "What",   "colour",
    "is",     "the",      "shape",     "shapes", "in",    "image",  "objects", "How",    "many",
    "there",  "Where",    "red",       "green",  "blue",  "yellow", "purple",  "orange", "circle",
    "square", "triangle", "diamond",   "left",   "right", "top",    "bottom"};

using Merges = std::map<std::pair<std::string, std::string>, std::int64_t>;  // pair -> rank

/// The byte-level characters of `word` (UTF-8, one string each), "Ġ" first when `spaced`.
std::vector<std::string> symbols_of(const std::string& word, bool spaced) {
  std::vector<std::string> out;
  if (spaced) out.emplace_back(kSpace);
  for (char c : word) out.emplace_back(1, c);
  return out;
}

/// `symbols` after BPE with `merges`: the adjacent pair of lowest rank merges first, until none
/// of the remaining pairs is a merge (what the tokenizer does to one pre-tokenized word).
std::vector<std::string> apply_merges(std::vector<std::string> symbols, const Merges& merges) {
  while (symbols.size() > 1) {
    auto best = merges.end();
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = merges.find({symbols[i], symbols[i + 1]});
      if (it != merges.end() && (best == merges.end() || it->second < best->second)) {
        best = it;
        at = i;
      }
    }
    if (best == merges.end()) break;
    symbols[at] += symbols[at + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  return symbols;
}

json tokenizer_document() {
  json vocab = json::object();
  for (unsigned b = 0; b < 256; ++b)
    vocab[data::byte_level_char(static_cast<unsigned char>(b))] = b;
  json merges = json::array();
  Merges ranks;
  std::int64_t id = 256;
  // Each word (bare and after a space) becomes one token: while BPE with the merges so far
  // leaves it in pieces, the first two pieces get a new merge of the lowest priority. Earlier
  // words stay whole (their own merges always outrank the new ones), so every answer is a single
  // token whatever letters the words share ("top" must not split "bottom").
  for (const char* word : kWords) {
    for (const bool spaced : {false, true}) {
      const auto chars = symbols_of(word, spaced);
      for (auto parts = apply_merges(chars, ranks); parts.size() > 1;
           parts = apply_merges(chars, ranks)) {
        ranks.emplace(std::make_pair(parts[0], parts[1]), static_cast<std::int64_t>(ranks.size()));
        if (!vocab.contains(parts[0] + parts[1])) vocab[parts[0] + parts[1]] = id++;
        merges.push_back(json::array({parts[0], parts[1]}));
      }
    }
  }
  SHARD_CHECK(id <= kSpecialBase, ErrorKind::internal, "demo tokenizer: too many merges",
              "raise kSpecialBase");
  // Placeholders no merge produces fill the ids up to the special tokens: HF tokenizers gives an
  // added token the next free id after the vocabulary, whatever its "id" says, so a gap would
  // move <|image_pad|> away from config.json's image_token_id under transformers.
  for (int k = 0; id < kSpecialBase; ++k) vocab["<|unused_" + std::to_string(k) + "|>"] = id++;
  json added = json::array();
  for (std::size_t i = 0; i < std::size(kSpecials); ++i)
    added.push_back({{"id", kSpecialBase + static_cast<std::int64_t>(i)},
                     {"content", kSpecials[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  json split = {{"type", "Split"},
                {"pattern", {{"Regex", kQwen2Pattern}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  // Every field HF tokenizers requires of a ByteLevel step (it refuses the file without them).
  json bytes = {{"type", "ByteLevel"},
                {"add_prefix_space", false},
                {"trim_offsets", true},
                {"use_regex", false}};
  return {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", json::array({split, bytes})}}},
      {"decoder", bytes},
      {"model", {{"type", "BPE"}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}}};
}

std::int64_t special_id(const char* name) {
  for (std::size_t i = 0; i < std::size(kSpecials); ++i)
    if (std::string(kSpecials[i]) == name) return kSpecialBase + static_cast<std::int64_t>(i);
  return -1;
}

/// A tiny Qwen2-VL in the published flat config.json layout: 2 vision blocks of width 64
/// (patch 14: a 168-pixel image is 12 x 12 patches, 36 tokens after the 2x2 merger), 2 text
/// blocks of width 128. rope_theta is 4, not Qwen2's 1e6: with head_dim 32 and mrope_section
/// [4, 6, 6] the height and width sections get the 12 lowest of 16 frequencies, which at theta
/// 1e4 turn by at most 0.1 (height) and 0.003 (width) radians per token, so attention could not
/// tell the 6 columns of image tokens apart; at theta 4 they turn by 0.27..0.71 radians. (Theta
/// 4 alone on the former 84-pixel layout left position at its prior; with the 168-pixel
/// layout the demo answers position and count.)
json config_document() {
  return {{"architectures", json::array({"Qwen2VLForConditionalGeneration"})},
          {"model_type", "qwen2_vl"},
          {"vocab_size", kVocab},
          {"hidden_size", 128},
          {"intermediate_size", 256},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"hidden_act", "silu"},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 4.0},
          {"max_position_embeddings", 4096},
          {"tie_word_embeddings", true},
          {"bos_token_id", special_id("<|endoftext|>")},
          {"eos_token_id", special_id("<|im_end|>")},
          {"vision_start_token_id", special_id("<|vision_start|>")},
          {"vision_end_token_id", special_id("<|vision_end|>")},
          {"vision_token_id", special_id("<|vision_pad|>")},
          {"image_token_id", special_id("<|image_pad|>")},
          {"video_token_id", special_id("<|video_pad|>")},
          {"vision_config",
           {{"depth", 2},
            {"embed_dim", 64},
            {"mlp_ratio", 2},
            {"num_heads", 4},
            {"in_chans", 3},
            {"hidden_size", 128},
            {"patch_size", 14},
            {"spatial_merge_size", 2},
            {"spatial_patch_size", 14},
            {"temporal_patch_size", 2}}},
          {"rope_scaling", {{"type", "mrope"}, {"mrope_section", json::array({4, 6, 6})}}}};
}

json preprocessor_document(int image_size) {
  const int pixels = image_size * image_size;
  return {{"image_processor_type", "Qwen2VLImageProcessor"},
          {"min_pixels", pixels},
          {"max_pixels", pixels},
          {"patch_size", 14},
          {"temporal_patch_size", 2},
          {"merge_size", 2},
          {"image_mean", json::array({0.48145466, 0.4578275, 0.40821073})},
          {"image_std", json::array({0.26862954, 0.26130258, 0.27577711})}};
}

void write_json(const fs::path& path, const json& doc) {
  std::ofstream out(path, std::ios::binary);
  out << doc.dump(2) << '\n';
  out.close();
  SHARD_CHECK(static_cast<bool>(out), ErrorKind::io, path.string() + ": cannot write",
              "check that the folder is writable and the disk has space");
}

/// model.safetensors: every untied parameter of the model at its seeded random init.
void write_weights(const fs::path& dir, std::uint64_t seed) {
  auto config = spec::read_hf_config(dir.string());
  SHARD_CHECK_OK(config, ErrorKind::internal, "the demo config.json must parse");
  model::Qwen2VLModel model(std::move(config).value());
  ckpt::NamedTensors named;
  const auto& layers = model.layers();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    std::vector<at::Tensor> params;
    for (const auto& p : layers[l].params) params.push_back(at::empty(p.shape, at::kFloat));
    model.init_layer(static_cast<int>(l), params, seed);
    for (std::size_t i = 0; i < params.size(); ++i)
      if (layers[l].params[i].tied_to.empty())
        named.emplace_back(layers[l].params[i].name, params[i]);
  }
  ckpt::write_safetensors((dir / "model.safetensors").string(), named, {{"format", "pt"}});
}

json counts_json(const data::ShapesAnswerCounts& counts) {
  json out = json::object();
  for (const auto& [type, answers] : counts) {
    out[type] = json::object();
    for (const auto& [answer, n] : answers) out[type][answer] = n;
  }
  return out;
}

}  // namespace

int run_make_demo_data(const MakeDemoDataOptions& options) {
  auto summary = data::make_shapes(options.dir, options.train, options.eval, options.seed,
                                   options.image_size, options.blank_images);
  SHARD_CHECK_OK(summary, ErrorKind::io, "choose a writable folder and non-negative counts");
  const fs::path model_dir = fs::path(options.dir) / "model";
  std::error_code ec;
  fs::create_directories(model_dir, ec);
  SHARD_CHECK(!ec, ErrorKind::io, model_dir.string() + ": cannot create (" + ec.message() + ")",
              "choose a writable folder");
  write_json(model_dir / "tokenizer.json", tokenizer_document());
  write_json(model_dir / "config.json", config_document());
  write_json(model_dir / "preprocessor_config.json", preprocessor_document(options.image_size));
  write_weights(model_dir, options.seed);
  std::cerr << json{{"train", counts_json(summary->train_answers)},
                    {"eval", counts_json(summary->eval_answers)}}
                   .dump()
            << '\n';
  events().write(spec::DoneEvent{spec::DoneStatus::complete,
                                 {static_cast<double>(options.train + options.eval)},
                                 false,
                                 std::nullopt});
  return kExitOk;
}

}  // namespace shardscope::trainer
