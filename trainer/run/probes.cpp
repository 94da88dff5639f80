#include "trainer/run/probes.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "spec/sha256.h"
#include "trainer/base/fatal.h"

namespace shardscope::trainer {
namespace {

using spec::ErrorKind;
namespace fs = std::filesystem;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::string bytes(in ? static_cast<std::size_t>(in.tellg()) : 0, '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  SHARD_CHECK(static_cast<bool>(in), ErrorKind::config,
              "eval.probes: cannot read the image " + path,
              "fix the probe's image path (relative to the probe file)");
  return bytes;
}

// The run-relative name of `image`'s copy: probes/<sha256 of its bytes><its extension, lower
// case>. With `run_dir` set the copy is written (through a temporary file and a rename, so a
// reader never sees half an image) unless a file of that name is there: the name is the content.
std::string copy_image(const std::string& image, const std::string& run_dir) {
  const auto bytes = read_bytes(image);
  auto ext = fs::path(image).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto rel = "probes/" + spec::sha256_hex(bytes) + ext;
  if (run_dir.empty()) return rel;
  const auto dest = fs::path(run_dir) / rel;
  std::error_code ec;
  if (fs::exists(dest, ec)) return rel;
  fs::create_directories(dest.parent_path(), ec);
  const auto tmp = dest.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    SHARD_CHECK(static_cast<bool>(out), ErrorKind::io,
                "eval.probes: cannot write " + tmp + " (a copy of " + image + ")",
                "free space in the run directory or make it writable");
  }
  fs::rename(tmp, dest, ec);
  SHARD_CHECK(!ec, ErrorKind::io, "eval.probes: cannot rename " + tmp + ": " + ec.message(),
              "make the run directory writable");
  return rel;
}

}  // namespace

ProbeSet load_probe_set(const std::string& path, const data::SftPreparer& preparer,
                        std::int64_t vocab_size, const std::string& copy_to) {
  auto probes = data::load_probes(path);
  SHARD_CHECK_OK(probes, ErrorKind::config,
                 "fix that line of eval.probes (docs/config.md, [eval] probes), or drop "
                 "eval.probes");
  ProbeSet set;
  set.probes = std::move(*probes);
  for (const auto& probe : set.probes) {
    auto prepared = preparer.prepare(probe.sample);
    SHARD_CHECK_OK(prepared, ErrorKind::config,
                   "fix that line of eval.probes (its images, its messages), or drop it");
    for (auto id : prepared->input_ids)
      SHARD_CHECK(id < vocab_size, ErrorKind::config,
                  path + ":" + std::to_string(probe.sample.where.line) + ": token id " +
                      std::to_string(id) + " is outside the model's vocabulary (" +
                      std::to_string(vocab_size) + ")",
                  "use the model's own tokenizer.json");
    set.prepared.push_back(std::move(*prepared));
    std::vector<std::string> copies;
    for (const auto& image : probe.sample.images) copies.push_back(copy_image(image, copy_to));
    set.images.push_back(std::move(copies));
  }
  return set;
}

spec::SampleEvent sample_event(const ProbeSet& set, std::size_t i, std::int64_t step,
                               const std::string& text, std::int64_t tokens) {
  const auto& probe = set.probes[i];
  spec::SampleEvent e;
  e.step = step;
  e.probe = probe.id;
  e.prompt = probe.prompt;
  e.images = set.images[i];
  e.text = text;
  e.tokens = tokens;
  if (probe.reference) {
    const auto scores = data::score_answer(text, *probe.reference);
    e.reference = probe.reference;
    e.exact_match = scores.exact_match;
    e.f1 = scores.f1;
    e.cer = scores.cer;
  }
  return e;
}

}  // namespace shardscope::trainer
