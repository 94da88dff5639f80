// The Hosts panel's dialogs: AddHostDialog (an ~/.ssh/config alias or a new host, with what the
// config resolves it to) and FingerprintDialog (the key a host offers, trusted only on accept).
#pragma once

#include <QDialog>

#include "backend/ssh/hostcheck.h"
#include "backend/ssh/sshconfig.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace shardscope::ui {

/// Asks for a host: pick an alias of ~/.ssh/config (fields show what it resolves to) or type a
/// host name with user and port.
class AddHostDialog : public QDialog {
  Q_OBJECT

 public:
  AddHostDialog(const backend::SshConfig& config, QWidget* parent = nullptr);
  QComboBox* aliasBox() const { return m_alias; }
  QString alias() const;
  QString hostName() const;
  QString user() const;
  int port() const;

 private:
  void onAlias();

  backend::SshConfig m_config;
  QComboBox* m_alias = nullptr;
  QLineEdit* m_hostName = nullptr;
  QLineEdit* m_user = nullptr;
  QSpinBox* m_port = nullptr;
  QLabel* m_note = nullptr;
  QPushButton* m_ok = nullptr;
};

/// Shows the key type and SHA256 fingerprint a host offered. Accept (the "Trust this key" button)
/// means the user compared it with the host's own (`ssh-keygen -lf` on the host); a changed key
/// offers no trust button at all.
class FingerprintDialog : public QDialog {
  Q_OBJECT

 public:
  FingerprintDialog(const backend::HostKeyOffer& offer, const QString& knownHostsPath,
                    QWidget* parent = nullptr);
  const backend::HostKeyOffer& offer() const { return m_offer; }
  QPushButton* trustButton() const { return m_trust; }
  QPushButton* rejectButton() const { return m_reject; }

 private:
  backend::HostKeyOffer m_offer;
  QPushButton* m_trust = nullptr;
  QPushButton* m_reject = nullptr;
};

}  // namespace shardscope::ui
