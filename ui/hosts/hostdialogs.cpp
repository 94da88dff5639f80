#include "ui/hosts/hostdialogs.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFont>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

Q_LOGGING_CATEGORY(lcHostDialogs, "shardscope.ui.hostdialogs")

namespace shardscope::ui {

AddHostDialog::AddHostDialog(const backend::SshConfig& config, QWidget* parent)
    : QDialog(parent),
      m_config(config),
      m_alias(new QComboBox(this)),
      m_hostName(new QLineEdit(this)),
      m_user(new QLineEdit(this)),
      m_port(new QSpinBox(this)),
      m_note(new QLabel(this)) {
  setWindowTitle(tr("Add SSH host"));
  m_alias->setEditable(true);
  for (const std::string& alias : config.aliases()) m_alias->addItem(QString::fromStdString(alias));
  m_alias->setCurrentIndex(-1);
  m_alias->setToolTip(
      tr("An alias of %1, or a host name")
          .arg(QString::fromStdString(config.path().empty() ? backend::SshConfig::defaultPath()
                                                            : config.path())));
  m_port->setRange(1, 65535);
  m_port->setValue(22);
  m_port->setToolTip(tr("TCP port of the SSH server (default 22)"));
  m_user->setPlaceholderText(tr("(your local user name)"));
  m_note->setWordWrap(true);
  auto* form = new QFormLayout;
  form->addRow(tr("Alias or host"), m_alias);
  form->addRow(tr("Host name"), m_hostName);
  form->addRow(tr("User"), m_user);
  form->addRow(tr("Port"), m_port);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  m_ok = buttons->button(QDialogButtonBox::Ok);
  m_ok->setText(tr("Add host"));
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(m_note);
  layout->addWidget(buttons);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(m_alias, &QComboBox::currentTextChanged, this, &AddHostDialog::onAlias);
  onAlias();
}

// Shows what ~/.ssh/config makes of the alias; an alias the config knows keeps its settings.
void AddHostDialog::onAlias() {
  const QString alias = this->alias();
  m_ok->setEnabled(!alias.isEmpty());
  if (alias.isEmpty()) {
    m_note->setText(tr("Pick an alias from your ssh config or type a host name."));
    return;
  }
  const backend::SshHostConfig c = m_config.resolve(alias.toStdString());
  const bool known = m_alias->findText(alias) >= 0;
  m_hostName->setText(QString::fromStdString(c.hostName));
  m_user->setText(QString::fromStdString(c.user));
  m_port->setValue(c.port);
  for (QWidget* w : {static_cast<QWidget*>(m_hostName), static_cast<QWidget*>(m_user),
                     static_cast<QWidget*>(m_port)})
    w->setEnabled(!known);
  m_note->setText(known ? tr("From your ssh config: edit it there to change these.")
                        : tr("Not in your ssh config: the fields below are used as typed."));
}

QString AddHostDialog::alias() const { return m_alias->currentText().trimmed(); }
QString AddHostDialog::hostName() const { return m_hostName->text().trimmed(); }
QString AddHostDialog::user() const { return m_user->text().trimmed(); }
int AddHostDialog::port() const { return m_port->value(); }

FingerprintDialog::FingerprintDialog(const backend::HostKeyOffer& offer,
                                     const QString& knownHostsPath, QWidget* parent)
    : QDialog(parent), m_offer(offer) {
  setWindowTitle(offer.changed ? tr("Host key CHANGED: %1").arg(offer.alias)
                               : tr("Unknown host key: %1").arg(offer.alias));
  auto* intro = new QLabel(this);
  intro->setWordWrap(true);
  intro->setText(
      offer.changed
          ? tr("<b>%1 (%2) offers a different key than the one you trusted.</b> Someone may be "
               "intercepting the connection, or the host was reinstalled. Shardscope will not "
               "connect until the old entry is removed from %3 by hand.")
                .arg(offer.alias.toHtmlEscaped(), offer.address, knownHostsPath.toHtmlEscaped())
          : tr("<b>%1 (%2) is not in %3 yet.</b> Trust its key only if the fingerprint below "
               "equals the one the host itself prints: run <code>ssh-keygen -lf "
               "/etc/ssh/ssh_host_ed25519_key.pub</code> there, or ask its administrator.")
                .arg(offer.alias.toHtmlEscaped(), offer.address, knownHostsPath.toHtmlEscaped()));
  auto* type = new QLabel(offer.keyType, this);
  type->setObjectName(QStringLiteral("keyType"));
  auto* fingerprint = new QLabel(offer.fingerprint, this);
  fingerprint->setObjectName(QStringLiteral("fingerprint"));
  fingerprint->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont mono(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::Monospace);
  fingerprint->setFont(mono);
  auto* form = new QFormLayout;
  form->addRow(tr("Key type"), type);
  form->addRow(tr("Fingerprint"), fingerprint);
  auto* buttons = new QDialogButtonBox(this);
  m_reject =
      buttons->addButton(offer.changed ? tr("Close") : tr("Reject"), QDialogButtonBox::RejectRole);
  if (!offer.changed) {
    m_trust = buttons->addButton(tr("Trust this key"), QDialogButtonBox::AcceptRole);
    m_trust->setToolTip(tr("Adds the key to %1 and checks the host again").arg(knownHostsPath));
  }
  m_reject->setDefault(true);  // Enter must not trust a key
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(intro);
  layout->addLayout(form);
  layout->addWidget(buttons);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
}

}  // namespace shardscope::ui
