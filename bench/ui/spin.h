// What the dashboard benchmarks share: running the event loop until a condition holds.
#pragma once

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEventLoop>

namespace shardscope::bench {

/// Runs the event loop until `done` holds or `ms` pass; false on timeout.
template <class Predicate>
bool spinUntil(Predicate done, int ms) {
  QElapsedTimer timer;
  timer.start();
  while (!done()) {
    if (timer.elapsed() > ms) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
  }
  return true;
}

}  // namespace shardscope::bench
