// Plain values the run-log worker thread sends to the panels (by queued signals): what a panel
// shows, already read from the store, so the GUI thread never runs a query.
#pragma once

#include <QHash>
#include <QJsonObject>
#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <QVariant>
#include <QVector>

#include <limits>
#include <optional>
#include <vector>

#include "backend/store/runrecords.h"
#include "backend/store/runusage.h"
#include "backend/store/verdicts.h"
#include "backend/sweep/pbtlineage.h"
#include "spec/calibration.h"

namespace shardscope::ui {

/// One row of the run table: the stored run plus what the table derives from its metrics.
struct RunSummary {
  backend::RunRecord record;
  qint64 lastStep = -1;             ///< highest step of rank 0's "loss" (-1: no step yet)
  QString host;                     ///< where it runs ("local" when the launcher was local)
  QStringList tags;                 ///< its tags by name (schema 9)
  QStringList tagColors;            ///< each tag's "#rrggbb", in the order of tags
  QStringList groups;               ///< the groups it is in, by name (schema 12)
  QString note;                     ///< its note (plain text or Markdown); "" when none
  backend::VerdictCounts verdicts;  ///< people's marks on its probe answers (schema 11)
  /// Its device-hours (backend/store/runusage.h), as of the read.
  backend::RunUsage usage;
  /// The host its price per device-hour is looked up by (backend::usageHost).
  QString priceHost;
  /// A running run's progress: the bytes of its ranks' events files stored so far (-1 when it
  /// is not running). No change for a while is a stall (ui/notifier.h).
  qint64 eventBytes = -1;
  /// A running run's follower holds a live lease: its ranks are watched, so silence is a stall
  /// rather than a follower gone.
  bool followed = false;
  /// What the runs filter compares, for the keys it asked for (RunLog::setQueryKeys): parameters
  /// by dotted key (the run's own, else its experiment's), metrics' last and lowest values.
  QHash<QString, QVariant> values;
  QHash<QString, double> last;
  QHash<QString, double> best;
};

/// The series key of the exposed-communication share the run-log worker derives per rank and
/// step from the `phases` metrics: phase.comm_exposed / phase.wall (0..1).
inline constexpr char kExposedShareKey[] = "phase.exposed_share";
/// The stored metric the share divides by (a run that has it has phases).
inline constexpr char kPhaseWallKey[] = "phase.wall";

/// New points of one metric of one run and rank (reset: they replace what the plot holds).
struct SeriesChunk {
  qint64 runId = 0;
  QString runName;
  QString key;  ///< "loss", "mem.peak", ...
  int rank = 0;
  bool reset = false;
  QVector<double> steps;
  QVector<double> values;
  /// Unix seconds of each point (its event's `t`), for the plots' time axes; empty when the
  /// sender has none (the memory estimate).
  QVector<double> times;
};

/// The last lines of one rank's log (both files, in file order).
struct LogSnapshot {
  qint64 runId = 0;
  int rank = 0;
  QStringList lines;
};

/// One trial of a sweep with its intermediate values of the objective key. The summary (status,
/// params, objective) arrives first; steps/values fill in as SweepCurves batches arrive.
struct SweepTrial {
  qint64 runId = 0;
  QString name;
  spec::RunStatus status = spec::RunStatus::queued;
  QJsonObject params;
  std::optional<double> objective;
  double createdAt = 0;
  QVector<double> steps;              ///< intermediate values: steps ...
  QVector<double> values;             ///< ... and the objective key's value at each
  std::optional<qint64> trialNumber;  ///< its number in the study (0-based), when a study's
  std::optional<std::vector<double>> objectiveValues;  ///< one per study objective
  /// Its device-hours (backend/store/runusage.h); hours 0 when it never started.
  backend::RunUsage usage;
  bool started = false;  ///< it has a started_at (its usage is known)
};

/// One configuration an autotune considered, as its study's state records it
/// (backend::tuneCandidateJson; NaN and -1 where unknown).
struct AutotuneCandidate {
  int number = 0;
  QJsonObject settings;  ///< {"shard.strategy": "FULL_SHARD", ...}: the tuned fields
  QString status;        ///< measured, infeasible, oom, failed, duplicate, stopped
  double tokensPerS = std::numeric_limits<double>::quiet_NaN();  ///< per rank
  double mfu = std::numeric_limits<double>::quiet_NaN();
  qint64 estimateBytes = 0;
  qint64 peakBytes = 0;
  qint64 runId = 0;  ///< 0: never started
  QString runName;
  int duplicateOf = -1;
  QString error;
};

/// An autotune as its study in the run log records it (kind autotune).
struct AutotuneData {
  QString name;          ///< the study's name
  qint64 studyId = -1;   ///< -1: not in the run log (yet)
  bool running = false;  ///< the study has not ended
  bool stopped = false;  ///< it ended stopped (by the user, or an error)
  QString objective;     ///< "tokens_per_s" or "mfu"
  QVector<AutotuneCandidate> candidates;
  int winner = -1;     ///< the best measured candidate's number (-1: none)
  QString winnerFile;  ///< the winner's experiment file, once written
  QString error;       ///< what ended it early, if anything
  qint64 pid = 0;      ///< the process that runs it (0: none stamped)
  QString host;
  /// The candidate's value of the objective (NaN unless measured or a duplicate of one).
  double valueOf(const AutotuneCandidate& c) const {
    return objective == QLatin1String("mfu") ? c.mfu : c.tokensPerS;
  }
};

/// The study (schema v3) a sweep belongs to, as stored; studyId -1 when it is none.
struct SweepStudy {
  qint64 studyId = -1;
  QString name;
  QString config;          ///< the experiment TOML with its [search] section
  QStringList objectives;  ///< metric names, one per objective
  QStringList directions;  ///< "minimize"/"maximize", one per objective
  bool running = false;    ///< the study has not ended
  qint64 sweepPid = 0;     ///< the process that stamped it as running its sweep (0: none)
  QString sweepHost;       ///< that process's machine
  QString sampler;         ///< a name of spec::kSamplers; empty for an autotune's record
  bool autotune = false;   ///< the study is an autotune's record (candidates, no sweep)
  /// sampler = "auto": the choice the study stored, in words ("gp for trials 0-99, then tpe (a
  /// space of 2 parameters)"); empty for any other sampler.
  QString samplerChoice;
};

/// Compare's sweeps are keyed by one id: an experiment's id, or for a user's group of runs
/// (schema 12) kGroupSweepBase + its group id, far above any experiment id, so "-1: none" and
/// every other test of an id keep their meaning.
inline constexpr qint64 kGroupSweepBase = qint64(1) << 48;
inline qint64 groupSweepId(qint64 groupId) { return kGroupSweepBase + groupId; }
/// The group id of a sweep id made by groupSweepId; -1 when it is an experiment's.
inline qint64 groupOfSweep(qint64 sweepId) {
  return sweepId > kGroupSweepBase ? sweepId - kGroupSweepBase : -1;
}

/// A population-based training study's lineage as Compare shows it: the study's state "pbt"
/// (backend::PbtLineage), the parameters [search.pbt] lets change, and the best member's chain.
struct PbtData {
  backend::PbtLineage lineage;
  qint64 intervalSteps = 0;   ///< [search.pbt] interval_steps: steps per segment
  QStringList mutableParams;  ///< [search.pbt] mutable, in its order
  QStringList logParams;      ///< those of them searched on a log scale
  /// The best member's chain of segments, first first (PbtLineage::bestSchedule in the study's
  /// direction): the best trial's parameter schedule. Empty until a segment is complete.
  std::vector<backend::PbtSegment> best;
};

/// The runs of one experiment or sweep, in creation order: the summaries, read by indexed
/// queries only (no scan of the metrics); curves follow as SweepCurves.
struct SweepData {
  qint64 experimentId = -1;      ///< -1: no sweep in the run log
  QString objectiveKey;          ///< the metric read as intermediate values ("eval.loss")
  QList<qint64> experimentIds;   ///< every experiment that has runs, oldest first, then every
                                 ///< group that has runs (groupSweepId), by name
  QHash<qint64, QString> names;  ///< experiment id -> its study's name (absent: no study);
                                 ///< group sweep id -> "group NAME"
  SweepStudy study;
  QVector<SweepTrial> trials;
  /// The sweep is an autotune's: every candidate (those never started too) and the winner. Its
  /// runs are the trials above (numbered by candidate), ranked by the measured value.
  std::optional<AutotuneData> autotune;
  /// The sweep is a population-based training study's (its segments are the trials above).
  std::optional<PbtData> pbt;
};

/// Figures of a sweep's trials over their steps, which Compare can colour them by (one read of
/// the run log for the whole sweep: RunLog::loadTrialFigures).
struct TrialFigures {
  qint64 experimentId = -1;
  QHash<qint64, double> mfu;  ///< run id -> mean `mfu` of rank 0's steps
  QHash<qint64, double>
      exposedShare;  ///< run id -> mean exposed-communication share, ranks averaged
};

/// Which curves of a sweep a SweepCurves batch carries.
enum class CurveSet {
  intermediate,  ///< the objective key of every trial (rank 0)
  overlay,       ///< "loss" of the runs the Compare overlay shows (rank 0)
};

/// A batch of curves of one sweep, streamed by the worker after the summaries. Each chunk holds
/// the new points of one run (reset: they replace what was delivered before).
struct SweepCurves {
  qint64 experimentId = -1;
  CurveSet set = CurveSet::intermediate;
  QString key;
  QVector<SeriesChunk> chunks;
  int done = 0;       ///< runs of this pass read so far (this batch included)
  int total = 0;      ///< runs this pass reads
  bool last = false;  ///< the pass is over: every curve is as stored
};

/// An SSH host as the Hosts panel lists it.
struct HostSummary {
  QString alias;
  QString address;  ///< user@hostname:port
  QString fingerprint;
  bool trusted = false;
};

/// The estimate's corrections the run log's completed runs make (RunReader::memoryCalibrations),
/// by spec::calibration_key: what the builder's memory panel applies.
struct MemoryCalibrations {
  spec::Calibrations table;
};

}  // namespace shardscope::ui

Q_DECLARE_METATYPE(shardscope::ui::MemoryCalibrations)
Q_DECLARE_METATYPE(shardscope::ui::RunSummary)
Q_DECLARE_METATYPE(shardscope::backend::StudyRecord)
Q_DECLARE_METATYPE(shardscope::ui::SeriesChunk)
Q_DECLARE_METATYPE(shardscope::ui::LogSnapshot)
Q_DECLARE_METATYPE(shardscope::ui::SweepData)
Q_DECLARE_METATYPE(shardscope::ui::SweepCurves)
Q_DECLARE_METATYPE(shardscope::ui::TrialFigures)
Q_DECLARE_METATYPE(shardscope::ui::HostSummary)
Q_DECLARE_METATYPE(shardscope::ui::AutotuneData)
