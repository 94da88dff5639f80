// Torch-free model shapes: the layers and parameters of a model from its configuration, how the
// wrap policy groups them into units, and how a flat parameter pads. The trainer builds its
// engine from these, and the memory estimate counts from the same numbers, so the estimate's
// parameter, gradient and optimizer terms are exact.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spec/experiment.h"

namespace shardscope::spec {

struct ParamShape {
  std::string name;  // Hugging Face name
  std::vector<std::int64_t> shape;
  bool decay = true;      // AdamW weight decay applies (false for norms and biases)
  bool trainable = true;  // false: frozen (LoRA base weights)
  /// Non-empty: this parameter is the same tensor as the named parameter of an earlier layer
  /// (lm_head.weight tied to model.embed_tokens.weight); it is not counted twice and whoever owns
  /// storage must hand the layer the owner's values (and sum both gradients into it).
  std::string tied_to;
  /// QLoRA (lora.quantize = "nf4"): a frozen base Linear weight stored as NF4 codes (packed
  /// bytes plus its absmax), dequantized to the compute dtype only while its unit runs.
  bool nf4 = false;
};

struct LayerShape {
  std::string name;  // "embed", "layers.3", "head"
  std::vector<ParamShape> params;
  bool is_block = false;
};

/// Qwen2 dimensions (config.json names in comments).
struct Qwen2Dims {
  std::int64_t vocab_size = 256;         // vocab_size
  std::int64_t hidden_size = 64;         // hidden_size (C)
  std::int64_t intermediate_size = 256;  // intermediate_size (I)
  std::int64_t num_layers = 2;           // num_hidden_layers
  std::int64_t num_heads = 4;            // num_attention_heads (H)
  std::int64_t num_kv_heads = 4;         // num_key_value_heads (K)
  std::int64_t max_position = 512;       // max_position_embeddings
  double rope_theta = 10000.0;           // rope_theta
  double rms_eps = 1e-6;                 // rms_norm_eps
  bool tie_word_embeddings = false;      // tie_word_embeddings: lm_head shares the embedding
};

/// Model FLOPs of training (forward and backward) per token at sequence length `seq_len`, the one
/// formula behind every MFU figure (shardtrain's `step.mfu`, `hello.flops_per_token`, the
/// benchmarks and their FSDP2 peers): 6 x the text stack's non-embedding parameters outside the
/// head (blocks and the final norm), plus the head's 6 x vocab x hidden whether it is tied to the
/// embedding or not, plus attention's 12 x layers x hidden x seq_len. Qwen2-VL's vision tower is
/// not counted (its patches are not tokens of the sequence).
double training_flops_per_token(const Qwen2Dims& dims, std::int64_t seq_len);

/// The tiny test model's dimensions from [model] tiny_* fields.
Qwen2Dims tiny_dims(const ModelSection& model);
/// Embedding, blocks, head, with HF parameter names.
std::vector<LayerShape> qwen2_layers(const Qwen2Dims& dims);

std::int64_t numel(const std::vector<std::int64_t>& shape);

/// Marks the parameters that train.freeze's globs match (fnmatch on the Hugging Face name)
/// frozen; returns the globs that match no parameter (a configuration error for the caller).
std::vector<std::string> apply_freeze(const TrainSection& train, std::vector<LayerShape>& layers);
/// The Linear modules LoRA can target, by the last part of their module path: the text stack's
/// q_proj k_proj v_proj o_proj gate_proj up_proj down_proj and the vision tower's qkv proj fc1
/// fc2 (a vision block's attn.qkv, attn.proj, mlp.fc1, mlp.fc2).
const std::vector<std::string>& lora_module_names();
/// The names of lora_module_names() joined by ", " (for error messages).
std::string lora_module_list();
/// PEFT's name of an adapter parameter of `module`: "base_model.model.<module>.lora_A.weight"
/// (`which` 'A') or ".lora_B.weight" ('B'), without PEFT's adapter name (".default").
std::string lora_param_name(const std::string& module, char which);
/// True for a name lora_param_name() makes.
bool is_lora_param(const std::string& name);
/// True when LoRA target `target` selects module path `module` (PEFT's rule for a list entry: the
/// path equals the target or ends with "." + target).
bool lora_target_matches(const std::string& target, const std::string& module);
/// With lora.enabled: for every 2-D "<module>.weight" whose module a target selects, appends
/// lora_A (r, in) and lora_B (out, r) to that parameter's layer (after its base parameters, so
/// base indices stay put), and freezes every other parameter (PEFT trains adapters only). With
/// lora.quantize = "nf4" it marks the base weights QLoRA quantizes (ParamShape::nf4): every
/// Linear of the text stack (bitsandbytes' load_in_4bit), and the vision tower's ("visual.")
/// only where a target selects them; embeddings, norms, biases, the merger and the head stay in
/// the compute dtype. Returns the targets that select no module (a configuration error for the
/// caller). No-op when disabled.
std::vector<std::string> apply_lora(const LoraSection& lora, std::vector<LayerShape>& layers);
/// Bytes of one weight's NF4 record in its unit's "<unit>/nf4" flat parameter (QLoRA), the
/// layout the engine stores and shards, for a weight of `n` elements in blocks of `block_size`:
/// with double_quant the nested absmax (fp32, one per 256 blocks) and the offset (fp32), then one
/// absmax code (uint8) per block; without, one fp32 absmax per block; then the packed codes (two
/// per byte, an odd n padded); the whole padded to a multiple of 4 bytes.
std::int64_t nf4_record_bytes(std::int64_t n, std::int64_t block_size, bool double_quant);
/// Parameters of `layers`, a tied parameter counted once (transformers' num_parameters()).
std::int64_t count_params(const std::vector<LayerShape>& layers);
/// The text stack's layers appended to `layers`: embed, blocks, head (names `prefix`-free HF).
void append_qwen2_text_layers(std::vector<LayerShape>& layers, const Qwen2Dims& dims);

/// Wrap units: the root's layers first (everything no policy wrapped), then each wrapped unit's
/// layers, ascending. Block policy: one unit per block; size policy: consecutive blocks until
/// the unit has at least `min_params` parameters (a smaller tail stays in the root); none: root.
std::vector<std::vector<int>> plan_units(const std::vector<LayerShape>& layers, WrapPolicy policy,
                                         std::int64_t min_params);

/// Elements per shard of a flat parameter of `numel` elements over `shard_size` ranks.
inline std::int64_t shard_numel(std::int64_t numel, int shard_size) {
  return (numel + shard_size - 1) / shard_size;
}

}  // namespace shardscope::spec
