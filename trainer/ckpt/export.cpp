#include "trainer/ckpt/export.h"

#include <array>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "trainer/base/fatal.h"
#include "trainer/ckpt/peft.h"

namespace shardscope::ckpt {

namespace fs = std::filesystem;
using spec::ErrorKind;

namespace {

// The files of a Hugging Face model folder that describe it besides its weights.
constexpr std::array<std::string_view, 9> kSideFiles = {
    "config.json",           "generation_config.json",   "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json",  "chat_template.json",
    "chat_template.jinja",   "preprocessor_config.json", "processor_config.json"};

void copy_side_files(const std::string& from, const std::string& to) {
  for (std::string_view name : kSideFiles) {
    const fs::path source = fs::path(from) / name;
    if (!fs::exists(source)) continue;
    std::error_code ec;
    fs::copy_file(source, fs::path(to) / name, fs::copy_options::overwrite_existing, ec);
    SHARD_CHECK(!ec, ErrorKind::io,
                "cannot copy " + source.string() + " to " + to + ": " + ec.message(),
                "check that the export folder is writable and has space");
  }
}

}  // namespace

std::vector<ExportedPart> export_model(const std::string& dir, const NamedTensors& state,
                                       const spec::Experiment& exp) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  SHARD_CHECK(!ec, ErrorKind::io, "cannot create the export folder " + dir + ": " + ec.message(),
              "choose a writable --export folder");
  std::vector<ExportedPart> parts;
  const bool lora = exp.lora.enabled;
  NamedTensors weights = lora ? merge_lora(state, exp.lora) : state;
  if (lora && exp.lora.quantize == "nf4") {
    // QLoRA: the adapters merged into the dequantized base, written in bf16 (what fsdp_qlora and
    // peft's merge of a 4-bit model give): the base holds 4-bit values, so fp32 would double the
    // folder for digits the merge does not have.
    for (auto& [name, t] : weights)
      if (t.is_floating_point()) t = t.to(at::kBFloat16);
  }
  write_safetensors((fs::path(dir) / "model.safetensors").string(), weights);
  if (!exp.model.path.empty()) copy_side_files(exp.model.path, dir);
  parts.push_back({"full", dir});
  if (lora) {
    const std::string adapter = (fs::path(dir) / "adapter").string();
    // The tiny test model is Qwen2's architecture and names.
    const std::string model_type = exp.model.arch == "qwen2_vl" ? "qwen2_vl" : "qwen2";
    write_peft_adapter(adapter, state, exp.lora, {exp.model.path, model_type});
    parts.push_back({"adapter", adapter});
  }
  return parts;
}

}  // namespace shardscope::ckpt
