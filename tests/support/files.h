// File helpers the Qt tests share: a whole file in, a whole file out.
#pragma once

#include <QByteArray>
#include <QFile>
#include <QString>

namespace shardscope::testing {

/// The file's bytes, or an empty array when it cannot be read.
inline QByteArray readAll(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

/// Replaces the file's content with `data`; false when it cannot be written whole.
inline bool writeAll(const QString& path, const QByteArray& data) {
  QFile file(path);
  return file.open(QIODevice::WriteOnly | QIODevice::Truncate) && file.write(data) == data.size();
}

/// writeAll of `text` in UTF-8 (an experiment's TOML, a script).
inline bool writeText(const QString& path, const QString& text) {
  return writeAll(path, text.toUtf8());
}

}  // namespace shardscope::testing
