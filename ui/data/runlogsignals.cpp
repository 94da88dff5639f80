#include "ui/data/runlogsignals.h"

#include <QMetaMethod>

namespace shardscope::ui {

void forwardRunLogSignals(const RunLogSignals* from, RunLogSignals* to) {
  const QMetaObject& meta = RunLogSignals::staticMetaObject;
  for (int i = meta.methodOffset(); i < meta.methodCount(); ++i) {
    const QMetaMethod method = meta.method(i);
    if (method.methodType() == QMetaMethod::Signal) QObject::connect(from, method, to, method);
  }
}

}  // namespace shardscope::ui
