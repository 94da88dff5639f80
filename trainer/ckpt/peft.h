// LoRA export: a PEFT adapter directory that peft's PeftModel.from_pretrained loads
// onto the base model (adapter_model.safetensors with PEFT's keys, no ".default" adapter name,
// and adapter_config.json), and the adapters merged into the base weights (W + alpha / r * B A)
// under Hugging Face names, for save/from_pretrained without peft. Both take the full (gathered)
// parameter values by name, as ShardEngine::full_state returns them; the caller picks the files.
#pragma once

#include <string>

#include "spec/experiment.h"
#include "trainer/base/safetensors.h"

namespace shardscope::ckpt {

/// What adapter_config.json records besides the [lora] section.
struct PeftInfo {
  std::string base_model_name_or_path;  // the base model's directory or hub id
  /// "qwen2" or "qwen2_vl": the key layout. Qwen2-VL adapters use transformers 5's module paths
  /// (model.language_model.*, model.visual.*), which peft sees on the loaded model.
  std::string model_type = "qwen2";
};

/// The adapter tensors of `state` under PEFT's keys for `model_type`, fp32, sorted by key.
NamedTensors peft_adapter_tensors(const NamedTensors& state, const std::string& model_type);
/// adapter_config.json's text: peft_type LORA, task_type CAUSAL_LM, r, lora_alpha, lora_dropout,
/// target_modules, base_model_name_or_path (and PEFT's defaults for the rest).
std::string peft_adapter_config(const spec::LoraSection& lora, const PeftInfo& info);
/// Writes `dir`/adapter_model.safetensors and `dir`/adapter_config.json (creating `dir`); raises
/// a TrainerError (io) naming the file, or (config) when `state` holds no adapter.
void write_peft_adapter(const std::string& dir, const NamedTensors& state,
                        const spec::LoraSection& lora, const PeftInfo& info);
/// The base parameters of `state` with every adapter merged in (W + alpha / r * B A, computed in
/// fp32 and stored in W's dtype), adapters dropped, Hugging Face names, state order.
NamedTensors merge_lora(const NamedTensors& state, const spec::LoraSection& lora);

}  // namespace shardscope::ckpt
