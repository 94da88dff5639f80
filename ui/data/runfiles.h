// RunFiles: the GUI thread's handle on runs' files (backend/lifecycle/runcleanup.h). A worker
// thread of its own measures each run's disk use (a local folder walk, or over SSH) and deletes,
// archives and clears checkpoints; the GUI thread only posts requests and gets signals, so a slow
// host never blocks the window, nor the run log's reads (RunLog has its own worker).
#pragma once

#include <QList>
#include <QObject>
#include <QThread>
#include <QVector>

#include "backend/lifecycle/checkpoints.h"
#include "backend/store/runrecords.h"

namespace shardscope::ui {

class RunFilesWorker;

class RunFiles : public QObject {
  Q_OBJECT

 public:
  explicit RunFiles(QObject* parent = nullptr);
  ~RunFiles() override;

  /// The run log the writes go to (the RunLog's path).
  void setPath(const QString& path);
  /// Measures these runs (queued behind earlier requests; a run already queued is not queued
  /// twice); measured() delivers each.
  void measure(const QVector<backend::RunRecord>& runs);
  /// Deletes these runs (their reachable folders, then their rows); done() says how it went.
  void remove(const QVector<backend::RunRecord>& runs);
  /// Archives these runs, or brings them back.
  void setArchived(const QList<qint64>& runIds, bool archived);
  /// Keeps the checkpoints of study `studyId`'s best `keep` trials, removes the others'.
  void keepBestCheckpoints(qint64 studyId, int keep);
  /// Lists run `run`'s checkpoints with their bytes (backend::listCheckpoints);
  /// checkpointsListed() delivers them.
  void listCheckpoints(const backend::RunRecord& run);
  /// Writes a sharded checkpoint as a Hugging Face folder or a PEFT adapter into new folder `dir`
  /// (backend::exportCheckpoint, with the trainer beside this executable first); exported() says
  /// how it went.
  void exportCheckpoint(const backend::RunRecord& run, const backend::CheckpointInfo& checkpoint,
                        backend::ExportFormat format, const QString& dir);

 signals:
  /// A run's bytes (checkpoints apart); `error` is why it could not be measured ("" when it was).
  void measured(qint64 runId, qint64 bytes, qint64 checkpointBytes, const QString& error);
  /// What a delete, archive or clean-up did (for the status bar); `ok` false when any part
  /// failed or was left.
  void done(bool ok, const QString& message);
  /// A run's checkpoints, oldest first; `error` is why they could not be listed ("" when they
  /// were).
  void checkpointsListed(qint64 runId, const QVector<backend::CheckpointInfo>& checkpoints,
                         const QString& error);
  /// An export ended: the folder written, or why not (`error`, "" when it worked).
  void exported(qint64 runId, qint64 step, const QString& dir, const QString& error);

 private:
  QThread m_thread;
  RunFilesWorker* m_worker = nullptr;  // lives in m_thread
};

}  // namespace shardscope::ui
