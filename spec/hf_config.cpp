#include "spec/hf_config.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

namespace shardscope::spec {
namespace {

using nlohmann::json;

// Reads typed fields of one JSON object; the first problem is kept and names file and field.
class Fields {
 public:
  Fields(const json& obj, std::string file, std::string prefix)
      : m_obj(obj), m_file(std::move(file)), m_prefix(std::move(prefix)) {}

  const json* find(const std::string& key) const {
    if (!m_obj.is_object()) return nullptr;
    auto it = m_obj.find(key);
    return it == m_obj.end() || it->is_null() ? nullptr : &*it;
  }
  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback,
                       std::string* error) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (!fallback) note(error, key, "is missing", "add it from the model's published config");
      return fallback.value_or(0);
    }
    if (!v->is_number_integer()) {
      note(error, key, "must be an integer", "fix its value");
      return 0;
    }
    return v->get<std::int64_t>();
  }
  double number(const std::string& key, double fallback, std::string* error) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) {
      note(error, key, "must be a number", "fix its value");
      return fallback;
    }
    return v->get<double>();
  }
  bool boolean(const std::string& key, bool fallback, std::string* error) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) {
      note(error, key, "must be true or false", "fix its value");
      return fallback;
    }
    return v->get<bool>();
  }
  std::string text(const std::string& key, const std::string& fallback, std::string* error) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) {
      note(error, key, "must be a string", "fix its value");
      return fallback;
    }
    return v->get<std::string>();
  }
  void note(std::string* error, const std::string& key, const std::string& what,
            const std::string& fix) const {
    if (error->empty()) *error = m_file + ": field " + m_prefix + key + " " + what + "; " + fix;
  }

 private:
  const json& m_obj;
  std::string m_file;
  std::string m_prefix;
};

// The rope parameters object: transformers 5's rope_parameters, or the published rope_scaling.
const json* rope_object(const Fields& f) {
  if (const json* r = f.find("rope_parameters"); r != nullptr && r->is_object()) return r;
  if (const json* r = f.find("rope_scaling"); r != nullptr && r->is_object()) return r;
  return nullptr;
}

std::string read_text(HfModelConfig& c, const json& root, const std::string& file) {
  const json* nested = root.contains("text_config") && root["text_config"].is_object()
                           ? &root["text_config"]
                           : nullptr;
  const json& obj = nested != nullptr ? *nested : root;
  Fields f(obj, file, nested != nullptr ? "text_config." : "");
  std::string err;
  auto& t = c.text;
  t.vocab_size = f.integer("vocab_size", std::nullopt, &err);
  t.hidden_size = f.integer("hidden_size", std::nullopt, &err);
  t.intermediate_size = f.integer("intermediate_size", std::nullopt, &err);
  t.num_layers = f.integer("num_hidden_layers", std::nullopt, &err);
  t.num_heads = f.integer("num_attention_heads", std::nullopt, &err);
  t.num_kv_heads = f.integer("num_key_value_heads", t.num_heads, &err);
  t.max_position = f.integer("max_position_embeddings", 32768, &err);
  t.rms_eps = f.number("rms_norm_eps", 1e-6, &err);
  const double default_theta = c.model_type == "qwen2_vl" ? 1000000.0 : 10000.0;
  t.rope_theta = f.number("rope_theta", default_theta, &err);
  Fields root_fields(root, file, "");
  // Pre-v5 saves may put tie_word_embeddings in text_config; transformers honours either.
  t.tie_word_embeddings = root_fields.boolean("tie_word_embeddings", false, &err) ||
                          (nested != nullptr && f.boolean("tie_word_embeddings", false, &err));
  if (f.text("hidden_act", "silu", &err) != "silu")
    f.note(&err, "hidden_act", "must be \"silu\" (Qwen2's SwiGLU)", "use a Qwen2 checkpoint");
  if (const json* rope = rope_object(f)) {
    Fields r(*rope, file,
             std::string(nested != nullptr ? "text_config." : "") +
                 (f.find("rope_parameters") != nullptr ? "rope_parameters." : "rope_scaling."));
    t.rope_theta = r.number("rope_theta", t.rope_theta, &err);
    if (const json* s = r.find("mrope_section")) {
      if (!s->is_array() || s->size() != 3) {
        r.note(&err, "mrope_section", "must be a list of 3 integers", "e.g. [16, 24, 24]");
      } else {
        c.mrope_section = s->get<std::vector<std::int64_t>>();
      }
    }
  }
  if (!err.empty()) return err;
  if (t.vocab_size <= 0 || t.hidden_size <= 0 || t.num_heads <= 0 || t.num_kv_heads <= 0 ||
      t.num_layers <= 0 || t.intermediate_size <= 0)
    return file +
           ": text dimensions must be positive (vocab_size, hidden_size, "
           "intermediate_size, num_hidden_layers, num_attention_heads, "
           "num_key_value_heads)";
  if (t.hidden_size % t.num_heads != 0 || t.num_heads % t.num_kv_heads != 0)
    return file +
           ": hidden_size must be a multiple of num_attention_heads and "
           "num_attention_heads a multiple of num_key_value_heads";
  return {};
}

