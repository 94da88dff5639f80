// The dashboard's rule: its GUI thread never runs a run-log write, a launcher or a pass over
// training data, so a slow disk, an unreachable host or a large file cannot freeze the window.
// Store writes, launchers and trainDataBound (backend/databound.h) call assertOffGuiThread(); in
// the CLI (no QGuiApplication) it never fires.
#pragma once

namespace shardscope::backend {

/// True when the calling thread is the GUI thread of a running QGuiApplication event loop
/// (start-up before exec(), e.g. migrating the run log before the window opens, is not counted).
bool onGuiThread();
/// Aborts with a message naming `what` when onGuiThread(). Active in debug builds, and in any
/// build when the environment sets SHARDSCOPE_THREAD_CHECKS=1 (the test suite does).
void assertOffGuiThread(const char* what);

}  // namespace shardscope::backend
