// Hugging Face safetensors files: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the
// bytes. Used for sharded checkpoints (one file per rank), full-state export and test dumps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace shardscope::ckpt {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Writes `tensors` (contiguous copies are made as needed) to `path` via a temporary file and a
/// rename; raises a TrainerError (io) naming the file on failure.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  NamedTensors tensors;                         // file order
  std::map<std::string, std::string> metadata;  // __metadata__
  const at::Tensor* find(const std::string& name) const;
};

/// Reads a whole file; raises a TrainerError (io/data) naming the file and the bad field.
SafetensorsFile read_safetensors(const std::string& path);

/// One tensor's header entry; `begin`/`end` are absolute byte offsets in the file.
struct TensorEntry {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<std::int64_t> shape;
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

/// A safetensors file mapped read-only: the header is parsed and checked at open (every entry's
/// dtype, shape and offsets must agree and lie inside the file), and tensors or byte ranges of
/// them are copied out on demand, so a rank reads only the pages of its own slice.
class MappedSafetensors {
 public:
  /// Maps `path`; raises a TrainerError (io/data) naming the file and the bad tensor or field.
  explicit MappedSafetensors(const std::string& path);
  ~MappedSafetensors();
  MappedSafetensors(const MappedSafetensors&) = delete;
  MappedSafetensors& operator=(const MappedSafetensors&) = delete;

  const std::string& path() const { return m_path; }
  const std::vector<TensorEntry>& entries() const { return m_entries; }
  const std::map<std::string, std::string>& metadata() const { return m_metadata; }
  const TensorEntry* find(const std::string& name) const;
  /// A copy of the whole tensor in its stored dtype and shape.
  at::Tensor read(const TensorEntry& entry) const;
  /// A 1-D copy of elements [first, first + count) of the tensor in row-major order, in its
  /// stored dtype; raises when the range is outside the tensor.
  at::Tensor read_elements(const TensorEntry& entry, std::int64_t first, std::int64_t count) const;
  /// The raw bytes [begin, end) of the tensor's data (relative to the tensor's first byte).
  const std::byte* bytes(const TensorEntry& entry, std::int64_t begin, std::int64_t end) const;

 private:
  std::string m_path;
  const std::byte* m_data = nullptr;
  std::size_t m_size = 0;
  std::vector<TensorEntry> m_entries;  // file order
  std::map<std::string, std::size_t> m_index;
  std::map<std::string, std::string> m_metadata;
};

}  // namespace shardscope::ckpt
