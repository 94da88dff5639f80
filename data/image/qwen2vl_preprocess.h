// The Qwen2-VL image processor, as transformers' PIL-based Qwen2VLImageProcessor computes it:
// smart resize to multiples of patch*merge within [min_pixels, max_pixels], PIL bicubic resize,
// rescale by 1/255, normalise by mean/std, and patchify into flat patches.
//
// Legend: P = patch_size (14), T = temporal_patch_size (2), M = merge_size (2),
//         gh, gw = grid height/width in patches, so the resized image is (gh*P, gw*P).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/image/image.h"
#include "spec/result.h"

namespace shardscope::data {

/// The image processor settings (preprocessor_config.json); defaults are Qwen2-VL's.
struct Qwen2VLImageConfig {
  std::int64_t min_pixels = 3136;     // pixels (56*56); `min_pixels` or `size.shortest_edge`
  std::int64_t max_pixels = 1003520;  // pixels (28*28*1280); `max_pixels` or `size.longest_edge`
  int patch_size = 14;                // pixels per patch side
  int temporal_patch_size = 2;        // frames per patch; an image is repeated
  int merge_size = 2;                 // patches merged per side into one LLM token
  std::array<float, 3> image_mean = {0.48145466F, 0.4578275F, 0.40821073F};  // OpenAI CLIP
  std::array<float, 3> image_std = {0.26862954F, 0.26130258F, 0.27577711F};  // OpenAI CLIP
  double rescale_factor = 1.0 / 255.0;                                       // uint8 -> [0, 1]
  bool do_resize = true;
  bool do_rescale = true;
  bool do_normalize = true;

  /// Resized sides are multiples of this: patch_size * merge_size (28).
  int factor() const { return patch_size * merge_size; }
};

/// Reads the image processor settings from a JSON object; `source` names the file in errors.
/// A transformers-5 processor_config.json nests them under "image_processor".
Result<Qwen2VLImageConfig> parse_qwen2vl_image_config(const nlohmann::json& config,
                                                      const std::string& source);

/// Reads MODEL_DIR/preprocessor_config.json, else MODEL_DIR/processor_config.json.
Result<Qwen2VLImageConfig> read_qwen2vl_image_config(const std::string& model_dir);

/// Target size of the resize (height, width), multiples of the factor.
struct ResizedSize {
  int height = 0;
  int width = 0;
  bool operator==(const ResizedSize&) const = default;
};

/// transformers' Qwen2-VL smart_resize: round each side to the factor, then scale both by
/// sqrt(area ratio) (floor when above max_pixels, ceil when below min_pixels). Fails for an
/// aspect ratio above 200, as transformers does.
Result<ResizedSize> smart_resize(int height, int width, int factor, std::int64_t min_pixels,
                                 std::int64_t max_pixels);

/// One image as the vision tower takes it.
struct ImagePatches {
  std::vector<float> pixel_values;  // (grid_t * grid_h * grid_w, 3 * T * P * P)
  std::int64_t grid_t = 1;          // always 1 for an image
  std::int64_t grid_h = 0;          // patches along the height
  std::int64_t grid_w = 0;          // patches along the width
  std::int64_t patch_dim = 0;       // 3 * T * P * P (1176 for Qwen2-VL)
  std::int64_t merge_size = 2;

  std::int64_t num_patches() const { return grid_t * grid_h * grid_w; }
  /// How many <|image_pad|> tokens the image takes in the text: t*h*w / merge^2.
  std::int64_t num_tokens() const { return num_patches() / (merge_size * merge_size); }
};

/// Resizes, normalises and patchifies an RGB image.
Result<ImagePatches> preprocess_qwen2vl(const RgbImage& image, const Qwen2VLImageConfig& config);

/// Number of <|image_pad|> tokens an image of this size takes, without touching its pixels.
Result<std::int64_t> qwen2vl_image_tokens(int height, int width, const Qwen2VLImageConfig& config);

}  // namespace shardscope::data
