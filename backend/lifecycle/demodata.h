// The demo experiment's token data, generated on first use (examples/demo.toml).
#pragma once

#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::backend {

/// True for the demo experiment: [experiment] name "demo", arch tiny, token data.
bool isDemo(const spec::Experiment& exp);
/// Writes `count` JSONL samples {"input_ids":[...]} of data.seq_len tokens, each an arithmetic
/// progression modulo model.tiny_vocab_size (start and stride from a fixed seed), to
/// data.train_path (its folder is created; written to a temporary name, then renamed).
[[nodiscard]] Result<void> writeDemoData(const spec::Experiment& exp, int count = 512);
/// Writes the demo's data when `exp` is the demo and data.train_path (already resolved against
/// the experiment's folder) does not exist yet; true when it wrote it.
[[nodiscard]] Result<bool> ensureDemoData(const spec::Experiment& exp);

}  // namespace shardscope::backend
