// What a rank tells people: one plain line on stderr (the launchers' rank-N.log, the dashboard's
// log panel) for each event it writes on stdout, so a run's log reads like any trainer's: a start
// banner and the plan, a line a logged step with loss, learning rate and speed, evaluations,
// memory, checkpoints, warnings and the end. Errors already print their own lines (fatal.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "spec/events.h"

namespace shardscope::trainer {

/// The line for `body` without a trailing newline; `max_steps` (0: unknown) sets a step line's
/// "step N/M". Empty for a payload people need no line for.
std::string human_line(const spec::Payload& body, std::int64_t max_steps);

/// Writes `body` as the rank's event (events()) and its human line to stderr.
void report(const spec::Payload& body, std::int64_t max_steps = 0);

/// One line to stderr as it is (the run's plan, from the caller that knows it).
void say(const std::string& line);

}  // namespace shardscope::trainer
