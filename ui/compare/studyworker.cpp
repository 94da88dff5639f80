#include "ui/compare/studyworker.h"

#include <QLoggingCategory>

Q_LOGGING_CATEGORY(lcStudyWorker, "shardscope.ui.studyworker")

namespace shardscope::ui::compare {

void StudyWorker::load(const QString& path, qint64 experimentId, const QList<qint64>& curveRuns) {
  if (path.isEmpty()) return;
  if (!m_reader || path != m_path) {
    auto reader = backend::RunReader::open(path);
    if (!reader) {
      emit failed(QString::fromStdString(reader.message()));
      return;
    }
    m_reader.emplace(std::move(*reader));
    m_path = path;
  }
  auto info = read(experimentId, curveRuns);
  if (!info) {
    qCWarning(lcStudyWorker, "%s: %s", qPrintable(path), info.message().c_str());
    emit failed(QString::fromStdString(info.message()));
    return;
  }
  emit loaded(*info);
}

Result<StudyInfo> StudyWorker::read(qint64 experimentId, const QList<qint64>& curveRuns) {
  StudyInfo info;
  info.experimentId = experimentId;
  auto studies = m_reader->listStudies();
  if (!studies) return studies.error();
  const backend::StudyRecord* chosen = nullptr;
  for (const auto& study : *studies) {
    const bool matches = study.experimentId && *study.experimentId == experimentId;
    if (matches && (chosen == nullptr || study.id > chosen->id)) chosen = &study;
  }
  if (chosen != nullptr) {
    info.studyId = chosen->id;
    info.name = chosen->name;
    info.config = chosen->config;
    info.objectives = chosen->objectives;
    info.directions = chosen->directions;
    auto trials = m_reader->trials(chosen->id);
    if (!trials) return trials.error();
    for (const auto& run : *trials) {
      if (run.trialNumber) info.trialNumbers.insert(run.id, *run.trialNumber);
      if (run.objectiveValues) info.objectiveValues.insert(run.id, *run.objectiveValues);
    }
  }
  for (qint64 id : curveRuns) {
    auto points = m_reader->metric(id, QStringLiteral("loss"));
    if (!points) return points.error();
    QVector<QPointF>& curve = info.lossCurves[id];
    for (const auto& p : *points) {
      if (p.rank == 0) curve.append(QPointF(double(p.step), p.value));
    }
  }
  return info;
}

StudyLoader::StudyLoader(QObject* parent) : QObject(parent), m_worker(new StudyWorker) {
  qRegisterMetaType<StudyInfo>();
  m_worker->moveToThread(&m_thread);
  connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
  connect(m_worker, &StudyWorker::loaded, this, &StudyLoader::loaded);
  connect(m_worker, &StudyWorker::failed, this, &StudyLoader::failed);
  m_thread.setObjectName(QStringLiteral("study-reader"));
  m_thread.start();
}

StudyLoader::~StudyLoader() {
  m_thread.quit();
  m_thread.wait();
}

void StudyLoader::request(const QString& path, qint64 experimentId,
                          const QList<qint64>& curveRuns) {
  QMetaObject::invokeMethod(
      m_worker,
      [w = m_worker, path, experimentId, curveRuns] { w->load(path, experimentId, curveRuns); },
      Qt::QueuedConnection);
}

}  // namespace shardscope::ui::compare
