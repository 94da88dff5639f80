// The shapes VQA generator. Randomness comes from splitmix64 with integer arithmetic only, so
// the bytes are the same on every platform and standard library.
#include "data/image/shapes.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace shardscope::data {

namespace {

constexpr std::array<std::array<int, 3>, 6> kColourRgb = {
    {{220, 40, 40}, {40, 170, 60}, {40, 80, 220}, {235, 200, 30}, {140, 60, 180}, {245, 130, 30}}};

// The background: the Qwen2-VL image normaliser's mean (0.481, 0.458, 0.408) in 8-bit levels.
constexpr std::array<int, 3> kBackgroundRgb = {123, 117, 104};

// Zones on a 3x3 grid of cells: (column, row) of left, right, top, bottom. Disjoint, so the
// position answer is never ambiguous.
constexpr std::array<std::array<int, 2>, 4> kZoneCell = {{{0, 1}, {2, 1}, {1, 0}, {1, 2}}};

class SplitMix {
 public:
  explicit SplitMix(std::uint64_t seed) : m_state(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (m_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n).
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  /// Uniform in [lo, hi].
  int between(int lo, int hi) { return lo + below(hi - lo + 1); }

 private:
  std::uint64_t m_state;
};

// Whether pixel offset (dx, dy) from a shape's centre lies inside it; r is the half-size.
bool inside(int kind, int dx, int dy, int r) {
  switch (kind) {
    case 0:  // circle
      return dx * dx + dy * dy <= r * r;
    case 1:  // square
      return std::abs(dx) * 10 <= r * 8 && std::abs(dy) * 10 <= r * 8;
    case 2:  // triangle, apex up: half-width grows from 0 at dy = -r to r at dy = +r
      return dy >= -r && dy <= r && 2 * std::abs(dx) <= dy + r;
    default:  // diamond
      return std::abs(dx) + std::abs(dy) <= r;
  }
}

void draw_shape(RgbImage& image, int kind, int cx, int cy, int r, const std::array<int, 3>& rgb) {
  for (int y = std::max(0, cy - r); y <= std::min(image.height - 1, cy + r); ++y) {
    for (int x = std::max(0, cx - r); x <= std::min(image.width - 1, cx + r); ++x) {
      if (!inside(kind, x - cx, y - cy, r)) continue;
      for (int c = 0; c < 3; ++c)
        image.pixels[(static_cast<std::size_t>(y) * image.width + x) * 3 + c] =
            static_cast<std::uint8_t>(rgb[c]);
    }
  }
}

std::uint64_t image_seed(std::uint64_t seed, std::int64_t index) {
  SplitMix mix(seed ^ (0xD1B54A32D192ED03ULL * static_cast<std::uint64_t>(index + 1)));
  return mix.next();
}

ShapesScene random_scene(SplitMix& rng) {
  ShapesScene s;
  s.colour = rng.below(static_cast<int>(kShapesColours.size()));
  s.kind = rng.below(static_cast<int>(kShapesKinds.size()));
  s.count = rng.between(1, 4);
  s.position = rng.below(static_cast<int>(kShapesPositions.size()));
  return s;
}

// The question and answer of sample `index` (question types cycle so each gets a quarter).
std::pair<std::string, std::string> question(const ShapesScene& s, std::int64_t index) {
  const bool one = s.count == 1;
  switch (index % 4) {
    case 0:
      return {one ? "What colour is the shape?" : "What colour are the shapes?",
              kShapesColours[s.colour]};
    case 1:
      return {one ? "What shape is in the image?" : "What shape are the objects in the image?",
              kShapesKinds[s.kind]};
    case 2:
      return {"How many shapes are there?", std::to_string(s.count)};
    default:
      return {one ? "Where is the shape?" : "Where are the shapes?", kShapesPositions[s.position]};
  }
}

nlohmann::ordered_json sample_record(const std::string& image, const std::string& q,
                                     const std::string& a) {
  using oj = nlohmann::ordered_json;
  oj user = {{"role", "user"},
             {"content", oj::array({oj{{"type", "image"}, {"image", image}},
                                    oj{{"type", "text"}, {"text", q}}})}};
  oj assistant = {{"role", "assistant"}, {"content", a}};
  return oj{{"messages", oj::array({user, assistant})}};
}

// A probe: the user turn of sample_record without the answer, which becomes the reference.
nlohmann::ordered_json probe_record(const std::string& id, const std::string& image,
                                    const std::string& q, const std::string& a) {
  using oj = nlohmann::ordered_json;
  oj user = {{"role", "user"},
             {"content", oj::array({oj{{"type", "image"}, {"image", image}},
                                    oj{{"type", "text"}, {"text", q}}})}};
  return oj{{"id", id}, {"messages", oj::array({user})}, {"reference", a}};
}

// Probe scenes get their own seeds (salted, so never those of a train or eval index).
constexpr std::uint64_t kProbeSalt = 0x70726F6265730000ULL;  // "probes"

}  // namespace

RgbImage render_shapes(const ShapesScene& scene, int size, std::uint64_t seed) {
  SplitMix rng(seed);
  RgbImage image{size, size, std::vector<std::uint8_t>(static_cast<std::size_t>(size) * size * 3)};
  // The background sits at the image normaliser's mean, so its pixel values are about 0 and
  // its patches embed to about 0: a shape's patch then differs from the background by its whole
  // embedding, not by a few percent of a large common one (on a white canvas a tiny model
  // trained from scratch learnt the answer priors and never the image).
  const int tint = rng.between(-6, 6);
  for (std::size_t i = 0; i < image.pixels.size(); ++i)
    image.pixels[i] = static_cast<std::uint8_t>(kBackgroundRgb[i % 3] + tint + rng.between(-2, 2));
  const int cell = size / 3;
  const int slot = cell / 2;
  const int r = std::max(2, slot * 2 / 5);
  const int jitter = std::max(0, slot / 2 - r - 1);
  std::array<int, 4> slots = {0, 1, 2, 3};
  for (int i = 3; i > 0; --i) std::swap(slots[i], slots[rng.below(i + 1)]);
  const auto [col, row] = kZoneCell[scene.position];
  for (int i = 0; i < scene.count; ++i) {
    const int cx = col * cell + (slots[i] % 2) * slot + slot / 2 + rng.between(-jitter, jitter);
    const int cy = row * cell + (slots[i] / 2) * slot + slot / 2 + rng.between(-jitter, jitter);
    std::array<int, 3> rgb = kColourRgb[scene.colour];
    for (int& v : rgb) v = std::clamp(v + rng.between(-12, 12), 0, 255);
    draw_shape(image, scene.kind, cx, cy, r, rgb);
  }
  return image;
}

Result<ShapesSummary> make_shapes(const std::string& dir, std::int64_t n_train, std::int64_t n_eval,
                                  std::uint64_t seed, int image_size, bool blank_images) {
  namespace fs = std::filesystem;
  if (image_size < 56)
    return fail("shapes: image size " + std::to_string(image_size) + " is below 56; use 168");
  if (n_train < 0 || n_eval < 0) return fail("shapes: sample counts must not be negative");
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "img", ec);
  if (ec) return fail(dir + ": cannot create the data folder (" + ec.message() + ")");
  ShapesSummary summary;
  summary.train_path = (fs::path(dir) / "train.jsonl").string();
  summary.eval_path = (fs::path(dir) / "eval.jsonl").string();
  for (int split = 0; split < 2; ++split) {
    const std::string& path = split == 0 ? summary.train_path : summary.eval_path;
    ShapesAnswerCounts& counts = split == 0 ? summary.train_answers : summary.eval_answers;
    std::ofstream out(path, std::ios::binary);
    const std::int64_t first = split == 0 ? 0 : n_train;
    const std::int64_t n = split == 0 ? n_train : n_eval;
    for (std::int64_t i = first; i < first + n; ++i) {
      SplitMix rng(image_seed(seed, i));
      ShapesScene scene = random_scene(rng);
      char name[32];
      std::snprintf(name, sizeof name, "img/%06lld.png", static_cast<long long>(i));
      ShapesScene drawn = scene;
      if (blank_images) drawn.count = 0;  // the background only; the answers stay the scene's
      auto written =
          write_png((fs::path(dir) / name).string(), render_shapes(drawn, image_size, rng.next()));
      if (!written) return written.error();
      auto [q, a] = question(scene, i - first);
      counts[kShapesQuestionTypes[(i - first) % 4]][a] += 1;
      out << sample_record(name, q, a).dump() << '\n';
    }
    out.close();
    if (!out) return fail(path + ": cannot write (" + std::string(std::strerror(errno)) + ")");
  }
  summary.probes_path = (fs::path(dir) / "probes.jsonl").string();
  std::ofstream probes(summary.probes_path, std::ios::binary);
  for (int k = 0; k < kShapesProbeImages; ++k) {
    SplitMix rng(image_seed(seed ^ kProbeSalt, k));
    ShapesScene scene = random_scene(rng);
    const std::string name = "img/probe-" + std::to_string(k + 1) + ".png";
    ShapesScene drawn = scene;
    if (blank_images) drawn.count = 0;
    auto written =
        write_png((fs::path(dir) / name).string(), render_shapes(drawn, image_size, rng.next()));
    if (!written) return written.error();
    for (int j = 0; j < 2; ++j) {
      const int type = (2 * k + j) % static_cast<int>(kShapesQuestionTypes.size());
      auto [q, a] = question(scene, type);
      const std::string id = std::string(kShapesQuestionTypes[type]) + "-" + std::to_string(k + 1);
      probes << probe_record(id, name, q, a).dump() << '\n';
    }
  }
  probes.close();
  if (!probes) {
    return fail(summary.probes_path + ": cannot write (" + std::string(std::strerror(errno)) + ")");
  }
  return summary;
}

}  // namespace shardscope::data
