#include "ui/settingsdialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QVBoxLayout>

namespace shardscope::ui {

SettingsDialog::SettingsDialog(const NotifySettings& settings, QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Settings"));
  setObjectName(QStringLiteral("settingsDialog"));
  auto* kinds = new QGroupBox(tr("Desktop notifications"), this);
  auto* kindsForm = new QFormLayout(kinds);
  m_onEnd = new QCheckBox(tr("When a run ends (complete, failed, oom, stopped)"), kinds);
  m_onEnd->setObjectName(QStringLiteral("notifyOnEnd"));
  m_onEnd->setChecked(settings.onEnd);
  m_onStall = new QCheckBox(tr("When a running run stalls"), kinds);
  m_onStall->setObjectName(QStringLiteral("notifyOnStall"));
  m_onStall->setChecked(settings.onStall);
  m_stallAfter = new QDoubleSpinBox(kinds);
  m_stallAfter->setObjectName(QStringLiteral("notifyStallAfter"));
  m_stallAfter->setRange(0.1, 24 * 60);
  m_stallAfter->setDecimals(1);
  m_stallAfter->setSuffix(tr(" min"));
  m_stallAfter->setValue(settings.stallAfterMin);
  m_stallAfter->setToolTip(tr("Minutes without an event from a run whose ranks live"));
  m_onSweepEnd = new QCheckBox(tr("When a sweep ends (with its best trial)"), kinds);
  m_onSweepEnd->setObjectName(QStringLiteral("notifyOnSweepEnd"));
  m_onSweepEnd->setChecked(settings.onSweepEnd);
  kindsForm->addRow(m_onEnd);
  kindsForm->addRow(m_onStall);
  kindsForm->addRow(tr("A stall is no event for"), m_stallAfter);
  kindsForm->addRow(m_onSweepEnd);

  auto* commands = new QGroupBox(tr("Commands (optional)"), this);
  auto* commandsForm = new QFormLayout(commands);
  auto* help = new QLabel(
      tr("Run by /bin/sh -c in your home folder when the dashboard tells of the event; the "
         "facts are in SHARDSCOPE_RUN_NAME, SHARDSCOPE_RUN_STATUS, SHARDSCOPE_BEST_RUN and the "
         "other SHARDSCOPE_* variables (docs/config.md, [notify]). A failure is logged."),
      commands);
  help->setWordWrap(true);
  commandsForm->addRow(help);
  const auto line = [&](const char* name, const QString& text) {
    auto* edit = new QLineEdit(text, commands);
    edit->setObjectName(QLatin1String(name));
    edit->setPlaceholderText(tr("e.g. notify-send \"$SHARDSCOPE_RUN_NAME\""));
    edit->setClearButtonEnabled(true);
    return edit;
  };
  m_endCommand = line("notifyEndCommand", settings.endCommand);
  m_stallCommand = line("notifyStallCommand", settings.stallCommand);
  m_sweepEndCommand = line("notifySweepEndCommand", settings.sweepEndCommand);
  commandsForm->addRow(tr("Run ended"), m_endCommand);
  commandsForm->addRow(tr("Run stalled"), m_stallCommand);
  commandsForm->addRow(tr("Sweep ended"), m_sweepEndCommand);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(kinds);
  layout->addWidget(commands);
  layout->addWidget(buttons);
  resize(560, sizeHint().height());
}

NotifySettings SettingsDialog::settings() const {
  NotifySettings out;
  out.onEnd = m_onEnd->isChecked();
  out.onStall = m_onStall->isChecked();
  out.onSweepEnd = m_onSweepEnd->isChecked();
  out.stallAfterMin = m_stallAfter->value();
  out.endCommand = m_endCommand->text().trimmed();
  out.stallCommand = m_stallCommand->text().trimmed();
  out.sweepEndCommand = m_sweepEndCommand->text().trimmed();
  return out;
}

}  // namespace shardscope::ui
