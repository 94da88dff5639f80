#include "trainer/ckpt/peft.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>

#include "spec/model_shape.h"
#include "trainer/base/fatal.h"

namespace shardscope::ckpt {
namespace {

using spec::ErrorKind;

constexpr std::string_view kPrefix = "base_model.model.";

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Our adapter names carry the published checkpoint's module paths; transformers 5 nests
// Qwen2-VL's text stack and vision tower under model.language_model / model.visual.
std::string peft_key(const std::string& name, const std::string& model_type) {
  if (model_type != "qwen2_vl") return name;
  const std::string body = name.substr(kPrefix.size());
  for (auto [from, to] :
       {std::pair<std::string_view, std::string_view>{"model.", "model.language_model."},
        {"visual.", "model.visual."}})
    if (starts_with(body, from))
      return std::string(kPrefix) + std::string(to) + body.substr(from.size());
  return name;
}

void write_text(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    SHARD_CHECK(out.good(), ErrorKind::io, "cannot write " + tmp,
                "check that the export directory is writable and the disk has space");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  SHARD_CHECK(!ec, ErrorKind::io, "cannot rename " + tmp + " to " + path + ": " + ec.message(),
              "check that the export directory is writable");
}

}  // namespace

NamedTensors peft_adapter_tensors(const NamedTensors& state, const std::string& model_type) {
  NamedTensors out;
  for (const auto& [name, value] : state)
    if (spec::is_lora_param(name))
      out.emplace_back(peft_key(name, model_type), value.to(at::kFloat).contiguous());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

std::string peft_adapter_config(const spec::LoraSection& lora, const PeftInfo& info) {
  nlohmann::ordered_json j;
  j["peft_type"] = "LORA";
  j["task_type"] = "CAUSAL_LM";
  j["base_model_name_or_path"] = info.base_model_name_or_path;
  j["r"] = lora.r;
  j["lora_alpha"] = lora.alpha;
  j["lora_dropout"] = lora.dropout;
  j["target_modules"] = lora.target_modules;
  j["bias"] = "none";
  j["fan_in_fan_out"] = false;
  j["use_rslora"] = false;
  j["use_dora"] = false;
  j["init_lora_weights"] = true;
  j["inference_mode"] = true;
  j["modules_to_save"] = nullptr;
  return j.dump(2) + "\n";
}

void write_peft_adapter(const std::string& dir, const NamedTensors& state,
                        const spec::LoraSection& lora, const PeftInfo& info) {
  auto tensors = peft_adapter_tensors(state, info.model_type);
  SHARD_CHECK(!tensors.empty(), ErrorKind::config,
              "PEFT export: the model state holds no LoRA adapter (no *.lora_A.weight)",
              "train with lora.enabled = true, or export the full weights instead");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  SHARD_CHECK(!ec, ErrorKind::io, "cannot create " + dir + ": " + ec.message(),
              "check the path and its permissions");
  write_safetensors(dir + "/adapter_model.safetensors", tensors, {{"format", "pt"}});
  write_text(dir + "/adapter_config.json", peft_adapter_config(lora, info));
}

NamedTensors merge_lora(const NamedTensors& state, const spec::LoraSection& lora) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, value] : state) by_name[name] = &value;
  const double scale = lora.alpha / static_cast<double>(lora.r);
  NamedTensors out;
  for (const auto& [name, value] : state) {
    if (spec::is_lora_param(name)) continue;
    const std::string weight_suffix = ".weight";
    at::Tensor merged = value;
    if (ends_with(name, weight_suffix)) {
      const auto module = name.substr(0, name.size() - weight_suffix.size());
      const auto a = by_name.find(spec::lora_param_name(module, 'A'));
      const auto b = by_name.find(spec::lora_param_name(module, 'B'));
      SHARD_CHECK((a == by_name.end()) == (b == by_name.end()), ErrorKind::data,
                  "merge: " + module + " has only one of lora_A and lora_B",
                  "export from a complete model state");
      if (a != by_name.end()) {
        auto delta = at::matmul(b->second->to(at::kFloat), a->second->to(at::kFloat));  // (out, in)
        merged = (value.to(at::kFloat) + delta * scale).to(value.scalar_type());
      }
    }
    out.emplace_back(name, merged);
  }
  return out;
}

}  // namespace shardscope::ckpt
