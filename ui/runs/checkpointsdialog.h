// CheckpointsDialog: one run's checkpoints (backend::listCheckpoints through RunFiles' thread):
// step, kind (sharded, full, adapter), attempt, size on disk, the evaluation metrics at that
// step, and where it is. Its actions act on the selected checkpoint: Resume from here (a new run
// from that sharded checkpoint: resumeFromRequested, which the app carries to
// RunLifecycle::startFromCheckpoint), Export as a Hugging Face folder or a PEFT adapter
// (RunFiles::exportCheckpoint), and Open samples at this step (samplesRequested; enabled when
// the run wrote probe answers at that step). Non-modal: the table stays usable behind it.
#pragma once

#include <QDialog>
#include <QVector>

#include "backend/lifecycle/checkpoints.h"
#include "backend/store/runrecords.h"

class QLabel;
class QPushButton;
class QTableWidget;

namespace shardscope::ui {

class RunFiles;

class CheckpointsDialog : public QDialog {
  Q_OBJECT

 public:
  /// Lists `run`'s checkpoints at once (asynchronously, through `files`).
  CheckpointsDialog(RunFiles& files, const backend::RunRecord& run, QWidget* parent = nullptr);

  QTableWidget* table() const { return m_table; }
  QLabel* status() const { return m_status; }
  QPushButton* resumeButton() const { return m_resume; }
  QPushButton* exportButton() const { return m_export; }
  QPushButton* samplesButton() const { return m_samples; }
  /// True once the list arrived (or failed).
  bool isLoaded() const { return m_loaded; }
  const QVector<backend::CheckpointInfo>& checkpoints() const { return m_checkpoints; }
  const backend::RunRecord& run() const { return m_run; }
  /// Selects the row of the checkpoint of `step` (the newest attempt's); false when none.
  bool selectStep(qint64 step);
  /// Exports the selected checkpoint into new folder `dir` (what Export's menu does once a
  /// folder is chosen).
  void exportTo(backend::ExportFormat format, const QString& dir);
  /// Lists the checkpoints again.
  void reload();

 signals:
  void loaded();
  /// Resume from here: a new run from run `runId`'s sharded checkpoint of `step`.
  void resumeFromRequested(qint64 runId, const QString& runName, qint64 step);
  /// Open samples at this step.
  void samplesRequested(qint64 runId, qint64 step);
  /// What an export did (for the status bar too).
  void message(const QString& text);

 private:
  void onListed(qint64 runId, const QVector<backend::CheckpointInfo>& checkpoints,
                const QString& error);
  void onExported(qint64 runId, qint64 step, const QString& dir, const QString& error);
  void updateButtons();
  void chooseExportFolder(backend::ExportFormat format);
  /// The selected checkpoint; nullptr when none.
  const backend::CheckpointInfo* selected() const;

  RunFiles& m_files;
  backend::RunRecord m_run;
  QVector<backend::CheckpointInfo> m_checkpoints;
  QTableWidget* m_table = nullptr;
  QLabel* m_status = nullptr;
  QPushButton* m_resume = nullptr;
  QPushButton* m_export = nullptr;
  QPushButton* m_samples = nullptr;
  bool m_loaded = false;
  bool m_exporting = false;
};

}  // namespace shardscope::ui
