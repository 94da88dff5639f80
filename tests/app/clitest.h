// Helpers of the shardscope-cli tests that use the sshd and Slurm fixtures: running the CLI, a
// fixture's env file, and a HOME whose ~/.ssh/config aliases reach the sshd fixture.
#pragma once

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

namespace clitest {

inline const QString kCli = QStringLiteral(SHARDSCOPE_BINARY_DIR "/bin/shardscope-cli");

struct Run {
  int exitCode = -1;
  QString out;
  QString err;
};

/// Runs shardscope-cli to its end (at most timeoutMs).
inline Run cli(const QStringList& args, const QProcessEnvironment& env, int timeoutMs = 120000) {
  QProcess process;
  process.setProcessEnvironment(env);
  process.start(kCli, args);
  Run result;
  if (!process.waitForStarted(10000) || !process.waitForFinished(timeoutMs)) {
    process.kill();
    process.waitForFinished();
    result.err = QStringLiteral("did not finish: ") + process.errorString();
    return result;
  }
  result.exitCode = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
  result.out = QString::fromUtf8(process.readAllStandardOutput());
  result.err = QString::fromUtf8(process.readAllStandardError());
  return result;
}

inline QJsonObject json(const QString& text) {
  return QJsonDocument::fromJson(text.toUtf8()).object();
}

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

inline bool writeFile(const QString& path, const QByteArray& data) {
  QFile file(path);
  return file.open(QIODevice::WriteOnly | QIODevice::Truncate) && file.write(data) == data.size();
}

inline QByteArray readFile(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

/// Writes HOME/.ssh/config with `alias` reaching the sshd fixture; returns false when the
/// fixture is not running.
inline bool writeSshConfig(const QString& home, const QString& alias) {
  const QMap<QString, QString> sshd = fixtureEnv("sshd");
  if (!sshd.contains("SSHD_PORT") || !QDir().mkpath(home + "/.ssh")) return false;
  const QByteArray config =
      "Host " + alias.toUtf8() + "\n  HostName " + sshd.value("SSHD_HOST").toUtf8() + "\n  Port " +
      sshd.value("SSHD_PORT").toUtf8() + "\n  User " + sshd.value("SSHD_USER").toUtf8() +
      "\n  IdentityFile " + sshd.value("SSHD_KEY").toUtf8() + "\n";
  return writeFile(home + "/.ssh/config", config);
}

/// The sshd fixture's host key fingerprint as `ssh-keygen -lf` prints it (SHA256:...).
inline QString fixtureFingerprint() {
  const QString dir = QFileInfo(fixtureEnv("sshd").value("SSHD_KEY")).absolutePath();
  QProcess keygen;
  keygen.start("ssh-keygen", {"-lf", dir + "/host_key.pub"});
  keygen.waitForFinished(30000);
  const QStringList words = QString::fromUtf8(keygen.readAllStandardOutput()).split(' ');
  return words.size() > 1 ? words[1] : QString();
}

}  // namespace clitest
