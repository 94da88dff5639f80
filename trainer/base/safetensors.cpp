#include "trainer/base/safetensors.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "trainer/base/fatal.h"

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
  SHARD_CHECK(f != nullptr, trainer::write_error_kind(errno),
              "cannot write " + tmp + ": " + std::strerror(errno),
              "check the folder exists and is writable, and the disk has space");
  std::uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xFF);
  std::uint64_t total = 8 + n;
  for (const auto& c : data) total += c.nbytes();
  int err = 0;  // the first failure's errno (fclose and remove may change errno)
  const auto step = [&](bool done) {
    if (!done && err == 0) err = errno != 0 ? errno : EIO;
  };
  step(std::fwrite(len, 1, 8, f) == 8);
  if (err == 0) step(std::fwrite(text.data(), 1, n, f) == n);
  for (const auto& c : data) {
    if (err == 0) step(std::fwrite(c.data_ptr(), 1, c.nbytes(), f) == c.nbytes());
  }
  step(std::fflush(f) == 0);
  if (err == 0) step(::fsync(fileno(f)) == 0);
  struct stat st {};
  const auto reached = ::fstat(fileno(f), &st) == 0 ? static_cast<long long>(st.st_size) : -1LL;
  step(std::fclose(f) == 0);
  if (err != 0) std::remove(tmp.c_str());  // a partial file only takes the space others need
  SHARD_CHECK(err == 0, trainer::write_error_kind(err),
              "writing " + tmp + " failed after " + std::to_string(reached) + " of " +
                  std::to_string(total) + " bytes: " + std::strerror(err),
              "free disk space (or raise the file size limit) and retry");
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  SHARD_CHECK(!ec, ErrorKind::io, "cannot rename " + tmp + " to " + path + ": " + ec.message(), "");
}

SafetensorsFile read_safetensors(const std::string& path) {
  MappedSafetensors map(path);
  SafetensorsFile file;
  file.metadata = map.metadata();
  for (const auto& e : map.entries()) file.tensors.emplace_back(e.name, map.read(e));
  return file;
}

namespace {

std::int64_t element_size(at::ScalarType t) {
  return static_cast<std::int64_t>(c10::elementSize(t));
}

// One header entry, checked against the file: `data_begin` is where the data region starts.
TensorEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& v,
                        std::int64_t data_begin, std::int64_t file_size) {
  const std::string where = path + ": tensor " + name;
  const char* fix = "the file is truncated or corrupt; re-download or re-export it";
  SHARD_CHECK(v.is_object() && v.contains("dtype") && v["dtype"].is_string() &&
                  v.contains("shape") && v["shape"].is_array() && v.contains("data_offsets") &&
                  v["data_offsets"].is_array() && v["data_offsets"].size() == 2,
              ErrorKind::data, where + ": header entry needs dtype, shape and data_offsets", fix);
  TensorEntry e;
  e.name = name;
  e.dtype = dtype_from(v["dtype"].get<std::string>(), path);
  // Every product below stays within the file's size, so none overflows (a header can claim
  // anything: dimensions or offsets near INT64_MAX wrapped around and passed the checks).
  std::int64_t numel = 1;
  for (const auto& d : v["shape"]) {
    SHARD_CHECK(d.is_number_integer() && d.get<std::int64_t>() >= 0, ErrorKind::data,
                where + ": shape has a bad dimension", fix);
    e.shape.push_back(d.get<std::int64_t>());
    const auto dim = e.shape.back();
    SHARD_CHECK(dim == 0 || numel <= file_size / dim, ErrorKind::data,
                where + ": its shape holds more elements than the file has bytes (" +
                    std::to_string(file_size) + ")",
                fix);
    numel *= dim;
  }
  const auto& off = v["data_offsets"];
  SHARD_CHECK(off[0].is_number_integer() && off[1].is_number_integer(), ErrorKind::data,
              where + ": data_offsets must be two integers", fix);
  const auto begin = off[0].get<std::int64_t>();
  const auto end = off[1].get<std::int64_t>();
  SHARD_CHECK(
      begin >= 0 && end >= begin && end - begin == numel * element_size(e.dtype), ErrorKind::data,
      where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
          ") do not hold a " + std::string(v["dtype"].get<std::string>()) + " tensor of its shape",
      fix);
  SHARD_CHECK(end <= file_size - data_begin, ErrorKind::data,
              where + ": data ends at byte " + std::to_string(data_begin) + " + " +
                  std::to_string(end) + " but the file has " + std::to_string(file_size) + " bytes",
              fix);
  e.begin = data_begin + begin;
  e.end = data_begin + end;
  return e;
}

}  // namespace

