#include "ui/data/runfiles.h"

#include <QCoreApplication>
#include <QLoggingCategory>

#include "ui/data/runfilesworker.h"

Q_LOGGING_CATEGORY(lcRunFiles, "shardscope.ui.runfiles")

namespace shardscope::ui {

RunFiles::RunFiles(QObject* parent) : QObject(parent), m_worker(new RunFilesWorker) {
  m_thread.setObjectName(QStringLiteral("run-files"));
  m_worker->moveToThread(&m_thread);
  connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
  connect(m_worker, &RunFilesWorker::measured, this, &RunFiles::measured);
  connect(m_worker, &RunFilesWorker::done, this, &RunFiles::done);
  connect(m_worker, &RunFilesWorker::checkpointsListed, this, &RunFiles::checkpointsListed);
  connect(m_worker, &RunFilesWorker::exported, this, &RunFiles::exported);
  m_thread.start();
}

RunFiles::~RunFiles() {
  m_thread.quit();
  m_thread.wait();
}

void RunFiles::setPath(const QString& path) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, path] { w->setPath(path); });
}

void RunFiles::measure(const QVector<backend::RunRecord>& runs) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, runs] { w->enqueue(runs); });
}

void RunFiles::remove(const QVector<backend::RunRecord>& runs) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, runs] { w->remove(runs); });
}

void RunFiles::setArchived(const QList<qint64>& runIds, bool archived) {
  QMetaObject::invokeMethod(m_worker,
                            [w = m_worker, runIds, archived] { w->setArchived(runIds, archived); });
}

void RunFiles::keepBestCheckpoints(qint64 studyId, int keep) {
  QMetaObject::invokeMethod(m_worker,
                            [w = m_worker, studyId, keep] { w->keepBest(studyId, keep); });
}

void RunFiles::listCheckpoints(const backend::RunRecord& run) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, run] { w->listCheckpoints(run); });
}

void RunFiles::exportCheckpoint(const backend::RunRecord& run,
                                const backend::CheckpointInfo& checkpoint,
                                backend::ExportFormat format, const QString& dir) {
  const QString trainerDir = QCoreApplication::applicationDirPath();
  QMetaObject::invokeMethod(m_worker, [=, w = m_worker] {
    w->exportCheckpoint(run, checkpoint, format, dir, trainerDir);
  });
}

}  // namespace shardscope::ui
