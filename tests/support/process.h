// Process helpers the tests share: is a process still running; run a program to its end.
#pragma once

#include <QByteArray>
#include <QFile>
#include <QProcess>
#include <QStringList>

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

/// How a program ended and what it printed; exitCode -1: it crashed or did not end in time.
struct ProgramRun {
  int exitCode = -1;
  QByteArray out;
  QByteArray err;
};

/// Runs `program` to its end (killed after `timeoutMs`), in `cwd` when it is not empty.
inline ProgramRun runProgram(const QString& program, const QStringList& args,
                             const QString& cwd = {}, int timeoutMs = 240000) {
  QProcess p;
  if (!cwd.isEmpty()) p.setWorkingDirectory(cwd);
  p.start(program, args);
  ProgramRun r;
  if (!p.waitForFinished(timeoutMs)) {
    p.kill();
    p.waitForFinished();
    return r;
  }
  r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  r.out = p.readAllStandardOutput();
  r.err = p.readAllStandardError();
  return r;
}

}  // namespace shardscope::testing