MappedSafetensors::MappedSafetensors(const std::string& path) : m_path(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  SHARD_CHECK(fd >= 0, ErrorKind::io, "cannot read " + path + ": " + std::strerror(errno),
              "check the path and its permissions");
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  m_size = stat_ok ? static_cast<std::size_t>(st.st_size) : 0;
  void* addr = m_size > 0 ? ::mmap(nullptr, m_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  ::close(fd);
  SHARD_CHECK(m_size >= 8 && addr != MAP_FAILED, ErrorKind::data,
              path + ": not a safetensors file (shorter than its 8-byte header length)",
              "re-download or re-export the file");
  m_data = static_cast<const std::byte*>(addr);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint64_t>(m_data[i]);
  if (n > m_size - 8) {
    ::munmap(const_cast<std::byte*>(m_data),
             m_size);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    m_data = nullptr;
    SHARD_FAIL(ErrorKind::data,
               path + ": header length " + std::to_string(n) + " exceeds the file size " +
                   std::to_string(m_size),
               "the file is truncated or not a safetensors file; re-download or re-export it");
  }
  const auto* text = reinterpret_cast<const char*>(m_data + 8);
  auto header = nlohmann::json::parse(text, text + n, nullptr, false);
  SHARD_CHECK(!header.is_discarded() && header.is_object(), ErrorKind::data,
              path + ": the safetensors header is not a JSON object",
              "the file is truncated or corrupt; re-download or re-export it");
  const auto data_begin = static_cast<std::int64_t>(8 + n);
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      for (auto m = it.value().begin(); m != it.value().end(); ++m)
        if (m.value().is_string()) m_metadata[m.key()] = m.value().get<std::string>();
      continue;
    }
    m_index[it.key()] = m_entries.size();
    m_entries.push_back(
        parse_entry(path, it.key(), it.value(), data_begin, static_cast<std::int64_t>(m_size)));
  }
  std::sort(m_entries.begin(), m_entries.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.begin < b.begin; });
  for (std::size_t i = 0; i < m_entries.size(); ++i) m_index[m_entries[i].name] = i;
}

MappedSafetensors::~MappedSafetensors() {
  if (m_data != nullptr)
    ::munmap(const_cast<std::byte*>(m_data),
             m_size);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
}

const TensorEntry* MappedSafetensors::find(const std::string& name) const {
  auto it = m_index.find(name);
  return it == m_index.end() ? nullptr : &m_entries[it->second];
}

const std::byte* MappedSafetensors::bytes(const TensorEntry& entry, std::int64_t begin,
                                          std::int64_t end) const {
  SHARD_CHECK(begin >= 0 && begin <= end && entry.begin + end <= entry.end, ErrorKind::internal,
              m_path + ": byte range [" + std::to_string(begin) + ", " + std::to_string(end) +
                  ") is outside tensor " + entry.name,
              "");
  return m_data + entry.begin + begin;
}

at::Tensor MappedSafetensors::read(const TensorEntry& entry) const {
  auto t = at::empty(entry.shape, at::TensorOptions().dtype(entry.dtype));
  if (entry.end > entry.begin)
    std::memcpy(t.data_ptr(), bytes(entry, 0, entry.end - entry.begin),
                static_cast<std::size_t>(entry.end - entry.begin));
  return t;
}

at::Tensor MappedSafetensors::read_elements(const TensorEntry& entry, std::int64_t first,
                                            std::int64_t count) const {
  const auto es = element_size(entry.dtype);
  auto t = at::empty({count}, at::TensorOptions().dtype(entry.dtype));
  if (count > 0)
    std::memcpy(t.data_ptr(), bytes(entry, first * es, (first + count) * es),
                static_cast<std::size_t>(count * es));
  return t;
}

}  // namespace shardscope::ckpt
