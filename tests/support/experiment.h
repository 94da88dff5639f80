// The tiny experiment that the launcher, CLI and dashboard tests and the live benchmark run: the
// tiny model (hidden size 16, one layer), 64 samples of 16 tokens, batch 4, no checkpoint at the
// end, `ranks` local ranks of `trainer` (the fake trainer or shardtrain).
#pragma once

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QString>

#include "tests/support/files.h"

namespace shardscope::testing {

struct TinyExperiment {
  QString name = QStringLiteral("tiny");     // [experiment] name; the file is DIR/NAME.toml
  QString trainer;                           // [launch] trainer
  int steps = 10;                            // [train] max_steps
  QByteArray train;                          // more [train] keys ("lr = -0.1\n")
  int ranks = 2;                             // [launch] nproc_per_node
  QByteArray launch = "kind = \"local\"\n";  // the rest of [launch]
  QByteArray tables;                         // tables after [launch] ([search] ...)
  bool absoluteData = false;                 // [data] train_path absolute (remote launches)
  QString fileName;                          // the TOML's file name, when not NAME.toml
};

/// Writes DIR/train.jsonl (when it does not exist) and the experiment's TOML in DIR; returns the
/// TOML's path, or "" when a file cannot be written.
inline QString writeExperiment(const QString& dir, const TinyExperiment& e) {
  const QString data = QDir(dir).filePath(QStringLiteral("train.jsonl"));
  if (!QFile::exists(data)) {
    QByteArray lines;
    for (int i = 0; i < 64; ++i) {
      QByteArray line = "{\"input_ids\": [";
      for (int t = 0; t < 16; ++t) line += (t ? ", " : "") + QByteArray::number((i + 3 * t) % 256);
      lines += line + "]}\n";
    }
    if (!writeAll(data, lines)) return {};
  }
  const QString path =
      QDir(dir).filePath(e.fileName.isEmpty() ? e.name + QStringLiteral(".toml") : e.fileName);
  const QByteArray toml = "[experiment]\nname = \"" + e.name.toUtf8() +
                          "\"\n[model]\narch = \"tiny\"\ntiny_hidden_size = 16\ntiny_layers = 1\n"
                          "[data]\ntrain_path = \"" +
                          (e.absoluteData ? data.toUtf8() : QByteArray("train.jsonl")) +
                          "\"\nseq_len = 16\n[train]\nmax_steps = " + QByteArray::number(e.steps) +
                          "\nbatch_size = 4\nckpt_at_end = false\n" + e.train +
                          "[launch]\nnproc_per_node = " + QByteArray::number(e.ranks) +
                          "\ntrainer = \"" + e.trainer.toUtf8() + "\"\n" + e.launch + e.tables;
  return writeAll(path, toml) ? path : QString();
}

}  // namespace shardscope::testing