std::string read_vision(HfModelConfig& c, const json& root, const std::string& file) {
  if (!root.contains("vision_config") || !root["vision_config"].is_object())
    return file + ": field vision_config is missing; a qwen2_vl config.json needs it";
  Fields f(root["vision_config"], file, "vision_config.");
  std::string err;
  auto& v = c.vision;
  v.depth = f.integer("depth", std::nullopt, &err);
  v.embed_dim = f.integer("embed_dim", std::nullopt, &err);
  v.num_heads = f.integer("num_heads", std::nullopt, &err);
  v.mlp_ratio = f.number("mlp_ratio", 4.0, &err);
  v.in_channels = f.integer("in_channels", f.integer("in_chans", 3, &err), &err);
  v.patch_size = f.integer("patch_size", f.integer("spatial_patch_size", 14, &err), &err);
  v.temporal_patch_size = f.integer("temporal_patch_size", 2, &err);
  v.spatial_merge_size = f.integer("spatial_merge_size", 2, &err);
  v.hidden_size = f.integer("hidden_size", std::nullopt, &err);
  v.hidden_act = f.text("hidden_act", "quick_gelu", &err);
  if (const json* r = f.find("rope_parameters"); r != nullptr && r->is_object()) {
    Fields rf(*r, file, "vision_config.rope_parameters.");
    v.rope_theta = rf.number("rope_theta", 10000.0, &err);
  }
  if (!err.empty()) return err;
  if (v.hidden_act != "quick_gelu" && v.hidden_act != "gelu" && v.hidden_act != "silu")
    return file + ": field vision_config.hidden_act \"" + v.hidden_act +
           "\" is not supported; use quick_gelu, gelu or silu";
  if (v.depth <= 0 || v.embed_dim <= 0 || v.num_heads <= 0 || v.embed_dim % v.num_heads != 0 ||
      (v.embed_dim / v.num_heads) % 4 != 0)
    return file +
           ": vision_config needs positive depth, embed_dim and num_heads with "
           "embed_dim / num_heads a multiple of 4 (2-D rotary)";
  if (v.hidden_size != c.text.hidden_size)
    return file + ": field vision_config.hidden_size (" + std::to_string(v.hidden_size) +
           ") must equal the text hidden_size (" + std::to_string(c.text.hidden_size) + ")";
  Fields rootf(root, file, "");
  c.image_token_id = rootf.integer("image_token_id", 151655, &err);
  c.video_token_id = rootf.integer("video_token_id", 151656, &err);
  c.vision_start_token_id = rootf.integer("vision_start_token_id", 151652, &err);
  if (c.mrope_section.empty()) c.mrope_section = {16, 24, 24};
  std::int64_t sum = 0;
  for (auto s : c.mrope_section) sum += s;
  if (sum * 2 != c.text.hidden_size / c.text.num_heads)
    return file + ": mrope_section must sum to head_dim / 2 (" +
           std::to_string(c.text.hidden_size / c.text.num_heads / 2) + ")";
  return err;
}

