// EventStream: what the monitor knows about one rank's files, and the parser that turns bytes
// read from them into a FileChunk for the run log. Pure logic: no I/O, no Qt event loop.
//
// Every complete line becomes exactly one row: an event (it parsed) or a log line (it did not;
// counted as malformed). A partial last line (no newline yet) is left for the next read. seq
// gaps and repeats are recorded as anomalies; the line itself is still stored.
#pragma once

#include <QByteArray>
#include <QStringList>

#include <array>
#include <optional>

#include "backend/store/runrecords.h"
#include "spec/events.h"

namespace shardscope::backend {

/// One rank's state, carried from chunk to chunk (and rebuilt from the run log on takeover).
struct EventStream {
  int rank = 0;
  qint64 eventsOffset = 0;  ///< bytes of events-rank-N.jsonl already stored
  qint64 logOffset = 0;     ///< bytes of rank-N.log already stored
  /// Where each file's byte 0 is in those offsets: the bytes read before the file was last
  /// truncated from outside (0 if never). Offsets stay one increasing sequence per file, so
  /// rows read after a truncation never collide with rows read before it.
  qint64 eventsBase = 0;
  qint64 logBase = 0;
  qint64 lastSeq = -1;  ///< highest seq seen
  int malformed = 0;    ///< lines that did not parse (this process's count)
  int failedReads = 0;  ///< reads failed in a row (host unreachable); 0 once a read works
  bool hello = false;
  std::optional<spec::DoneEvent> done;
  std::optional<spec::ErrorEvent> lastError;
  QStringList lastLogLines;  ///< the newest stderr lines, oldest first (its "last words")
  /// Inside a line longer than one read (a progress bar's \r stream, a runaway event), whose
  /// start was kept cut: the rest is skipped up to its newline.
  bool cuttingEvents = false;
  bool cuttingLog = false;
};

/// What is kept of a line longer than one read: its first bytes, then a note.
inline constexpr qint64 kCutLineBytes = 4096;

/// How many stderr lines EventStream keeps as last words.
inline constexpr int kLastWordsLines = 10;

/// Parses the complete lines of `bytes`, read from events-rank-N.jsonl at stream.eventsOffset,
/// and advances `stream`. The chunk ends after the last newline. `full`: the read returned all
/// it was allowed to, so a chunk without any newline is the start of a line longer than a read:
/// it is stored cut (a malformed line, kept as a log line) and the rest of that line is skipped,
/// where waiting for its newline would never end.
FileChunk parseEventsChunk(qint64 runId, const QByteArray& bytes, EventStream& stream,
                           bool full = false);
/// The same for rank-N.log: each complete line becomes a log line.
FileChunk parseLogChunk(qint64 runId, const QByteArray& bytes, EventStream& stream,
                        bool full = false);

/// A `phases` field and the run log metric it is stored as ("phase.wall", ...): the one list that
/// metricsOf writes and the straggler's reader (straggler.h) reads back.
struct PhaseMetric {
  const char* key;
  double spec::PhasesEvent::*field;
};
inline constexpr std::array<PhaseMetric, 9> kPhaseMetrics{{
    {"phase.wall", &spec::PhasesEvent::wall},
    {"phase.data", &spec::PhasesEvent::data},
    {"phase.forward", &spec::PhasesEvent::forward},
    {"phase.backward", &spec::PhasesEvent::backward},
    {"phase.optimizer", &spec::PhasesEvent::optimizer},
    {"phase.comm_exposed", &spec::PhasesEvent::comm_exposed},
    {"phase.comm_total", &spec::PhasesEvent::comm_total},
    {"phase.copy", &spec::PhasesEvent::copy},
    {"phase.other", &spec::PhasesEvent::other},
}};

/// The metric rows of one event (step, eval, mem and phases events; none for the others).
std::vector<MetricRow> metricsOf(qint64 runId, const spec::Event& event);

}  // namespace shardscope::backend
