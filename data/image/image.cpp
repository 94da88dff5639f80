// PNG/JPEG decoding to RGB8 with PIL's conversion rules (what transformers' convert_to_rgb does
// before the Qwen2-VL image processor sees the pixels).
#include "data/image/image.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

#include "data/image/stb/stb_codec.h"

namespace shardscope::data {

namespace {

bool starts_with(const std::vector<std::uint8_t>& bytes, std::size_t at, const char* magic) {
  std::size_t n = std::strlen(magic);
  if (bytes.size() < at + n) return false;
  return std::memcmp(bytes.data() + at, magic, n) == 0;
}

// The container a file's first bytes announce; empty for PNG/JPEG (decodable) and "unknown" for
// anything unrecognised.
std::string foreign_format(const std::vector<std::uint8_t>& bytes) {
  if (starts_with(bytes, 0, "\x89PNG") || starts_with(bytes, 0, "\xFF\xD8\xFF")) return "";
  if (starts_with(bytes, 0, "GIF8")) return "GIF";
  if (starts_with(bytes, 0, "BM")) return "BMP";
  if (starts_with(bytes, 0, "RIFF") && starts_with(bytes, 8, "WEBP")) return "WebP";
  if (starts_with(bytes, 0, "II*") || starts_with(bytes, 0, "MM\x00*")) return "TIFF";
  return "unknown";
}

// PIL's Image.alpha_composite of a pixel over opaque white, in PIL's integer arithmetic
// (AlphaComposite.c: 7 extra bits of precision, rounded divisions by 255), then convert("RGB").
void composite_over_white(const std::uint8_t* rgba, std::uint8_t* rgb) {
  constexpr std::uint32_t kBits = 7;
  const std::uint32_t alpha = rgba[3];
  if (alpha == 0) {
    rgb[0] = rgb[1] = rgb[2] = 255;
    return;
  }
  const std::uint32_t blend = 255 * (255 - alpha);
  const std::uint32_t out_a255 = alpha * 255 + blend;
  const std::uint32_t coef1 = alpha * 255 * 255 * (1U << kBits) / out_a255;
  const std::uint32_t coef2 = 255 * (1U << kBits) - coef1;
  for (int c = 0; c < 3; ++c) {
    std::uint32_t tmp = rgba[c] * coef1 + 255 * coef2 + (0x80U << kBits);
    rgb[c] = static_cast<std::uint8_t>((((tmp >> 8) + tmp) >> 8) >> kBits);
  }
}

std::int64_t big_endian16(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::int64_t{b[at]} << 8) | b[at + 1];
}

// (width, height) from a PNG's IHDR or a JPEG's start-of-frame, read before stb so a
// decompression bomb is refused by its header; (0, 0) when the header is not found.
std::pair<std::int64_t, std::int64_t> header_size(const std::vector<std::uint8_t>& b) {
  if (starts_with(b, 0, "\x89PNG") && b.size() >= 24) {
    return {(big_endian16(b, 16) << 16) | big_endian16(b, 18),
            (big_endian16(b, 20) << 16) | big_endian16(b, 22)};
  }
  std::size_t at = 2;  // after the JPEG SOI marker: segments of FF, marker, 16-bit length
  while (at + 9 < b.size() && b[at] == 0xFF) {
    const std::uint8_t marker = b[at + 1];
    const bool frame =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) return {big_endian16(b, at + 7), big_endian16(b, at + 5)};
    at += 2 + static_cast<std::size_t>(big_endian16(b, at + 2));
  }
  return {0, 0};
}

// What in a JPEG's Huffman tables would make stb_image 2.27 (Debian 12's libstb-dev; fixed
// upstream in 2.28) read or write out of bounds, or nullptr. stb sums a DHT table's 16 code counts
// without a bound and writes that many sizes and values into 257- and 256-entry arrays; and it
// decodes a scan with a table no DHT defined, from uninitialised memory (a symbol index of -95).
// The walk follows stb's: segments with a length, entropy-coded bytes scanned to the next
// marker; a byte past the end reads as 0, as stb's does.
struct JpegWalk {
  const std::vector<std::uint8_t>& b;
  bool defined[2][4] = {};  // [DC, AC][table id]
  bool progressive = false;

