// Qwen2-VL image preprocessing, following transformers 5's Qwen2VLImageProcessorPil step by
// step so every float equals what it computes (see the reference test).
#include "data/image/qwen2vl_preprocess.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "data/image/resize.h"

namespace shardscope::data {

namespace {

using nlohmann::json;

constexpr int kPilBicubic = 3;  // PIL.Image.Resampling.BICUBIC

Result<std::int64_t> positive_int(const json& node, const std::string& where) {
  if (!node.is_number_integer() || node.get<std::int64_t>() <= 0)
    return fail(where + " must be a positive integer (got " + node.dump() + ")");
  return node.get<std::int64_t>();
}

Result<std::array<float, 3>> three_floats(const json& node, const std::string& where) {
  std::array<float, 3> out{};
  if (node.is_number()) {
    out.fill(node.get<float>());
    return out;
  }
  if (!node.is_array() || node.size() != 3)
    return fail(where + " must be a list of 3 numbers, one per RGB channel (got " + node.dump() +
                ")");
  for (std::size_t c = 0; c < 3; ++c) {
    if (!node[c].is_number()) return fail(where + "[" + std::to_string(c) + "] must be a number");
    out[c] = static_cast<float>(node[c].get<double>());
  }
  return out;
}

Result<void> read_bool(const json& config, const char* key, const std::string& source, bool& out) {
  if (!config.contains(key)) return ok();
  if (!config[key].is_boolean())
    return fail(source + ": " + key + " must be true or false (got " + config[key].dump() + ")");
  out = config[key].get<bool>();
  return ok();
}

// min/max pixels: the flat keys (Qwen2-VL's published file) win over size.shortest_edge /
// size.longest_edge (what transformers 5 writes), as in Qwen2VLImageProcessor.__init__.
Result<void> read_pixel_range(const json& config, const std::string& source,
                              Qwen2VLImageConfig& out) {
  if (config.contains("size") && !config["size"].is_null()) {
    const json& size = config["size"];
    if (!size.is_object() || !size.contains("shortest_edge") || !size.contains("longest_edge"))
      return fail(source +
                  ": size must hold shortest_edge and longest_edge (pixel counts) for "
                  "Qwen2-VL (got " +
                  size.dump() + ")");
    auto lo = positive_int(size["shortest_edge"], source + ": size.shortest_edge");
    if (!lo) return lo.error();
    auto hi = positive_int(size["longest_edge"], source + ": size.longest_edge");
    if (!hi) return hi.error();
    out.min_pixels = *lo;
    out.max_pixels = *hi;
  }
  for (auto [key, field] :
       {std::pair{"min_pixels", &out.min_pixels}, {"max_pixels", &out.max_pixels}}) {
    if (!config.contains(key) || config[key].is_null()) continue;
    auto v = positive_int(config[key], source + ": " + key);
    if (!v) return v.error();
    *field = *v;
  }
  if (out.min_pixels > out.max_pixels) {
    return fail(source + ": min_pixels (" + std::to_string(out.min_pixels) +
                ") is above max_pixels (" + std::to_string(out.max_pixels) + "); swap them");
  }
  return ok();
}

Result<void> read_patching(const json& config, const std::string& source, Qwen2VLImageConfig& out) {
  for (auto [key, field] : {std::pair{"patch_size", &out.patch_size},
                            {"temporal_patch_size", &out.temporal_patch_size},
                            {"merge_size", &out.merge_size}}) {
    if (!config.contains(key)) continue;
    auto v = positive_int(config[key], source + ": " + key);
    if (!v) return v.error();
    *field = static_cast<int>(*v);
  }
  if (config.contains("resample") && config["resample"] != kPilBicubic) {
    return fail(source + ": resample " + config["resample"].dump() +
                " is not supported; only BICUBIC (3), Qwen2-VL's, is implemented");
  }
  return ok();
}

Result<void> read_normalisation(const json& config, const std::string& source,
                                Qwen2VLImageConfig& out) {
  for (auto [key, field] :
       {std::pair{"image_mean", &out.image_mean}, {"image_std", &out.image_std}}) {
    if (!config.contains(key)) continue;
    auto v = three_floats(config[key], source + ": " + key);
    if (!v) return v.error();
    *field = *v;
  }
  for (float s : out.image_std)
    if (s == 0.0F) return fail(source + ": image_std has a zero; use the model's published std");
  if (config.contains("rescale_factor")) {
    if (!config["rescale_factor"].is_number())
      return fail(source + ": rescale_factor must be a number (1/255 for 8-bit images)");
    out.rescale_factor = config["rescale_factor"].get<double>();
  }
  for (auto [key, field] : {std::pair{"do_resize", &out.do_resize},
                            {"do_rescale", &out.do_rescale},
                            {"do_normalize", &out.do_normalize}}) {
    auto r = read_bool(config, key, source, *field);
    if (!r) return r;
  }
  return ok();
}

// The normalised image, (H, W, 3) float32, computed in numpy's order: float64 rescale cast to
// float32, then (x - mean) / std in float32.
std::vector<float> normalise(const RgbImage& image, const Qwen2VLImageConfig& config) {
  std::vector<float> out(image.pixels.size());
  for (std::size_t i = 0; i < image.pixels.size(); ++i) {
    const std::size_t c = i % 3;
    float x = config.do_rescale ? static_cast<float>(image.pixels[i] * config.rescale_factor)
                                : static_cast<float>(image.pixels[i]);
    if (config.do_normalize) x = (x - config.image_mean[c]) / config.image_std[c];
    out[i] = x;
  }
  return out;
}

// transformers' patchify: (C, gh/M, M, P, gw/M, M, P) -> (gh/M, gw/M, M, M, C, T, P, P), the
// image repeated T times, flattened to rows of C*T*P*P.
void patchify(const std::vector<float>& hwc, int width, const Qwen2VLImageConfig& config,
              ImagePatches& out) {
  const int p = config.patch_size;
  const int m = config.merge_size;
  const int t = config.temporal_patch_size;
  out.pixel_values.resize(static_cast<std::size_t>(out.num_patches() * out.patch_dim));
  float* dst = out.pixel_values.data();
  for (std::int64_t bh = 0; bh < out.grid_h / m; ++bh) {
    for (std::int64_t bw = 0; bw < out.grid_w / m; ++bw) {
      for (int mh = 0; mh < m; ++mh) {
        for (int mw = 0; mw < m; ++mw) {
          const std::int64_t y0 = (bh * m + mh) * p;
          const std::int64_t x0 = (bw * m + mw) * p;
          for (int c = 0; c < 3; ++c) {
            for (int f = 0; f < t; ++f) {
              for (int ph = 0; ph < p; ++ph) {
                const float* src = &hwc[static_cast<std::size_t>(((y0 + ph) * width + x0) * 3 + c)];
                for (std::ptrdiff_t pw = 0; pw < p; ++pw) *dst++ = src[pw * 3];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

Result<Qwen2VLImageConfig> parse_qwen2vl_image_config(const json& config,
                                                      const std::string& source) {
  if (!config.is_object()) return fail(source + ": not a JSON object");
  // transformers 5's processor_config.json keeps the image processor's fields in a sub-object.
  if (config.contains("image_processor") && config["image_processor"].is_object())
    return parse_qwen2vl_image_config(config["image_processor"], source + ": image_processor");
  Qwen2VLImageConfig out;
  if (auto r = read_pixel_range(config, source, out); !r) return r.error();
  if (auto r = read_patching(config, source, out); !r) return r.error();
  if (auto r = read_normalisation(config, source, out); !r) return r.error();
  return out;
}

Result<Qwen2VLImageConfig> read_qwen2vl_image_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  for (const char* name : {"preprocessor_config.json", "processor_config.json"}) {
    fs::path path = fs::path(model_dir) / name;
    if (!fs::exists(path)) continue;
    std::ifstream in(path);
    json config = json::parse(in, nullptr, false);
    if (config.is_discarded())
      return fail(path.string() + ": not valid JSON; restore the file from the model's release");
    return parse_qwen2vl_image_config(config, path.string());
  }
  return fail(model_dir +
              ": no preprocessor_config.json or processor_config.json; copy the "
              "model's image processor config into the folder");
}

Result<ResizedSize> smart_resize(int height, int width, int factor, std::int64_t min_pixels,
                                 std::int64_t max_pixels) {
  if (height <= 0 || width <= 0)
    return fail("image size " + std::to_string(width) + "x" + std::to_string(height) + " is empty");
  const double aspect = static_cast<double>(std::max(height, width)) / std::min(height, width);
  if (aspect > 200) {
    return fail("image size " + std::to_string(width) + "x" + std::to_string(height) +
                ": aspect ratio above 200, which Qwen2-VL refuses; crop the image");
  }
  // Python's round() rounds halves to even; nearbyint does too in the default rounding mode.
  std::int64_t h_bar =
      static_cast<std::int64_t>(std::nearbyint(static_cast<double>(height) / factor)) * factor;
  std::int64_t w_bar =
      static_cast<std::int64_t>(std::nearbyint(static_cast<double>(width) / factor)) * factor;
  const double area = static_cast<double>(static_cast<std::int64_t>(height) * width);
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(area / static_cast<double>(max_pixels));
    h_bar = std::max<std::int64_t>(
        factor, static_cast<std::int64_t>(std::floor(height / beta / factor)) * factor);
    w_bar = std::max<std::int64_t>(
        factor, static_cast<std::int64_t>(std::floor(width / beta / factor)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / area);
    h_bar = static_cast<std::int64_t>(std::ceil(height * beta / factor)) * factor;
    w_bar = static_cast<std::int64_t>(std::ceil(width * beta / factor)) * factor;
  }
  return ResizedSize{static_cast<int>(h_bar), static_cast<int>(w_bar)};
}

Result<std::int64_t> qwen2vl_image_tokens(int height, int width, const Qwen2VLImageConfig& config) {
  int h = height;
  int w = width;
  if (config.do_resize) {
    auto size = smart_resize(height, width, config.factor(), config.min_pixels, config.max_pixels);
    if (!size) return size.error();
    h = size->height;
    w = size->width;
  }
  if (h % config.factor() != 0 || w % config.factor() != 0) {
    return fail("image size " + std::to_string(w) + "x" + std::to_string(h) +
                " is not a multiple of patch_size*merge_size (" + std::to_string(config.factor()) +
                ") and do_resize is false; set do_resize to true");
  }
  const std::int64_t m = config.merge_size;
  return std::int64_t{h / config.patch_size} * (w / config.patch_size) / (m * m);
}

Result<ImagePatches> preprocess_qwen2vl(const RgbImage& image, const Qwen2VLImageConfig& config) {
  auto tokens = qwen2vl_image_tokens(image.height, image.width, config);
  if (!tokens) return tokens.error();
  RgbImage resized;
  const RgbImage* src = &image;
  if (config.do_resize) {
    auto size = smart_resize(image.height, image.width, config.factor(), config.min_pixels,
                             config.max_pixels);
    if (!size) return size.error();
    if (size->height != image.height || size->width != image.width) {
      resized = resize_bicubic(image, size->width, size->height);
      src = &resized;
    }
  }
  ImagePatches out;
  out.grid_h = src->height / config.patch_size;
  out.grid_w = src->width / config.patch_size;
  out.merge_size = config.merge_size;
  out.patch_dim =
      std::int64_t{3} * config.temporal_patch_size * config.patch_size * config.patch_size;
  patchify(normalise(*src, config), src->width, config, out);
  return out;
}

}  // namespace shardscope::data
