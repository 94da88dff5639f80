#include "data/inspect.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <utility>

#include <nlohmann/json.hpp>

#include "data/jsonl.h"
#include "data/text/chat.h"
#include "data/text/packing.h"
#include "data/text/sft.h"
#include "data/tokens.h"
#include "spec/hf_config.h"

namespace shardscope::data {
namespace {

using nlohmann::json;

std::string at_line(const JsonlPosition& where) {
  return where.path + ":" + std::to_string(where.line) + ": ";
}

// What a refused chat line's message is about: an image (missing or not readable) or the sample.
std::string image_kind(const std::string& message, const std::vector<std::string>& images) {
  namespace fs = std::filesystem;
  for (const auto& path : images) {
    if (message.find(path + ":") == std::string::npos) continue;
    std::error_code ec;
    return fs::exists(path, ec) ? "unreadable_image" : "missing_image";
  }
  return "invalid_sample";
}

void keep_largest(std::vector<ImageStat>& largest, ImageStat stat, std::int64_t keep) {
  if (keep <= 0) return;
  auto at = std::find_if(largest.begin(), largest.end(),
                         [&](const ImageStat& s) { return stat.tokens > s.tokens; });
  largest.insert(at, std::move(stat));
  if (static_cast<std::int64_t>(largest.size()) > keep) largest.pop_back();
}

json image_json(const ImageStat& s) {
  return {{"line", s.line},     {"path", s.path},     {"grid_t", s.grid_t},
          {"grid_h", s.grid_h}, {"grid_w", s.grid_w}, {"tokens", s.tokens}};
}

json listed_json(const std::vector<ListedLine>& lines) {
  json out = json::array();
  for (const auto& l : lines) {
    json row = {{"line", l.line}, {"kind", l.kind}, {"reason", l.reason}};
    if (l.kind == "over_seq_len") row["tokens"] = l.tokens;
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

DataInspector::DataInspector(spec::Experiment exp, std::optional<SftPreparer> preparer,
                             std::int64_t vocab_size)
    : m_exp(std::move(exp)), m_preparer(std::move(preparer)), m_vocab(vocab_size) {}

Result<DataInspector> DataInspector::open(const spec::Experiment& exp) {
  const auto& format = exp.data.format;
  if (format != "chat" && format != "tokens") {
    return fail("data.format = \"" + format +
                "\" is not supported by the trainer yet; use \"chat\" (SFT conversations) or "
                "\"tokens\" (pre-tokenized)");
  }
  if (exp.data.train_path.empty()) return fail("data.train_path: empty; set the training file");
  if (exp.model.arch == "tiny") {
    if (format == "chat") {
      return fail(
          "data.format = \"chat\" needs a Hugging Face model (its tokenizer); set model.arch = "
          "\"qwen2\" or \"qwen2_vl\" with model.path, or use data.format = \"tokens\"");
    }
    return DataInspector(exp, std::nullopt, exp.model.tiny_vocab_size);
  }
  auto config = spec::read_hf_config(exp.model.path);
  if (!config) return config.error();
  std::optional<SftPreparer> preparer;
  std::error_code ec;
  if (format == "chat" ||
      std::filesystem::exists(std::filesystem::path(exp.model.path) / "tokenizer.json", ec)) {
    auto opened = SftPreparer::open(exp.model.path);
    if (!opened) return opened.error();
    preparer.emplace(std::move(*opened));
  }
  return DataInspector(exp, std::move(preparer), config->text.vocab_size);
}

Result<Inspection> DataInspector::inspect(const InspectOptions& options) const {
  Inspection out;
  out.format = m_exp.data.format;
  out.seq_len = m_exp.data.seq_len;
  out.packing = m_exp.data.pack && m_exp.data.format == "chat";
  out.world = std::max(1, spec::launch_world_size(m_exp.launch));
  out.model = m_exp.model.arch == "tiny" ? std::string("tiny") : m_exp.model.path;
  const std::pair<const char*, const std::string*> files[] = {{"train", &m_exp.data.train_path},
                                                              {"eval", &m_exp.data.eval_path}};
  for (const auto& [role, path] : files) {
    if (path->empty()) continue;
    auto file = inspect_file(*path, role, options);
    if (!file) return file.error();
    out.cancelled = out.cancelled || file->cancelled;
    out.files.push_back(std::move(*file));
    if (out.cancelled) break;
  }
  return out;
}

Result<FileInspection> DataInspector::inspect_file(const std::string& path, const std::string& role,
                                                   const InspectOptions& options) const {
  FileInspection out;
  out.role = role;
  out.path = path;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  out.bytes_total = ec ? 0 : static_cast<std::int64_t>(size);
  const bool chat = m_exp.data.format == "chat";
  const auto seq_len = m_exp.data.seq_len;
  const std::string base = std::filesystem::absolute(path, ec).parent_path().string();
  // Tokenized lines by length (as many entries as distinct lengths, not as lines), and, only when
  // the packing efficiency is computed (chat train data with data.pack), the lengths of the
  // samples the trainer packs (chat within seq_len: the plan needs each, in order). Without
  // packing nothing grows with the file (a 1 GB file kept 8 bytes a line here for nothing).
  std::map<std::int64_t, std::int64_t> by_length;
  std::int64_t tokenized = 0;
  const bool plan_packing = chat && m_exp.data.pack && role == "train";
  std::vector<std::int64_t> loaded;
  auto refuse = [&](const JsonlPosition& where, std::string kind, std::string reason) {
    ++out.refused;
    if (static_cast<std::int64_t>(out.refused_listed.size()) < options.max_listed)
      out.refused_listed.push_back({where.line, std::move(kind), std::move(reason), 0});
  };
  auto scanned = scan_jsonl(
      path, [&](const json* record, const std::string& error, const JsonlPosition& where) {
        if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) {
          out.cancelled = true;
          return false;
        }
        out.bytes_read = where.byte_offset;
        if (options.progress && where.line % 64 == 0)
          options.progress(out.bytes_read, out.bytes_total);
        ++out.lines;
        if (record == nullptr) {
          refuse(where, "malformed_json", at_line(where) + error);
          return true;
        }
        std::int64_t length = 0;
        std::int64_t loss = 0;
        if (chat) {
          auto sample = parse_sft_record(*record, base);
          if (!sample) {
            refuse(where, "invalid_sample", at_line(where) + sample.message());
            return true;
          }
          sample->where = where;
          auto prepared = m_preparer->prepare(*sample);
          if (!prepared) {
            refuse(where, image_kind(prepared.message(), sample->images), prepared.message());
            return true;
          }
          if (auto v = check_sample_vocab(*prepared, m_vocab); !v) {
            refuse(where, "vocabulary", v.message());
            return true;
          }
          length = static_cast<std::int64_t>(prepared->input_ids.size());
          for (std::size_t i = 0; i < prepared->images.size(); ++i) {
            const auto& image = prepared->images[i];
            ++out.images;
            out.visual_tokens += image.num_tokens();
            keep_largest(out.largest_images,
                         {where.line, sample->images[i], image.grid_t, image.grid_h, image.grid_w,
                          image.num_tokens()},
                         options.largest_images);
          }
          ++out.images_per_sample[static_cast<std::int64_t>(prepared->images.size())];
          if (auto fits = check_sample_length(*prepared, seq_len); !fits) {
            ++out.over_seq_len;
            if (static_cast<std::int64_t>(out.over_listed.size()) < options.max_listed)
              out.over_listed.push_back({where.line, "over_seq_len", fits.message(), length});
          } else {
            loss = loss_tokens(*prepared);
            out.bound.add(length, visual_tokens(*prepared));
            if (plan_packing) loaded.push_back(length);
            ++out.samples;
          }
        } else {
          auto tokens = parse_token_record(*record, m_vocab);
          if (!tokens) {
            refuse(where, "invalid_sample", at_line(where) + tokens.message());
            return true;
          }
          length = static_cast<std::int64_t>(tokens->input_ids.size());
          if (length > seq_len) {
            ++out.over_seq_len;
            if (static_cast<std::int64_t>(out.over_listed.size()) < options.max_listed)
              out.over_listed.push_back(
                  {where.line, "over_seq_len",
                   at_line(where) + std::to_string(length) +
                       " tokens, more than data.seq_len = " + std::to_string(seq_len) +
                       "; the trainer truncates it to " + std::to_string(seq_len),
                   length});
          }
          // As the trainer: truncated or padded to seq_len, loss on labels past position 0.
          tokens->labels.resize(static_cast<std::size_t>(seq_len), -100);
          loss = data::loss_tokens(*tokens);
          ++out.images_per_sample[0];
          ++out.samples;
        }
        out.tokens += length;
        out.loss_tokens += loss;
        ++by_length[length];
        ++tokenized;
        return true;
      });
  if (!scanned) return scanned.error();
  if (!out.cancelled) out.bytes_read = out.bytes_total;
  if (options.progress) options.progress(out.bytes_read, out.bytes_total);
  if (tokenized > 0) {
    out.min_tokens = by_length.begin()->first;
    out.max_tokens = by_length.rbegin()->first;
    out.mean_tokens = static_cast<double>(out.tokens) / static_cast<double>(tokenized);
  }
  const auto bins = std::max<std::int64_t>(1, options.histogram_bins);
  const auto top = std::max(seq_len, out.max_tokens + 1);
  out.histogram.width = std::max<std::int64_t>(1, (top + bins - 1) / bins);
  const auto last = (top + out.histogram.width - 1) / out.histogram.width - 1;
  out.histogram.counts.assign(static_cast<std::size_t>(last + 1), 0);
  for (const auto& [n, count] : by_length) {
    const auto bin = std::min<std::int64_t>(n / out.histogram.width, last);
    out.histogram.counts[static_cast<std::size_t>(bin)] += count;
  }
  if (out.bound.samples > 0) out.bound.source = describe_bound(path, out.bound);
  if (plan_packing && !out.cancelled && !loaded.empty()) {
    const PackPlan plan{m_exp.train.batch_size, m_exp.train.max_steps,
                        std::max(1, spec::launch_world_size(m_exp.launch)), m_exp.train.seed,
                        m_exp.data.shuffle};
    auto efficiency = pack_efficiency(loaded, seq_len, plan);
    if (!efficiency) return efficiency.error();
    out.pack_efficiency = *efficiency;
  }
  return out;
}

std::string bound_key(const spec::Experiment& exp) {
  if (exp.data.format != "chat") return {};
  return exp.data.train_path + '\n' + exp.model.path + '\n' + exp.model.arch + '\n' +
         std::to_string(exp.model.tiny_vocab_size) + '\n' + std::to_string(exp.data.seq_len);
}

Result<std::optional<spec::DataBound>> train_data_bound(const spec::Experiment& exp,
                                                        const std::atomic<bool>* cancel) {
  if (exp.data.format != "chat") return std::optional<spec::DataBound>();
  // A sweep asks once a trial: the bound depends on the file, the model's tokenizer and image
  // processor, and data.seq_len (which lines load), so a file unchanged since (same size and
  // modification time) is not read again.
  std::error_code ec;
  const auto size = std::filesystem::file_size(exp.data.train_path, ec);
  const auto mtime = std::filesystem::last_write_time(exp.data.train_path, ec);
  const std::string key = bound_key(exp) + '\n' + std::to_string(size) + '\n' +
                          std::to_string(static_cast<long long>(mtime.time_since_epoch().count()));
  static std::mutex mutex;
  static std::map<std::string, spec::DataBound> cache;
  if (!ec) {
    const std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end())
      return std::optional<spec::DataBound>(it->second);
  }
  auto inspector = DataInspector::open(exp);
  if (!inspector) return inspector.error();
  InspectOptions options;
  options.cancel = cancel;
  auto file = inspector->inspect_file(exp.data.train_path, "train", options);
  if (!file) return file.error();
  if (file->cancelled) return fail(exp.data.train_path + ": reading the data was cancelled");
  if (!ec) {
    const std::lock_guard<std::mutex> lock(mutex);
    cache[key] = file->bound;
  }
  return std::optional<spec::DataBound>(file->bound);
}

Result<SampleView> DataInspector::sample(const std::string& path, std::int64_t line) const {
  SampleView view;
  view.path = path;
  view.line = line;
  view.seq_len = m_exp.data.seq_len;
  std::optional<json> found;
  std::string bad;
  std::optional<JsonlPosition> at;
  auto scanned = scan_jsonl(
      path, [&](const json* record, const std::string& error, const JsonlPosition& where) {
        if (where.line < line) return true;
        if (where.line == line) {
          at = where;
          if (record != nullptr)
            found = *record;
          else
            bad = at_line(where) + error;
        }
        return false;
      });
  if (!scanned) return scanned.error();
  if (!at) {
    return fail(path + ":" + std::to_string(line) +
                ": no such sample (blank, or past the end of the file); give the line number of "
                "a JSONL record");
  }
  if (!bad.empty()) return fail(bad);
  std::error_code ec;
  const std::string base = std::filesystem::absolute(path, ec).parent_path().string();
  if (m_exp.data.format == "chat") {
    auto sample = parse_sft_record(*found, base);
    if (!sample) return fail(at_line(*at) + sample.message());
    sample->where = *at;
    auto prepared = m_preparer->prepare(*sample);
    if (!prepared) return prepared.error();
    if (auto v = check_sample_vocab(*prepared, m_vocab); !v) return v.error();
    view.rendered = render_qwen2vl_chat(sample->messages).text;
    view.input_ids = std::move(prepared->input_ids);
    view.labels = std::move(prepared->labels);
    for (std::size_t i = 0; i < prepared->images.size(); ++i) {
      const auto& im = prepared->images[i];
      view.images.push_back(
          {line, sample->images[i], im.grid_t, im.grid_h, im.grid_w, im.num_tokens()});
    }
  } else {
    auto tokens = parse_token_record(*found, m_vocab);
    if (!tokens) return fail(at_line(*at) + tokens.message());
    view.input_ids = std::move(tokens->input_ids);
    view.labels = std::move(tokens->labels);
  }
  // Runs of tokens: each image's <|image_pad|> run on its own, the rest by loss or not.
  std::optional<std::int64_t> pad;
  if (m_preparer) {
    if (auto id = m_preparer->tokenizer().token_to_id("<|image_pad|>")) pad = *id;
  }
  const auto n = static_cast<std::int64_t>(view.input_ids.size());
  std::int64_t image = 0;
  for (std::int64_t t = 0; t < n;) {
    const auto k = static_cast<std::size_t>(t);
    SampleSegment seg;
    seg.first = t;
    if (pad && view.input_ids[k] == *pad && image < static_cast<std::int64_t>(view.images.size())) {
      seg.image = image;
      seg.count = view.images[static_cast<std::size_t>(image++)].tokens;
      seg.text = "<|image_pad|>";
      t += seg.count;
      view.segments.push_back(std::move(seg));
      continue;
    }
    seg.loss = view.labels[k] != -100;
    std::vector<std::int32_t> ids;
    while (t < n && (view.labels[static_cast<std::size_t>(t)] != -100) == seg.loss &&
           !(pad && view.input_ids[static_cast<std::size_t>(t)] == *pad)) {
      ids.push_back(static_cast<std::int32_t>(view.input_ids[static_cast<std::size_t>(t)]));
      ++t;
    }
    if (ids.empty()) {  // an <|image_pad|> past the images: one token of its own
      ids.push_back(static_cast<std::int32_t>(view.input_ids[k]));
      ++t;
    }
    seg.count = static_cast<std::int64_t>(ids.size());
    if (m_preparer) {
      seg.text = m_preparer->tokenizer().decode(ids);
    } else {
      for (auto id : ids) seg.text += (seg.text.empty() ? "" : " ") + std::to_string(id);
    }
    view.segments.push_back(std::move(seg));
  }
  return view;
}

json inspection_to_json(const Inspection& inspection) {
  json files = json::array();
  for (const auto& f : inspection.files) {
    json per_sample = json::object();
    for (const auto& [images, samples] : f.images_per_sample)
      per_sample[std::to_string(images)] = samples;
    json largest = json::array();
    for (const auto& s : f.largest_images) largest.push_back(image_json(s));
    json file = {{"role", f.role},
                 {"path", f.path},
                 {"lines", f.lines},
                 {"samples", f.samples},
                 {"tokens", f.tokens},
                 {"loss_tokens", f.loss_tokens},
                 {"min_tokens", f.min_tokens},
                 {"max_tokens", f.max_tokens},
                 {"mean_tokens", f.mean_tokens},
                 {"histogram", {{"width", f.histogram.width}, {"counts", f.histogram.counts}}},
                 {"over_seq_len", f.over_seq_len},
                 {"over_seq_len_lines", listed_json(f.over_listed)},
                 {"refused", f.refused},
                 {"refused_lines", listed_json(f.refused_listed)},
                 {"pack_efficiency", f.pack_efficiency ? json(*f.pack_efficiency) : json(nullptr)},
                 {"images", f.images},
                 {"visual_tokens", f.visual_tokens},
                 {"images_per_sample", per_sample},
                 {"largest_images", largest},
                 {"cancelled", f.cancelled}};
    files.push_back(std::move(file));
  }
  return {{"format", inspection.format},   {"seq_len", inspection.seq_len},
          {"packing", inspection.packing}, {"world", inspection.world},
          {"model", inspection.model},     {"files", files}};
}

json sample_to_json(const SampleView& sample) {
  json segments = json::array();
  for (const auto& s : sample.segments) {
    json seg = {{"text", s.text}, {"first", s.first}, {"count", s.count}, {"loss", s.loss}};
    if (s.image >= 0) seg["image"] = s.image;
    segments.push_back(std::move(seg));
  }
  json images = json::array();
  for (const auto& s : sample.images) images.push_back(image_json(s));
  std::vector<int> mask;
  mask.reserve(sample.labels.size());
  for (auto l : sample.labels) mask.push_back(l != -100 ? 1 : 0);
  return {{"path", sample.path},         {"line", sample.line},
          {"seq_len", sample.seq_len},   {"tokens", sample.input_ids.size()},
          {"rendered", sample.rendered}, {"input_ids", sample.input_ids},
          {"labels", sample.labels},     {"loss_mask", mask},
          {"segments", segments},        {"images", images}};
}

}  // namespace shardscope::data
