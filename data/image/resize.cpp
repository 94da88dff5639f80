// PIL's convolution resampling (libImaging/Resample.c) for the BICUBIC filter on 8-bit images.
// The float arithmetic below follows PIL's expression order so weights round identically.
#include "data/image/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace shardscope::data {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // PIL's fixed-point weight precision
constexpr double kBicubicSupport = 2.0;

double bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// For each output index: the first input index, how many inputs it reads, and the weights.
struct Coefficients {
  int ksize = 0;
  std::vector<int> first;        // (out,)
  std::vector<int> count;        // (out,)
  std::vector<std::int32_t> kk;  // (out, ksize) fixed-point weights
};

Coefficients precompute(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = kBicubicSupport * filterscale;
  Coefficients co;
  co.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  co.first.resize(out_size);
  co.count.resize(out_size);
  co.kk.assign(static_cast<std::size_t>(out_size) * co.ksize, 0);
  std::vector<double> w(co.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // PIL "rounds" by truncating (value + 0.5) toward zero; lround would differ for negatives.
    // NOLINTNEXTLINE(bugprone-incorrect-roundings): PIL's exact arithmetic is the point
    int xmin = static_cast<int>(center - support + 0.5);
    xmin = std::max(xmin, 0);
    // NOLINTNEXTLINE(bugprone-incorrect-roundings): as above
    int xmax = static_cast<int>(center + support + 0.5);
    xmax = std::min(xmax, in_size) - xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[x] = bicubic((x + xmin - center + 0.5) * ss);
      ww += w[x];
    }
    for (int x = 0; x < xmax; ++x) {
      double k = ww != 0.0 ? w[x] / ww : w[x];
      double fixed = k * (1 << kPrecisionBits);
      co.kk[static_cast<std::size_t>(xx) * co.ksize + x] =
          static_cast<std::int32_t>(k < 0 ? -0.5 + fixed : 0.5 + fixed);
    }
    co.first[xx] = xmin;
    co.count[xx] = xmax;
  }
  return co;
}

std::uint8_t clip8(std::int64_t acc) {
  std::int64_t v = acc >> kPrecisionBits;  // arithmetic shift: floor, as PIL's lookup does
  return static_cast<std::uint8_t>(std::clamp<std::int64_t>(v, 0, 255));
}

RgbImage horizontal(const RgbImage& in, int out_w) {
  Coefficients co = precompute(in.width, out_w);
  RgbImage out{out_w, in.height,
               std::vector<std::uint8_t>(static_cast<std::size_t>(out_w) * in.height * 3)};
  for (int y = 0; y < in.height; ++y) {
    const std::uint8_t* row = &in.pixels[static_cast<std::size_t>(y) * in.width * 3];
    std::uint8_t* dst = &out.pixels[static_cast<std::size_t>(y) * out_w * 3];
    for (int xx = 0; xx < out_w; ++xx) {
      const std::int32_t* k = &co.kk[static_cast<std::size_t>(xx) * co.ksize];
      for (int c = 0; c < 3; ++c) {
        std::int64_t acc = 1 << (kPrecisionBits - 1);
        for (int x = 0; x < co.count[xx]; ++x)
          acc += row[(x + co.first[xx]) * 3 + c] * std::int64_t{k[x]};
        dst[xx * 3 + c] = clip8(acc);
      }
    }
  }
  return out;
}

RgbImage vertical(const RgbImage& in, int out_h) {
  Coefficients co = precompute(in.height, out_h);
  const std::size_t stride = static_cast<std::size_t>(in.width) * 3;
  RgbImage out{in.width, out_h, std::vector<std::uint8_t>(stride * out_h)};
  for (int yy = 0; yy < out_h; ++yy) {
    const std::int32_t* k = &co.kk[static_cast<std::size_t>(yy) * co.ksize];
    std::uint8_t* dst = &out.pixels[yy * stride];
    for (std::size_t i = 0; i < stride; ++i) {
      std::int64_t acc = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < co.count[yy]; ++y)
        acc += in.pixels[(y + co.first[yy]) * stride + i] * std::int64_t{k[y]};
      dst[i] = clip8(acc);
    }
  }
  return out;
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& image, int width, int height) {
  // PIL skips a pass whose size does not change (and copies when neither does). Since Pillow 13
  // (python-pillow/Pillow#9549) the vertical pass runs first when the height shrinks by more than
  // twice as many pixels as the width; the order changes the uint8 rounding between the passes,
  // so it must match. Older Pillow always ran the horizontal pass first.
  const int shrink_h = image.height - height;
  const bool vertical_first = shrink_h > 0 && shrink_h > (image.width - width) * 2;
  RgbImage out = image;
  if (vertical_first) {
    if (height != image.height) out = vertical(out, height);
    if (width != image.width) out = horizontal(out, width);
  } else {
    if (width != image.width) out = horizontal(out, width);
    if (height != image.height) out = vertical(out, height);
  }
  return out;
}

}  // namespace shardscope::data
