// A process started in its own session (double fork: a child of init), so it outlives the
// process that starts it: the supervisor of a detached run, and a sweep or an autotune started by
// the dashboard.
#pragma once

#include <QString>
#include <QStringList>

#include "spec/result.h"

namespace shardscope::backend {

/// The environment variable that gives shardscope-cli its run log when --db is absent. The
/// dashboard passes the run log to the processes it starts this way, never on their command
/// line: a PostgreSQL URL may hold a password, and any local user reads a command line
/// (/proc/PID/cmdline, ps), while a process's environment is readable by its own user only.
inline constexpr char kDbEnvironmentVariable[] = "SHARDSCOPE_DB";

/// Executes argv[0] with `argv` in a new session, stdin from /dev/null, stdout and stderr
/// appended to `logPath`; returns its pid. Its environment is this process's with `environment`
/// (NAME=value entries) set over it. `what` names it in the fork and pipe errors ("the
/// supervisor"); `notStarted` is the error when it did not start.
[[nodiscard]] Result<qint64> spawnInSession(const QStringList& argv, const QString& logPath,
                                            const std::string& what, const std::string& notStarted,
                                            const QStringList& environment = {});

}  // namespace shardscope::backend
