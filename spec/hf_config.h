// A Hugging Face model directory's config.json, torch-free: the Qwen2 text dimensions and, for
// Qwen2-VL, the vision tower's, read from either layout (the published flat one with
// `rope_scaling: {type: mrope, mrope_section}` and a nested `vision_config`, or the nested
// `text_config` / `vision_config` one transformers 5 writes). The layer shapes carry HF parameter
// names, so the GUI counts parameters without LibTorch and the trainer builds the same layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spec/model_shape.h"
#include "spec/result.h"

namespace shardscope::spec {

/// Qwen2-VL vision tower dimensions (vision_config names in comments).
struct VisionDims {
  std::int64_t depth = 32;                // depth
  std::int64_t embed_dim = 1280;          // embed_dim (E)
  std::int64_t num_heads = 16;            // num_heads
  double mlp_ratio = 4.0;                 // mlp_ratio: MLP width = int(E * mlp_ratio)
  std::int64_t in_channels = 3;           // in_channels (published: in_chans)
  std::int64_t patch_size = 14;           // patch_size
  std::int64_t temporal_patch_size = 2;   // temporal_patch_size
  std::int64_t spatial_merge_size = 2;    // spatial_merge_size
  std::int64_t hidden_size = 1536;        // hidden_size: the merger's output (= text hidden)
  std::string hidden_act = "quick_gelu";  // hidden_act of the block MLPs
  double rope_theta = 10000.0;            // rope_parameters.rope_theta

  std::int64_t mlp_hidden() const {
    return static_cast<std::int64_t>(static_cast<double>(embed_dim) * mlp_ratio);
  }
  /// Values per patch: in_channels * temporal_patch_size * patch_size^2.
  std::int64_t patch_dim() const {
    return in_channels * temporal_patch_size * patch_size * patch_size;
  }
};

/// A model directory's configuration: Qwen2 ("qwen2") or Qwen2-VL ("qwen2_vl").
struct HfModelConfig {
  std::string model_type;  // "qwen2" or "qwen2_vl"
  Qwen2Dims text;
  bool has_vision = false;
  VisionDims vision;
  std::vector<std::int64_t> mrope_section;  // t/h/w sections of head_dim / 2 (Qwen2-VL)
  std::int64_t image_token_id = 151655;     // <|image_pad|>
  std::int64_t video_token_id = 151656;
  std::int64_t vision_start_token_id = 151652;
};

/// Parses config.json text; `file` names the source in error messages.
Result<HfModelConfig> parse_hf_config(const std::string& json_text, const std::string& file);
/// Reads `<dir>/config.json` (or `dir` itself when it names a file).
Result<HfModelConfig> read_hf_config(const std::string& dir);

/// Qwen2-VL layers in engine order: visual.patch_embed, visual.blocks.N, visual.merger, then the
/// Qwen2 text layers (embed, layers.N, head), with the published checkpoint's names.
std::vector<LayerShape> qwen2vl_layers(const Qwen2Dims& text, const VisionDims& vision);
/// The layers of either model type.
std::vector<LayerShape> hf_layers(const HfModelConfig& config);

/// Reads only the safetensors headers of the model folder `dir` (model.safetensors, or the files
/// model.safetensors.index.json lists) and checks that every parameter of `config`'s layers is
/// there with the shape config.json implies. The error names the weights file, the tensor and the
/// config.json field whose value disagrees with it. A folder with config.json but no weights yet
/// passes (an estimate before the download; training fails at loading, naming the folder).
Result<void> check_hf_weights(const std::string& dir, const HfModelConfig& config);

/// The image processor's limit on one image, from `<dir>/preprocessor_config.json` (Qwen2-VL's
/// defaults when the file is absent): max_pixels (flat, or size.longest_edge) over
/// (patch_size * merge_size)^2 is the most merged tokens one image becomes.
Result<std::int64_t> max_image_tokens(const std::string& dir, const VisionDims& vision);

}  // namespace shardscope::spec
