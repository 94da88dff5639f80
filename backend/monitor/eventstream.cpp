#include "backend/monitor/eventstream.h"

#include <QLoggingCategory>

#include <cmath>
#include <string_view>

Q_LOGGING_CATEGORY(lcEventStream, "shardscope.backend.eventstream")

namespace shardscope::backend {

namespace {

void addMetric(std::vector<MetricRow>& rows, qint64 runId, const spec::Event& event, qint64 step,
               const char* key, double value) {
  rows.push_back({runId, step, QString::fromLatin1(key), value, event.env.rank, event.env.t});
}

// Seq bookkeeping: a gap (lines lost) or a repeat (lines written twice) becomes an anomaly.
void checkSeq(qint64 runId, qint64 offset, const spec::Event& event, EventStream& stream,
              FileChunk& chunk) {
  const qint64 seq = event.env.seq;
  if (seq < 0) return;  // a lenient line without seq
  const qint64 expected = stream.lastSeq + 1;
  if (seq > expected) {
    chunk.anomalies.push_back({runId, stream.rank, Anomaly::Kind::gap, seq, offset,
                               QString("expected seq %1, got %2: %3 events missing")
                                   .arg(expected)
                                   .arg(seq)
                                   .arg(seq - expected)});
  } else if (seq < expected) {
    chunk.anomalies.push_back(
        {runId, stream.rank, Anomaly::Kind::repeat, seq, offset,
         QString("seq %1 again (already saw up to %2)").arg(seq).arg(stream.lastSeq)});
  }
  stream.lastSeq = std::max(stream.lastSeq, seq);
}

void noteEvent(const spec::Event& event, EventStream& stream) {
  if (std::holds_alternative<spec::HelloEvent>(event.body)) stream.hello = true;
  if (const auto* done = std::get_if<spec::DoneEvent>(&event.body)) stream.done = *done;
  if (const auto* error = std::get_if<spec::ErrorEvent>(&event.body)) stream.lastError = *error;
}

void keepLastWords(EventStream& stream, const QString& line) {
  stream.lastLogLines << line;
  while (stream.lastLogLines.size() > kLastWordsLines) stream.lastLogLines.removeFirst();
}

}  // namespace

std::vector<MetricRow> metricsOf(qint64 runId, const spec::Event& event) {
  std::vector<MetricRow> rows;
  if (const auto* s = std::get_if<spec::StepEvent>(&event.body)) {
    addMetric(rows, runId, event, s->step, "loss", s->loss);
    addMetric(rows, runId, event, s->step, "lr", s->lr);
    addMetric(rows, runId, event, s->step, "grad_norm", s->grad_norm);
    addMetric(rows, runId, event, s->step, "tokens_per_s", s->tokens_per_s);
    addMetric(rows, runId, event, s->step, "mfu", s->mfu);
    addMetric(rows, runId, event, s->step, "comm.all_gather", double(s->all_gather_bytes));
    addMetric(rows, runId, event, s->step, "comm.reduce_scatter", double(s->reduce_scatter_bytes));
  } else if (const auto* e = std::get_if<spec::EvalEvent>(&event.body)) {
    for (const auto& [name, value] : e->metrics) {
      rows.push_back({runId, e->step, QString::fromStdString("eval." + name), value, event.env.rank,
                      event.env.t});
    }
  } else if (const auto* m = std::get_if<spec::MemEvent>(&event.body)) {
    addMetric(rows, runId, event, m->step, "mem.allocated", double(m->allocated));
    addMetric(rows, runId, event, m->step, "mem.reserved", double(m->reserved));
    addMetric(rows, runId, event, m->step, "mem.peak", double(m->peak));
    addMetric(rows, runId, event, m->step, "mem.rss", double(m->rss));
    if (m->cuda_allocated)
      addMetric(rows, runId, event, m->step, "mem.cuda_allocated", double(*m->cuda_allocated));
    if (m->cuda_reserved)
      addMetric(rows, runId, event, m->step, "mem.cuda_reserved", double(*m->cuda_reserved));
    if (m->cuda_peak)
      addMetric(rows, runId, event, m->step, "mem.cuda_peak", double(*m->cuda_peak));
  } else if (const auto* p = std::get_if<spec::PhasesEvent>(&event.body)) {
    for (const auto& metric : kPhaseMetrics)
      addMetric(rows, runId, event, p->step, metric.key, (*p).*metric.field);
  } else if (const auto* y = std::get_if<spec::SysEvent>(&event.body)) {
    addMetric(rows, runId, event, y->step, "sys.cpu", y->cpu);
    addMetric(rows, runId, event, y->step, "sys.rss", double(y->rss));
    addMetric(rows, runId, event, y->step, "sys.load1", y->load1);
    if (y->gpu) {
      const auto& g = *y->gpu;
      for (const auto& [name, value] :
           {std::pair{"sys.gpu_util", g.util}, std::pair{"sys.sm_clock_mhz", g.sm_clock_mhz},
            std::pair{"sys.power_w", g.power_w}, std::pair{"sys.power_limit_w", g.power_limit_w},
            std::pair{"sys.temp_c", g.temp_c}, std::pair{"sys.pcie_tx", g.pcie_tx},
            std::pair{"sys.pcie_rx", g.pcie_rx}}) {
        if (value) addMetric(rows, runId, event, y->step, name, *value);
      }
      if (g.mem_used)
        addMetric(rows, runId, event, y->step, "sys.gpu_mem_used", double(*g.mem_used));
    }
  }
  return rows;
}

namespace {

// Calls fn(line, position of the line in `bytes`) for each complete line; returns the bytes
// consumed (a partial last line waits for its newline).
template <class Fn>
qint64 forEachLine(const QByteArray& bytes, Fn&& fn) {
  qint64 at = 0;
  for (qint64 end = bytes.indexOf('\n'); end >= 0; end = bytes.indexOf('\n', at)) {
    fn(bytes.mid(at, end - at), at);
    at = end + 1;
  }
  return at;
}

// The bytes a chunk takes before its first complete line: the rest of a cut line (up to and
// including its newline; all of `bytes` when it has none).
qint64 skipCutLine(const QByteArray& bytes, bool& cutting) {
  if (!cutting) return 0;
  const qint64 newline = bytes.indexOf('\n');
  if (newline < 0) return bytes.size();
  cutting = false;
  return newline + 1;
}

// The text kept of a line that is longer than one read.
QString cutText(const QByteArray& bytes) {
  return QString::fromUtf8(bytes.left(kCutLineBytes)) +
         QStringLiteral(" [... cut: the line is longer than %1 bytes]").arg(bytes.size());
}

FileChunk emptyChunk(qint64 runId, const EventStream& stream, RankFile file, qint64 offset) {
  FileChunk chunk;
  chunk.runId = runId;
  chunk.rank = stream.rank;
  chunk.file = file;
  chunk.startOffset = offset;
  chunk.endOffset = offset;
  return chunk;
}

}  // namespace

FileChunk parseEventsChunk(qint64 runId, const QByteArray& bytes, EventStream& stream, bool full) {
  FileChunk chunk = emptyChunk(runId, stream, RankFile::events, stream.eventsOffset);
  const qint64 skipped = skipCutLine(bytes, stream.cuttingEvents);
  const QByteArray rest = bytes.mid(skipped);
  qint64 consumed =
      skipped + forEachLine(rest, [&](const QByteArray& line, qint64 at) {
        const qint64 offset = stream.eventsOffset + skipped + at;
        auto event = spec::parse_event(std::string_view(line.constData(), size_t(line.size())));
        if (!event) {
          // Kept verbatim as a log line, never dropped: it may be a crash message on stdout.
          ++stream.malformed;
          const QString text = QString::fromUtf8(line);
          chunk.logs.push_back({runId, stream.rank, RankFile::events, offset, text});
          chunk.anomalies.push_back({runId, stream.rank, Anomaly::Kind::malformed, -1, offset,
                                     QString::fromStdString(event.message())});
          keepLastWords(stream, text);
          return;
        }
        if (!std::isfinite(event->env.t)) {
          // A null, NaN or infinite time (a program printing float('nan')) would make every
          // metric row of the line fail the run log's `time REAL NOT NULL`, and the chunk would
          // be read again on every poll, forever. One rule for it: the time the line was read,
          // and an anomaly that says so.
          event->env.t = spec::unix_time_now();
          chunk.anomalies.push_back(
              {runId, stream.rank, Anomaly::Kind::malformed, -1, offset,
               QStringLiteral("t: null or not a finite number; stored with the time the "
                              "line was read")});
        }
        checkSeq(runId, offset, *event, stream, chunk);
        noteEvent(*event, stream);
        chunk.events.push_back({0, runId, stream.rank, event->env.seq,
                                QString::fromUtf8(spec::kind_name(event->body)), line, offset});
        std::vector<MetricRow> metrics = metricsOf(runId, *event);
        for (MetricRow& row : metrics) row.offset = offset;
        chunk.metrics.insert(chunk.metrics.end(), metrics.begin(), metrics.end());
      });
  if (full && consumed == 0 && !bytes.isEmpty()) {
    // A line longer than a whole read: kept cut, as a malformed line is kept, never waited for.
    ++stream.malformed;
    const QString text = cutText(bytes);
    chunk.logs.push_back({runId, stream.rank, RankFile::events, stream.eventsOffset, text});
    chunk.anomalies.push_back(
        {runId, stream.rank, Anomaly::Kind::malformed, -1, stream.eventsOffset,
         QStringLiteral("a line longer than %1 bytes, cut").arg(bytes.size())});
    stream.cuttingEvents = true;
    consumed = bytes.size();
  }
  stream.eventsOffset += consumed;
  chunk.endOffset = stream.eventsOffset;
  return chunk;
}

FileChunk parseLogChunk(qint64 runId, const QByteArray& bytes, EventStream& stream, bool full) {
  FileChunk chunk = emptyChunk(runId, stream, RankFile::log, stream.logOffset);
  const qint64 skipped = skipCutLine(bytes, stream.cuttingLog);
  const QByteArray rest = bytes.mid(skipped);
  qint64 consumed = skipped + forEachLine(rest, [&](const QByteArray& line, qint64 at) {
                      const QString text = QString::fromUtf8(line);
                      chunk.logs.push_back({runId, stream.rank, RankFile::log,
                                            stream.logOffset + skipped + at, text});
                      keepLastWords(stream, text);
                    });
  if (full && consumed == 0 && !bytes.isEmpty()) {
    const QString text = cutText(bytes);
    chunk.logs.push_back({runId, stream.rank, RankFile::log, stream.logOffset, text});
    keepLastWords(stream, text);
    stream.cuttingLog = true;
    consumed = bytes.size();
  }
  stream.logOffset += consumed;
  chunk.endOffset = stream.logOffset;
  return chunk;
}

}  // namespace shardscope::backend
