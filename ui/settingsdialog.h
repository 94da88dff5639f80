// SettingsDialog: File > Settings…: what the dashboard notifies about (each kind on or off, the
// minutes that make a stall) and an optional command per kind (ui/notifier.h). It edits a
// NotifySettings; the window saves and applies it when the dialog is accepted. Below, the price
// per device-hour of each host ("local" included) that the runs table's Cost column and
// `shardscope-cli ls` multiply device-hours by (backend/store/runusage.h).
#pragma once

#include <QDialog>

#include "backend/store/runusage.h"
#include "ui/notifier.h"

class QCheckBox;
class QDoubleSpinBox;
class QLineEdit;
class QTableWidget;

namespace shardscope::ui {

class SettingsDialog : public QDialog {
  Q_OBJECT

 public:
  /// `prices`: the saved prices; `hosts`: hosts to offer a price for ("local" and the runs').
  explicit SettingsDialog(const NotifySettings& settings, const backend::HostPrices& prices = {},
                          const QStringList& hosts = {}, QWidget* parent = nullptr);

  /// The settings as the dialog shows them now.
  NotifySettings settings() const;
  /// The prices as the dialog shows them now (hosts left empty or at 0 have none).
  backend::HostPrices prices() const;
  QTableWidget* pricesTable() const { return m_prices; }

 private:
  QCheckBox* m_onEnd = nullptr;
  QCheckBox* m_onStall = nullptr;
  QCheckBox* m_onSweepEnd = nullptr;
  QDoubleSpinBox* m_stallAfter = nullptr;
  QLineEdit* m_endCommand = nullptr;
  QLineEdit* m_stallCommand = nullptr;
  QLineEdit* m_sweepEndCommand = nullptr;
  QTableWidget* m_prices = nullptr;
};

}  // namespace shardscope::ui
