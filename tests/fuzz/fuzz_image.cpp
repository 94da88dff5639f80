// Image decoding (data/image): PNG and JPEG through stb, behind the pixel-count check
// that refuses a decompression bomb by its header. An image that decodes must respect the limit
// and go through Qwen2-VL's resize and patchify; a refused one names the file.
#include <vector>

#include "data/image/image.h"
#include "data/image/qwen2vl_preprocess.h"
#include "tests/fuzz/fuzz_support.h"

using namespace shardscope;

namespace {

// Small enough that a few decodes a second fit in the fuzzer's memory limit, large enough
// for real images: the check is the same code as with the default limit.
constexpr std::int64_t kMaxPixels = std::int64_t{1} << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::uint8_t> bytes(data, data + size);
  auto image = data::decode_image(bytes, "fuzz-image.png", kMaxPixels);
  if (!image) {
    fuzz::expect_clear_error(image.message(), "fuzz-image.png");
    return 0;
  }
  const auto pixels = std::int64_t{image->width} * image->height;
  if (image->width <= 0 || image->height <= 0 || pixels > kMaxPixels)
    fuzz::broken("a decoded image breaks the pixel limit or has no pixels");
  if (image->pixels.size() != static_cast<std::size_t>(pixels) * 3)
    fuzz::broken("the pixel buffer does not match width x height x 3");
  auto patches = data::preprocess_qwen2vl(*image, data::Qwen2VLImageConfig{});
  if (!patches) fuzz::expect_clear_error(patches.message());
  return 0;
}
