// The "shapes" demo data set: procedurally drawn PNGs of coloured shapes with visual questions
// (colour, shape, count, position) and short answers, in the SFT JSONL format. Deterministic for
// a seed; train and eval use different images. `shardtrain make-demo-data` writes it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "data/image/image.h"
#include "spec/result.h"

namespace shardscope::data {

inline constexpr std::array<const char*, 6> kShapesColours = {"red",    "green",  "blue",
                                                              "yellow", "purple", "orange"};
inline constexpr std::array<const char*, 4> kShapesKinds = {"circle", "square", "triangle",
                                                            "diamond"};
inline constexpr std::array<const char*, 4> kShapesPositions = {"left", "right", "top", "bottom"};
/// Question types, in the order samples cycle through them.
inline constexpr std::array<const char*, 4> kShapesQuestionTypes = {"colour", "shape", "count",
                                                                    "position"};

/// What one image shows: `count` shapes of one kind and colour, grouped at one side.
struct ShapesScene {
  int colour = 0;    // index into kShapesColours
  int kind = 0;      // index into kShapesKinds
  int count = 1;     // 1..4
  int position = 0;  // index into kShapesPositions
};

/// Draws a scene on a size x size canvas with a grey background at the Qwen2-VL normaliser's mean;
/// `seed` picks the background tint, slots and jitter.
RgbImage render_shapes(const ShapesScene& scene, int size, std::uint64_t seed);

/// Answer counts per split: question type -> answer -> samples.
using ShapesAnswerCounts = std::map<std::string, std::map<std::string, std::int64_t>>;

/// The probes make_shapes writes (eval.probes of examples/shapes-vqa.toml): each of
/// kShapesProbeImages scenes, drawn apart from train and eval, is asked two question types, so
/// every type is asked and two probes share each image.
inline constexpr int kShapesProbeImages = 3;
inline constexpr int kShapesProbes = 2 * kShapesProbeImages;

/// What make_shapes wrote.
struct ShapesSummary {
  std::string train_path;   // DIR/train.jsonl
  std::string eval_path;    // DIR/eval.jsonl
  std::string probes_path;  // DIR/probes.jsonl
  ShapesAnswerCounts train_answers;
  ShapesAnswerCounts eval_answers;
};

/// Writes DIR/train.jsonl, DIR/eval.jsonl and DIR/img/NNNNNN.png (one image per sample; train
/// images first), and DIR/probes.jsonl: kShapesProbes chat probes with their reference answers
/// ({"id": "colour-1", "messages": [user turn: image, question], "reference": "red"}) on the
/// images DIR/img/probe-K.png, whose scenes come from the seed alone (not the counts). Same
/// arguments, same bytes. `image_size` is the square side in pixels (>= 56; a multiple of 28 needs
/// no resize in Qwen2-VL). The canvas is a 3x3 grid of zones, each with 4 slots (2x2); the shapes
/// fill `count` slots of the named side's zone. At 168 (the demo's size) the layout meets the
/// tokens: a zone is 2x2 merged image tokens of the 6x6 and each shape (about 22 px) sits in its
/// own merged token (2x2 patches of 14), so the count is the number of non-background image tokens
/// and the side is where they are. At 84 a zone is one merged token and a shape one 14-pixel patch;
/// a tiny model trained from scratch on that read only colour. With `blank_images` every image is
/// its background only (the control run: same questions and answers, nothing to see).
Result<ShapesSummary> make_shapes(const std::string& dir, std::int64_t n_train, std::int64_t n_eval,
                                  std::uint64_t seed, int image_size = 168,
                                  bool blank_images = false);

}  // namespace shardscope::data
