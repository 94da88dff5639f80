// Learning-rate schedules: linear warmup from 0, then constant, linear or cosine decay to lr_min
// at train.max_steps. Pure functions of the step, so a resumed run continues exactly.
#pragma once

#include <cstdint>

#include "spec/experiment.h"

namespace shardscope::optim {

/// Learning rate of optimizer step `step` (0-based).
double lr_at(const spec::TrainSection& train, std::int64_t step);

}  // namespace shardscope::optim
