// Test tool for the Qwen2-VL image reference test: decodes and preprocesses images with
// data and writes what it computed as .npy files for ref_qwen2vl_image.py.
//
//   qwen2vl_image_dump CONFIG_DIR OUT_DIR IMAGE...
//   -> OUT_DIR/<image file name>.rgb.npy           uint8   (H, W, 3) decoded pixels
//      OUT_DIR/<image file name>.pixel_values.npy  float32 (grid_t*grid_h*grid_w, 3*T*P*P)
//      OUT_DIR/<image file name>.grid.npy          int64   (3,) = (t, h, w), then tokens
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/image/image.h"
#include "data/image/qwen2vl_preprocess.h"

namespace {

// Writes a C-order .npy (format 1.0) with the given numpy dtype descriptor.
void write_npy(const std::string& path, const char* dtype, const std::vector<std::size_t>& shape,
               const void* data, std::size_t bytes) {
  std::string dims;
  for (std::size_t d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();
  std::string header =
      "{'descr': '" + std::string(dtype) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xFF), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out << header;
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace shardscope::data;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s CONFIG_DIR OUT_DIR IMAGE...\n", argv[0]);
    return 2;
  }
  auto config = read_qwen2vl_image_config(argv[1]);
  if (!config) {
    std::fprintf(stderr, "%s\n", config.message().c_str());
    return 1;
  }
  const std::filesystem::path out_dir = argv[2];
  for (int i = 3; i < argc; ++i) {
    const std::string name = std::filesystem::path(argv[i]).filename().string();
    auto image = read_image(argv[i]);
    if (!image) {
      std::fprintf(stderr, "%s\n", image.message().c_str());
      return 1;
    }
    auto patches = preprocess_qwen2vl(*image, *config);
    if (!patches) {
      std::fprintf(stderr, "%s\n", patches.message().c_str());
      return 1;
    }
    const std::string base = (out_dir / name).string();
    write_npy(base + ".rgb.npy", "|u1",
              {static_cast<std::size_t>(image->height), static_cast<std::size_t>(image->width), 3},
              image->pixels.data(), image->pixels.size());
    write_npy(base + ".pixel_values.npy", "<f4",
              {static_cast<std::size_t>(patches->num_patches()),
               static_cast<std::size_t>(patches->patch_dim)},
              patches->pixel_values.data(), patches->pixel_values.size() * sizeof(float));
    const std::int64_t grid[4] = {patches->grid_t, patches->grid_h, patches->grid_w,
                                  patches->num_tokens()};
    write_npy(base + ".grid.npy", "<i8", {4}, grid, sizeof grid);
  }
  return 0;
}
