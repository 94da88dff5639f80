#include "ui/settingsdialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QTableWidget>
#include <QVBoxLayout>

namespace shardscope::ui {

SettingsDialog::SettingsDialog(const NotifySettings& settings, const backend::HostPrices& prices,
                               const QStringList& hosts, QWidget* parent)
    : QDialog(parent) {
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

  auto* cost = new QGroupBox(tr("Price per device-hour"), this);
  auto* costLayout = new QVBoxLayout(cost);
  auto* costHelp = new QLabel(
      tr("Per host (\"local\" for runs on this machine's local launcher): the runs table's "
         "Cost is a run's GPU-hours (CPU-hours for CPU runs) times its host's price. Leave it "
         "empty for no cost."),
      cost);
  costHelp->setWordWrap(true);
  m_prices = new QTableWidget(cost);
  m_prices->setObjectName(QStringLiteral("hostPrices"));
  m_prices->setColumnCount(2);
  m_prices->setHorizontalHeaderLabels({tr("Host"), tr("Price per hour")});
  m_prices->verticalHeader()->hide();
  m_prices->horizontalHeader()->setStretchLastSection(true);
  QStringList rows = hosts;
  rows.prepend(QStringLiteral("local"));
  for (auto it = prices.begin(); it != prices.end(); ++it) rows << it.key();
  rows.removeAll(QString());
  rows.removeDuplicates();
  m_prices->setRowCount(int(rows.size()));
  for (int row = 0; row < rows.size(); ++row) {
    auto* host = new QTableWidgetItem(rows[row]);
    host->setFlags(Qt::ItemIsEnabled);
    m_prices->setItem(row, 0, host);
    const auto it = prices.find(rows[row]);
    m_prices->setItem(
        row, 1, new QTableWidgetItem(it == prices.end() ? QString() : QString::number(it.value())));
  }
  m_prices->setMaximumHeight(140);
  costLayout->addWidget(costHelp);
  costLayout->addWidget(m_prices);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(kinds);
  layout->addWidget(commands);
  layout->addWidget(cost);
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

backend::HostPrices SettingsDialog::prices() const {
  backend::HostPrices out;
  for (int row = 0; row < m_prices->rowCount(); ++row) {
    const QTableWidgetItem* host = m_prices->item(row, 0);
    const QTableWidgetItem* price = m_prices->item(row, 1);
    if (host == nullptr || price == nullptr) continue;
    bool ok = false;
    const double value = price->text().trimmed().toDouble(&ok);
    if (ok && value > 0) out.insert(host->text(), value);
  }
  return out;
}

}  // namespace shardscope::ui
