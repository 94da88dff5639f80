#include "ui/runs/groupdialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

#include "backend/store/rungroups.h"

namespace shardscope::ui {

GroupDialog::GroupDialog(int runCount, const QStringList& known, QWidget* parent)
    : QDialog(parent), m_name(new QComboBox(this)), m_error(new QLabel(this)) {
  setWindowTitle(runCount == 1 ? tr("Add 1 run to a group")
                               : tr("Add %1 runs to a group").arg(runCount));
  setWindowModality(Qt::WindowModal);
  m_name->setEditable(true);
  m_name->setInsertPolicy(QComboBox::NoInsert);
  m_name->addItems(known);
  m_name->setCurrentIndex(-1);
  m_name->lineEdit()->setPlaceholderText(tr("a new group's name, or pick one"));
  m_name->setMinimumWidth(280);
  m_error->setStyleSheet(QStringLiteral("color: #c62828"));
  m_error->setWordWrap(true);
  m_buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(new QLabel(tr("Group (new or existing):"), this));
  layout->addWidget(m_name);
  layout->addWidget(m_error);
  layout->addWidget(m_buttons);
  connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(m_name, &QComboBox::currentTextChanged, this, &GroupDialog::check);
  check();
}

QString GroupDialog::name() const { return m_name->currentText().trimmed(); }

void GroupDialog::check() {
  const QString text = name();
  const auto valid = backend::checkGroupName(text);
  // An empty box is not an error yet: OK waits for a name without scolding.
  m_error->setText(valid || text.isEmpty() ? QString() : QString::fromStdString(valid.message()));
  m_error->setVisible(!m_error->text().isEmpty());
  m_buttons->button(QDialogButtonBox::Ok)->setEnabled(static_cast<bool>(valid));
}

}  // namespace shardscope::ui
