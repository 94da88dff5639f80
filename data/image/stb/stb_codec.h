// Thin wrappers around stb_image / stb_image_write (internal to data/image). The stb
// implementation is compiled static in stb_codec.cpp only, so its symbols never clash with
// another copy of stb in the same program.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardscope::data::detail {

/// Width, height and channel count in the file (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA).
struct StbInfo {
  int width = 0;
  int height = 0;
  int channels = 0;
};

/// Decoded pixels, freed with stb's allocator.
using StbPixels = std::unique_ptr<std::uint8_t, void (*)(void*)>;

/// Reads the header only; false when stb does not recognise the bytes (reason in `why`).
bool stb_info(const std::vector<std::uint8_t>& bytes, StbInfo& info, std::string& why);

/// Decodes to 8-bit with `want_channels` channels (stb converts grey/RGB/alpha as needed); null
/// on failure with the reason in `why`.
StbPixels stb_decode(const std::vector<std::uint8_t>& bytes, int want_channels, StbInfo& info,
                     std::string& why);

/// Encodes 8-bit interleaved pixels (`channels` per pixel, rows top to bottom) as a PNG.
std::vector<std::uint8_t> stb_encode_png(const std::uint8_t* pixels, int width, int height,
                                         int channels);

}  // namespace shardscope::data::detail
