#include "ui/data/runfiles.h"

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

}  // namespace shardscope::ui
