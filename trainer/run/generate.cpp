#include "trainer/run/generate.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstring>

#include "trainer/base/fatal.h"

namespace shardscope::trainer {
namespace {

using spec::ErrorKind;

/// The left-padded prompt batch: ids and mask (B, T), images of every row in row order.
model::Batch prompt_batch(const std::vector<Prompt>& prompts, std::int64_t pad_id) {
  const auto B = static_cast<std::int64_t>(prompts.size());
  std::int64_t T = 1;
  std::int64_t patches = 0;
  std::int64_t images = 0;
  std::int64_t width = 0;
  for (const auto& p : prompts) {
    T = std::max<std::int64_t>(T, static_cast<std::int64_t>(p.ids.size()));
    for (const auto* im : p.images) {
      patches += im->num_patches();
      width = im->patch_dim;
      ++images;
    }
  }
  model::Batch batch;
  batch.input_ids = at::full({B, T}, pad_id, at::kLong);  // (B, T)
  batch.attention_mask = at::zeros({B, T}, at::kLong);    // (B, T)
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& ids = prompts[static_cast<std::size_t>(b)].ids;
    const auto n = static_cast<std::int64_t>(ids.size());
    std::memcpy(batch.input_ids[b].narrow(0, T - n, n).data_ptr<std::int64_t>(), ids.data(),
                static_cast<std::size_t>(n) * sizeof(std::int64_t));
    batch.attention_mask[b].narrow(0, T - n, n).fill_(1);
  }
  if (images == 0) return batch;
  batch.pixel_values = at::empty({patches, width}, at::kFloat);  // (N, P)
  batch.image_grid_thw = at::empty({images, 3}, at::kLong);      // (I, 3)
  auto* pixels = batch.pixel_values.data_ptr<float>();
  auto grid = batch.image_grid_thw.accessor<std::int64_t, 2>();
  std::int64_t image = 0;
  for (const auto& p : prompts) {
    for (const auto* im : p.images) {
      std::memcpy(pixels, im->pixel_values.data(), im->pixel_values.size() * sizeof(float));
      pixels += im->pixel_values.size();
      grid[image][0] = im->grid_t;
      grid[image][1] = im->grid_h;
      grid[image][2] = im->grid_w;
      ++image;
    }
  }
  return batch;
}

/// Next rotary position of each row: one past the largest prompt position, (B).
at::Tensor next_positions(const at::Tensor& positions) {
  auto p = positions.dim() == 3 ? std::get<0>(positions.max(0)) : positions;  // (B, T)
  return std::get<0>(p.max(1)) + 1;
}

/// Positions of one new token per row, (B, 1) or (3, B, 1) like the prompt's.
at::Tensor step_positions(const at::Tensor& next, bool mrope) {
  auto p = next.unsqueeze(1);  // (B, 1)
  return mrope ? p.unsqueeze(0).expand({3, p.size(0), 1}).contiguous() : p;
}

/// The token of each row from its logits (B, V).
std::vector<std::int64_t> choose(const at::Tensor& device_logits, const GenerateConfig& config,
                                 std::vector<at::Generator>& gens) {
  // On the host (one copy of B x V per token): the CPU generators sample on any device, so a
  // GPU's generation draws what the CPU's does.
  const auto logits = device_logits.to(at::kCPU);
  const auto B = logits.size(0);
  std::vector<std::int64_t> out(static_cast<std::size_t>(B));
  if (!config.do_sample) {
    auto ids = logits.argmax(-1).contiguous();  // (B)
    for (std::int64_t b = 0; b < B; ++b)
      out[static_cast<std::size_t>(b)] = ids[b].item<std::int64_t>();
    return out;
  }
  auto probs = at::softmax(logits.to(at::kFloat) / config.temperature, -1);  // (B, V)
  if (config.top_p < 1.0) {
    auto [sorted, order] = probs.sort(-1, /*descending=*/true);
    auto before = sorted.cumsum(-1) - sorted;  // mass of the tokens ranked above each
    sorted.masked_fill_(before >= config.top_p, 0.0);
    probs = at::zeros_like(probs).scatter_(-1, order, sorted);
  }
  for (std::int64_t b = 0; b < B; ++b) {
    auto pick = at::multinomial(probs[b], 1, false, gens[static_cast<std::size_t>(b)]);
    out[static_cast<std::size_t>(b)] = pick.item<std::int64_t>();
  }
  return out;
}

/// The batch of one forward: with the cache only this step's tokens; without it the whole
/// sequence again (prompt layout plus every generated column) and an empty cache.
struct Stepper {
  const model::Batch& prompt;
  const at::Tensor& prompt_pos;  // (B, T) or (3, B, T)
  bool use_cache;
  model::DecodeState state;
  at::Tensor tokens;     // (B, S) generated columns so far
  at::Tensor positions;  // their positions, (B, S) or (3, B, S)

