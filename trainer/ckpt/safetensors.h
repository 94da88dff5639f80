// Hugging Face safetensors files: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the
// bytes. Used for sharded checkpoints (one file per rank), full-state export and test dumps.
#pragma once

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

}  // namespace shardscope::ckpt
