// The full-state export: a trained model as a Hugging Face folder. model.safetensors holds every
// parameter under its Hugging Face name (with LoRA: the adapters merged into the base), beside
// the base folder's config.json, tokenizer and processor files, so `from_pretrained` loads it;
// with LoRA the PEFT adapter goes to `adapter/` as well. Rank 0 writes; the caller gathers.
#pragma once

#include <string>
#include <vector>

#include "spec/experiment.h"
#include "trainer/base/safetensors.h"

namespace shardscope::ckpt {

/// One folder the export wrote: `kind` is the ckpt event's kind ("full" or "adapter").
struct ExportedPart {
  std::string kind;
  std::string path;
};

/// Writes the export of `state` (ShardEngine::full_state's names and values) for experiment
/// `exp` into `dir` (created; an existing model.safetensors is replaced whole). Raises a
/// TrainerError (io) naming the file that could not be written.
std::vector<ExportedPart> export_model(const std::string& dir, const NamedTensors& state,
                                       const spec::Experiment& exp);

}  // namespace shardscope::ckpt
