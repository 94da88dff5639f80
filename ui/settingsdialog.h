// SettingsDialog: File > Settings…: what the dashboard notifies about (each kind on or off, the
// minutes that make a stall) and an optional command per kind (ui/notifier.h). It edits a
// NotifySettings; the window saves and applies it when the dialog is accepted.
#pragma once

#include <QDialog>

#include "ui/notifier.h"

class QCheckBox;
class QDoubleSpinBox;
class QLineEdit;

namespace shardscope::ui {

class SettingsDialog : public QDialog {
  Q_OBJECT

 public:
  explicit SettingsDialog(const NotifySettings& settings, QWidget* parent = nullptr);

  /// The settings as the dialog shows them now.
  NotifySettings settings() const;

 private:
  QCheckBox* m_onEnd = nullptr;
  QCheckBox* m_onStall = nullptr;
  QCheckBox* m_onSweepEnd = nullptr;
  QDoubleSpinBox* m_stallAfter = nullptr;
  QLineEdit* m_endCommand = nullptr;
  QLineEdit* m_stallCommand = nullptr;
  QLineEdit* m_sweepEndCommand = nullptr;
};

}  // namespace shardscope::ui
