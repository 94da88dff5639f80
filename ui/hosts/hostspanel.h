// HostsPanel: the SSH hosts a run can use: the aliases of ~/.ssh/config and the hosts added to
// the run log, with their trusted key, the last check and its GPUs and Slurm partitions. "Add
// host" asks for an alias (AddHostDialog); "Check" runs the step-by-step diagnostics off the GUI
// thread (HostWorker) and fills the steps table as each answer arrives; an unknown host key
// opens the FingerprintDialog, and known_hosts is written only when the user trusts the key.
#pragma once

#include <QHash>
#include <QPointer>
#include <QWidget>

#include "backend/ssh/hostcheck.h"
#include "backend/ssh/sshconfig.h"
#include "ui/data/runlogtypes.h"

class QLabel;
class QLineEdit;
class QPushButton;
class QTableWidget;

namespace shardscope::ui {

class AddHostDialog;
class FingerprintDialog;
class HostJobs;
class RunLog;

class HostsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit HostsPanel(RunLog& runLog, QWidget* parent = nullptr);
  ~HostsPanel() override;

  /// The ssh config and known_hosts files to use (empty: ~/.ssh/config, ~/.ssh/known_hosts).
  void setSshFiles(const QString& sshConfigPath, const QString& knownHostsPath);
  /// The trainer program the check looks for on each host (default "shardtrain").
  void setTrainer(const QString& trainer);
  /// Starts the check of `alias` (the steps table shows it); false while one is running.
  bool checkHost(const QString& alias);
  bool isChecking() const { return !m_checking.isEmpty(); }
  /// The last state of step `id` of the shown check (see hostCheckSteps()).
  backend::CheckStep step(const QString& id) const;

  bool isLoaded() const { return m_loaded; }
  /// Host rows: alias, address, from, host key, last check, GPUs, Slurm.
  QTableWidget* table() const { return m_table; }
  QTableWidget* stepsTable() const { return m_steps; }
  QPushButton* addButton() const { return m_add; }
  QPushButton* checkButton() const { return m_check; }
  /// The open Add host / fingerprint dialog, if any.
  AddHostDialog* addDialog() const;
  FingerprintDialog* fingerprintDialog() const;
  /// The thread the checks run in.
  const QThread* jobThread() const;

  enum Column { AliasCol, AddressCol, FromCol, KeyCol, CheckCol, GpuCol, SlurmCol, ColumnCount };

 signals:
  void loaded();
  /// A check ended (after the last step, or at the first failed one).
  void checkFinished(const QString& alias, bool ok);
  /// A host was saved to the run log, or a key trusted (ok false: message says why).
  void hostSaved(const QString& alias, bool ok, const QString& message);
  void keyTrusted(const QString& alias, bool ok, const QString& message);

 private:
  struct Row {
    QString alias;
    QString address;
    bool inConfig = false;
    bool stored = false;
    QString fingerprint;  // trusted in the run log
    QString seenKey;      // what the last check saw known_hosts vouch for
    QString check;
    QString gpus;
    QString slurm;
  };
  void onHosts(const QVector<HostSummary>& hosts);
  void onStep(const QString& alias, const backend::CheckStep& step);
  void onFinished(const QString& alias, const backend::HostCheckOutcome& outcome);
  void onKeyOffered(const backend::HostKeyOffer& offer);
  void openAddDialog();
  void reloadConfig();
  void rebuildTable();
  void showStep(const backend::CheckStep& step);
  backend::HostCheckRequest request(const QString& alias) const;
  Row& row(const QString& alias);

  RunLog& m_runLog;
  HostJobs* m_jobs = nullptr;
  backend::SshConfig m_config;
  QString m_sshConfigPath;
  QString m_knownHostsPath;
  QString m_trainerName = QStringLiteral("shardtrain");
  QList<Row> m_rows;
  QHash<QString, backend::CheckStep> m_stepStates;
  QString m_checking;  // alias being checked; empty: none
  QTableWidget* m_table = nullptr;
  QTableWidget* m_steps = nullptr;
  QLabel* m_stepsTitle = nullptr;
  QLabel* m_note = nullptr;
  QLineEdit* m_trainer = nullptr;
  QPushButton* m_add = nullptr;
  QPushButton* m_check = nullptr;
  QPointer<AddHostDialog> m_addDialog;
  QPointer<FingerprintDialog> m_keyDialog;
  bool m_loaded = false;
};

}  // namespace shardscope::ui
