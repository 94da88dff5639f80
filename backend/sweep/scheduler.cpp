#include "backend/sweep/scheduler.h"

#include <unistd.h>
#include <QLoggingCategory>
#include <QTimer>

Q_LOGGING_CATEGORY(lcScheduler, "shardscope.search.scheduler")

namespace shardscope::backend {

namespace {

int onlineCores() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace

Scheduler::Scheduler(TrialRunner& runner, int cores, QObject* parent)
    : QObject(parent), m_runner(runner) {
  const int concurrency = std::max(1, runner.space().concurrency);
  if (runner.runsHere()) {
    const int here = cores > 0 ? cores : onlineCores();
    m_slots = std::max(1, std::min(concurrency, here / runner.ranksPerTrial()));
  } else {
    m_slots = concurrency;
  }
  qCInfo(lcScheduler) << m_slots << "slot(s): concurrency" << concurrency << "ranks per trial"
                      << runner.ranksPerTrial();
  connect(&m_runner, &TrialRunner::trialFinished, this, &Scheduler::onFinished);
}

void Scheduler::enqueue(qint64 number, search::TrialParams params, std::optional<qint64> runId) {
  m_queue.push_back({number, std::move(params), runId});
  dispatch();
}

void Scheduler::setHeld(bool held) {
  m_held = held;
  if (!held) dispatch();
}

std::deque<Scheduler::Queued> Scheduler::takeQueued() {
  std::deque<Queued> taken;
  taken.swap(m_queue);
  return taken;
}

void Scheduler::dispatch() {
  while (!m_held && !m_queue.empty() && m_runner.running() < m_slots) {
    Queued next = std::move(m_queue.front());
    m_queue.pop_front();
    const qint64 number = next.number;
    auto started = m_runner.start(number, next.params, next.runId);
    if (!started) {
      qCWarning(lcScheduler) << "trial" << number << started.message().c_str();
      emit trialRejected(number, QString::fromStdString(started.message()));
    }
  }
}

void Scheduler::onFinished(const TrialOutcome& outcome) {
  emit trialFinished(outcome);
  dispatch();
  if (idle()) emit drained();
}

}  // namespace shardscope::backend
