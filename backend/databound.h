// What a chat experiment's training data holds that bounds the memory estimate's rows
// (spec::DataBound), read as the trainer loads it (data/inspect.h). The one way the backend and
// the dashboard read it: the sweep's memory check (and the replan ladder after it) and the
// builder's memory panel (on its worker thread) call it, so they state what `shardscope-cli
// estimate` states on the same file.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "spec/estimate.h"
#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::backend {

/// data::train_data_bound (one pass over data.train_path, cached per file, its size and
/// modification time, the model folder and data.seq_len). It reads the whole file, so it refuses
/// the dashboard's GUI thread (assertOffGuiThread). nullopt: not chat data (rows bounded by
/// data.seq_len); an error: the data could not be read (its reason names the file).
Result<std::optional<spec::DataBound>> trainDataBound(const spec::Experiment& exp,
                                                      const std::atomic<bool>* cancel = nullptr);

/// The bound an estimate of `exp` takes: trainDataBound's, or nullopt when it is not chat data
/// or the data cannot be read here (a remote host's path, a file not made yet), `why` then
/// saying which (empty for other formats).
std::optional<spec::DataBound> rowsBoundOf(const spec::Experiment& exp, std::string* why = nullptr);

}  // namespace shardscope::backend
