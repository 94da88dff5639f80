// POSIX process plumbing: start a process in its own session with its output in files (a rank of
// the local launcher, or, detached, a run's supervisor or a sweep), read /proc, find and signal a
// session's processes, and learn how a rank ended (exit code or signal) whether or not this
// process started it. Linux only.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <optional>

#include "spec/result.h"

namespace shardscope::backend::localproc {

/// The fields of /proc/PID/stat the launcher needs.
struct ProcStat {
  char state = '?';  // R, S, D, Z (zombie), X (dead), ...
  qint64 ppid = 0;
  qint64 pgrp = 0;
  qint64 session = 0;
  qint64 startTicks = 0;  // field 22: clock ticks after boot; (pid, startTicks) names a process
};
std::optional<ProcStat> readProcStat(qint64 pid);

/// One process to start: argv[0] is `program`, stdin is /dev/null, stdout and stderr are
/// appended to the two files (created owner-only), the working directory is `workDir` (empty:
/// this one's), the environment is exactly `env` ("NAME=value"), the signal mask is empty and
/// the process leads a new session.
struct SpawnSpec {
  QString program;  // absolute path
  QStringList args;
  QStringList env;
  QString workDir;
  QString stdoutPath;
  QString stderrPath;
  /// A child of init (a double fork), not of this process: it outlives this process, which never
  /// reaps it (a run's supervisor, a sweep). A rank stays this process's child (probe reaps it)
  /// and gets every signal disposition reset. A detached program that cannot be executed exits
  /// 127 instead of failing the spawn.
  bool detached = false;
};

/// A started process: its pid and its start time (taken before it can be reaped).
struct Spawned {
  qint64 pid = 0;
  qint64 startTicks = 0;
};
Result<Spawned> spawnInSession(const SpawnSpec& spec);

/// This process's environment ("NAME=value") with the `set` entries ("NAME=value") over it.
QStringList environmentWith(const QStringList& set);

/// Live (not zombie) processes whose session id is `sid`.
QList<qint64> sessionMembers(qint64 sid);

/// Sends `sig` to the process group `sid` and to every live process of session `sid`, unless
/// `sid` now names a different process than the rank started at `startTicks` (pid reuse).
/// Returns how many live processes it signalled.
int signalSession(qint64 sid, qint64 startTicks, int sig);

/// How a process ended, when that can be known.
struct ExitInfo {
  bool known = false;  // false: it ended, but it was not our child (attach) or was reaped
  int exitCode = -1;   // when it exited normally
  int signal = 0;      // when a signal killed it
};

/// Whether the process (pid, startTicks) still runs. Reaps it when it is this process's child
/// and has ended, and remembers the status process-wide, so every handle of the same run in
/// this process sees the same exit code.
struct Probe {
  bool running = false;
  ExitInfo exit;
};
Probe probe(qint64 pid, qint64 startTicks);

/// A pidfd that becomes readable when `pid` ends (Linux >= 5.3), or -1 when unavailable.
/// The caller re-checks the start time after opening, to be sure it is the same process.
int openPidfd(qint64 pid);

}  // namespace shardscope::backend::localproc
