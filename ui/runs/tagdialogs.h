// The runs table's editors of tags and notes: TagEditDialog takes edits as the CLI's `tag` verb
// does ("+best -draft"; a bare name adds), completing the word being typed from the run log's
// tags; NoteDialog edits one run's note (plain text or Markdown). Both open window-modal and
// non-blocking (QDialog::open): the panel acts on accepted().
#pragma once

#include <QDialog>
#include <QStringList>

class QCompleter;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;

namespace shardscope::ui {

/// The tag edits of one line: names to add and to remove, or why the line is wrong.
struct TagEdits {
  QStringList add;
  QStringList remove;
  QString error;  ///< "" when every name is valid
};
/// Reads "+best -draft lr/1e-4" (whitespace between edits).
TagEdits parseTagEdits(const QString& text);

class TagEditDialog : public QDialog {
  Q_OBJECT

 public:
  /// `runCount`: how many runs the edits go to; `known`: the tags to complete from.
  TagEditDialog(int runCount, const QStringList& known, QWidget* parent = nullptr);

  QLineEdit* edit() const { return m_edit; }
  QLabel* errorLabel() const { return m_error; }
  /// The edits as typed (valid once accepted).
  TagEdits edits() const;

 private:
  void onTextEdited(const QString& text);
  void insertCompletion(const QString& tag);

  QLineEdit* m_edit = nullptr;
  QLabel* m_error = nullptr;
  QCompleter* m_completer = nullptr;
  QDialogButtonBox* m_buttons = nullptr;
};

class NoteDialog : public QDialog {
  Q_OBJECT

 public:
  NoteDialog(const QString& runName, const QString& note, QWidget* parent = nullptr);
  QPlainTextEdit* editor() const { return m_editor; }
  QString note() const;

 private:
  QPlainTextEdit* m_editor = nullptr;
};

}  // namespace shardscope::ui
