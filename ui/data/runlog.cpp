#include "ui/data/runlog.h"

#include <QLoggingCategory>

#include "backend/store/db.h"
#include "ui/data/runlogworker.h"

Q_LOGGING_CATEGORY(lcRunLog, "shardscope.ui.runlog")

namespace shardscope::ui {

RunLog::RunLog(int pollMs, QObject* parent)
    : RunLogSignals(parent), m_worker(new RunLogWorker(pollMs)) {
  qRegisterMetaType<QVector<RunSummary>>();
  qRegisterMetaType<QVector<backend::StudyRecord>>();
  qRegisterMetaType<QVector<SeriesChunk>>();
  qRegisterMetaType<LogSnapshot>();
  qRegisterMetaType<MemoryCalibrations>();
  qRegisterMetaType<SweepData>();
  qRegisterMetaType<SweepCurves>();
  qRegisterMetaType<TrialFigures>();
  qRegisterMetaType<QVector<HostSummary>>();
  qRegisterMetaType<AutotuneData>();
  qRegisterMetaType<PhasesDelta>();
  qRegisterMetaType<UnitStepData>();
  qRegisterMetaType<SamplesDelta>();
  m_thread.setObjectName(QStringLiteral("runlog-reader"));
  m_worker->moveToThread(&m_thread);
  connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
  forwardRunLogSignals(m_worker, this);
  m_thread.start();
}

RunLog::~RunLog() {
  m_thread.quit();
  m_thread.wait();
}

void RunLog::open(const QString& path) {
  m_path = path;
  qCInfo(lcRunLog, "opening %s", qPrintable(backend::displaySpec(path)));
  QMetaObject::invokeMethod(m_worker, [w = m_worker, path] { w->open(path); });
}

void RunLog::watchRuns(const QList<qint64>& runIds, int generation) {
  QMetaObject::invokeMethod(
      m_worker, [w = m_worker, runIds, generation] { w->watchRuns(runIds, generation); });
}

void RunLog::watchLog(qint64 runId, int rank, int limit) {
  QMetaObject::invokeMethod(
      m_worker, [w = m_worker, runId, rank, limit] { w->watchLog(runId, rank, limit); });
}

void RunLog::watchSweep(qint64 experimentId) {
  QMetaObject::invokeMethod(m_worker,
                            [w = m_worker, experimentId] { w->watchSweep(experimentId); });
}

void RunLog::setQueryKeys(const QStringList& params, const QStringList& metrics) {
  QMetaObject::invokeMethod(m_worker,
                            [w = m_worker, params, metrics] { w->setQueryKeys(params, metrics); });
}

void RunLog::editTags(const QList<qint64>& runIds, const QStringList& add,
                      const QStringList& remove) {
  QMetaObject::invokeMethod(
      m_worker, [w = m_worker, runIds, add, remove] { w->editTags(runIds, add, remove); });
}

void RunLog::editGroup(const QString& name, const QList<qint64>& add, const QList<qint64>& remove) {
  QMetaObject::invokeMethod(m_worker,
                            [w = m_worker, name, add, remove] { w->editGroup(name, add, remove); });
}

void RunLog::renameGroup(const QString& from, const QString& to) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, from, to] { w->renameGroup(from, to); });
}

void RunLog::deleteGroup(const QString& name) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, name] { w->deleteGroup(name); });
}

void RunLog::setVerdicts(const QVector<VerdictEdit>& edits) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, edits] { w->setVerdicts(edits); });
}

void RunLog::setNote(qint64 runId, const QString& note) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, runId, note] { w->setNote(runId, note); });
}

void RunLog::watchAutotune(const QString& studyName) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, studyName] { w->watchAutotune(studyName); });
}

void RunLog::loadUnitStep(qint64 runId, qint64 step) {
  QMetaObject::invokeMethod(m_worker,
                            [w = m_worker, runId, step] { w->loadUnitStep(runId, step); });
}

void RunLog::watchPhases(qint64 runId) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, runId] { w->watchPhases(runId); });
}

void RunLog::watchSamples(const QList<qint64>& runIds, const QString& objectiveKey, bool minimize) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, runIds, objectiveKey, minimize] {
    w->watchSamples(runIds, objectiveKey, minimize);
  });
}

void RunLog::loadExperiment(qint64 experimentId) {
  QMetaObject::invokeMethod(m_worker,
                            [w = m_worker, experimentId] { w->loadExperiment(experimentId); });
}

void RunLog::loadTrialFigures(qint64 experimentId, const QList<qint64>& runIds) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, experimentId, runIds] {
    w->loadTrialFigures(experimentId, runIds);
  });
}

void RunLog::watchOverlay(const QList<qint64>& runIds) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, runIds] { w->watchOverlay(runIds); });
}

void RunLog::setCurveBatchRows(int rows) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, rows] { w->setCurveBatchRows(rows); });
}

void RunLog::refresh() {
  QMetaObject::invokeMethod(m_worker, [w = m_worker] { w->refresh(); });
}

void RunLog::sync(quint64 token) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, token] { w->sync(token); });
}

}  // namespace shardscope::ui
