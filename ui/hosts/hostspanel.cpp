#include "ui/hosts/hostspanel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include "backend/ssh/knownhosts.h"
#include "ui/data/runlog.h"
#include "ui/hosts/hostdialogs.h"
#include "ui/hosts/hostworker.h"

Q_LOGGING_CATEGORY(lcHostsPanel, "shardscope.ui.hostspanel")

namespace shardscope::ui {

namespace {

// Background and text colour of a step's state: green, red, grey, amber, pale.
QPair<QColor, QColor> stateColours(backend::CheckStep::State state) {
  switch (state) {
    case backend::CheckStep::State::passed:
      return {QColor(0xd4, 0xed, 0xda), QColor(0x15, 0x57, 0x24)};
    case backend::CheckStep::State::failed:
      return {QColor(0xf8, 0xd7, 0xda), QColor(0x72, 0x1c, 0x24)};
    case backend::CheckStep::State::notAvailable:
      return {QColor(0xe9, 0xec, 0xef), QColor(0x38, 0x3d, 0x41)};
    case backend::CheckStep::State::running:
      return {QColor(0xff, 0xf3, 0xcd), QColor(0x85, 0x64, 0x04)};
    case backend::CheckStep::State::skipped:
      break;
  }
  return {QColor(0xf8, 0xf9, 0xfa), QColor(0x6c, 0x75, 0x7d)};
}

QString stateMark(backend::CheckStep::State state) {
  switch (state) {
    case backend::CheckStep::State::passed:
      return QStringLiteral("✔ ");
    case backend::CheckStep::State::failed:
      return QStringLiteral("✖ ");
    case backend::CheckStep::State::notAvailable:
      return QStringLiteral("– ");
    case backend::CheckStep::State::running:
      return QStringLiteral("… ");
    case backend::CheckStep::State::skipped:
      break;
  }
  return {};
}

QTableWidgetItem* cell(const QString& text, const QString& tip = {}) {
  auto* item = new QTableWidgetItem(text);
  item->setToolTip(tip.isEmpty() ? text : tip);
  return item;
}

}  // namespace

HostsPanel::HostsPanel(RunLog& runLog, QWidget* parent)
    : QWidget(parent),
      m_runLog(runLog),
      m_jobs(new HostJobs(this)),
      m_table(new QTableWidget(0, ColumnCount, this)),
      m_steps(new QTableWidget(0, 3, this)),
      m_stepsTitle(new QLabel(this)),
      m_note(new QLabel(this)),
      m_trainer(new QLineEdit(m_trainerName, this)),
      m_add(new QPushButton(tr("Add host…"), this)),
      m_check(new QPushButton(tr("Check"), this)) {
  m_table->setHorizontalHeaderLabels({tr("Alias"), tr("Address"), tr("From"), tr("Host key"),
                                      tr("Last check"), tr("GPUs"), tr("Slurm partitions")});
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setSectionResizeMode(KeyCol, QHeaderView::Stretch);
  m_table->horizontalHeader()->setSectionResizeMode(GpuCol, QHeaderView::Stretch);
  m_table->verticalHeader()->hide();
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_steps->setHorizontalHeaderLabels({tr("Step"), tr("Result"), tr("Detail")});
  m_steps->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_steps->horizontalHeader()->setStretchLastSection(true);
  m_steps->verticalHeader()->hide();
  m_steps->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_steps->setWordWrap(true);
  m_trainer->setToolTip(
      tr("The trainer program the check looks for on the host's PATH, or its "
         "full path (launch.trainer; default shardtrain)"));
  m_add->setToolTip(tr("Add an SSH host: an alias of your ssh config or a host name"));
  m_check->setToolTip(
      tr("Check the selected host step by step: resolve, connect, host key, "
         "login, trainer, GPUs, Slurm"));
  m_check->setShortcut(QKeySequence(tr("Ctrl+K")));
  m_note->setWordWrap(true);
  m_trainer->setMinimumWidth(320);
  m_stepsTitle->setText(tr("Select a host and press Check to diagnose it step by step."));

  auto* bar = new QHBoxLayout;
  bar->addWidget(m_add);
  bar->addWidget(m_check);
  bar->addSpacing(12);
  bar->addWidget(new QLabel(tr("Trainer"), this));
  bar->addWidget(m_trainer);
  bar->addWidget(m_note, 1);
  auto* stepsBox = new QWidget(this);
  auto* stepsLayout = new QVBoxLayout(stepsBox);
  stepsLayout->setContentsMargins(0, 0, 0, 0);
  stepsLayout->addWidget(m_stepsTitle);
  stepsLayout->addWidget(m_steps);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(m_table);
  splitter->addWidget(stepsBox);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(bar);
  layout->addWidget(splitter);

  connect(&runLog, &RunLog::hostsLoaded, this, &HostsPanel::onHosts);
  connect(m_add, &QPushButton::clicked, this, &HostsPanel::openAddDialog);
  connect(m_check, &QPushButton::clicked, this, [this] {
    const int r = m_table->currentRow();
    if (r >= 0) checkHost(m_table->item(r, AliasCol)->text());
  });
  connect(m_trainer, &QLineEdit::textChanged, this,
          [this](const QString& text) { m_trainerName = text.trimmed(); });
  HostWorker* worker = m_jobs->worker();
  connect(worker, &HostWorker::stepReported, this, &HostsPanel::onStep);
  connect(worker, &HostWorker::checkFinished, this, &HostsPanel::onFinished);
  connect(worker, &HostWorker::keyOffered, this, &HostsPanel::onKeyOffered);
  connect(worker, &HostWorker::saveFinished, this,
          [this](const QString& alias, bool ok, const QString& message) {
            m_note->setText(ok ? tr("%1 added.").arg(alias) : message);
            if (ok) m_runLog.refresh();
            emit hostSaved(alias, ok, message);
          });
  connect(worker, &HostWorker::trustFinished, this,
          [this](const QString& alias, bool ok, const QString& message) {
            m_note->setText(message);
            if (ok) m_runLog.refresh();
            emit keyTrusted(alias, ok, message);
            if (ok) checkHost(alias);  // go on with the steps after the host key
          });
  reloadConfig();
}

HostsPanel::~HostsPanel() = default;

const QThread* HostsPanel::jobThread() const { return m_jobs->thread(); }
AddHostDialog* HostsPanel::addDialog() const { return m_addDialog; }
FingerprintDialog* HostsPanel::fingerprintDialog() const { return m_keyDialog; }

void HostsPanel::setSshFiles(const QString& sshConfigPath, const QString& knownHostsPath) {
  m_sshConfigPath = sshConfigPath;
  m_knownHostsPath = knownHostsPath;
  reloadConfig();
}

void HostsPanel::setTrainer(const QString& trainer) { m_trainer->setText(trainer); }

void HostsPanel::reloadConfig() {
  auto config = backend::SshConfig::load(m_sshConfigPath.toStdString());
  if (!config) {
    m_note->setText(QString::fromStdString(config.message()));
    return;
  }
  m_config = std::move(*config);
  for (Row& r : m_rows) r.inConfig = false;
  for (const std::string& alias : m_config.aliases()) {
    Row& r = row(QString::fromStdString(alias));
    r.inConfig = true;
    const backend::SshHostConfig c = m_config.resolve(alias);
    r.address = QStringLiteral("%1%2:%3")
                    .arg(c.user.empty() ? QString() : QString::fromStdString(c.user) + '@',
                         QString::fromStdString(c.hostName))
                    .arg(c.port);
  }
  rebuildTable();
}

HostsPanel::Row& HostsPanel::row(const QString& alias) {
  for (Row& r : m_rows) {
    if (r.alias == alias) return r;
  }
  m_rows.append(Row{alias, {}, false, false, {}, {}, {}, {}, {}});
  return m_rows.last();
}

void HostsPanel::onHosts(const QVector<HostSummary>& hosts) {
  for (Row& r : m_rows) r.stored = false;
  for (const HostSummary& host : hosts) {
    Row& r = row(host.alias);
    r.stored = true;
    if (!r.inConfig) r.address = host.address;
    r.fingerprint = host.trusted ? host.fingerprint : QString();
  }
  rebuildTable();
  if (!m_loaded) {
    m_loaded = true;
    emit loaded();
  }
}

void HostsPanel::rebuildTable() {
  const int current = m_table->currentRow();
  m_table->setRowCount(static_cast<int>(m_rows.size()));
  for (int i = 0; i < m_rows.size(); ++i) {
    const Row& r = m_rows[i];
    const QString from = r.inConfig && r.stored ? tr("ssh config, added")
                         : r.inConfig           ? tr("ssh config")
                                                : tr("added");
    m_table->setItem(i, AliasCol, cell(r.alias));
    m_table->setItem(i, AddressCol, cell(r.address));
    m_table->setItem(i, FromCol, cell(from));
    const QString key = !r.fingerprint.isEmpty() ? tr("%1 (trusted here)").arg(r.fingerprint)
                        : !r.seenKey.isEmpty()   ? tr("%1 (in known_hosts)").arg(r.seenKey)
                                                 : tr("unknown: press Check");
    m_table->setItem(i, KeyCol, cell(key));
    m_table->setItem(i, CheckCol, cell(r.check.isEmpty() ? tr("(not checked)") : r.check));
    m_table->setItem(i, GpuCol, cell(r.gpus));
    m_table->setItem(i, SlurmCol, cell(r.slurm));
  }
  if (current >= 0 && current < m_table->rowCount()) m_table->selectRow(current);
  if (m_table->currentRow() < 0 && m_table->rowCount() > 0) m_table->selectRow(0);
  m_check->setEnabled(m_table->rowCount() > 0 && m_checking.isEmpty());
}

backend::HostCheckRequest HostsPanel::request(const QString& alias) const {
  return {alias, m_sshConfigPath, m_knownHostsPath,
          m_trainerName.isEmpty() ? QStringLiteral("shardtrain") : m_trainerName};
}

bool HostsPanel::checkHost(const QString& alias) {
  if (!m_checking.isEmpty() || alias.isEmpty()) return false;
  m_checking = alias;
  m_check->setEnabled(false);
  m_stepStates.clear();
  m_steps->setRowCount(0);
  for (const backend::CheckStep& s : backend::hostCheckSteps()) {
    backend::CheckStep waiting = s;
    waiting.detail = tr("waiting");
    showStep(waiting);
  }
  m_stepsTitle->setText(tr("Checking %1…").arg(alias));
  m_jobs->check(request(alias));
  return true;
}

backend::CheckStep HostsPanel::step(const QString& id) const { return m_stepStates.value(id); }

void HostsPanel::showStep(const backend::CheckStep& s) {
  m_stepStates.insert(s.id, s);
  int r = 0;
  while (r < m_steps->rowCount() && m_steps->item(r, 0)->data(Qt::UserRole).toString() != s.id) ++r;
  if (r == m_steps->rowCount()) m_steps->insertRow(r);
  const auto [background, foreground] = stateColours(s.state);
  auto* title = cell(s.title);
  title->setData(Qt::UserRole, s.id);
  auto* result = cell(stateMark(s.state) + backend::stateName(s.state));
  result->setData(Qt::UserRole, int(s.state));
  auto* detail = cell(s.detail);
  for (QTableWidgetItem* item : {title, result, detail}) {
    item->setBackground(background);
    item->setForeground(foreground);
  }
  m_steps->setItem(r, 0, title);
  m_steps->setItem(r, 1, result);
  m_steps->setItem(r, 2, detail);
  m_steps->resizeRowToContents(r);
}

void HostsPanel::onStep(const QString& alias, const backend::CheckStep& s) {
  if (alias == m_checking) showStep(s);
}

void HostsPanel::onFinished(const QString& alias, const backend::HostCheckOutcome& outcome) {
  if (alias != m_checking) return;
  // Steps never reached stay visible as skipped, so the user sees where the check stopped.
  for (const backend::CheckStep& s : backend::hostCheckSteps()) {
    if (m_stepStates.value(s.id).detail == tr("waiting")) {
      backend::CheckStep skipped = s;
      skipped.detail = tr("not tried: an earlier step failed");
      showStep(skipped);
    }
  }
  m_checking.clear();
  Row& r = row(alias);
  r.check =
      outcome.ok ? tr("✔ ready") : tr("✖ %1").arg(outcome.offer ? tr("host key") : tr("failed"));
  r.seenKey = outcome.hostKey;
  const QString unknown = tr("(not reached)");
  r.gpus = !outcome.ok              ? unknown
           : outcome.gpus.isEmpty() ? tr("none (no nvidia-smi)")
                                    : outcome.gpus.join(QStringLiteral("; "));
  r.slurm = !outcome.ok                    ? unknown
            : outcome.partitions.isEmpty() ? tr("none")
                                           : outcome.partitions.join(QStringLiteral("; "));
  m_stepsTitle->setText(outcome.ok ? tr("%1 is ready to run trials.").arg(alias)
                                   : tr("%1 cannot run trials yet: see the red step.").arg(alias));
  rebuildTable();
  emit checkFinished(alias, outcome.ok);
}

void HostsPanel::onKeyOffered(const backend::HostKeyOffer& offer) {
  const QString knownHosts = m_knownHostsPath.isEmpty()
                                 ? QString::fromStdString(backend::KnownHosts::defaultPath())
                                 : m_knownHostsPath;
  delete m_keyDialog;
  auto* dialog = new FingerprintDialog(offer, knownHosts, this);
  m_keyDialog = dialog;
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &QDialog::accepted, this, [this, offer] {
    m_stepsTitle->setText(tr("Trusting the key of %1…").arg(offer.alias));
    m_jobs->trust(request(offer.alias), offer.fingerprint, m_runLog.path());
  });
  connect(dialog, &QDialog::rejected, this, [this, offer] {
    backend::CheckStep s = m_stepStates.value(QStringLiteral("hostkey"));
    s.detail = tr("Key %1 rejected: known_hosts left unchanged").arg(offer.fingerprint);
    showStep(s);
  });
  dialog->open();
}

void HostsPanel::openAddDialog() {
  delete m_addDialog;
  auto* dialog = new AddHostDialog(m_config, this);
  m_addDialog = dialog;
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &QDialog::accepted, this, [this, dialog] {
    const backend::HostRecord host{
        dialog->alias(), dialog->hostName(), dialog->port(), dialog->user(), {}, std::nullopt};
    Row& r = row(host.alias);
    if (r.address.isEmpty()) {
      r.address = QStringLiteral("%1%2:%3")
                      .arg(host.user.isEmpty() ? QString() : host.user + '@', host.hostname)
                      .arg(host.port);
    }
    rebuildTable();
    if (m_runLog.path().isEmpty()) {
      m_note->setText(tr("No run log is open: %1 is kept until you quit").arg(host.alias));
      return;
    }
    m_jobs->save(host, m_runLog.path());
  });
  dialog->open();
}

}  // namespace shardscope::ui
