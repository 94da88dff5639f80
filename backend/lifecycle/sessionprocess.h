// A process started in its own session (double fork: a child of init), so it outlives the
// process that starts it: the supervisor of a detached run, and a sweep or an autotune started by
// the dashboard.
#pragma once

#include <QString>
#include <QStringList>

#include "spec/result.h"

namespace shardscope::backend {

/// Executes argv[0] with `argv` in a new session, stdin from /dev/null, stdout and stderr
/// appended to `logPath`; returns its pid. `what` names it in the fork and pipe errors ("the
/// supervisor"); `notStarted` is the error when it did not start.
[[nodiscard]] Result<qint64> spawnInSession(const QStringList& argv, const QString& logPath,
                                            const std::string& what, const std::string& notStarted);

}  // namespace shardscope::backend
