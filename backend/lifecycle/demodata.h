// The bundled demos' data, generated on first use: the token data of examples/demo.toml (written
// here), and the shapes VQA set with its probes and tiny Qwen2-VL of examples/shapes-vqa.toml
// (written by the trainer's `shardtrain make-demo-data`, which this runs).
#pragma once

#include <functional>

#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::backend {

/// True for the demo experiment: [experiment] name "demo", arch tiny, token data.
bool isDemo(const spec::Experiment& exp);
/// Writes `count` JSONL samples {"input_ids":[...]} of data.seq_len tokens, each an arithmetic
/// progression modulo model.tiny_vocab_size (start and stride from a fixed seed), to
/// data.train_path (its folder is created; written to a temporary name, then renamed).
[[nodiscard]] Result<void> writeDemoData(const spec::Experiment& exp, int count = 512);
/// The shapes demo's set size (examples/shapes-vqa.toml: make-demo-data DIR --train 3000 --eval
/// 400).
inline constexpr int kShapesDemoTrain = 3000;
inline constexpr int kShapesDemoEval = 400;
/// True for the shapes VQA demo: [experiment] name "shapes-vqa", arch qwen2_vl, chat data, and
/// every file make-demo-data writes where it writes it: data.train_path DIR/train.jsonl,
/// model.path DIR/model, data.eval_path (if set) DIR/eval.jsonl, eval.probes (if set)
/// DIR/probes.jsonl.
bool isShapesDemo(const spec::Experiment& exp);
/// Writes a demo's data when `exp` is one (paths already resolved against the experiment's
/// folder) and its data is missing: the token demo's data.train_path; any of the shapes demo's
/// files (then `shardtrain make-demo-data DIR --train 3000 --eval 400`, same bytes every time,
/// with the trainer of launch.trainer: a bare name is looked for beside this program, then on
/// PATH). True when it wrote them. `waiting`, when given, is called about every 100 ms while
/// make-demo-data runs (seconds): a window repaints and says why it waits.
[[nodiscard]] Result<bool> ensureDemoData(const spec::Experiment& exp,
                                          const std::function<void()>& waiting = {});

}  // namespace shardscope::backend
