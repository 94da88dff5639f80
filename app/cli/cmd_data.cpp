// `data inspect EXP [--line N] [--file train|eval]`: what the trainer will train on, read with
// its own tokenizer, chat template and image processor (data/inspect.h): per file the samples,
// the token lengths against data.seq_len (a histogram), the lines longer than it and the lines
// the trainer refuses (with the reason), data.pack's efficiency, the images and their visual
// tokens. With --line N: that line's rendered chat, the tokens that carry loss marked [[...]].
// --json: one object (the inspection, or the sample with its input_ids, labels and loss_mask).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "backend/lifecycle/demodata.h"
#include "data/inspect.h"
#include "spec/experiment.h"
#include "spec/experiment_query.h"

namespace shardscope::cli {
namespace {

struct DataOptions {
  std::string experiment;
  std::vector<std::string> overrides;
  std::int64_t line = 0;       // 0: the whole inspection
  std::string file = "train";  // --line reads this file: train or eval
};

void printJsonValue(const nlohmann::json& value) {
  // Decoded token runs may split a UTF-8 character: replaced, never a throw.
  std::cout << value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

std::string percent(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * v);
  return text;
}

void printHistogram(const data::FileInspection& f, std::int64_t seq_len) {
  const auto& h = f.histogram;
  const auto most = h.counts.empty() ? 0 : *std::max_element(h.counts.begin(), h.counts.end());
  if (most == 0) return;
  std::cout << "  token lengths (bins of " << h.width << "; '>': past data.seq_len = " << seq_len
            << ", '|': the bin holds data.seq_len and longer):\n";
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    if (h.counts[i] == 0) continue;
    const auto from = static_cast<std::int64_t>(i) * h.width;
    const auto bar = std::max<std::int64_t>(1, h.counts[i] * 40 / most);
    const std::int64_t to = from + h.width - 1;
    const char mark = from > seq_len ? '>' : to > seq_len ? '|' : ' ';
    std::printf("  %c %6lld-%-6lld %7lld %s\n", mark, static_cast<long long>(from),
                static_cast<long long>(to), static_cast<long long>(h.counts[i]),
                std::string(static_cast<std::size_t>(bar), '#').c_str());
  }
}

void printFile(const data::FileInspection& f, const data::Inspection& all) {
  std::cout << f.role << ": " << f.path << (f.cancelled ? " (cancelled)" : "") << '\n';
  std::cout << "  lines " << f.lines << ", samples " << f.samples << ", refused " << f.refused
            << ", over data.seq_len " << f.over_seq_len << '\n';
  if (f.lines > f.refused) {
    std::printf("  tokens: min %lld, mean %.1f, max %lld; loss tokens %lld\n",
                static_cast<long long>(f.min_tokens), f.mean_tokens,
                static_cast<long long>(f.max_tokens), static_cast<long long>(f.loss_tokens));
  }
  printHistogram(f, all.seq_len);
  if (f.over_seq_len > 0) {
    std::cout << "  longer than data.seq_len = " << all.seq_len
              << (all.format == "chat"
                      ? " (shardtrain stops at the first; raise data.seq_len or shorten them):\n"
                      : " (shardtrain truncates them):\n");
    for (const auto& l : f.over_listed)
      std::cout << "    line " << l.line << ": " << l.tokens << " tokens\n";
    if (f.over_seq_len > static_cast<std::int64_t>(f.over_listed.size()))
      std::cout << "    ... " << f.over_seq_len - static_cast<std::int64_t>(f.over_listed.size())
                << " more\n";
  }
  if (f.refused > 0) {
    std::cout << "  refused (shardtrain stops at the first):\n";
    for (const auto& l : f.refused_listed)
      std::cout << "    line " << l.line << " (" << l.kind << "): " << l.reason << '\n';
    if (f.refused > static_cast<std::int64_t>(f.refused_listed.size()))
      std::cout << "    ... " << f.refused - static_cast<std::int64_t>(f.refused_listed.size())
                << " more\n";
  }
  if (f.pack_efficiency) {
    std::cout << "  packing (data.pack, " << all.world
              << " rank(s)): " << percent(*f.pack_efficiency) << " of row slots hold real tokens\n";
  }
  if (f.images > 0) {
    std::cout << "  images " << f.images << ", visual tokens " << f.visual_tokens
              << "; samples by image count:";
    for (const auto& [images, samples] : f.images_per_sample)
      std::cout << ' ' << images << ':' << samples;
    std::cout << "\n  largest images (grid t x h x w patches, tokens after the 2x2 merge):\n";
    for (const auto& s : f.largest_images) {
      std::printf("    line %lld: %s %lldx%lldx%lld, %lld tokens\n", static_cast<long long>(s.line),
                  s.path.c_str(), static_cast<long long>(s.grid_t),
                  static_cast<long long>(s.grid_h), static_cast<long long>(s.grid_w),
                  static_cast<long long>(s.tokens));
    }
  }
}

void printSample(const data::SampleView& s) {
  std::int64_t loss = 0;
  for (std::size_t t = 1; t < s.labels.size(); ++t) loss += s.labels[t] != -100 ? 1 : 0;
  std::cout << s.path << ':' << s.line << ": " << s.input_ids.size() << " tokens (data.seq_len "
            << s.seq_len << "), " << loss << " carry loss (marked [[...]])\n";
  for (const auto& im : s.images) {
    std::printf("image: %s %lldx%lldx%lld, %lld tokens\n", im.path.c_str(),
                static_cast<long long>(im.grid_t), static_cast<long long>(im.grid_h),
                static_cast<long long>(im.grid_w), static_cast<long long>(im.tokens));
  }
  std::string text;
  for (const auto& seg : s.segments) {
    if (seg.image >= 0)
      text += "<|image_pad|> x " + std::to_string(seg.count);
    else if (seg.loss)
      text += "[[" + seg.text + "]]";
    else
      text += seg.text;
  }
  std::cout << text << (text.empty() || text.back() == '\n' ? "" : "\n");
}

void dataInspectVerb(const Globals& g, const DataOptions& o) {
  // The demo's data is made on first use, as `run` makes it (examples/demo.toml): a new user's
  // first look at it must not be "does not exist".
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  auto exp = spec::load_experiment(o.experiment, o.overrides, noPaths);
  if (!exp) exitWith(kExitUsage, exp.message());
  auto written = backend::ensureDemoData(*exp);
  if (!written) exitWith(kExitError, written.message());
  if (*written) std::cerr << "wrote the demo's data to " << exp->data.train_path << '\n';
  if (auto paths = spec::check_experiment_paths(*exp); !paths)
    exitWith(kExitUsage, paths.message());
  auto inspector = data::DataInspector::open(*exp);
  if (!inspector) exitWith(kExitUsage, o.experiment + ": " + inspector.message());
  if (o.line > 0) {
    const std::string& path = o.file == "eval" ? exp->data.eval_path : exp->data.train_path;
    if (path.empty()) exitWith(kExitUsage, "data.eval_path: empty; --file eval has no file");
    const auto sample = orExit(inspector->sample(path, o.line));
    if (g.json)
      printJsonValue(data::sample_to_json(sample));
    else
      printSample(sample);
    return;
  }
  const auto inspection = orExit(inspector->inspect());
  if (g.json) {
    printJsonValue(data::inspection_to_json(inspection));
    return;
  }
  std::cout << o.experiment << ": format " << inspection.format << ", data.seq_len "
            << inspection.seq_len << ", packing " << (inspection.packing ? "on" : "off")
            << ", model " << inspection.model << '\n';
  for (const auto& f : inspection.files) printFile(f, inspection);
}

}  // namespace

void addDataVerb(CLI::App& app, Globals& g) {
  auto o = std::make_shared<DataOptions>();
  CLI::App* verb = app.add_subcommand("data", "Look at an experiment's data as the trainer will");
  verb->require_subcommand(1);
  CLI::App* inspect = verb->add_subcommand(
      "inspect",
      "Samples, token lengths against data.seq_len, refused lines, packing and images of "
      "data.train_path and data.eval_path, or one line's chat with its loss tokens");
  inspect->add_option("EXP", o->experiment, "Experiment file (TOML)")->required();
  inspect->add_option("--line", o->line, "Show this JSONL line (1-based) as the trainer takes it")
      ->check(CLI::PositiveNumber);
  inspect->add_option("--file", o->file, "The file --line reads: train (default) or eval")
      ->check(CLI::IsMember({"train", "eval"}));
  inspect->add_option("--set", o->overrides, "Override a field: dotted.key=value (repeatable)")
      ->type_name("K=V")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  inspect->callback([&g, o] { dataInspectVerb(g, *o); });
}

}  // namespace shardscope::cli