ParamShape param(const std::string& name, std::vector<std::int64_t> shape, bool decay) {
  ParamShape p;
  p.name = name;
  p.shape = std::move(shape);
  p.decay = decay;
  return p;
}

// Checkpoint name prefix -> ours, longest first (trainer/model/hf_weights.cpp maps the same way):
// the published layout (`model.*`, `visual.*`) and transformers 5's (`model.language_model.*`,
// `model.visual.*`).
constexpr std::pair<const char*, const char*> kPrefixes[] = {
    {"model.language_model.", "model."},
    {"model.visual.", "visual."},
    {"visual.", "visual."},
    {"model.", "model."},
    {"lm_head.", "lm_head."},
};

std::string our_name(const std::string& name) {
  for (const auto& [from, to] : kPrefixes) {
    const std::size_t n = std::strlen(from);
    if (name.compare(0, n, from) == 0) return to + name.substr(n);
  }
  return {};
}

// A header above this is not a model's (a 7B checkpoint's is about 100 KiB): refused rather
// than allocated.
constexpr std::uint64_t kMaxHeaderBytes = 64ULL << 20;

struct TensorHeader {
  std::vector<std::int64_t> shape;
  std::string file;
};
using HeaderMap = std::map<std::string, TensorHeader>;  // our name -> shape and file

Result<void> read_header(const std::string& file, HeaderMap& out) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return fail(file + ": cannot read; restore the checkpoint's weights");
  unsigned char len[8] = {};
  in.read(reinterpret_cast<char*>(len), 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (!in || ec || n == 0 || n > kMaxHeaderBytes || n + 8 > size)
    return fail(file + ": not a safetensors file (header length " + std::to_string(n) +
                " in a file of " + std::to_string(size) + " bytes); restore the checkpoint");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  auto header = json::parse(text, nullptr, false);
  if (!in || header.is_discarded() || !header.is_object())
    return fail(file + ": the safetensors header is not a JSON object; restore the checkpoint");
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    std::string where = file;  // "<file>: tensor <name>" for the messages below
    where += ": tensor ";
    where += name;
    if (!entry.is_object() || !entry.contains("shape") || !entry["shape"].is_array())
      return fail(where + " has no shape in the header; restore the file");
    std::vector<std::int64_t> shape;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
        return fail(where + " has a bad shape " + entry["shape"].dump());
      shape.push_back(d.get<std::int64_t>());
    }
    const auto ours = our_name(name);
    if (!ours.empty()) out[ours] = {std::move(shape), file};
  }
  return ok();
}

Result<std::vector<std::string>> weight_files(const std::string& dir) {
  namespace fs = std::filesystem;
  const auto single = fs::path(dir) / "model.safetensors";
  const auto index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) return std::vector<std::string>{single.string()};
  if (!fs::exists(index, ec)) return std::vector<std::string>{};  // config.json alone
  std::ifstream in(index);
  std::stringstream ss;
  ss << in.rdbuf();
  auto doc = json::parse(ss.str(), nullptr, false);
  if (doc.is_discarded() || !doc.contains("weight_map") || !doc["weight_map"].is_object())
    return fail(index.string() + ": field weight_map is missing; restore the index file");
  std::set<std::string> files;
  for (const auto& [name, file] : doc["weight_map"].items()) {
    if (!file.is_string())
      return fail(index.string() + ": field weight_map." + name + " must name a file");
    files.insert((fs::path(dir) / file.get<std::string>()).string());
  }
  return std::vector<std::string>(files.begin(), files.end());
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The config.json fields whose value is `dim` (what a disagreeing dimension came from).
std::string fields_with(const HfModelConfig& c, std::int64_t dim) {
  const auto& t = c.text;
  const auto& v = c.vision;
  const std::pair<const char*, std::int64_t> fields[] = {
      {"vocab_size", t.vocab_size},
      {"hidden_size", t.hidden_size},
      {"intermediate_size", t.intermediate_size},
      {"num_key_value_heads", t.num_kv_heads * (t.hidden_size / t.num_heads)},
      {"vision_config.embed_dim", c.has_vision ? v.embed_dim : -1},
      {"vision_config.mlp_ratio", c.has_vision ? v.mlp_hidden() : -1},
      {"vision_config.patch_size", c.has_vision ? v.patch_size : -1},
      {"vision_config.in_chans", c.has_vision ? v.in_channels : -1},
      {"vision_config.temporal_patch_size", c.has_vision ? v.temporal_patch_size : -1},
      {"vision_config.spatial_merge_size", c.has_vision ? v.spatial_merge_size : -1},
  };
  std::string out;
  for (const auto& [name, value] : fields)
    if (value == dim) out += std::string(out.empty() ? "" : ", ") + name;
  return out.empty() ? "the dimensions" : out;
}

}  // namespace

