#include "ui/hosts/hostspanel.h"

#include <QHeaderView>
#include <QLabel>
#include <QLoggingCategory>
#include <QTableWidget>
#include <QVBoxLayout>

#include "ui/data/runlog.h"

Q_LOGGING_CATEGORY(lcHostsPanel, "shardscope.ui.hostspanel")

namespace shardscope::ui {

HostsPanel::HostsPanel(RunLog& runLog, QWidget* parent)
    : QWidget(parent), m_table(new QTableWidget(0, 4, this)), m_note(new QLabel(this)) {
  m_table->setHorizontalHeaderLabels({tr("Alias"), tr("Address"), tr("Host key"), tr("Trusted")});
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setSectionResizeMode(2, QHeaderView::Stretch);
  m_table->verticalHeader()->hide();
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_note->setWordWrap(true);
  m_note->setText(
      tr("SSH hosts known to this run log. Add and check hosts with "
         "<code>shardscope-cli hosts add ALIAS</code> and <code>hosts check</code>; "
         "the add/check dialogs of this panel are not built yet."));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(m_note);
  layout->addWidget(m_table);
  connect(&runLog, &RunLog::hostsLoaded, this, &HostsPanel::onHosts);
}

void HostsPanel::onHosts(const QVector<HostSummary>& hosts) {
  m_table->setRowCount(static_cast<int>(hosts.size()));
  for (int row = 0; row < hosts.size(); ++row) {
    const HostSummary& host = hosts[row];
    m_table->setItem(row, 0, new QTableWidgetItem(host.alias));
    m_table->setItem(row, 1, new QTableWidgetItem(host.address));
    m_table->setItem(
        row, 2,
        new QTableWidgetItem(host.fingerprint.isEmpty() ? tr("(not checked)") : host.fingerprint));
    m_table->setItem(row, 3, new QTableWidgetItem(host.trusted ? tr("yes") : tr("no")));
  }
  if (!m_loaded) {
    m_loaded = true;
    emit loaded();
  }
}

}  // namespace shardscope::ui
