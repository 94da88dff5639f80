// Images for the data pipeline: PNG/JPEG decoded with stb into 8-bit RGB exactly as PIL's
// convert("RGB") gives them to transformers (grey replicated, transparency composited onto
// white), and PNG writing for generated data. Torch-free and Qt-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spec/result.h"

namespace shardscope::data {

/// An 8-bit RGB image: rows top to bottom, pixels interleaved.
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> pixels;  // (height, width, 3)

  std::uint8_t at(int y, int x, int c) const {
    return pixels[(static_cast<std::size_t>(y) * width + x) * 3 + c];
  }
};

/// Images with more pixels than this are refused before decoding (PIL's decompression-bomb
/// threshold): a 90-megapixel training image is a mistake, and Qwen2-VL resizes to far less.
inline constexpr std::int64_t kImageDecodeMaxPixels = 89'478'485;

/// Decodes PNG or JPEG bytes; `name` (the file) prefixes every error message.
Result<RgbImage> decode_image(const std::vector<std::uint8_t>& bytes, const std::string& name,
                              std::int64_t max_pixels = kImageDecodeMaxPixels);

/// Reads and decodes a PNG or JPEG file; errors name the file and what to do.
Result<RgbImage> read_image(const std::string& path,
                            std::int64_t max_pixels = kImageDecodeMaxPixels);

/// Encodes an image as PNG (deterministic bytes for the same pixels).
std::vector<std::uint8_t> encode_png(const RgbImage& image);

/// Writes an image as a PNG file.
Result<void> write_png(const std::string& path, const RgbImage& image);

}  // namespace shardscope::data
