// RunsPanel's disk and clean-up part: the Disk column and total fed by RunFiles' background
// measurements, Delete (confirmed with the bytes it frees), Archive / Unarchive, "Show archived",
// and "Keep the best N checkpoints" of the current run's sweep.
#include <QCheckBox>
#include <QInputDialog>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QTimer>

#include <algorithm>

#include "backend/lifecycle/runcleanup.h"
#include "ui/data/runfiles.h"
#include "ui/data/runlog.h"
#include "ui/runs/checkpointsdialog.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"

namespace shardscope::ui {

namespace {

// How often running runs (whose folders grow) are measured again, ms.
constexpr int kRemeasureRunningMs = 30000;

// What a measurement depends on: a run measured as this need not be measured again.
QString measureKey(const backend::RunRecord& run) {
  return QString::fromLatin1(spec::to_string(run.status).data()) + '|' + run.runDir + '|' +
         QString::number(run.attempt);
}

}  // namespace

void RunsPanel::setupFileActions() {
  m_files = new RunFiles(this);
  m_delete = new QAction(tr("Delete..."), this);
  m_delete->setToolTip(
      tr("Delete the selected runs: their folders (here or over SSH) and their "
         "rows in the run log. A running run cannot be deleted."));
  m_archive = new QAction(tr("Archive"), this);
  m_archive->setToolTip(tr("Hide the selected runs (kept on disk); Show archived lists them"));
  m_unarchive = new QAction(tr("Unarchive"), this);
  m_keepBest = new QAction(tr("Keep the best N checkpoints of this sweep..."), this);
  m_keepBest->setToolTip(
      tr("Remove the checkpoints of every trial of the current run's sweep "
         "but the best N by its objective"));
  m_showArchived = new QCheckBox(tr("Show archived"), this);
  m_showArchived->setObjectName(QStringLiteral("showArchived"));
  m_diskTotal = new QLabel(this);
  m_diskTotal->setObjectName(QStringLiteral("diskTotal"));
  m_diskTotal->setToolTip(tr("Disk use of the listed runs' folders, measured in the background"));

  connect(m_delete, &QAction::triggered, this, &RunsPanel::confirmDelete);
  connect(m_archive, &QAction::triggered, this,
          [this] { m_files->setArchived(selectedRunIds(), true); });
  connect(m_unarchive, &QAction::triggered, this,
          [this] { m_files->setArchived(selectedRunIds(), false); });
  connect(m_keepBest, &QAction::triggered, this, &RunsPanel::askKeepBest);
  m_checkpoints = new QAction(tr("Checkpoints..."), this);
  m_checkpoints->setObjectName(QStringLiteral("checkpointsAction"));
  m_checkpoints->setToolTip(
      tr("The current run's checkpoints: step, kind, size, evaluation; resume from one, export "
         "one, or open its samples"));
  connect(m_checkpoints, &QAction::triggered, this, [this] { openCheckpoints(currentRunId()); });
  connect(m_files, &RunFiles::measured, this, &RunsPanel::onMeasured);
  connect(m_files, &RunFiles::done, this, [this](bool, const QString& text) {
    emit message(text);
    m_runLog.refresh();
  });
  auto* timer = new QTimer(this);
  connect(timer, &QTimer::timeout, this, [this] {
    QVector<backend::RunRecord> running;
    for (int row = 0; row < m_model->rowCount(); ++row) {
      const RunSummary* run = m_model->runAt(row);
      if (run != nullptr && run->record.status == spec::RunStatus::running)
        running.append(run->record);
    }
    if (!running.isEmpty()) m_files->measure(running);
  });
  timer->start(kRemeasureRunningMs);
}

CheckpointsDialog* RunsPanel::checkpointsDialog() const { return m_checkpointsDialog; }

CheckpointsDialog* RunsPanel::openCheckpoints(qint64 runId) {
  const RunSummary* run = m_model->runById(runId);
  if (run == nullptr) return nullptr;
  m_files->setPath(m_runLog.path());
  if (m_checkpointsDialog) m_checkpointsDialog->close();
  auto* dialog = new CheckpointsDialog(*m_files, run->record, this);
  connect(dialog, &CheckpointsDialog::resumeFromRequested, this,
          &RunsPanel::resumeFromCheckpointRequested);
  connect(dialog, &CheckpointsDialog::samplesRequested, this, &RunsPanel::samplesAtStepRequested);
  connect(dialog, &CheckpointsDialog::message, this, &RunsPanel::message);
  m_checkpointsDialog = dialog;
  dialog->show();
  return dialog;
}

void RunsPanel::measureChanged(const QVector<RunSummary>& runs) {
  m_files->setPath(m_runLog.path());
  QVector<backend::RunRecord> changed;
  for (const auto& run : runs) {
    const QString key = measureKey(run.record);
    if (m_measuredAs.value(run.record.id) == key) continue;
    m_measuredAs.insert(run.record.id, key);
    changed.append(run.record);
  }
  if (!changed.isEmpty()) m_files->measure(changed);
  onMeasured(-1, 0, 0, {});  // the total of the runs listed now
}

void RunsPanel::onMeasured(qint64 runId, qint64 bytes, qint64 checkpointBytes,
                           const QString& error) {
  if (runId >= 0 && bytes >= 0) m_model->setDiskUse(runId, bytes, checkpointBytes);
  if (runId >= 0 && !error.isEmpty()) m_measuredAs.remove(runId);  // try again next time
  m_diskTotal->setText(tr("Runs on disk: %1").arg(backend::humanBytes(m_model->totalDiskBytes())));
}

QMessageBox* RunsPanel::deleteDialog() const { return m_deleteDialog.data(); }

void RunsPanel::confirmDelete() {
  QVector<backend::RunRecord> runs;
  QStringList names;
  qint64 bytes = 0;
  bool allMeasured = true;
  for (const qint64 id : selectedRunIds()) {
    const RunSummary* run = m_model->runById(id);
    if (run == nullptr || run->record.status == spec::RunStatus::running) continue;
    runs.append(run->record);
    names << run->record.name;
    const qint64 b = m_model->diskBytes(id);
    allMeasured = allMeasured && b >= 0;
    bytes += std::max<qint64>(b, 0);
  }
  if (runs.isEmpty()) return;
  const QString what = names.size() <= 3 ? names.join(QStringLiteral(", "))
                                         : tr("%n runs", nullptr, static_cast<int>(names.size()));
  QString text =
      tr("Delete %1? This frees %2 (%3 bytes)%4: the run folders (here or over SSH) "
         "and their rows in the run log. It cannot be undone.")
          .arg(what, backend::humanBytes(bytes))
          .arg(bytes)
          .arg(allMeasured ? QString() : tr(" or more (not every size is measured yet)"));
  auto* box = new QMessageBox(QMessageBox::Warning, tr("Delete runs"), text,
                              QMessageBox::Yes | QMessageBox::Cancel, this);
  box->setObjectName(QStringLiteral("deleteRunsDialog"));
  box->button(QMessageBox::Yes)->setText(tr("Delete"));
  box->setDefaultButton(QMessageBox::Cancel);
  box->setAttribute(Qt::WA_DeleteOnClose);
  m_deleteDialog = box;
  connect(box, &QMessageBox::finished, this, [this, box, runs] {
    if (box->clickedButton() == box->button(QMessageBox::Yes)) m_files->remove(runs);
  });
  box->open();
}

void RunsPanel::askKeepBest() {
  const RunSummary* run = m_model->runById(currentRunId());
  if (run == nullptr || !run->record.studyId) return;
  const qint64 studyId = *run->record.studyId;
  auto* dialog = new QInputDialog(this);
  dialog->setObjectName(QStringLiteral("keepBestDialog"));
  dialog->setWindowTitle(tr("Keep the best N checkpoints"));
  dialog->setLabelText(
      tr("Keep the checkpoints of the best N trials of this sweep (by its "
         "objective) and remove every other trial's:"));
  dialog->setInputMode(QInputDialog::IntInput);
  dialog->setIntRange(0, 100000);
  dialog->setIntValue(3);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &QInputDialog::intValueSelected, this,
          [this, studyId](int keep) { m_files->keepBestCheckpoints(studyId, keep); });
  dialog->open();
}

void RunsPanel::updateFileActions(const QList<qint64>& ids) {
  bool anyRunning = false;
  bool anyArchived = false;
  bool anyShown = false;
  for (const qint64 id : ids) {
    const RunSummary* run = m_model->runById(id);
    if (run == nullptr) continue;
    anyRunning = anyRunning || run->record.status == spec::RunStatus::running;
    anyArchived = anyArchived || run->record.archivedAt.has_value();
    anyShown = anyShown || !run->record.archivedAt.has_value();
  }
  m_delete->setEnabled(!ids.isEmpty() && !anyRunning);
  m_archive->setEnabled(anyShown);
  m_unarchive->setEnabled(anyArchived);
  const RunSummary* current = m_model->runById(currentRunId());
  m_keepBest->setEnabled(current != nullptr && current->record.studyId.has_value());
}

}  // namespace shardscope::ui
