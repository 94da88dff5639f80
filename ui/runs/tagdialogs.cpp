#include "ui/runs/tagdialogs.h"

#include <QAbstractItemView>
#include <QCompleter>
#include <QDialogButtonBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QStringListModel>
#include <QVBoxLayout>

#include "backend/store/runtags.h"

namespace shardscope::ui {

TagEdits parseTagEdits(const QString& text) {
  TagEdits edits;
  static const QRegularExpression space(QStringLiteral("\\s+"));
  for (const QString& word : text.split(space, Qt::SkipEmptyParts)) {
    const bool remove = word.startsWith('-');
    const QString name = remove || word.startsWith('+') ? word.mid(1) : word;
    if (auto r = backend::checkTagName(name); !r) {
      edits.error = QString::fromStdString(r.message());
      return edits;
    }
    (remove ? edits.remove : edits.add).append(name);
  }
  return edits;
}

TagEditDialog::TagEditDialog(int runCount, const QStringList& known, QWidget* parent)
    : QDialog(parent), m_edit(new QLineEdit(this)), m_error(new QLabel(this)) {
  setWindowTitle(runCount == 1 ? tr("Tags of 1 run") : tr("Tags of %1 runs").arg(runCount));
  setObjectName(QStringLiteral("tagEditDialog"));
  auto* hint =
      new QLabel(tr("+NAME adds a tag, -NAME removes one (a bare name adds), e.g. <code>+best "
                    "-draft</code>. Letters, digits and _ - . /"),
                 this);
  hint->setWordWrap(true);
  m_edit->setPlaceholderText(tr("+best -draft"));
  m_error->setStyleSheet(QStringLiteral("color: #c62828"));
  m_error->setWordWrap(true);
  m_error->hide();
  m_completer = new QCompleter(new QStringListModel(known, this), this);
  m_completer->setCaseSensitivity(Qt::CaseInsensitive);
  m_completer->setWidget(m_edit);
  m_completer->setCompletionMode(QCompleter::PopupCompletion);
  m_buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  m_buttons->button(QDialogButtonBox::Ok)->setEnabled(false);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(hint);
  layout->addWidget(m_edit);
  layout->addWidget(m_error);
  layout->addWidget(m_buttons);
  connect(m_edit, &QLineEdit::textEdited, this, &TagEditDialog::onTextEdited);
  connect(m_edit, &QLineEdit::textChanged, this, [this](const QString& text) {
    const TagEdits edits = parseTagEdits(text);
    m_error->setText(edits.error);
    m_error->setVisible(!edits.error.isEmpty());
    m_buttons->button(QDialogButtonBox::Ok)
        ->setEnabled(edits.error.isEmpty() && (!edits.add.isEmpty() || !edits.remove.isEmpty()));
  });
  connect(m_completer, qOverload<const QString&>(&QCompleter::activated), this,
          &TagEditDialog::insertCompletion);
  connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
}

TagEdits TagEditDialog::edits() const { return parseTagEdits(m_edit->text()); }

// Completes the word being typed (after its + or -) from the known tags.
void TagEditDialog::onTextEdited(const QString& text) {
  QString word = text.section(QRegularExpression(QStringLiteral("\\s")), -1);
  if (word.startsWith('+') || word.startsWith('-')) word = word.mid(1);
  if (word.isEmpty()) {
    m_completer->popup()->hide();
    return;
  }
  m_completer->setCompletionPrefix(word);
  if (m_completer->completionCount() > 0) {
    m_completer->complete();
  } else {
    m_completer->popup()->hide();
  }
}

void TagEditDialog::insertCompletion(const QString& tag) {
  QString text = m_edit->text();
  const qsizetype start = text.lastIndexOf(QRegularExpression(QStringLiteral("\\s"))) + 1;
  const bool signed_ = start < text.size() && (text.at(start) == '+' || text.at(start) == '-');
  text.truncate(start + (signed_ ? 1 : 0));
  m_edit->setText(text + tag + QLatin1Char(' '));
}

NoteDialog::NoteDialog(const QString& runName, const QString& note, QWidget* parent)
    : QDialog(parent), m_editor(new QPlainTextEdit(this)) {
  setWindowTitle(tr("Note of %1").arg(runName));
  setObjectName(QStringLiteral("noteDialog"));
  auto* hint = new QLabel(tr("Plain text or Markdown; empty clears the note."), this);
  m_editor->setPlainText(note);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(hint);
  layout->addWidget(m_editor);
  layout->addWidget(buttons);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  resize(520, 320);
}

QString NoteDialog::note() const { return m_editor->toPlainText().trimmed(); }

}  // namespace shardscope::ui
