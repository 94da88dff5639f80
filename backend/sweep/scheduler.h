// Scheduler: runs up to N trials at once through a TrialRunner. The slots are
// min(search.concurrency, cores here / ranks per trial) for trials on this machine (at least
// one), and search.concurrency for trials elsewhere (ssh, Slurm: the cluster places them; we
// only keep N queued or running). Trials wait in a FIFO queue until a slot frees (or, held,
// until released).
#pragma once

#include <QObject>

#include <deque>
#include <optional>
#include <utility>

#include "backend/sweep/trialrunner.h"

namespace shardscope::backend {

class Scheduler : public QObject {
  Q_OBJECT
 public:
  /// `cores`: cores of this machine to pack local trials onto; 0 counts the online ones.
  explicit Scheduler(TrialRunner& runner, int cores = 0, QObject* parent = nullptr);

  /// Trials that may run at once.
  int slotCount() const { return m_slots; }
  int running() const { return m_runner.running(); }
  int queued() const { return static_cast<int>(m_queue.size()); }
  /// Slots neither running nor promised to a queued trial: how many trials to ask for now.
  int freeSlots() const { return std::max(0, m_slots - running() - queued()); }
  /// True when nothing runs and nothing waits.
  bool idle() const { return running() == 0 && m_queue.empty(); }

  /// Queues trial `number`; it starts at once when a slot is free. `runId`: the run a study
  /// already made for it (Study::ask), else the runner creates one.
  void enqueue(qint64 number, search::TrialParams params,
               std::optional<qint64> runId = std::nullopt);
  /// Held (a paused study's driver): queued trials wait even with a slot free; released, they
  /// start as slots allow.
  void setHeld(bool held);
  bool held() const { return m_held; }
  /// Empties the queue (a stopped study's driver): the trials that never started, first first.
  struct Queued {
    qint64 number = 0;
    search::TrialParams params;
    std::optional<qint64> runId;
  };
  std::deque<Queued> takeQueued();

 signals:
  /// A trial ended (the runner's outcome); its slot is free already.
  void trialFinished(const shardscope::backend::TrialOutcome& outcome);
  /// A trial could not even be recorded (the run log refused it); it holds no slot.
  void trialRejected(qint64 number, const QString& error);
  /// Nothing runs and nothing waits.
  void drained();

 private:
  void dispatch();
  void onFinished(const TrialOutcome& outcome);

  TrialRunner& m_runner;
  int m_slots = 1;
  bool m_held = false;
  std::deque<Queued> m_queue;
};

}  // namespace shardscope::backend
