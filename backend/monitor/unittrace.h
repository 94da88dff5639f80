// Per-unit traces read back (docs/trainer.md, "Per-unit traces"): the files a run writes with
// `[trace] every_n_steps` (RUN/trace/rank-R.jsonl) or `shardtrain --trace FILE` (FILE,
// FILE.rank-N), turned into spans per step, per rank, per FSDP unit: each all-gather and
// reduce-scatter from its issue to its done (with when the rank began waiting on it), each
// stretch of forward and backward compute. Times are milliseconds from the step's origin on the
// rank's own clock. Qt Core only: the Timeline's per-unit view draws what this returns.
#pragma once

#include <QString>
#include <QStringList>

#include <map>
#include <vector>

#include "spec/result.h"

namespace shardscope::backend {

/// What a span is: a collective (communication stream) or compute.
enum class UnitSpanKind { allGather, reduceScatter, forward, backward };

/// "all_gather", "reduce_scatter", "forward", "backward".
const char* unitSpanKindName(UnitSpanKind kind);

struct UnitSpan {
  UnitSpanKind kind = UnitSpanKind::forward;
  QString unit;      ///< the FSDP unit ("root", "layers.3", ...)
  QString phase;     ///< a collective's phase ("forward", "backward"); compute: its kind's name
  int micro = 0;     ///< the micro-step
  double start = 0;  ///< ms: a collective's issue, a compute stretch's start
  double end = 0;    ///< ms: a collective's done (its wait returned), a stretch's end
  /// Collectives: when the rank began waiting (ms); the rank stood still from here to `end`.
  /// -1 for compute.
  double waitFrom = -1;
  qint64 bytes = 0;  ///< a collective's buffer (all-gather: the gathered unit; 0 for compute)

  bool isCollective() const {
    return kind == UnitSpanKind::allGather || kind == UnitSpanKind::reduceScatter;
  }
  double duration() const { return end - start; }
  /// Collectives: how long the rank waited on it (ms); 0 for compute.
  double exposed() const { return waitFrom >= 0 ? end - waitFrom : 0; }
  /// Bytes per second over issue..done; 0 without bytes or time.
  double bandwidth() const { return bytes > 0 && end > start ? bytes / (duration() / 1000) : 0; }
};

/// One rank's spans of one step, in the order they ended.
struct UnitTraceRank {
  int rank = 0;
  std::vector<UnitSpan> spans;
  double end() const;  ///< the last span's end (ms)
};

/// One optimizer step recorded in detail on one or more ranks.
struct UnitTraceStep {
  qint64 step = 0;
  QStringList units;  ///< units in forward order (the order their forward gathers were issued)
  std::map<int, UnitTraceRank> ranks;
  double end() const;  ///< the latest rank's end (ms)
};

struct UnitTrace {
  std::map<qint64, UnitTraceStep> steps;
  /// Ranks whose file ends at trace.max_mib (a `stopped` record).
  std::vector<int> stoppedRanks;
  /// Ranks whose last line was cut (a rank killed mid-write): the line is dropped.
  std::vector<int> truncatedRanks;
};

/// Adds `rank`'s records in `path` to `into`. A last line without its end (the file stops
/// mid-record) is dropped; any other line that is not a trace record is an error naming the
/// file, the line and what is wrong.
[[nodiscard]] Result<void> readUnitTraceFile(const QString& path, int rank, UnitTrace& into);

/// A run directory's RUN/trace/rank-R.jsonl, or the files of `--trace FILE` (FILE for rank 0,
/// FILE.rank-N): `where` is either the run directory or FILE.
[[nodiscard]] Result<UnitTrace> readUnitTrace(const QString& where);

}  // namespace shardscope::backend
