// Helpers shared by the SSH and Slurm launcher tests: the fixtures' env files, files on disk,
// and a test ssh config whose aliases point at the sshd fixture on 127.0.0.1.
#pragma once

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QMap>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace remotetest {

/// KEY=value pairs of a fixture's env file (`export KEY=value` lines).
inline QMap<QString, QString> fixtureEnv(const QString& fixture) {
  QMap<QString, QString> env;
  QFile file(QStringLiteral(SHARDSCOPE_BINARY_DIR "/fixtures/%1/env").arg(fixture));
  if (!file.open(QIODevice::ReadOnly)) return env;
  for (const QByteArray& raw : file.readAll().split('\n')) {
    QString line = QString::fromUtf8(raw).trimmed();
    if (line.startsWith("export ")) line = line.mid(7);
    const auto eq = line.indexOf('=');
    if (eq > 0) env.insert(line.left(eq), line.mid(eq + 1));
  }
  return env;
}

inline QByteArray readAll(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

inline bool writeAll(const QString& path, const QByteArray& data) {
  QFile file(path);
  return file.open(QIODevice::WriteOnly | QIODevice::Truncate) && file.write(data) == data.size();
}

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
  return QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/backend/launch");
}

}  // namespace remotetest
