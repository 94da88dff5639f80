#include "trainer/cli/forward.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "data/text/sft_prepare.h"
#include "trainer/base/fatal.h"
#include "trainer/base/safetensors.h"
#include "trainer/model/qwen2vl.h"
#include "trainer/run/sft_batch.h"

namespace shardscope::trainer {
namespace {

using spec::ErrorKind;

// Every layer's parameters from the checkpoint, in `dtype`; a tied parameter shares its owner's.
std::vector<std::vector<at::Tensor>> load_params(const model::Qwen2VLModel& m,
                                                 at::ScalarType dtype) {
  std::vector<std::vector<at::Tensor>> params;
  std::map<std::string, at::Tensor> by_name;
  for (std::size_t l = 0; l < m.layers().size(); ++l) {
    const auto& defs = m.layers()[l].params;
    std::vector<at::Tensor> values;
    values.reserve(defs.size());
    for (const auto& p : defs) values.push_back(at::zeros(p.shape, at::kFloat));
    m.init_layer(static_cast<int>(l), values, 0);
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (!defs[i].tied_to.empty() && by_name.count(defs[i].tied_to) != 0) {
        values[i] = by_name.at(defs[i].tied_to);
        continue;
      }
      values[i] = values[i].to(dtype);
      by_name[defs[i].name] = values[i];
    }
    params.push_back(std::move(values));
  }
  return params;
}

struct SampleOutput {
  at::Tensor logits;  // (T, V) float32
  double loss_sum = 0;
};

SampleOutput forward_sample(const model::Qwen2VLModel& m,
                            const std::vector<std::vector<at::Tensor>>& params,
                            const model::Batch& batch, at::ScalarType dtype) {
  auto ctx = m.context(batch, dtype);
  ctx.loss_scale = 1.0;
  at::Tensor x;
  const auto n_layers = static_cast<int>(params.size());
  for (int l = 0; l + 1 < n_layers; ++l) x = m.forward_layer(l, params[l], x, ctx);
  SampleOutput out;
  out.logits = m.logits(params.back(), x)[0].to(at::kFloat).contiguous();  // (T, V)
  out.loss_sum = m.forward_layer(n_layers - 1, params.back(), x, ctx).item<double>();
  return out;
}

}  // namespace

int run_forward(const ForwardOptions& options) {
  SHARD_CHECK(options.dtype == "fp32" || options.dtype == "bf16", ErrorKind::config,
              "--dtype " + options.dtype + " is not supported", "use --dtype fp32 or bf16");
  const auto dtype = options.dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  at::NoGradGuard no_grad;
  auto model = model::load_hf_model(options.model);
  auto preparer = data::SftPreparer::open(options.model);
  SHARD_CHECK_OK(preparer, ErrorKind::data, "fix the model folder's tokenizer/processor files");
  auto samples =
      data::load_prepared_sft(options.data, *preparer, 0, model->config().text.vocab_size);
  SHARD_CHECK_OK(samples, ErrorKind::data, "fix the sample named above and run again");
  const auto params = load_params(*model, dtype);

  ckpt::NamedTensors out;
  double loss_sum = 0;
  std::int64_t label_tokens = 0;
  for (std::size_t i = 0; i < samples->size(); ++i) {
    const auto& s = (*samples)[i];
    const auto batch = make_sft_batch(*samples, {static_cast<std::int64_t>(i)}, preparer->pad_id());
    const auto result = forward_sample(*model, params, batch, dtype);
    loss_sum += result.loss_sum;
    label_tokens += data::loss_tokens(s);
    const auto k = std::to_string(i);
    out.emplace_back("input_ids." + k, batch.input_ids[0].clone());
    out.emplace_back("labels." + k, batch.labels[0].clone());
    out.emplace_back("logits." + k, result.logits);
    if (batch.pixel_values.defined()) {
      out.emplace_back("pixel_values." + k, batch.pixel_values);
      out.emplace_back("image_grid_thw." + k, batch.image_grid_thw);
    }
  }
  ckpt::write_safetensors(options.out, out, {{"format", "pt"}, {"dtype", options.dtype}});
  const double objective =
      label_tokens > 0 ? loss_sum / static_cast<double>(label_tokens) : std::nan("");
  events().write(spec::DoneEvent{spec::DoneStatus::complete, {objective}, false, std::nullopt});
  return kExitOk;
}

}  // namespace shardscope::trainer
