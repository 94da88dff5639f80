// The experiment builder's state: one spec::Experiment edited field by field (each edit one
// QUndoStack command), validated by spec after every edit (debounced), serialised to the
// exact TOML the CLI reads. The panel's widgets only talk to this class.
#pragma once

#include <QMap>
#include <QObject>
#include <QStringList>
#include <QTimer>
#include <QUndoStack>

#include "spec/experiment.h"

namespace shardscope::ui {

class BuilderController : public QObject {
  Q_OBJECT

 public:
  explicit BuilderController(QObject* parent = nullptr);

  const spec::Experiment& experiment() const { return m_exp; }
  /// A field's value as text (spec::get_field), "" for an unknown path.
  QString fieldText(const QString& path) const;
  /// Sets a field through the undo stack. A value the spec cannot read (a word in a number
  /// field) is refused: returns false and emits editRejected with the spec's message.
  bool setField(const QString& path, const QString& text);
  /// The [search] table as TOML ("" removes it), through the undo stack.
  void setSearchToml(const QString& toml);
  QString searchToml() const;

  /// Opens an experiment file (range errors are kept and shown, syntax/type errors refuse).
  /// The bundled demo's data is written first when it is missing (backend::ensureDemoData).
  bool openFile(const QString& path, QString* error);
  /// Writes tomlText() to `path`; later commands name it.
  bool saveFile(const QString& path, QString* error);
  /// Replaces the experiment with TOML text (a template); the file path becomes "". Relative
  /// paths resolve against `sourceName`'s folder; the demo's data is written there when missing.
  bool loadText(const QString& text, const QString& sourceName, QString* error);
  /// Opens the experiment run-log row `experimentId` was recorded from: the file `source` when
  /// it still reads as the recorded TOML (so Save and Launch go back to it), else the recorded
  /// TOML itself, unsaved (Save as writes it). `label` names it in messages.
  bool openRecorded(qint64 experimentId, const QString& source, const QString& toml,
                    const QString& label, QString* error);
  /// The run-log experiment shown (openRecorded), -1 after a file, a template or a new one.
  qint64 recordedExperimentId() const { return m_recordedId; }
  /// True once an edit since the last open or save is not saved (the undo stack is not clean).
  bool isModified() const { return !m_undo.isClean(); }
  /// Built-in templates (resources): "demo", "qwen2-vl-2b-lora", "full-finetune".
  static QStringList templateNames();
  /// loadText of the bundled template `name` as if it were
  /// $XDG_DATA_HOME/shardscope/templates/NAME.toml (where the demo's data then goes).
  bool loadTemplate(const QString& name, QString* error);

  QString filePath() const { return m_path; }
  /// The exact file content Save writes (spec's writer).
  QString tomlText() const;
  /// What Launch runs, as a shell command: `shardscope-cli sweep FILE` with a [search] table,
  /// else `shardscope-cli run FILE`; before a save, FILE is launchPath(), where Launch saves it.
  QString commandLine() const;
  /// Where Launch saves an experiment that has no file yet (a template, a recorded copy), since a
  /// run records the file it was launched from: $XDG_DATA_HOME/shardscope/experiments/
  /// NAME-yyyyMMdd-HHmmss.toml, the time fixed when first asked for this name. Empty once the
  /// experiment has a file.
  QString launchPath() const;
  QUndoStack* undoStack() { return &m_undo; }

  /// Validation messages by field ("" holds messages that name no field).
  QMap<QString, QStringList> issues() const { return m_issues; }
  int issueCount() const;
  /// False while any validation message stands.
  bool launchAllowed() const { return m_launchAllowed; }
  /// The Launch option "Replan on out-of-memory": a run (not a sweep: search.on_oom) whose attempt
  /// runs out of memory runs again in the next plan that fits (shardscope-cli run
  /// --replan-on-oom). Off by default.
  bool replanOnOom() const { return m_replanOnOom; }
  void setReplanOnOom(bool on);
  /// Runs validation now (normally debounced after edits).
  void validateNow();

  /// Applies a field without the undo stack (the undo command's redo/undo).
  void applyField(const QString& path, const QString& text);
  /// Applies [search] text without the undo stack.
  void applySearch(const QString& toml);

 public slots:
  /// Saves to the current file when there is one and emits launchRequested(path) if allowed.
  void requestLaunch();

 public:
  /// What an autotune of the experiment starts from: validates now and saves pending edits (as
  /// Launch does), then returns the saved file's path. Refused: "" and `why` says what to fix,
  /// naming each field with a validation message ("train.batch_size: ...") or asking for a save.
  QString prepareAutotune(QString* why);

 signals:
  /// One field changed ("" after a whole new experiment was loaded).
  void fieldChanged(const QString& path);
  void editRejected(const QString& path, const QString& message);
  void issuesChanged();
  void launchAllowedChanged(bool allowed);
  void replanOnOomChanged(bool on);
  /// The user asked to run the saved experiment file `path` (an unsaved experiment is saved
  /// first, to $XDG_DATA_HOME/shardscope/experiments).
  void launchRequested(const QString& path);
  /// Launch could not go ahead (the unsaved experiment could not be saved): why.
  void launchFailed(const QString& message);
  void filePathChanged(const QString& path);

 private:
  void replaceExperiment(spec::Experiment exp, const QString& path, qint64 recordedId = -1);
  void scheduleValidation();

  spec::Experiment m_exp;
  QString m_path;
  mutable QString m_launchPath;  // launchPath() as first asked (for m_launchName)
  mutable QString m_launchName;
  qint64 m_recordedId = -1;
  QUndoStack m_undo;
  QTimer m_validateTimer;
  QMap<QString, QStringList> m_issues;
  bool m_launchAllowed = true;
  bool m_replanOnOom = false;
};

}  // namespace shardscope::ui
