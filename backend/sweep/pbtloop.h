// PbtLoop: population-based training over a study ([search.pbt]). search.pbt.population members
// train side by side in segments of interval_steps optimizer steps; each segment of each member
// is one trial of the study (number segment * population + member, its own run and folder),
// started through the TrialRunner with train.max_steps at the segment's end and a sharded
// checkpoint every interval_steps, resuming from a checkpoint folder (`--resume`). Once every
// member finished a segment, search/pbt.h decides: the bottom quantile go on from the checkpoint
// of a member in the top quantile (any world size: the trainer's resume reshards) with explored
// values; the others from their own. A segment that fails (a killed rank) is retried as the
// study retries any trial (--max-retries): from its failed attempt's newest checkpoint, or from
// its source's. The lineage (pbtlineage.h) is written to the study's state after every change,
// so a study whose driver was killed goes on from it when swept again (resume()): the segments
// that completed are kept, the ones left running are reattached or retried. The user steers it
// as any sweep, through SweepControl (`study pause|resume|stop`, the dashboard's buttons): paused,
// it starts no segment (the running ones finish their interval and keep their checkpoints; the
// next segment, or a retry, waits for the resume); stopped, its running segments are stopped as
// a sweep's trials are (SIGTERM, SIGKILL after search.stop_grace_s), those that never started
// are dropped, every one of them is recorded `stopped` in the lineage and the study ends
// `stopped`. A stopped PBT study does not go on when swept again (its stopped segments have no
// end checkpoint): resume() refuses it.
//
// Use: SweepLoop::readInput -> prepareData -> openStudy -> PbtLoop -> start -> the event loop
// runs until ended() -> finish.
#pragma once

#include <QObject>
#include <QString>

#include <optional>
#include <string>
#include <vector>

#include "backend/sweep/pbtlineage.h"
#include "backend/sweep/scheduler.h"
#include "backend/sweep/study.h"
#include "backend/sweep/sweepcontrol.h"
#include "backend/sweep/sweeploop.h"
#include "backend/sweep/trialrunner.h"
#include "spec/result.h"

namespace shardscope::backend {

class PbtLoop : public QObject {
  Q_OBJECT
 public:
  /// The checks of an experiment before a PBT study starts: [search.pbt] present, train.max_steps
  /// at least one interval, eval.every > 0 dividing interval_steps (a segment ends on an
  /// evaluation), an eval.X objective. Errors name the field and the fix.
  [[nodiscard]] static Result<void> check(const SweepInput& input);

  /// `study` must hold [search.pbt]. `store` must outlive the loop.
  PbtLoop(RunStore& store, search::Study study, const SweepInput& input,
          const SweepLoop::Options& options, QObject* parent = nullptr);
  ~PbtLoop() override;

  const search::Study& study() const { return m_study; }
  const PbtLineage& lineage() const { return m_lineage; }
  /// Segments of every member (the last may be shorter than interval_steps).
  int segmentCount() const { return m_segments; }
  /// The user's pause, resume or stop as it reached this driver (SweepControl::control()).
  StudyControl control() const { return m_control.control(); }
  /// The user stopped the study (finish() records it `stopped`).
  bool stopped() const { return m_stopping; }

  /// Starts the first segment of every member; on a study that has a lineage (its driver was
  /// killed), goes on with the segments it had not finished (resume()).
  [[nodiscard]] Result<void> start();
  /// Once ended(): the study's end recorded (complete, stopped by the user, or left running after
  /// an error) and its summary; an error of the loop (every member failed a segment, the run log
  /// refused the lineage) is returned here.
  [[nodiscard]] Result<search::StudySummary> finish();

 signals:
  /// A segment was queued: `from` is the member whose checkpoint it starts from (-1: none).
  void segmentStarting(int segment, int member, int from,
                       const shardscope::search::TrialParams& params);
  /// A segment's ranks were launched as run `runId` (each attempt).
  void segmentLaunched(int segment, int member, qint64 runId);
  /// A segment a killed driver left running whose ranks still run is followed again (resume()).
  void segmentReattached(int segment, int member, qint64 runId);
  /// A segment ended (after its retries).
  void segmentEnded(const shardscope::backend::PbtSegment& segment);
  /// A failed segment runs again (attempt `attempt`).
  void segmentRetried(int segment, int member, int attempt);
  /// The user paused, resumed or stopped the study (SweepControl::controlChanged). On stop the
  /// running segments were told to stop.
  void controlChanged(shardscope::backend::StudyControl control);
  /// Nothing runs and nothing is left to start (or the user stopped the study and nothing runs).
  void ended();

 private:
  /// Fails when another live process drives the study (its sweep stamp, RunStore::stampSweep),
  /// after waiting a moment for `study adopt`'s hand-over of its own stamp to this process.
  Result<void> checkNoOtherDriver();
  /// start() of a new study: the first segment of every member, drawn at random.
  Result<void> startFirstSegments();
  /// start() of a study whose lineage the run log holds (its driver was killed, or it ended):
  /// the segments that completed are kept; each one left running goes on. Never recorded or
  /// never launched: it starts; its ranks alive (the driver's follower is gone): they are
  /// reattached and followed to their end; ended meanwhile: recorded as if followed here; gone:
  /// recorded failed and retried as any failed segment (from its newest checkpoint, else its
  /// source's). With none left running, the next segment is decided, or the loop ends. Refused,
  /// starting nothing, while a live process follows one of its segments (another driver).
  Result<void> resume();
  /// Makes trial row.trial the segment `row` for the runner (its last step, its checkpoints, its
  /// source's checkpoint).
  void prepareSegment(const PbtSegment& row);
  void startSegment(const PbtSegment& row);
  void onFinished(const TrialOutcome& outcome);
  /// Every member finished segment `segment`: exploit and explore into the next one.
  Result<void> advance(int segment);
  /// The newest sharded checkpoint of run `runId` and its step.
  Result<std::pair<QString, qint64>> checkpointOf(qint64 runId);
  Result<void> save();
  void fail(const std::string& error);
  /// The user's pause (hold), resume (what was held goes on) or stop.
  void onControl(StudyControl control);
  /// The user stopped the study: segments that never started are dropped and recorded stopped.
  void stopStudy();
  /// ended() once nothing runs, nothing waits and nothing is held for a resume.
  void endIfIdle();

  RunStore& m_store;
  search::Study m_study;
  TrialRunner m_runner;
  Scheduler m_scheduler;
  search::PbtConfig m_config;
  qint64 m_maxSteps = 0;
  int m_segments = 0;
  bool m_minimize = true;
  PbtLineage m_lineage;
  std::string m_error;
  bool m_ended = false;
  /// The user's control, as a sweep's (its pause, resume and stop, and the per-trial requests);
  /// it also stamps the study as driven by this process (RunStore::stampSweep), so that `study
  /// show`, the dashboard and `study adopt` see a live driver.
  SweepControl m_control;
  bool m_stopping = false;  ///< the user stopped the study: nothing more starts
  /// While paused: the segment every member finished, whose next one waits for the resume.
  std::optional<int> m_heldAdvance;
  /// While paused: failed segments whose retry waits for the resume.
  std::vector<TrialOutcome> m_heldRetries;
};

}  // namespace shardscope::backend
