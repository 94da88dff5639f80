// Image resampling that reproduces PIL's Image.resize(..., BICUBIC) on RGB8 bit for bit: the
// Qwen2-VL image processor resizes with PIL, so the trainer must too.
#pragma once

#include "data/image/image.h"

namespace shardscope::data {

/// PIL's BICUBIC resize (a = -0.5, support widened by the downscale factor, i.e. antialiased),
/// separable (pass order as Pillow 13 picks it), 22-bit fixed-point weights, each pass rounded and
/// clipped back to uint8 as PIL does. Same size returns a copy.
RgbImage resize_bicubic(const RgbImage& image, int width, int height);

}  // namespace shardscope::data
