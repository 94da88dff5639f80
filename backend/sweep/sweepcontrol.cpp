#include "backend/sweep/sweepcontrol.h"

#include <QCoreApplication>
#include <QLoggingCategory>
#include <QSysInfo>

#include "backend/sweep/trialrunner.h"

Q_LOGGING_CATEGORY(lcSweepControl, "shardscope.backend.sweepcontrol")

namespace shardscope::backend {

SweepControl::SweepControl(RunStore& store, qint64 studyId, TrialRunner& runner, int pollMs,
                           QObject* parent)
    : QObject(parent), m_store(store), m_studyId(studyId), m_runner(runner) {
  m_timer.setInterval(pollMs);
  connect(&m_timer, &QTimer::timeout, this, &SweepControl::poll);
  m_stampTimer.setInterval(RunStore::kSweepStampMs);
  connect(&m_stampTimer, &QTimer::timeout, this, [this] {
    // Not waited for: a slow disk must not stall the sweep; a failure only logs.
    (void)m_store.stampSweep(m_studyId, QCoreApplication::applicationPid(),
                             QSysInfo::machineHostName());
  });
}

SweepControl::~SweepControl() {
  if (!m_stampTimer.isActive()) return;
  if (auto r = m_store
                   .clearSweepStamp(m_studyId, QCoreApplication::applicationPid(),
                                    QSysInfo::machineHostName())
                   .get();
      !r)
    qCWarning(lcSweepControl) << r.message().c_str();
}

Result<void> SweepControl::start() {
  auto reader = m_store.reader();
  if (!reader) return reader.error();
  m_reader = std::make_unique<RunReader>(std::move(*reader));
  if (auto r = m_store.setStudyControl(m_studyId, StudyControl::run).get(); !r) return r;
  m_control = StudyControl::run;
  if (auto r = m_store
                   .stampSweep(m_studyId, QCoreApplication::applicationPid(),
                               QSysInfo::machineHostName())
                   .get();
      !r)
    return r;
  m_timer.start();
  m_stampTimer.start();
  return ok();
}

void SweepControl::poll() {
  if (!m_reader) return;
  auto study = m_reader->study(m_studyId);
  if (!study || !*study) {
    qCWarning(lcSweepControl) << "study" << m_studyId << "cannot be read:"
                              << (study ? "it is no longer in the run log"
                                        : study.message().c_str());
    return;
  }
  if (const StudyControl control = (*study)->control; control != m_control) {
    m_control = control;
    qCInfo(lcSweepControl).noquote()
        << "study" << (*study)->name << "asked to" << studyControlName(control);
    if (control == StudyControl::stop) m_runner.stopAll();
    emit controlChanged(control);
  }
  auto requested = m_reader->requestedTrials(m_studyId);
  if (!requested) {
    qCWarning(lcSweepControl) << requested.message().c_str();
    return;
  }
  for (const RunRecord& run : *requested) {
    if (!run.trialNumber) continue;
    const qint64 number = *run.trialNumber;
    const bool done =
        run.request == TrialRequest::prune ? m_runner.prune(number) : m_runner.stop(number);
    // A request for a trial this process does not run stays for the one that does, unless the
    // trial has ended (nothing will carry it out any more).
    if (!done && !spec::is_final(run.status)) continue;
    if (auto r = m_store.requestTrial(run.id, TrialRequest::none).get(); !r)
      qCWarning(lcSweepControl) << r.message().c_str();
    emit trialRequestHandled(number, run.request, done);
  }
}

}  // namespace shardscope::backend
