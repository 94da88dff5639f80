// Generation for evaluation under sharding: prompts cut from SFT samples at their
// first label, left-padded into a batch, prefilled once and decoded token by token with the
// text blocks' key/value caches (model::DecodeState), greedy or sampled (temperature, top-p,
// a generator per sample from the seed). The forward runs through whatever holds the parameters
// (the sharding engine's forward_only, or the unsharded reference), so every rank must call
// generate() for the same number of batches: a rank whose rows are all done keeps stepping
// with padding until the all-reduced "any row running" flag is false on every rank.
//
// Legend: B prompts of this rank's batch, T longest prompt, V vocabulary.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/text/sft_prepare.h"
#include "data/text/tokenizer.h"
#include "trainer/model/model.h"

namespace shardscope::trainer {

/// How tokens are chosen and when a row stops.
struct GenerateConfig {
  std::int64_t max_new_tokens = 16;  // tokens generated per prompt at most (the stop included)
  bool do_sample = false;            // false: greedy (argmax)
  double temperature = 1.0;          // logits divided by it before sampling
  double top_p = 1.0;                // nucleus: the smallest set of tokens with this much mass
  std::uint64_t seed = 0;            // sample i draws from a generator seeded by (seed, i)
  bool use_cache = true;             // false: recompute the whole sequence every step (tests)
  std::int64_t stop_id = -1;         // <|im_end|>; generation of a row ends with it
  std::int64_t pad_id = 0;           // id fed to padding positions and finished rows
};

/// A generation prompt: sample `index`'s tokens before its first label and the images they
/// hold; `answer` is the first labelled span without its stop token.
struct Prompt {
  std::int64_t index = 0;
  std::vector<std::int64_t> ids;
  std::vector<const data::ImagePatches*> images;
  std::vector<std::int64_t> answer;
};

/// The prompt of `sample` (`index` = its position in the data set); an error names the JSONL
/// line when the sample has no labelled (assistant) tokens.
Prompt make_prompt(const data::PreparedSample& sample, std::int64_t index,
                   std::int64_t image_token_id, std::int64_t stop_id);

/// Runs one forward of a batch whose `decode` is set (the model writes decode->logits).
using ForwardFn = std::function<void(const model::Batch&)>;
/// All-reduces "this rank still has a running row" over every rank: true while any has.
using AnyRunningFn = std::function<bool(bool)>;

/// Generated ids per prompt (stop token excluded), in `prompts` order. `prompts` may be empty on
/// a rank that only steps along (it still calls forward as often as the others).
std::vector<std::vector<std::int64_t>> generate(const model::Model& model,
                                                const std::vector<Prompt>& prompts,
                                                const GenerateConfig& config,
                                                const ForwardFn& forward,
                                                const AnyRunningFn& any_running);

/// One evaluated sample: what was generated and whether it matches the answer.
struct GeneratedAnswer {
  std::int64_t index = 0;         // sample index in the eval file (0-based line order)
  std::vector<std::int64_t> ids;  // generated ids, stop token excluded
  std::string text;               // their decoded text
  std::string answer;             // the label's text
  bool match = false;             // exact_match(text, answer)
};

/// Generates the answers of this rank's samples `indices` of `samples` in `chunks` batches of at
/// most `micro` prompts (every rank passes the same `chunks`; a rank out of prompts steps along).
/// config.stop_id and the image token come from `tokenizer` (<|im_end|>, <|image_pad|>).
std::vector<GeneratedAnswer> generate_answers(const model::Model& model,
                                              const std::vector<data::PreparedSample>& samples,
                                              const std::vector<std::int64_t>& indices,
                                              std::int64_t chunks, std::int64_t micro,
                                              const data::Tokenizer& tokenizer,
                                              GenerateConfig config, const ForwardFn& forward,
                                              const AnyRunningFn& any_running);

/// Exact match: the generated text equals the answer text, both decoded and stripped of
/// leading and trailing white space.
bool exact_match(const data::Tokenizer& tokenizer, const std::vector<std::int64_t>& generated,
                 const std::vector<std::int64_t>& answer);

/// `text` without leading and trailing white space.
std::string strip(const std::string& text);

/// Decoded text of `ids`.
std::string decode_text(const data::Tokenizer& tokenizer, const std::vector<std::int64_t>& ids);

}  // namespace shardscope::trainer
