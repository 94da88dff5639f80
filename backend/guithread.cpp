#include "backend/guithread.h"

#include <QCoreApplication>
#include <QThread>

namespace shardscope::backend {
namespace {

bool checksEnabled() {
#ifndef NDEBUG
  return true;
#else
  static const bool enabled = qEnvironmentVariableIntValue("SHARDSCOPE_THREAD_CHECKS") == 1;
  return enabled;
#endif
}

}  // namespace

bool onGuiThread() {
  const QCoreApplication* app = QCoreApplication::instance();
  // By class name: the backend links Qt Core only, never Qt Gui.
  if (app == nullptr || !app->inherits("QGuiApplication")) return false;
  QThread* current = QThread::currentThread();
  return current == app->thread() && current->loopLevel() > 0;
}

void assertOffGuiThread(const char* what) {
  if (checksEnabled() && onGuiThread()) {
    qFatal(
        "shardscope: %s on the GUI thread; post it to a worker thread (the dashboard's GUI "
        "thread never writes the run log, drives a launcher or reads training data)",
        what);
  }
}

}  // namespace shardscope::backend
