// Importing another tool's training configuration as an experiment: an accelerate config (YAML
// or JSON, as `accelerate config` writes it), Hugging Face TrainingArguments (the JSON the
// Trainer saves, or a command line) and a DeepSpeed JSON config. Each key of the file is
// reported: mapped to a field of the experiment schema (and the value it set), ignored because
// it has no meaning here (why), or unsupported (what to do). An unknown key, a value of the wrong
// type or two keys that ask for different values of one field are errors: the import then has no
// experiment, never a silently different one. docs/import.md has the mapping tables.
#pragma once

#include <QJsonObject>
#include <QString>
#include <QVector>

#include <optional>

#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::backend {

/// The formats `import` reads.
enum class ImportKind { accelerate, hfTrainer, deepspeed };
/// "accelerate", "hf-trainer", "deepspeed".
QString importKindName(ImportKind kind);
/// The kind a name on the command line or in the GUI gives; an error lists the names.
Result<ImportKind> importKindFromName(const QString& name);
/// Every kind, in the order the GUI offers them.
QVector<ImportKind> importKinds();

/// What became of one key of the imported file.
enum class ImportOutcome { mapped, ignored, unsupported, error };
QString importOutcomeName(ImportOutcome outcome);

struct ImportEntry {
  QString key;    // dotted path in the file: "fsdp_config.fsdp_offload_params", "--bf16"
  QString value;  // the file's value as text (strings unquoted, tables as compact JSON)
  ImportOutcome outcome = ImportOutcome::mapped;
  QString fields;  // mapped: `shard.offload_params = true, shard.offload_optimizer = true`
  QString detail;  // mapped: a note or ""; ignored: why; unsupported: what to do; error: why
};

/// The outcome of one import: the experiment when no key is an error, and every key's entry.
struct ImportResult {
  QString file;  // the file as given
  ImportKind kind = ImportKind::accelerate;
  QVector<ImportEntry> entries;  // one per key of the file, in file order where known
  /// Validation messages of the written experiment (the fields an import cannot know, e.g.
  /// data.train_path); the builder shows them on the fields.
  QStringList notes;
  std::optional<spec::Experiment> experiment;  // absent when an entry is an error

  bool ok() const { return experiment.has_value(); }
  int count(ImportOutcome outcome) const;
  /// The report as text: a summary line, then one line per key, errors first.
  QString reportText() const;
  /// The report as JSON: file, kind, ok, counts, entries [{key, value, outcome, fields, detail}],
  /// notes.
  QJsonObject reportJson() const;
};

/// Reads `path` as `kind` and maps it. An unreadable or unparsable file is an Error (naming the
/// file and the line); keys that cannot be mapped are entries of the result.
Result<ImportResult> importConfig(ImportKind kind, const QString& path);
/// Same from text already read; `fileName` is used in messages and for the experiment's name.
Result<ImportResult> importConfigText(ImportKind kind, const QByteArray& text,
                                      const QString& fileName);

}  // namespace shardscope::backend
