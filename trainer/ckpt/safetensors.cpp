#include "trainer/ckpt/safetensors.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "trainer/run/fatal.h"

namespace shardscope::ckpt {
namespace {

using spec::ErrorKind;

const char* dtype_code(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "F32";
    case at::kBFloat16:
      return "BF16";
    case at::kHalf:
      return "F16";
    case at::kDouble:
      return "F64";
    case at::kLong:
      return "I64";
    case at::kInt:
      return "I32";
    case at::kByte:
      return "U8";
    case at::kBool:
      return "BOOL";
    default:
      break;
  }
  SHARD_FAIL(ErrorKind::internal, std::string("safetensors: unsupported dtype ") + c10::toString(t),
             "");
}

at::ScalarType dtype_from(const std::string& code, const std::string& path) {
  static const std::map<std::string, at::ScalarType> kTypes{
      {"F32", at::kFloat}, {"BF16", at::kBFloat16}, {"F16", at::kHalf}, {"F64", at::kDouble},
      {"I64", at::kLong},  {"I32", at::kInt},       {"U8", at::kByte},  {"BOOL", at::kBool}};
  auto it = kTypes.find(code);
  SHARD_CHECK(it != kTypes.end(), ErrorKind::data,
              path + ": unsupported safetensors dtype \"" + code + "\"",
              "convert the checkpoint to F32, BF16 or F16");
  return it->second;
}

}  // namespace

const at::Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  std::int64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    auto c = t.detach().to(at::kCPU).contiguous();
    const auto bytes = static_cast<std::int64_t>(c.nbytes());
    header[name] = {{"dtype", dtype_code(c.scalar_type())},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(c));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data to 8 bytes
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  SHARD_CHECK(f != nullptr, ErrorKind::io, "cannot write " + tmp + ": " + std::strerror(errno),
              "check the folder exists and is writable, and the disk has space");
  std::uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xFF);
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(text.data(), 1, n, f) == n;
  for (const auto& c : data) {
    ok = ok && std::fwrite(c.data_ptr(), 1, c.nbytes(), f) == c.nbytes();
  }
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(fileno(f)) == 0 && ok;
  std::fclose(f);
  SHARD_CHECK(ok, ErrorKind::io, "writing " + tmp + " failed: " + std::strerror(errno),
              "free disk space and retry");
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  SHARD_CHECK(!ec, ErrorKind::io, "cannot rename " + tmp + " to " + path + ": " + ec.message(), "");
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SHARD_CHECK(in.good(), ErrorKind::io, "cannot read " + path + ": " + std::strerror(errno),
              "check the path");
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  const auto size = std::filesystem::file_size(path);
  SHARD_CHECK(in.good() && n + 8 <= size, ErrorKind::data,
              path + ": not a safetensors file (bad header length)", "re-export the file");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  auto header = nlohmann::json::parse(text, nullptr, false);
  SHARD_CHECK(!header.is_discarded() && header.is_object(), ErrorKind::data,
              path + ": the safetensors header is not a JSON object", "re-export the file");
  SafetensorsFile file;
  const auto base = static_cast<std::streamoff>(8 + n);
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      for (auto m = it.value().begin(); m != it.value().end(); ++m)
        file.metadata[m.key()] = m.value().get<std::string>();
      continue;
    }
    const auto& v = it.value();
    const auto dtype = dtype_from(v.at("dtype").get<std::string>(), path);
    const auto shape = v.at("shape").get<std::vector<std::int64_t>>();
    const auto begin = v.at("data_offsets")[0].get<std::int64_t>();
    const auto end = v.at("data_offsets")[1].get<std::int64_t>();
    auto t = at::empty(shape, at::TensorOptions().dtype(dtype));
    SHARD_CHECK(static_cast<std::int64_t>(t.nbytes()) == end - begin &&
                    static_cast<std::uint64_t>(base + end) <= size,
                ErrorKind::data, path + ": tensor " + it.key() + " has inconsistent data_offsets",
                "the file is truncated or corrupt; re-export it");
    in.seekg(base + begin);
    in.read(static_cast<char*>(t.data_ptr()), end - begin);
    file.tensors.emplace_back(it.key(), std::move(t));
  }
  return file;
}

}  // namespace shardscope::ckpt
