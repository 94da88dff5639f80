#include "trainer/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace shardscope::optim {

double lr_at(const spec::TrainSection& train, std::int64_t step) {
  if (step < train.lr_warmup_steps) {
    return train.lr * static_cast<double>(step + 1) / static_cast<double>(train.lr_warmup_steps);
  }
  const auto decay_steps = std::max<std::int64_t>(1, train.max_steps - train.lr_warmup_steps);
  const double progress = std::clamp(
      static_cast<double>(step - train.lr_warmup_steps) / static_cast<double>(decay_steps), 0.0,
      1.0);
  switch (train.lr_schedule) {
    case spec::LrSchedule::constant:
      return train.lr;
    case spec::LrSchedule::linear:
      return train.lr_min + (train.lr - train.lr_min) * (1.0 - progress);
    case spec::LrSchedule::cosine:
      break;
  }
  return train.lr_min +
         (train.lr - train.lr_min) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace shardscope::optim
