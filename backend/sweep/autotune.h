// Autotuner: finds the fastest configuration of the sharding and batching fields that fits
// (autotunespace.h says what it searches and in which order) by measuring it. Each candidate is
// first held against the device budget with the memory estimate (estimateAgainstBudget, the
// check a sweep's trials pass): over it, it is `infeasible` and never started. A candidate the
// target runs the same as an earlier one (offload on a CPU run) is a `duplicate` of it and not
// run again. The others run `shardtrain train` for warm-up + measured steps, all ranks, the
// optimizer on, as ordinary runs of the run log started and followed by RunLifecycle (what
// `run` does): the objective is the median over the measured steps of rank 0's `step` events.
// An oom marks the candidate out of memory. Nothing here prints: each candidate is reported to
// a callback when it is settled.
//
// The run log holds the whole search as a study (kind autotune, one objective to maximise):
// one experiment row that every candidate's run points to, so the Compare panel shows the
// candidates that ran side by side like a sweep's trials (params: the tuned settings; objective:
// the measured value), and the study's state holds every candidate (tuneCandidateJson), those
// never started too, rewritten as each one is settled, then the winner and its file. The study's
// control (RunStore::setStudyControl, the dashboard's Stop) stops the search as SIGINT does.
#pragma once

#include <QElapsedTimer>
#include <QJsonObject>
#include <QString>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/lifecycle/runlifecycle.h"
#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "backend/sweep/autotunespace.h"
#include "spec/estimate.h"
#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::backend {

/// How a candidate was settled.
enum class TuneStatus {
  measured,    ///< ran; its objective is the median of its measured steps
  infeasible,  ///< its estimate is over the budget: never started
  oom,         ///< ran out of memory while running
  failed,      ///< did not run or ended without measured steps (see error)
  duplicate,   ///< the same as an earlier candidate on this target: not run again
  stopped      ///< stopped by the user while running
};
const char* tuneStatusName(TuneStatus status);

/// What autotune maximises.
enum class TuneObjective { tokensPerS, mfu };
/// "tokens_per_s" or "mfu": the metric key, as the CLI's --objective and the study name it.
const char* tuneObjectiveName(TuneObjective objective);

/// One configuration autotune considered.
struct TuneCandidate {
  int number = 0;  ///< from 0, in the order considered
  TuneSettings settings;
  TuneStatus status = TuneStatus::failed;
  qint64 estimateBytes = 0;  ///< per rank, as the budget holds it (device or total)
  double tokensPerS = NAN;   ///< median tokens/s per rank over the measured steps
  double mfu = NAN;          ///< median MFU over the measured steps
  qint64 peakBytes = 0;      ///< highest peak of its ranks' last `mem` event (0: none reported)
  double value = NAN;        ///< the objective (tokensPerS or mfu); NaN unless measured
  qint64 runId = 0;          ///< its run in the run log (0: never started)
  QString runName;
  int duplicateOf = -1;  ///< duplicate: the candidate it is the same as
  QString error;         ///< why it is infeasible, oom, failed or stopped
};

/// A candidate as JSON: the `autotune --json` candidate object and an element of the study
/// state's "candidates" (number, settings {field: value}, estimate_bytes, peak_bytes,
/// tokens_per_s, mfu, status, run_id, run, duplicate_of, error; null where unknown).
QJsonObject tuneCandidateJson(const TuneCandidate& c);

/// The "kind" of an autotune study's state JSON (its row's kind column is StudyKind::autotune).
inline constexpr const char* kAutotuneKind = "autotune";

/// How autotune ended.
struct TuneOutcome {
  std::vector<TuneCandidate> candidates;  ///< every candidate, by number
  std::optional<int> winner;              ///< the best measured candidate's number
  bool stopped = false;                   ///< the user stopped it
  bool outOfTime = false;                 ///< the time budget ended the search
  std::optional<bool> cpuTarget;          ///< the target computes on CPU (unknown: none ran)
};

class Autotuner {
 public:
  struct Options {
    TuneObjective objective = TuneObjective::tokensPerS;
    std::int64_t steps = 10;    ///< measured steps per candidate
    std::int64_t warmup = 3;    ///< steps run first and not measured
    double budgetMinutes = 30;  ///< no new candidate starts after this (the first run always
                                ///< does); 0 = no limit
    double minGain = 0.03;      ///< a move needs this fraction more than the current value
    /// The study recording the search; "": "<experiment name>-autotune", numbered when taken.
    /// A name given here must be free.
    QString studyName;
  };
  /// RunLifecycle::follow, or the caller's wrapper of it (the CLI's stops on SIGINT).
  using Follow = std::function<Result<FollowOutcome>(RunStore&, RunHandle&, qint64, FollowOptions)>;
  using Report = std::function<void(const TuneCandidate&)>;

  /// `base`: the experiment as RunLifecycle::loadForRun loaded it from `experimentPath`;
  /// `budget`: what each candidate's estimate is held against (budgetFor). `store` must outlive
  /// the tuner.
  Autotuner(RunStore& store, RunLifecycle lifecycle, QString experimentPath, spec::Experiment base,
            spec::DeviceBudget budget, Options options, Follow follow = RunLifecycle::follow);
  /// Ends the study (finish()) if the caller did not.
  ~Autotuner();
  Autotuner(const Autotuner&) = delete;
  Autotuner& operator=(const Autotuner&) = delete;

  /// Runs the search to its end; `report` hears of each candidate once it is settled.
  [[nodiscard]] Result<TuneOutcome> run(const Report& report = {});
  /// Records the end in the study: `winnerFile` (the winner's experiment file once written; ""
  /// when none) and its status (complete, or stopped when the user stopped it or it failed).
  /// Called after the winner's file is written, so a reader that sees the study end finds it.
  [[nodiscard]] Result<void> finish(const QString& winnerFile);
  /// The study recording the search (known once run() started it).
  const QString& studyName() const { return m_studyName; }

  /// The experiment a candidate runs: `base` with `s` and the measurement settings (warm-up +
  /// measured steps, a `mem` event at the last, no evaluation, no checkpoint, runs named
  /// "<name>-autotune-<n>").
  spec::Experiment candidateExperiment(const TuneSettings& s) const;

 private:
  TuneMeasure consider(const TuneSettings& s);
  void measure(TuneCandidate& c);
  void readSteps(TuneCandidate& c);
  void readPeak(RunReader& reader, TuneCandidate& c) const;
  Result<void> openStudy();
  Result<void> publish();
  QJsonObject studyState() const;
  /// True when the study's control says stop (read at most every kControlPollMs).
  bool stopAsked();

  RunStore& m_store;
  RunLifecycle m_lifecycle;
  QString m_experimentPath;
  spec::Experiment m_base;
  spec::DeviceBudget m_budget;
  Options m_options;
  Follow m_follow;
  Report m_report;
  TuneOutcome m_outcome;
  std::string m_error;        // a store error: ends the search
  qint64 m_experimentId = 0;  // the experiment row every candidate's run points to
  qint64 m_studyId = 0;
  QString m_studyName;
  QString m_winnerFile;
  bool m_finished = false;
  std::optional<RunReader> m_reader;  // this thread's, for the study's control
  qint64 m_controlReadMs = -1;        // when the control was last read (m_clock)
  bool m_stopAsked = false;
  QElapsedTimer m_clock;
  static constexpr qint64 kControlPollMs = 300;
};

}  // namespace shardscope::backend