Result<HfModelConfig> parse_hf_config(const std::string& json_text, const std::string& file) {
  auto root = json::parse(json_text, nullptr, false);
  if (root.is_discarded() || !root.is_object())
    return fail(file + ": not a JSON object; restore the model's config.json");
  HfModelConfig c;
  Fields rootf(root, file, "");
  std::string err;
  c.model_type = rootf.text("model_type", "", &err);
  if (c.model_type != "qwen2" && c.model_type != "qwen2_vl")
    return fail(file + ": field model_type is \"" + c.model_type +
                "\"; Shardscope supports \"qwen2\" and \"qwen2_vl\"");
  if (auto e = read_text(c, root, file); !e.empty()) return fail(e);
  c.has_vision = c.model_type == "qwen2_vl";
  if (c.has_vision) {
    if (auto e = read_vision(c, root, file); !e.empty()) return fail(e);
  } else {
    c.mrope_section.clear();
  }
  return c;
}

Result<HfModelConfig> read_hf_config(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string file =
      fs::is_directory(dir, ec) ? (fs::path(dir) / "config.json").string() : dir;
  std::ifstream in(file);
  if (!in) return fail(file + ": cannot read; point --model at a Hugging Face model directory");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hf_config(ss.str(), file);
}

std::vector<LayerShape> qwen2vl_layers(const Qwen2Dims& text, const VisionDims& v) {
  const auto E = v.embed_dim;
  const auto M = v.mlp_hidden();
  const auto Q = E * v.spatial_merge_size * v.spatial_merge_size;  // merger width
  std::vector<LayerShape> layers;
  layers.push_back(
      {"visual.patch_embed",
       {param("visual.patch_embed.proj.weight",
              {E, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size}, true)},
       false});
  for (std::int64_t i = 0; i < v.depth; ++i) {
    const std::string p = "visual.blocks." + std::to_string(i) + ".";
    layers.push_back({"visual.blocks." + std::to_string(i),
                      {
                          param(p + "norm1.weight", {E}, false),
                          param(p + "norm1.bias", {E}, false),
                          param(p + "attn.qkv.weight", {3 * E, E}, true),
                          param(p + "attn.qkv.bias", {3 * E}, false),
                          param(p + "attn.proj.weight", {E, E}, true),
                          param(p + "attn.proj.bias", {E}, false),
                          param(p + "norm2.weight", {E}, false),
                          param(p + "norm2.bias", {E}, false),
                          param(p + "mlp.fc1.weight", {M, E}, true),
                          param(p + "mlp.fc1.bias", {M}, false),
                          param(p + "mlp.fc2.weight", {E, M}, true),
                          param(p + "mlp.fc2.bias", {E}, false),
                      },
                      true});
  }
  layers.push_back({"visual.merger",
                    {
                        param("visual.merger.ln_q.weight", {E}, false),
                        param("visual.merger.ln_q.bias", {E}, false),
                        param("visual.merger.mlp.0.weight", {Q, Q}, true),
                        param("visual.merger.mlp.0.bias", {Q}, false),
                        param("visual.merger.mlp.2.weight", {v.hidden_size, Q}, true),
                        param("visual.merger.mlp.2.bias", {v.hidden_size}, false),
                    },
                    false});
  append_qwen2_text_layers(layers, text);
  return layers;
}

