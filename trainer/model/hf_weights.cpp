#include "trainer/model/hf_weights.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "trainer/base/fatal.h"

namespace shardscope::model {
namespace {

using spec::ErrorKind;

// Checkpoint prefix -> our prefix, longest first: the one table of name mappings.
struct PrefixMap {
  const char* checkpoint;
  const char* ours;
};
constexpr PrefixMap kPrefixes[] = {
    {"model.language_model.", "model."},  // transformers 5 Qwen2-VL text stack
    {"model.visual.", "visual."},         // transformers 5 Qwen2-VL vision tower
    {"visual.", "visual."},               // published Qwen2-VL vision tower
    {"model.", "model."},                 // published Qwen2 / Qwen2-VL text stack
    {"lm_head.", "lm_head."},
};

std::vector<std::string> shard_files(const std::string& dir) {
  namespace fs = std::filesystem;
  const auto single = fs::path(dir) / "model.safetensors";
  const auto index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) return {single.string()};
  SHARD_CHECK(fs::exists(index, ec), ErrorKind::io,
              dir + ": neither model.safetensors nor model.safetensors.index.json exists",
              "point --model at a Hugging Face model directory with safetensors weights");
  std::ifstream in(index);
  std::stringstream ss;
  ss << in.rdbuf();
  auto json = nlohmann::json::parse(ss.str(), nullptr, false);
  SHARD_CHECK(!json.is_discarded() && json.contains("weight_map") && json["weight_map"].is_object(),
              ErrorKind::data, index.string() + ": no weight_map object",
              "re-download the model's index file");
  std::set<std::string> files;
  for (const auto& [name, file] : json["weight_map"].items()) {
    SHARD_CHECK(file.is_string(), ErrorKind::data,
                index.string() + ": weight_map." + name + " must name a file",
                "re-download the model's index file");
    files.insert((fs::path(dir) / file.get<std::string>()).string());
  }
  return {files.begin(), files.end()};
}

}  // namespace

std::string map_hf_name(const std::string& name) {
  for (const auto& p : kPrefixes) {
    const std::string from = p.checkpoint;
    if (name.compare(0, from.size(), from) == 0) return p.ours + name.substr(from.size());
  }
  return {};
}

HfWeights::HfWeights(const std::string& dir) : m_dir(dir) {
  for (const auto& path : shard_files(dir)) {
    m_files.push_back(std::make_unique<ckpt::MappedSafetensors>(path));
    const auto& file = *m_files.back();
    for (const auto& entry : file.entries()) {
      const auto ours = map_hf_name(entry.name);
      if (ours.empty()) continue;
      auto [it, fresh] = m_by_name.emplace(ours, Source{&file, &entry});
      SHARD_CHECK(fresh, ErrorKind::data,
                  path + ": tensor " + entry.name + " duplicates " + it->second.entry->name +
                      " in " + it->second.file->path(),
                  "remove the duplicate from the checkpoint");
    }
  }
}

bool HfWeights::has(const std::string& name) const { return m_by_name.count(name) != 0; }

const HfWeights::Source& HfWeights::source(const std::string& name) const {
  auto it = m_by_name.find(name);
  SHARD_CHECK(it != m_by_name.end(), ErrorKind::data,
              m_dir + ": the checkpoint has no tensor for " + name,
              "check that config.json matches the weights (model type, layer counts)");
  return it->second;
}

void HfWeights::load(const std::string& name, at::Tensor& dst) const {
  const auto& src = source(name);
  const auto& shape = src.entry->shape;
  SHARD_CHECK(at::IntArrayRef(shape) == dst.sizes(), ErrorKind::data,
              src.file->path() + ": tensor " + src.entry->name + " has shape " +
                  c10::str(at::IntArrayRef(shape)) + " but config.json gives " +
                  c10::str(dst.sizes()),
              "config.json and the weights disagree; use the config.json saved with them");
  at::NoGradGuard no_grad;
  dst.copy_(src.file->read(*src.entry));
}

at::Tensor HfWeights::read(const std::string& name) const {
  const auto& src = source(name);
  return src.file->read(*src.entry);
}

std::vector<std::int64_t> HfWeights::shape(const std::string& name) const {
  return source(name).entry->shape;
}

at::Tensor HfWeights::load_elements(const std::string& name, std::int64_t first,
                                    std::int64_t count) const {
  const auto& src = source(name);
  return src.file->read_elements(*src.entry, first, count).to(at::kFloat);
}

}  // namespace shardscope::model
