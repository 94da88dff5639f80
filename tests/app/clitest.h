// Helpers of the shardscope-cli tests: running the CLI, and (over the launcher tests' fixture
// helpers in remotetest.h) a HOME whose ~/.ssh/config aliases reach the sshd fixture.
#pragma once

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QProcess>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QString>
#include <QStringList>

#include "tests/backend/launch/remotetest.h"
#include "tests/support/paths.h"

namespace clitest {

using remotetest::fixtureEnv;
using remotetest::readAll;
using remotetest::writeAll;

inline const QString kCli = shardscope::testing::binaryDir() + "/bin/shardscope-cli";

struct Run {
  int exitCode = -1;
  QString out;
  QString err;
};

/// Runs shardscope-cli to its end (at most timeoutMs).
inline Run cli(const QStringList& args,
               const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment(),
               int timeoutMs = 120000) {
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

/// An object's keys, sorted (to compare with documentedFields()).
inline QStringList sortedKeys(const QJsonObject& o) {
  QStringList k = o.keys();
  k.sort();
  return k;
}

/// The field names of the table after `<!-- json-fields: SECTION -->` in docs/cli.md, sorted;
/// empty when the file or the section is missing.
inline QStringList documentedFields(const QString& section) {
  QFile file(shardscope::testing::sourceDir() + "/docs/cli.md");
  if (!file.open(QIODevice::ReadOnly)) return {};
  const QString text = QString::fromUtf8(file.readAll());
  const qsizetype at = text.indexOf("<!-- json-fields: " + section + " -->");
  if (at < 0) return {};
  QStringList fields;
  const QStringList lines = text.mid(at).split('\n');
  static const QRegularExpression row(QStringLiteral("^\\| `([a-z_]+)` \\|"));
  for (qsizetype i = 1; i < lines.size() && !lines[i].trimmed().isEmpty(); ++i) {
    const auto m = row.match(lines[i]);
    if (m.hasMatch()) fields << m.captured(1);
  }
  fields.sort();
  return fields;
}

/// Writes HOME/.ssh/config with `alias` reaching the sshd fixture; returns false when the
/// fixture is not running.
inline bool writeSshConfig(const QString& home, const QString& alias) {
  const QMap<QString, QString> sshd = fixtureEnv("sshd");
  if (!sshd.contains("SSHD_PORT") || !QDir().mkpath(home + "/.ssh")) return false;
  return writeAll(home + "/.ssh/config", remotetest::sshConfigFor(sshd, {alias}));
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
