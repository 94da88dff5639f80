// A Hugging Face model directory's weights (model.safetensors, or the shards listed by
// model.safetensors.index.json), memory-mapped and indexed by our parameter names. Checkpoint
// names map to ours through one prefix table, so both the published layout (`model.*`,
// `visual.*`) and transformers 5's (`model.language_model.*`, `model.visual.*`) load.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "trainer/base/safetensors.h"

namespace shardscope::model {

/// Our name for a checkpoint tensor name ("" when no prefix of the table matches).
std::string map_hf_name(const std::string& checkpoint_name);

class HfWeights {
 public:
  /// Maps every safetensors file of `dir`; raises a TrainerError naming the file when a file or
  /// the index is missing or corrupt.
  explicit HfWeights(const std::string& dir);

  /// True when the checkpoint has a tensor for our parameter `name`.
  bool has(const std::string& name) const;
  /// Copies the tensor for our parameter `name` into `dst` (converted to dst's dtype); raises a
  /// TrainerError naming the tensor and file when it is missing or its shape differs from
  /// `dst`'s (which config.json determines).
  void load(const std::string& name, at::Tensor& dst) const;
  /// Elements [first, first + count) of the row-major tensor for `name` (a rank's slice of a
  /// flat unit), as float32.
  at::Tensor load_elements(const std::string& name, std::int64_t first, std::int64_t count) const;
  /// A copy of the checkpoint tensor `name` (ours) in its stored dtype and shape (raises when it
  /// is missing): what bitsandbytes' side tensors (absmax, quant_state, ...) are read with.
  at::Tensor read(const std::string& name) const;
  /// The shape of the checkpoint tensor for our parameter `name` (raises when it is missing).
  std::vector<std::int64_t> shape(const std::string& name) const;
  const std::string& dir() const { return m_dir; }

 private:
  struct Source {
    const ckpt::MappedSafetensors* file;
    const ckpt::TensorEntry* entry;
  };
  const Source& source(const std::string& name) const;

  std::string m_dir;
  std::vector<std::unique_ptr<ckpt::MappedSafetensors>> m_files;
  std::map<std::string, Source> m_by_name;  // our name -> checkpoint tensor
};

}  // namespace shardscope::model
