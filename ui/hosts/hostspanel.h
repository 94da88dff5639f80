// HostsPanel: the SSH hosts stored in the run log (alias, address, trusted fingerprint). A
// read-only list for now: adding a host, the fingerprint dialog and the step-by-step check come
// with the hosts work of issue #7 (shardscope-cli hosts does them today).
#pragma once

#include <QWidget>

#include "ui/data/runlogtypes.h"

class QLabel;
class QTableWidget;

namespace shardscope::ui {

class RunLog;

class HostsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit HostsPanel(RunLog& runLog, QWidget* parent = nullptr);
  bool isLoaded() const { return m_loaded; }
  QTableWidget* table() const { return m_table; }

 signals:
  void loaded();

 private:
  void onHosts(const QVector<HostSummary>& hosts);

  QTableWidget* m_table = nullptr;
  QLabel* m_note = nullptr;
  bool m_loaded = false;
};

}  // namespace shardscope::ui
