#include "data/text/sft_prepare.h"

#include <filesystem>
#include <utility>

#include "data/image/image.h"

namespace shardscope::data {
namespace {

std::string at_line(const JsonlPosition& where) {
  return where.path + ":" + std::to_string(where.line) + ": ";
}

}  // namespace

SftPreparer::SftPreparer(Tokenizer tokenizer, const std::optional<Qwen2VLImageConfig>& image)
    : m_tokenizer(std::move(tokenizer)), m_image(image) {
  if (auto eos = m_tokenizer.token_to_id("<|endoftext|>")) m_pad_id = *eos;
}

Result<SftPreparer> SftPreparer::open(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(fs::path(model_dir) / "tokenizer.json", ec)) {
    return fail(model_dir +
                ": no tokenizer.json; copy the model's tokenizer files (tokenizer.json) into "
                "the model folder");
  }
  auto tokenizer = Tokenizer::load(model_dir);
  if (!tokenizer) return tokenizer.error();
  std::optional<Qwen2VLImageConfig> image;
  const bool has_image_config = fs::exists(fs::path(model_dir) / "preprocessor_config.json", ec) ||
                                fs::exists(fs::path(model_dir) / "processor_config.json", ec);
  if (has_image_config) {
    auto config = read_qwen2vl_image_config(model_dir);
    if (!config) return config.error();
    image = *config;
  }
  return SftPreparer(std::move(*tokenizer), image);
}

Result<PreparedSample> SftPreparer::prepare(const SftSample& sample) const {
  const std::string where = at_line(sample.where);
  PreparedSample out;
  out.where = sample.where;
  std::vector<std::int64_t> counts;
  if (!sample.images.empty() && !m_image) {
    return fail(where +
                "the sample has images but the model folder has no preprocessor_config.json; "
                "use a Qwen2-VL model, or remove the images from the sample");
  }
  for (const auto& path : sample.images) {
    auto rgb = read_image(path);
    if (!rgb) return fail(where + rgb.message());
    auto patches = preprocess_qwen2vl(*rgb, *m_image);
    if (!patches) return fail(where + path + ": " + patches.message());
    counts.push_back(patches->num_tokens());
    out.images.push_back(std::move(*patches));
  }
  auto chat = tokenize_chat(m_tokenizer, sample.messages, counts);
  if (!chat) return fail(where + chat.message());
  out.input_ids = std::move(chat->input_ids);
  out.labels = std::move(chat->labels);
  return out;
}

Result<void> check_sample_length(const PreparedSample& sample, std::int64_t max_tokens) {
  const auto T = static_cast<std::int64_t>(sample.input_ids.size());
  if (max_tokens > 0 && T > max_tokens) {
    return fail(
        at_line(sample.where) + "the sample has " + std::to_string(T) +
        " tokens (images expanded), more than data.seq_len = " + std::to_string(max_tokens) +
        "; raise data.seq_len, shorten the conversation or use smaller images");
  }
  return ok();
}

Result<void> check_sample_vocab(const PreparedSample& sample, std::int64_t vocab_size) {
  for (auto id : sample.input_ids) {
    if (vocab_size > 0 && id >= vocab_size) {
      return fail(at_line(sample.where) + "token id " + std::to_string(id) +
                  " is outside the model's vocabulary (" + std::to_string(vocab_size) +
                  "); the tokenizer does not belong to this model: use the model's own "
                  "tokenizer.json");
    }
  }
  return ok();
}

Result<std::vector<PreparedSample>> load_prepared_sft(const std::string& path,
                                                      const SftPreparer& preparer,
                                                      std::int64_t max_tokens,
                                                      std::int64_t vocab_size) {
  auto samples = load_sft_jsonl(path);
  if (!samples) return samples.error();
  std::vector<PreparedSample> out;
  out.reserve(samples->size());
  for (const auto& s : *samples) {
    auto p = preparer.prepare(s);
    if (!p) return p.error();
    if (auto r = check_sample_length(*p, max_tokens); !r) return r.error();
    if (auto r = check_sample_vocab(*p, vocab_size); !r) return r.error();
    out.push_back(std::move(*p));
  }
  if (out.empty()) return fail(path + ": no samples; add at least one JSONL line");
  return out;
}

std::int64_t loss_tokens(const PreparedSample& sample) {
  std::int64_t n = 0;
  for (std::size_t t = 1; t < sample.labels.size(); ++t) n += sample.labels[t] != -100 ? 1 : 0;
  return n;
}

std::int64_t visual_tokens(const PreparedSample& sample) {
  std::int64_t n = 0;
  for (const auto& image : sample.images) n += image.num_tokens();
  return n;
}

spec::DataBound data_bound_of(const std::vector<PreparedSample>& samples,
                              const std::string& source) {
  spec::DataBound bound;
  for (const auto& s : samples)
    bound.add(static_cast<std::int64_t>(s.input_ids.size()), visual_tokens(s));
  bound.source = describe_bound(source, bound);
  return bound;
}

std::string describe_bound(const std::string& path, const spec::DataBound& bound) {
  return std::filesystem::path(path).filename().string() + ": " + std::to_string(bound.samples) +
         (bound.samples == 1 ? " sample" : " samples") + ", the longest " +
         std::to_string(bound.longest) + " tokens";
}

}  // namespace shardscope::data