  void prefill(const ForwardFn& forward) {
    state.key_mask = prompt.attention_mask;
    state.positions = prompt_pos;
    model::Batch b = prompt;
    b.decode = &state;
    forward(b);
  }

  void step(const at::Tensor& next_tok, const at::Tensor& next_pos, const ForwardFn& forward) {
    tokens = tokens.defined() ? at::cat({tokens, next_tok}, 1) : next_tok;
    positions = positions.defined() ? at::cat({positions, next_pos}, -1) : next_pos;
    auto ones = at::ones({next_tok.size(0), 1}, at::kLong);
    model::Batch b;
    if (use_cache) {
      state.key_mask = at::cat({state.key_mask, ones}, 1);
      state.positions = next_pos;
      b.input_ids = next_tok;
      b.attention_mask = state.key_mask;
    } else {
      state.keys.clear();  // recompute: no cached keys
      state.values.clear();
      b = prompt;
      b.input_ids = at::cat({prompt.input_ids, tokens}, 1);
      b.attention_mask = at::cat({prompt.attention_mask, at::ones_like(tokens)}, 1);
      state.key_mask = b.attention_mask;
      state.positions = at::cat({prompt_pos, positions}, -1);
    }
    b.decode = &state;
    forward(b);
  }
};

}  // namespace

Prompt make_prompt(const data::PreparedSample& sample, std::int64_t index,
                   std::int64_t image_token_id, std::int64_t stop_id) {
  const auto& labels = sample.labels;
  const auto first = std::find_if(labels.begin(), labels.end(), [](auto l) { return l != -100; });
  SHARD_CHECK(first != labels.end() && first != labels.begin(), ErrorKind::data,
              sample.where.path + ":" + std::to_string(sample.where.line) +
                  ": the sample has no assistant turn to generate",
              "end every eval conversation with an assistant turn (its answer)");
  const auto start = static_cast<std::size_t>(first - labels.begin());
  Prompt p;
  p.index = index;
  p.ids.assign(sample.input_ids.begin(),
               sample.input_ids.begin() + static_cast<std::ptrdiff_t>(start));
  for (auto i = start; i < sample.input_ids.size() && sample.input_ids[i] != stop_id; ++i)
    p.answer.push_back(sample.input_ids[i]);
  // The images whose <|image_pad|> runs lie in the prompt.
  std::size_t runs = 0;
  for (std::size_t i = 0; i < start; ++i)
    if (p.ids[i] == image_token_id && (i == 0 || p.ids[i - 1] != image_token_id)) ++runs;
  for (std::size_t i = 0; i < std::min(runs, sample.images.size()); ++i)
    p.images.push_back(&sample.images[i]);
  return p;
}