  std::size_t at(std::size_t i) const { return i < b.size() ? b[i] : 0; }

  const char* define_tables(std::size_t i, std::size_t length) {
    std::size_t table = i + 4;
    for (std::int64_t left = std::int64_t(length) - 2; left > 0;) {
      const std::size_t cls = at(table) >> 4, id = at(table) & 15;
      std::size_t codes = 0;
      for (std::size_t k = 1; k <= 16; ++k) codes += at(table + k);
      if (codes > 256) return "a Huffman table with more than 256 codes";
      if (cls <= 1 && id <= 3) defined[cls][id] = true;
      table += 17 + codes;
      left -= static_cast<std::int64_t>(17 + codes);
    }
    return nullptr;
  }

  // A scan's tables: a baseline scan uses both, a progressive DC scan its DC table (first pass
  // only), a progressive AC scan its AC table.
  const char* check_scan(std::size_t i) const {
    const std::size_t components = at(i + 4), spectral = i + 5 + 2 * components;
    const bool dc_scan = at(spectral) == 0, first_pass = (at(spectral + 2) >> 4) == 0;
    const bool need_dc = !progressive || (dc_scan && first_pass);
    const bool need_ac = !progressive || !dc_scan;
    for (std::size_t k = 0; k < components; ++k) {
      const std::size_t dc = at(i + 6 + 2 * k) >> 4, ac = at(i + 6 + 2 * k) & 15;
      if ((need_dc && (dc > 3 || !defined[0][dc])) || (need_ac && (ac > 3 || !defined[1][ac])))
        return "a scan uses a Huffman table the file does not define";
    }
    return nullptr;
  }

  const char* problem() {
    std::size_t i = 2;  // after SOI
    while (i + 1 < b.size()) {
      const std::size_t marker = at(i + 1);
      if (at(i) != 0xFF || marker == 0xFF) {  // entropy-coded data, or a fill byte
        ++i;
        continue;
      }
      if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
        i += 2;  // a stuffed FF, TEM or a restart marker: no length
        continue;
      }
      if (marker == 0xD9) return nullptr;  // EOI
      const std::size_t length = (at(i + 2) << 8) | at(i + 3);
      if (marker == 0xC2) progressive = true;
      const char* why = marker == 0xC4   ? define_tables(i, length)
                        : marker == 0xDA ? check_scan(i)
                                         : nullptr;
      if (why != nullptr) return why;
      i += 2 + length;
    }
    return nullptr;
  }
};

// What in a PNG's chunk layout would make stb_image 2.27 allocate without bound, or nullptr.
// stb grows its IDAT buffer to a chunk's declared length before it reads the chunk, so a
// 100-byte file whose IDAT claims 0x52000000 bytes had it realloc 2 GiB. Every chunk up to IEND
// must fit in the bytes that follow its header; the IDAT buffer is then bounded by the file.
const char* png_problem(const std::vector<std::uint8_t>& b) {
  std::size_t at = 8;  // after the signature: chunks of length, type, data, CRC
  while (at < b.size()) {
    if (b.size() - at < 8) return "a chunk header cut short";
    const std::uint64_t length = (std::uint64_t{b[at]} << 24) | (std::uint64_t{b[at + 1]} << 16) |
                                 (std::uint64_t{b[at + 2]} << 8) | b[at + 3];
    if (length > b.size() - at - 8) return "a chunk longer than the rest of the file";
    if (std::memcmp(b.data() + at + 4, "IEND", 4) == 0) return nullptr;
    at += 8 + length + 4;
  }
  return nullptr;
}

