// Process helpers the tests share: is a process still running.
#pragma once

#include <QFile>

namespace shardscope::testing {

/// True while `pid` runs. A zombie has ended (it only waits for its parent to reap it), and so
/// has a pid /proc does not know.
inline bool alive(qint64 pid) {
  QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
  if (pid <= 0 || !stat.open(QIODevice::ReadOnly)) return false;
  const QByteArray s = stat.readAll();
  const qsizetype close = s.lastIndexOf(')');  // the command name may hold spaces and ')'
  return close > 0 && s.size() > close + 2 && s[close + 2] != 'Z';
}

}  // namespace shardscope::testing