std::vector<std::vector<std::int64_t>> generate(const model::Model& model,
                                                const std::vector<Prompt>& prompts,
                                                const GenerateConfig& config,
                                                const ForwardFn& forward,
                                                const AnyRunningFn& any_running) {
  const bool idle = prompts.empty();  // this rank only steps along with the others
  std::vector<Prompt> idle_rows;
  if (idle) idle_rows.push_back(Prompt{0, {config.pad_id}, {}, {}});
  const auto& rows = idle ? idle_rows : prompts;
  const auto B = static_cast<std::int64_t>(rows.size());
  auto batch = prompt_batch(rows, config.pad_id);
  const auto prompt_pos = model.prompt_positions(batch);  // (B, T) or (3, B, T)
  const bool mrope = prompt_pos.dim() == 3;
  std::vector<at::Generator> gens;
  gens.reserve(rows.size());
  for (const auto& p : rows)
    gens.push_back(at::make_generator<at::CPUGeneratorImpl>(config.seed * 1000003ULL +
                                                            static_cast<std::uint64_t>(p.index)));
  Stepper stepper{batch, prompt_pos, config.use_cache, {}, {}, {}};
  stepper.prefill(forward);
  auto next = next_positions(prompt_pos);  // (B)
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(B));
  std::vector<bool> done(static_cast<std::size_t>(B), idle);
  for (std::int64_t n = 0;; ++n) {
    auto picked = choose(stepper.state.logits, config, gens);
    bool running = false;
    for (std::size_t b = 0; b < out.size(); ++b) {
      if (done[b]) continue;
      if (picked[b] == config.stop_id) {
        done[b] = true;
        continue;
      }
      out[b].push_back(picked[b]);
      done[b] = static_cast<std::int64_t>(out[b].size()) >= config.max_new_tokens;
      running = running || !done[b];
    }
    if (!any_running(running)) break;
    auto tok = at::empty({B, 1}, at::kLong);  // (B, 1): finished rows are fed padding
    for (std::size_t b = 0; b < out.size(); ++b)
      tok[static_cast<std::int64_t>(b)][0] = done[b] ? config.pad_id : picked[b];
    stepper.step(tok, step_positions(next, mrope), forward);
    next = next + 1;
  }
  if (idle) out.clear();
  return out;
}

std::vector<GeneratedAnswer> generate_answers(const model::Model& model,
                                              const std::vector<data::PreparedSample>& samples,
                                              const std::vector<std::int64_t>& indices,
                                              std::int64_t chunks, std::int64_t micro,
                                              const data::Tokenizer& tokenizer,
                                              GenerateConfig config, const ForwardFn& forward,
                                              const AnyRunningFn& any_running) {
  const auto stop = tokenizer.token_to_id("<|im_end|>");
  SHARD_CHECK(stop.has_value(), ErrorKind::data, "the tokenizer has no <|im_end|> token",
              "exact_match needs a Qwen2 chat tokenizer (tokenizer.json with <|im_end|>)");
  config.stop_id = *stop;
  const auto image = tokenizer.token_to_id("<|image_pad|>").value_or(-1);
  std::vector<GeneratedAnswer> out;
  for (std::int64_t c = 0; c < chunks; ++c) {
    std::vector<Prompt> prompts;
    const auto begin = c * micro;
    const auto end =
        std::min<std::int64_t>(begin + micro, static_cast<std::int64_t>(indices.size()));
    for (auto k = begin; k < end; ++k) {
      const auto i = indices[static_cast<std::size_t>(k)];
      prompts.push_back(make_prompt(samples[static_cast<std::size_t>(i)], i, image, *stop));
    }
    auto ids = generate(model, prompts, config, forward, any_running);
    for (std::size_t k = 0; k < prompts.size(); ++k) {
      GeneratedAnswer a;
      a.index = prompts[k].index;
      a.ids = std::move(ids[k]);
      a.text = decode_text(tokenizer, a.ids);
      a.answer = decode_text(tokenizer, prompts[k].answer);
      a.match = strip(a.text) == strip(a.answer);
      out.push_back(std::move(a));
    }
  }
  return out;
}

std::string strip(const std::string& text) {
  const char* ws = " \t\n\r\f\v";
  const auto begin = text.find_first_not_of(ws);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(ws) - begin + 1);
}

std::string decode_text(const data::Tokenizer& tokenizer, const std::vector<std::int64_t>& ids) {
  std::vector<std::int32_t> narrow(ids.begin(), ids.end());
  return tokenizer.decode(narrow);
}

bool exact_match(const data::Tokenizer& tokenizer, const std::vector<std::int64_t>& generated,
                 const std::vector<std::int64_t>& answer) {
  return strip(decode_text(tokenizer, generated)) == strip(decode_text(tokenizer, answer));
}

}  // namespace shardscope::trainer
