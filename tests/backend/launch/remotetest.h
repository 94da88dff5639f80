// Helpers shared by the SSH and Slurm launcher tests: the fixtures' env files, files on disk,
// a test ssh config whose aliases point at the sshd fixture on 127.0.0.1, and the process tree
// of a test's own sshd (to kill it whole).
#pragma once

#include <QByteArray>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QMap>
#include <QProcess>
#include <QString>
#include <QStringList>

#include <optional>

#include "tests/support/files.h"
#include "tests/support/paths.h"

namespace remotetest {

/// KEY=value pairs of a fixture's env file (`export KEY=value` lines).
inline QMap<QString, QString> fixtureEnv(const QString& fixture) {
  QMap<QString, QString> env;
  QFile file(shardscope::testing::binaryDir() + QStringLiteral("/fixtures/%1/env").arg(fixture));
  if (!file.open(QIODevice::ReadOnly)) return env;
  for (const QByteArray& raw : file.readAll().split('\n')) {
    QString line = QString::fromUtf8(raw).trimmed();
    if (line.startsWith("export ")) line = line.mid(7);
    const auto eq = line.indexOf('=');
    if (eq > 0) env.insert(line.left(eq), line.mid(eq + 1));
  }
  return env;
}

using shardscope::testing::readAll;
using shardscope::testing::writeAll;

/// An ssh config with one block per alias, all reaching the sshd fixture described by `sshd`.
inline QByteArray sshConfigFor(const QMap<QString, QString>& sshd, const QStringList& aliases) {
  QByteArray text;
  for (const QString& alias : aliases) {
    text += "Host " + alias.toUtf8() + "\n  HostName " + sshd.value("SSHD_HOST").toUtf8() +
            "\n  Port " + sshd.value("SSHD_PORT").toUtf8() + "\n  User " +
            sshd.value("SSHD_USER").toUtf8() + "\n  IdentityFile " +
            sshd.value("SSHD_KEY").toUtf8() + "\n";
  }
  return text;
}

/// Runs a program to its end; returns stdout (stderr appended when it fails).
inline QByteArray run(const QString& program, const QStringList& args, int* exitCode = nullptr) {
  QProcess process;
  process.start(program, args);
  process.waitForFinished(120000);
  if (exitCode) *exitCode = process.exitCode();
  return process.readAllStandardOutput() +
         (process.exitCode() != 0 ? process.readAllStandardError() : QByteArray());
}

/// The source folder of these tests (fake_rank.sh lives there).
inline QString testSourceDir() {
  return shardscope::testing::sourceDir() + "/tests/backend/launch";
}

/// A process as /proc/PID/stat describes it.
struct ProcInfo {
  qint64 parent = 0;
  QByteArray comm;
  qint64 startTicks = -1;  // field 22: clock ticks after boot; tells a pid's reuse apart
  char state = '?';
};

inline std::optional<ProcInfo> procInfo(qint64 pid) {
  const QByteArray stat = readAll(QString("/proc/%1/stat").arg(pid));
  const auto open = stat.indexOf('(');
  const auto close = stat.lastIndexOf(')');
  if (open < 0 || close < open) return std::nullopt;
  const QList<QByteArray> fields = stat.mid(close + 2).split(' ');  // fields[0] is field 3
  if (fields.size() < 20) return std::nullopt;
  ProcInfo info;
  info.comm = stat.mid(open + 1, close - open - 1);
  info.state = fields[0].isEmpty() ? '?' : fields[0][0];
  info.parent = fields[1].toLongLong();
  info.startTicks = fields[19].toLongLong();
  return info;
}

/// The sshd listener `listener` and every sshd below it (per-connection children and their
/// privilege-separated children), found by walking this machine's process tree from the test's
/// own listener pid, so no other test's sshd is touched.
inline QList<qint64> sshdTree(qint64 listener) {
  QMap<qint64, QList<qint64>> children;
  QDirIterator procs("/proc", QDir::Dirs | QDir::NoDotAndDotDot);
  while (procs.hasNext()) {
    bool isPid = false;
    const qint64 pid = QFileInfo(procs.next()).fileName().toLongLong(&isPid);
    if (!isPid) continue;
    if (const auto info = procInfo(pid); info && info->comm == "sshd") {
      children[info->parent].append(pid);
    }
  }
  QList<qint64> tree{listener};
  for (int i = 0; i < tree.size(); ++i) tree.append(children.value(tree[i]));
  return tree;
}

}  // namespace remotetest
