// The one translation unit that compiles stb_image and stb_image_write (PNG and JPEG decoding,
// PNG encoding). Everything stb defines here is static; the rest of the code calls the wrappers.
#include "data/image/stb/stb_codec.h"

#include <cstdlib>
#include <cstring>
#include <limits>

// stb's allocations start zeroed, so nothing a corrupt file leaves undefined in stb's decoder
// structs can carry a value over from an earlier decode. The fuzzer met a JPEG DC coefficient
// times its quantiser overflowing int after ~79,000 inputs, which the file alone does not
// reproduce: a value left from before is the likely source (sources.cmake: -fwrapv as well).
#define STBI_MALLOC(size) std::calloc(1, size)
#define STBI_REALLOC(p, size) std::realloc(p, size)
#define STBI_FREE(p) std::free(p)
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
// stb casts what STBI_REALLOC returns C-style; the cast's last token is the macro above, ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#include <stb_image.h>
#pragma GCC diagnostic pop

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb_image_write.h>

namespace shardscope::data::detail {

namespace {

bool fits_int(const std::vector<std::uint8_t>& bytes, std::string& why) {
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    why = "file larger than 2 GiB";
    return false;
  }
  return true;
}

void append_bytes(void* context, void* data, int size) {
  auto* out = static_cast<std::vector<std::uint8_t>*>(context);
  const auto* begin = static_cast<const std::uint8_t*>(data);
  out->insert(out->end(), begin, begin + size);
}

}  // namespace

bool stb_info(const std::vector<std::uint8_t>& bytes, StbInfo& info, std::string& why) {
  if (!fits_int(bytes, why)) return false;
  if (stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &info.width, &info.height,
                            &info.channels) == 0) {
    why = stbi_failure_reason();
    return false;
  }
  return true;
}

StbPixels stb_decode(const std::vector<std::uint8_t>& bytes, int want_channels, StbInfo& info,
                     std::string& why) {
  StbPixels none(nullptr, stbi_image_free);
  if (!fits_int(bytes, why)) return none;
  stbi_uc* pixels = stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &info.width,
                                          &info.height, &info.channels, want_channels);
  if (pixels == nullptr) {
    why = stbi_failure_reason();
    return none;
  }
  return {pixels, stbi_image_free};
}

std::vector<std::uint8_t> stb_encode_png(const std::uint8_t* pixels, int width, int height,
                                         int channels) {
  std::vector<std::uint8_t> out;
  stbi_write_png_to_func(append_bytes, &out, width, height, channels, pixels, width * channels);
  return out;
}

}  // namespace shardscope::data::detail