std::vector<LayerShape> hf_layers(const HfModelConfig& config) {
  return config.has_vision ? qwen2vl_layers(config.text, config.vision) : qwen2_layers(config.text);
}

}  // namespace shardscope::spec

namespace shardscope::spec {
namespace {

Error missing_tensor(const std::string& dir, const std::string& name, const std::string& cfg) {
  return fail(dir + ": the weights have no tensor for " + name + ", which " + cfg +
              " implies (fields num_hidden_layers, vision_config.depth, tie_word_embeddings); "
              "use the config.json saved with these weights");
}

Error shape_mismatch(const std::string& file, const ParamShape& p,
                     const std::vector<std::int64_t>& got, const std::string& cfg,
                     const std::string& field) {
  return fail(file + ": tensor " + p.name + " has shape " + shape_text(got) + " but " + cfg +
              " implies " + shape_text(p.shape) + " (field " + field +
              "); use the config.json saved with these weights");
}

}  // namespace

Result<void> check_hf_weights(const std::string& dir, const HfModelConfig& config) {
  auto files = weight_files(dir);
  if (!files) return files.error();
  if (files->empty()) return ok();  // config.json alone: nothing to contradict it
  HeaderMap headers;
  for (const auto& file : *files)
    if (auto r = read_header(file, headers); !r) return r;
  const std::string cfg = (std::filesystem::path(dir) / "config.json").string();
  for (const auto& layer : hf_layers(config)) {
    for (const auto& p : layer.params) {
      auto it = headers.find(p.name);
      if (it == headers.end()) {
        if (!p.tied_to.empty()) continue;  // a tied head is the embedding's storage
        return missing_tensor(dir, p.name, cfg);
      }
      const auto& got = it->second.shape;
      if (got == p.shape) continue;
      std::string field = "the dimensions";
      for (std::size_t d = 0; d < p.shape.size(); ++d)
        if (d >= got.size() || got[d] != p.shape[d]) {
          field = fields_with(config, p.shape[d]);
          break;
        }
      return shape_mismatch(it->second.file, p, got, cfg, field);
    }
  }
  return ok();
}

Result<std::int64_t> max_image_tokens(const std::string& dir, const VisionDims& vision) {
  const std::string file = (std::filesystem::path(dir) / "preprocessor_config.json").string();
  std::int64_t max_pixels = 1003520;  // Qwen2VLImageProcessor's default (28 * 28 * 1280)
  std::int64_t patch = vision.patch_size;
  std::int64_t merge = vision.spatial_merge_size;
  std::ifstream in(file);
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    auto doc = json::parse(ss.str(), nullptr, false);
    if (doc.is_discarded() || !doc.is_object())
      return fail(file + ": not a JSON object; restore the model's preprocessor_config.json");
    std::string err;
    Fields f(doc, file, "");
    if (const json* size = f.find("size"); size != nullptr && size->is_object())
      max_pixels = Fields(*size, file, "size.").integer("longest_edge", max_pixels, &err);
    max_pixels = f.integer("max_pixels", max_pixels, &err);
    patch = f.integer("patch_size", patch, &err);
    merge = f.integer("merge_size", merge, &err);
    if (!err.empty()) return fail(err);
    if (max_pixels <= 0 || patch <= 0 || merge <= 0)
      return fail(file + ": fields max_pixels, patch_size and merge_size must be positive");
  }
  const auto side = patch * merge;
  return std::max<std::int64_t>(1, max_pixels / (side * side));
}

}  // namespace shardscope::spec
