// SFT samples as the model takes them: a conversation of data/text/sft.h tokenized with
// the Qwen2-VL chat template (labels on the assistant turns) and its images decoded, resized and
// patchified with the model's image processor settings. Torch-free: the trainer's `train` and
// `forward` verbs and the GUI's data preview prepare samples with the same code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/image/qwen2vl_preprocess.h"
#include "data/jsonl.h"
#include "data/text/sft.h"
#include "data/text/tokenizer.h"
#include "spec/estimate.h"
#include "spec/result.h"

namespace shardscope::data {

/// One conversation ready for a forward: ids and labels (unpadded) and its images in order.
struct PreparedSample {
  std::vector<std::int64_t> input_ids;  // (T)
  std::vector<std::int64_t> labels;     // (T), -100 = no loss
  std::vector<ImagePatches> images;     // in the order their <|image_pad|> runs appear
  JsonlPosition where;                  // the JSONL line it came from
};

/// The tokenizer and image processor of a Hugging Face model directory.
class SftPreparer {
 public:
  /// Loads DIR/tokenizer.json and, when present, DIR/preprocessor_config.json (or
  /// processor_config.json); errors name the file and the fix.
  static Result<SftPreparer> open(const std::string& model_dir);

  /// Tokenizes one conversation and preprocesses its images; errors start with "file:line: ".
  Result<PreparedSample> prepare(const SftSample& sample) const;
  const Tokenizer& tokenizer() const { return m_tokenizer; }
  /// The id padding positions take (<|endoftext|>, else 0); they are masked anyway.
  std::int64_t pad_id() const { return m_pad_id; }

 private:
  SftPreparer(Tokenizer tokenizer, const std::optional<Qwen2VLImageConfig>& image);
  Tokenizer m_tokenizer;
  std::optional<Qwen2VLImageConfig> m_image;  // absent: a text-only model
  std::int64_t m_pad_id = 0;
};

/// data.seq_len: a sample longer than `max_tokens` (0 = no limit) is refused, naming its line and
/// the fix. load_prepared_sft and the data inspector (data/inspect.h) both ask this.
Result<void> check_sample_length(const PreparedSample& sample, std::int64_t max_tokens);
/// Every id below `vocab_size` (0 = unchecked), else an error naming the line and the fix.
Result<void> check_sample_vocab(const PreparedSample& sample, std::int64_t vocab_size);

/// Reads and prepares every line of an SFT JSONL file. A sample longer than `max_tokens`
/// (0 = no limit) is an error naming its line; ids must be below `vocab_size` (0 = unchecked).
Result<std::vector<PreparedSample>> load_prepared_sft(const std::string& path,
                                                      const SftPreparer& preparer,
                                                      std::int64_t max_tokens,
                                                      std::int64_t vocab_size);

/// Loss tokens of a sample: positions t >= 1 whose label is not -100.
std::int64_t loss_tokens(const PreparedSample& sample);

/// The sample's <|image_pad|> tokens, over all its images.
std::int64_t visual_tokens(const PreparedSample& sample);

/// What loaded samples hold that the memory estimate's rows depend on (spec::DataBound); the
/// trainer's hello and the data inspector both count with it. `source` names the file for people.
spec::DataBound data_bound_of(const std::vector<PreparedSample>& samples,
                              const std::string& source);
/// "train.jsonl: 120 samples, the longest 69 tokens": where a bound came from, for people.
std::string describe_bound(const std::string& path, const spec::DataBound& bound);

}  // namespace shardscope::data
