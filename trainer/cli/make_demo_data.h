// `shardtrain make-demo-data DIR [--train N --eval M --seed S]`: the shapes VQA set
// (data/image/shapes.h) with its probes (DIR/probes.jsonl, eval.probes of the demo) and, in
// DIR/model, a tiny Qwen2-VL to train on it from scratch: config.json, a byte-level BPE
// tokenizer.json written here (the 256 byte tokens, whole-word merges for the set's words,
// Qwen2-VL's special tokens), preprocessor_config.json and model.safetensors (a seeded random
// init). Nothing is downloaded; same arguments, same bytes.
#pragma once

#include <cstdint>
#include <string>

namespace shardscope::trainer {

struct MakeDemoDataOptions {
  std::string dir;            // output folder
  std::int64_t train = 2000;  // training samples
  std::int64_t eval = 200;    // evaluation samples (other images)
  std::uint64_t seed = 0;     // images, questions and the model's init
  int image_size = 168;       // square side in pixels (a multiple of 28)
  bool blank_images = false;  // backgrounds only: the control run with nothing to see
};

/// Writes the set and the model folder; prints a `done` event whose objective is the number of
/// samples written, and a JSON summary of the answer classes on stderr.
int run_make_demo_data(const MakeDemoDataOptions& options);

}  // namespace shardscope::trainer