// The pixel limit, checked on a header's (width, height). Each side is below 2^32 (a PNG's
// IHDR), so the product fits 64 unsigned bits; as int64 it overflowed (4294967295 squared).
std::optional<Error> over_limit(const std::string& name, std::int64_t width, std::int64_t height,
                                std::int64_t max_pixels) {
  const std::uint64_t pixels =
      static_cast<std::uint64_t>(width) * static_cast<std::uint64_t>(height);
  if (pixels <= static_cast<std::uint64_t>(max_pixels)) return std::nullopt;
  return fail(name + ": " + std::to_string(width) + "x" + std::to_string(height) + " = " +
              std::to_string(pixels) + " pixels is above the decode limit of " +
              std::to_string(max_pixels) +
              " pixels; downscale the image (Qwen2-VL resizes it to at most max_pixels anyway)");
}

}  // namespace

Result<RgbImage> decode_image(const std::vector<std::uint8_t>& bytes, const std::string& name,
                              std::int64_t max_pixels) {
  if (bytes.empty()) return fail(name + ": the image file is empty; replace it with a PNG or JPEG");
  std::string format = foreign_format(bytes);
  if (format == "unknown")
    return fail(name + ": not a PNG or JPEG image; convert it to PNG or JPEG");
  if (!format.empty())
    return fail(name + ": " + format + " images are not supported; convert it to PNG or JPEG");
  if (auto size = header_size(bytes); size.first > 0) {
    if (auto error = over_limit(name, size.first, size.second, max_pixels)) return *error;
  }
  if (starts_with(bytes, 0, "\x89PNG")) {
    if (const char* why = png_problem(bytes))
      return fail(name + ": corrupt or truncated image (PNG: " + why + "); re-export the image");
  }
  if (starts_with(bytes, 0, "\xFF\xD8\xFF")) {
    if (const char* why = JpegWalk{bytes}.problem())
      return fail(name + ": corrupt JPEG (" + why + "); re-export the image");
  }
  detail::StbInfo info;
  std::string why;
  if (!detail::stb_info(bytes, info, why))
    return fail(name + ": corrupt image header (" + why + "); re-export the image");
  // Again on the size stb will decode: header_size's quick walk of JPEG segments misses a frame
  // header behind fill bytes (FF FF C0 ...), which stb reads, and then decoded 65535x65535.
  if (auto error = over_limit(name, info.width, info.height, max_pixels)) return *error;
  detail::StbPixels rgba = detail::stb_decode(bytes, 4, info, why);
  if (!rgba) return fail(name + ": corrupt or truncated image (" + why + "); re-export the image");
  const std::size_t n =
      static_cast<std::size_t>(info.width) * static_cast<std::size_t>(info.height);
  std::vector<std::uint8_t> rgb(n * 3, std::uint8_t{0});
  for (std::size_t i = 0; i < n; ++i) composite_over_white(rgba.get() + i * 4, rgb.data() + i * 3);
  return RgbImage{info.width, info.height, std::move(rgb)};
}

Result<RgbImage> read_image(const std::string& path, std::int64_t max_pixels) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(path + ": cannot open the image (" + std::strerror(errno) +
                "); check the path (relative paths are resolved against the JSONL file's folder)");
  }
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  std::vector<std::uint8_t> bytes(size > 0 ? static_cast<std::size_t>(size) : 0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    return fail(path + ": cannot read the image (" + std::strerror(errno) + ")");
  return decode_image(bytes, path, max_pixels);
}

std::vector<std::uint8_t> encode_png(const RgbImage& image) {
  return detail::stb_encode_png(image.pixels.data(), image.width, image.height, 3);
}

Result<void> write_png(const std::string& path, const RgbImage& image) {
  std::vector<std::uint8_t> png = encode_png(image);
  if (png.empty()) return fail(path + ": could not encode the image as PNG");
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  out.close();
  if (!out) {
    return fail(path + ": cannot write the PNG (" + std::strerror(errno) +
                "); check that the folder exists and is writable");
  }
  return ok();
}

}  // namespace shardscope::data
