#include "backend/monitor/runmonitor.h"

#include <QLoggingCategory>
#include <QSysInfo>
#include <QUuid>

#include <unistd.h>

#include <algorithm>
#include <string>

#include "backend/launch/rankfiles.h"
#include "backend/monitor/oommemory.h"

Q_LOGGING_CATEGORY(lcRunMonitor, "shardscope.backend.runmonitor")

namespace shardscope::backend {

namespace {

// The bytes [begin, end) of `chunk`'s file, with none of its rows yet.
FileChunk bytesOf(const FileChunk& chunk, qint64 begin, qint64 end) {
  FileChunk part;
  part.runId = chunk.runId;
  part.attempt = chunk.attempt;
  part.rank = chunk.rank;
  part.file = chunk.file;
  part.startOffset = begin;
  part.endOffset = end;
  return part;
}

// How a truncation's anomaly starts: restoreStreams finds the file's base by it.
QString truncationNote(const QString& fileName) { return fileName + " shrank"; }

template <class T>
std::optional<T> payloadOf(const std::optional<EventRow>& row) {
  if (!row) return std::nullopt;
  auto event = spec::parse_event(std::string_view(row->json.constData(), size_t(row->json.size())));
  if (!event) return std::nullopt;
  if (const auto* body = std::get_if<T>(&event->body)) return *body;
  return std::nullopt;
}

// The rank's error, then (an oom) its allocator's figures and snapshot on lines of their own.
QString errorText(int rank, const spec::ErrorEvent& error, const QString& runDir) {
  QString text = QString("rank %1: %2: %3")
                     .arg(rank)
                     .arg(QString::fromUtf8(spec::to_string(error.kind)))
                     .arg(QString::fromStdString(error.message));
  if (!error.hint.empty()) text += QString(" (%1)").arg(QString::fromStdString(error.hint));
  if (error.memory) {
    text += "\n" + oomMemoryText(*error.memory);
    if (error.memory->snapshot) text += "\n" + oomSnapshotLine(*error.memory, runDir);
  }
  return text;
}

}  // namespace

RunMonitor::RunMonitor(RunStore& store, qint64 runId, RunHandle& handle, const Options& options,
                       QObject* parent)
    : QObject(parent), m_store(store), m_runId(runId), m_handle(handle), m_options(options) {
  m_pollTimer.setInterval(options.pollMs);
  connect(&m_pollTimer, &QTimer::timeout, this, &RunMonitor::poll);
  connect(&m_handle, &RunHandle::filesGrew, this, &RunMonitor::poll);
  connect(&m_handle, &RunHandle::ranksChanged, this, &RunMonitor::poll);
}

RunMonitor::RunMonitor(RunStore& store, qint64 runId, RunHandle& handle, QObject* parent)
    : RunMonitor(store, runId, handle, Options{}, parent) {}

RunMonitor::~RunMonitor() {
  m_leaseKeeper.reset();
  // A monitor that goes away before its run ends lets the next one take over at once.
  if (m_active) (void)m_store.releaseLease(m_lease).get();
}

int RunMonitor::malformedLines() const {
  int count = 0;
  for (const EventStream& stream : m_streams) count += stream.malformed;
  return count;
}

int RunMonitor::worldSize() const {
  const int fromLocation = m_handle.location().worldSize;
  return fromLocation > 0 ? fromLocation : int(m_handle.ranks().size());
}

Result<void> RunMonitor::start() {
  // A start the run log failed after the lease was taken (restoreStreams) is tried again by the
  // same holder: a fresh token would find its own live lease and be refused for good.
  if (m_lease.token.isEmpty()) {
    m_lease = {m_runId, ::getpid(), QSysInfo::machineHostName(),
               QUuid::createUuid().toString(QUuid::WithoutBraces), 0};
  }
  auto outcome = m_store.acquireLease(m_lease, m_options.staleAfterS).get();
  if (!outcome) return outcome.error();
  m_refusedBy.reset();
  if (!outcome->acquired) {
    m_refusedBy = outcome->holder;
    const LeaseRecord& holder = *outcome->holder;
    return fail("run " + std::to_string(m_runId) + " is already followed by process " +
                std::to_string(holder.pid) + " on " + holder.host.toStdString() +
                ": stop that backend first, or wait " + std::to_string(int(m_options.staleAfterS)) +
                " s after it died");
  }
  m_tookOver = outcome->tookOver;
  auto reader = m_store.reader();
  if (!reader) return reader.error();
  m_reader.emplace(std::move(*reader));
  if (auto r = restoreStreams(); !r) return r;
  m_active = true;
  m_pollTimer.start();
  // The heartbeat has its own thread: a poll blocked on a slow host must not let the lease go
  // stale while this monitor is alive.
  m_leaseKeeper = std::make_unique<LeaseKeeper>(
      m_store, m_lease, m_options.heartbeatMs, [this](const std::string& why) {
        QMetaObject::invokeMethod(
            this,
            [this, message = QString::fromStdString(why)] {
              if (!m_active) return;
              stopFollowing();
              qCWarning(lcRunMonitor, "%s", qPrintable(message));
              emit leaseLost(message);
            },
            Qt::QueuedConnection);
      });
  qCInfo(lcRunMonitor, "following run %lld (%s)", static_cast<long long>(m_runId),
         m_tookOver ? "took over a stale lease" : "new lease");
  poll();
  return ok();
}

// The monitor's memory of each rank, rebuilt from the run log: where to read on, the last seq,
// and the hello/done/error events and last log lines the status decisions need.
Result<void> RunMonitor::restoreStreams() {
  auto run = m_reader->run(m_runId);
  if (!run) return run.error();
  if (!*run) return fail("run " + std::to_string(m_runId) + " is not in the run log");
  m_status = (*run)->status;
  // A retry's ranks write fresh files: its offsets, seq and done/error events are its own.
  m_attempt = (*run)->attempt;
  auto noted = m_reader->anomalies(m_runId, m_attempt);
  if (!noted) return noted.error();
  // Built aside and swapped in whole: a read that fails half way must not leave some ranks
  // restored and others ahead of the run log.
  std::vector<EventStream> streams;
  for (int rank = 0; rank < worldSize(); ++rank) {
    EventStream stream;
    stream.rank = rank;
    auto events = m_reader->offset(m_runId, rank, RankFile::events);
    auto log = m_reader->offset(m_runId, rank, RankFile::log);
    auto seq = m_reader->maxSeq(m_runId, rank);
    auto hello = m_reader->lastEvent(m_runId, rank, "hello");
    auto done = m_reader->lastEvent(m_runId, rank, "done");
    auto error = m_reader->lastEvent(m_runId, rank, "error");
    auto words = m_reader->logLines(m_runId, rank, kLastWordsLines);
    for (const std::string* message :
         {events ? nullptr : &events.message(), log ? nullptr : &log.message(),
          seq ? nullptr : &seq.message(), hello ? nullptr : &hello.message(),
          done ? nullptr : &done.message(), error ? nullptr : &error.message(),
          words ? nullptr : &words.message()}) {
      if (message) return fail(*message);
    }
    stream.eventsOffset = *events;
    stream.logOffset = *log;
    // A file truncated from outside earlier: its byte 0 is at its last truncation's offset.
    for (const Anomaly& anomaly : *noted) {
      if (anomaly.rank != rank || anomaly.kind != Anomaly::Kind::gap) continue;
      if (anomaly.detail.startsWith(truncationNote(rankFileName(rank, RankFile::events))))
        stream.eventsBase = std::max(stream.eventsBase, anomaly.offset);
      if (anomaly.detail.startsWith(truncationNote(rankFileName(rank, RankFile::log))))
        stream.logBase = std::max(stream.logBase, anomaly.offset);
    }
    stream.lastSeq = *seq;
    if (auto aside = m_asideSeq.find(rank); aside != m_asideSeq.end())
      stream.lastSeq = std::max(stream.lastSeq, aside->second);
    stream.hello = hello->has_value();
    stream.done = payloadOf<spec::DoneEvent>(*done);
    stream.lastError = payloadOf<spec::ErrorEvent>(*error);
    for (const LogLine& line : *words) stream.lastLogLines << line.text;
    streams.push_back(std::move(stream));
  }
  m_streams = std::move(streams);
  m_streamsAhead = false;
  return ok();
}

// Reads what is new in one rank's two files and queues the chunks; true when both files were
// read to their current end. `exited`: the rank's process has ended.
Result<bool> RunMonitor::readRank(EventStream& stream, bool exited, std::vector<Ingesting>& out) {
  auto events = readRankFile(stream, RankFile::events);
  auto log = readRankFile(stream, RankFile::log);
  // Reading cannot tell a file truncated or deleted from outside from one with nothing new; a
  // stat can, and costs only reads that found nothing (or failed).
  bool changed = false;
  for (const auto& [file, read] : {std::pair{RankFile::events, &events}, {RankFile::log, &log}}) {
    if (*read && !(*read)->isEmpty()) continue;
    auto found = noticeOutsideChange(stream, file, exited, out);
    if (!found) return found.error();
    changed = changed || *found;
  }
  if (changed) return false;  // read again at once, from the new offsets
  if (!events) return events.error();
  if (!log) return log.error();
  FileChunk eventsChunk =
      parseEventsChunk(m_runId, *events, stream, events->size() >= m_options.maxReadBytes);
  eventsChunk.attempt = m_attempt;
  if (stream.rank == 0) emitSteps(eventsChunk);
  if (eventsChunk.endOffset > eventsChunk.startOffset) {
    auto receipt = m_store.ingest(eventsChunk);
    out.push_back({std::move(eventsChunk), std::move(receipt)});
  }
  FileChunk logChunk = parseLogChunk(m_runId, *log, stream, log->size() >= m_options.maxReadBytes);
  logChunk.attempt = m_attempt;
  if (logChunk.endOffset > logChunk.startOffset) {
    auto receipt = m_store.ingest(logChunk);
    out.push_back({std::move(logChunk), std::move(receipt)});
  }
  return events->size() < m_options.maxReadBytes && log->size() < m_options.maxReadBytes;
}

// Up to maxReadBytes of one of the rank's files from where the run log has read it; nothing
// from a file found deleted.
Result<QByteArray> RunMonitor::readRankFile(const EventStream& stream, RankFile file) {
  if (m_gone.contains({stream.rank, file})) return QByteArray();
  if (file == RankFile::events) {
    return m_handle.readEvents(stream.rank, stream.eventsOffset - stream.eventsBase,
                               m_options.maxReadBytes);
  }
  return m_handle.readLog(stream.rank, stream.logOffset - stream.logBase, m_options.maxReadBytes);
}

// A rank file changed from outside while followed; true when one was found.
// - Truncated (shorter than what was read of it): the file's byte 0 now follows what was read,
//   and the file is read again from its start. The launchers open the rank files O_APPEND, so
//   what the rank writes after the truncation lands at the new end and is read; only lines
//   written between the last read and the truncation are lost (a seq gap says so).
// - Deleted: the rank writes on into an unlinked file nobody can read. The file counts as read
//   to its end, so the run still ends when its ranks do.
// Either is stored as an anomaly; a truncation's offset is where restoreStreams finds the base.
Result<bool> RunMonitor::noticeOutsideChange(EventStream& stream, RankFile file, bool exited,
                                             std::vector<Ingesting>& out) {
  if (m_gone.contains({stream.rank, file})) return false;
  auto stat = m_handle.statRankFile(stream.rank, file);
  if (!stat) return stat.error();
  const bool events = file == RankFile::events;
  const qint64 offset = events ? stream.eventsOffset : stream.logOffset;
  qint64& base = events ? stream.eventsBase : stream.logBase;
  const bool truncated = stat->exists && stat->size < offset - base;
  const bool deleted = !stat->exists && (offset > 0 || exited);
  if (!truncated && !deleted) return false;
  const QString name = rankFileName(stream.rank, file);
  const QString detail =
      truncated ? truncationNote(name) + QString(
                                             " from %1 to %2 bytes while followed (truncated "
                                             "from outside); read again from its start: only "
                                             "lines written after that and before the "
                                             "truncation are lost")
                                             .arg(offset - base)
                                             .arg(stat->size)
                : QString(
                      "%1 was deleted while followed: the rank writes on into a file nobody "
                      "can read, so its later lines are lost; its exit code tells how it ended")
                      .arg(name);
  qCWarning(lcRunMonitor, "run %lld: %s", static_cast<long long>(m_runId), qPrintable(detail));
  if (truncated) {
    base = offset;
    (events ? stream.cuttingEvents : stream.cuttingLog) = false;
  } else {
    m_gone.insert({stream.rank, file});
  }
  FileChunk chunk;
  chunk.runId = m_runId;
  chunk.attempt = m_attempt;
  chunk.rank = stream.rank;
  chunk.file = file;
  chunk.noteOnly = true;
  chunk.startOffset = offset;
  chunk.endOffset = offset;
  chunk.anomalies.push_back(
      {m_runId, stream.rank, Anomaly::Kind::gap, stream.lastSeq, offset, detail});
  auto receipt = m_store.ingest(chunk);
  out.push_back({std::move(chunk), std::move(receipt)});
  return true;
}

void RunMonitor::emitSteps(const FileChunk& chunk) {
  for (const MetricRow& row : chunk.metrics) {
    if (row.key == QLatin1String("loss")) emit stepReached(row.step, row.value, row.time);
  }
}

void RunMonitor::poll() {
  if (!m_active || m_polling) return;
  // The run log refused the last try: the next waits out its backoff (the poll timer, the
  // handle's signals and a read cut short all land here).
  if (m_storeFailures > 0 && !m_retryAt.hasExpired()) return;
  m_polling = true;
  // After a refusal the streams still hold what the refused rows said (a done event, read
  // offsets): nothing is read or decided from them until they are rebuilt from what the run log
  // has; a rebuild that fails (the server gone) is one more refused try.
  if (m_streamsAhead) {
    if (auto r = restoreStreams(); !r) {
      noteStoreRefusal(r.message());
      m_polling = false;
      return;
    }
  }
  // Rank states first: a rank seen exited here has written everything the reads below get.
  const QList<RankState> ranks = m_handle.ranks();
  bool caughtUp = true;     // every file read to its current end
  bool moreToRead = false;  // a read stopped at maxReadBytes: read on at once
  std::vector<Ingesting> pending;
  for (EventStream& stream : m_streams) {
    const bool exited = std::any_of(ranks.begin(), ranks.end(), [&](const RankState& r) {
      return r.rank == stream.rank && r.phase == RankState::Phase::exited;
    });
    auto complete = readRank(stream, exited, pending);
    noteReadOutcome(stream, complete);
    if (!complete || !*complete) caughtUp = false;
    if (complete && !*complete) moreToRead = true;
  }
  bool stored = true;
  const FileChunk* refused = nullptr;  // the first chunk the run log refused for good this poll
  std::string why;                     // the first refusal's message
  for (auto& [chunk, receipt] : pending) {
    auto r = receipt.get();
    if (!r) {
      if (stored) why = r.message();
      stored = false;
      if (refused == nullptr && r.error().permanent) refused = &chunk;
    }
  }
  if (refused != nullptr) {
    // A refusal that a retry meets again (a constraint or a trigger refusing a value): the chunk
    // goes in line by line, so the line the run log will never take is set aside and the run
    // goes on. A refusal that may pass (a full disk, a lost connection) is only retried: nothing
    // is set aside while the run log cannot write.
    if (auto r = ingestLineByLine(*refused); !r)
      qCWarning(lcRunMonitor, "run %lld: %s (retrying)", static_cast<long long>(m_runId),
                r.message().c_str());
  }
  if (stored && !pending.empty() && m_storeFailures > 0) {
    qCInfo(lcRunMonitor, "run %lld: the run log takes rows again, after %d refused tries",
           static_cast<long long>(m_runId), m_storeFailures);
    m_storeFailures = 0;
  }
  const bool eventsArrived = std::any_of(pending.begin(), pending.end(), [](const Ingesting& i) {
    return i.chunk.file == RankFile::events && !i.chunk.events.empty();
  });
  if (!stored) {
    noteStoreRefusal(why);
    // The run log refused a chunk (a full disk, another writer): the next poll, after the
    // backoff, reads on from what it has (the poll's first step).
    m_streamsAhead = true;
    m_polling = false;
    return;
  }
  decide(ranks, caughtUp);
  watchStall(ranks, eventsArrived);
  m_polling = false;
  // Only a read cut short re-polls at once. A failed read (host unreachable while the handle
  // reconnects) waits for the poll timer: re-polling at once would spin on the error.
  if (m_active && moreToRead) QTimer::singleShot(0, this, &RunMonitor::poll);
}

// A full disk (on this machine or the PostgreSQL server's) or a lost server can last minutes:
// each try after a refusal waits twice as long as the one before, from pollMs up to maxRetryMs,
// and each says so, so the log shows the cause while it lasts without a line per poll.
void RunMonitor::noteStoreRefusal(const std::string& why) {
  ++m_storeFailures;
  const int doublings = std::min(m_storeFailures - 1, 20);
  const qint64 delayMs = std::min<qint64>(qint64{std::max(m_options.pollMs, 1)} << doublings,
                                          std::max(m_options.maxRetryMs, m_options.pollMs));
  m_retryAt.setRemainingTime(delayMs);
  qCWarning(lcRunMonitor,
            "run %lld: the run log refused its rows: %s (try %d; the next in %.1f s; nothing is "
            "lost: the rank files keep the lines)",
            static_cast<long long>(m_runId), why.c_str(), m_storeFailures, delayMs / 1000.0);
}

Result<void> RunMonitor::ingestLineByLine(const FileChunk& chunk) {
  // Where each line starts: every row carries its line's offset (a log line, an event and its
  // metrics, an anomaly); bytes before the first of them (a cut line's rest) go with it.
  std::vector<qint64> starts{chunk.startOffset};
  auto note = [&](qint64 offset) {
    if (offset > chunk.startOffset && offset < chunk.endOffset) starts.push_back(offset);
  };
  for (const EventRow& row : chunk.events) note(row.offset);
  for (const LogLine& row : chunk.logs) note(row.offset);
  for (const Anomaly& row : chunk.anomalies) note(row.offset);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const qint64 begin = starts[i];
    const qint64 end = i + 1 < starts.size() ? starts[i + 1] : chunk.endOffset;
    auto inLine = [&](qint64 offset) { return offset >= begin && offset < end; };
    FileChunk line = bytesOf(chunk, begin, end);
    for (const EventRow& row : chunk.events)
      if (inLine(row.offset)) line.events.push_back(row);
    for (const MetricRow& row : chunk.metrics)
      if (inLine(row.offset)) line.metrics.push_back(row);
    for (const LogLine& row : chunk.logs)
      if (inLine(row.offset)) line.logs.push_back(row);
    for (const Anomaly& row : chunk.anomalies)
      if (inLine(row.offset)) line.anomalies.push_back(row);
    auto stored = m_store.ingest(line).get();
    if (stored) continue;
    if (!stored.error().permanent) return stored.error();  // may pass: the next poll retries
    // Refused alone: kept verbatim as a log line, with an anomaly that says why.
    FileChunk aside = bytesOf(chunk, begin, end);
    for (const EventRow& row : line.events)
      aside.logs.push_back(
          {row.runId, row.rank, line.file, row.offset, QString::fromUtf8(row.json)});
    for (const LogLine& row : line.logs) aside.logs.push_back(row);
    aside.anomalies.push_back(
        {line.runId, line.rank, Anomaly::Kind::malformed, -1, begin,
         QStringLiteral("the run log refused this line (%1); kept as a log line")
             .arg(QString::fromStdString(stored.message()))});
    if (auto kept = m_store.ingest(std::move(aside)).get(); !kept) return kept.error();
    for (const EventRow& row : line.events)
      m_asideSeq[line.rank] = std::max(m_asideSeq[line.rank], row.seq);
    qCWarning(lcRunMonitor,
              "run %lld rank %d: the run log refused the line at byte %lld (%s); "
              "kept as a log line",
              static_cast<long long>(m_runId), line.rank, static_cast<long long>(begin),
              stored.message().c_str());
  }
  return ok();
}

// One warning when a rank's files become unreadable and one line when they are readable again,
// not one per poll: an SSH outage can last minutes.
void RunMonitor::noteReadOutcome(EventStream& stream, const Result<bool>& outcome) {
  const auto run = static_cast<long long>(m_runId);
  if (!outcome) {
    if (stream.failedReads++ == 0) {
      qCWarning(lcRunMonitor, "run %lld rank %d: %s (retrying every poll)", run, stream.rank,
                outcome.message().c_str());
    }
    return;
  }
  if (stream.failedReads > 0) {
    qCInfo(lcRunMonitor, "run %lld rank %d: reading again after %d failed reads", run, stream.rank,
           stream.failedReads);
  }
  stream.failedReads = 0;
}

RunMonitor::Failure RunMonitor::describeDeath(const RankState& rank,
                                              const EventStream& stream) const {
  Failure failure;
  if (stream.lastError) {
    failure.error = errorText(rank.rank, *stream.lastError, m_handle.location().runDir);
    if (stream.lastError->kind == spec::ErrorKind::oom) failure.status = spec::RunStatus::oom;
    return failure;
  }
  QString how = "exited";
  if (rank.signal != 0) {
    how = QString("was killed by signal %1").arg(rank.signal);
  } else if (rank.exitCode >= 0) {
    how = QString("exited with code %1").arg(rank.exitCode);
  }
  failure.error = QString("rank %1 %2 without `done`").arg(rank.rank).arg(how);
  if (m_gone.contains({rank.rank, RankFile::events}))
    failure.error += " (its events file was deleted while the run ran)";
  const QStringList words = stream.lastLogLines.mid(
      std::max<qsizetype>(0, stream.lastLogLines.size() - m_options.lastWordsLines));
  if (!words.isEmpty()) failure.error += "; last words:\n" + words.join('\n');
  return failure;
}

void RunMonitor::decide(const QList<RankState>& ranks, bool caughtUp) {
  const bool anyHello =
      std::any_of(m_streams.begin(), m_streams.end(), [](const auto& s) { return s.hello; });
  if (m_status == spec::RunStatus::queued && anyHello)
    (void)setStatus(spec::RunStatus::running, {});
  bool allExited = !ranks.isEmpty() && int(ranks.size()) >= int(m_streams.size());
  for (const RankState& rank : ranks) {
    if (rank.phase != RankState::Phase::exited) {
      allExited = false;
      continue;
    }
    if (rank.rank < 0 || rank.rank >= int(m_streams.size()) || !caughtUp) continue;
    const EventStream& stream = m_streams[std::size_t(rank.rank)];
    // A rank whose events file was deleted from outside cannot be read to its `done`: its exit
    // code tells (shardtrain exits 0 only after `done`).
    const bool unreadable = m_gone.contains({rank.rank, RankFile::events});
    const bool exitedCleanly = rank.signal == 0 && rank.exitCode == 0;
    const bool died = stream.done ? stream.done->status == spec::DoneStatus::failed
                                  : !(unreadable && exitedCleanly);
    if (died && !m_failure && !stream.done) {
      m_failure = describeDeath(rank, stream);
      qCInfo(lcRunMonitor, "run %lld: %s", static_cast<long long>(m_runId),
             qPrintable(m_failure->error));
      (void)setStatus(m_failure->status, m_failure->error);  // finish() stores it for sure
    }
    if (died && !m_stopSent) {
      m_stopSent = true;  // one dead rank stops the others (they would hang in a collective)
      m_handle.stop();
    }
  }
  if (allExited && caughtUp) finish();
}

// A stall is judged on this machine's monotonic clock from when this monitor last read an event
// (a monitor that takes over starts counting afresh): the ranks' own `t` may come from another
// machine's clock.
void RunMonitor::watchStall(const QList<RankState>& ranks, bool eventsArrived) {
  if (eventsArrived || !m_sinceEvent.isValid()) {
    m_sinceEvent.start();
    m_stallReported = false;
    return;
  }
  if (m_options.stallAfterS <= 0 || m_stallReported || m_finished) return;
  const bool allLive = !ranks.isEmpty() && int(ranks.size()) >= int(m_streams.size()) &&
                       std::none_of(ranks.begin(), ranks.end(), [](const RankState& r) {
                         return r.phase == RankState::Phase::exited;
                       });
  const double silentS = double(m_sinceEvent.elapsed()) / 1000.0;
  if (!allLive || silentS < m_options.stallAfterS) return;
  m_stallReported = true;
  qCInfo(lcRunMonitor, "run %lld: no event for %.1f s while its ranks live",
         static_cast<long long>(m_runId), silentS);
  emit stalled(silentS);
}

RunMonitor::Failure RunMonitor::finalOutcome() const {
  // oom wins: a peer that lost its partner to an oom reports peer_lost, not the cause.
  for (const EventStream& stream : m_streams) {
    if (stream.lastError && stream.lastError->kind == spec::ErrorKind::oom) {
      return {spec::RunStatus::oom,
              errorText(stream.rank, *stream.lastError, m_handle.location().runDir)};
    }
  }
  if (m_failure) return *m_failure;
  Failure outcome{spec::RunStatus::complete, {}};
  for (const EventStream& stream : m_streams) {
    if (!stream.done) continue;  // not reached: a rank without done is m_failure
    if (stream.done->status == spec::DoneStatus::failed) {
      return {spec::RunStatus::failed,
              stream.lastError
                  ? errorText(stream.rank, *stream.lastError, m_handle.location().runDir)
                  : QString("rank %1 reported failed").arg(stream.rank)};
    }
    if (stream.done->status == spec::DoneStatus::stopped) outcome.status = spec::RunStatus::stopped;
  }
  return outcome;
}

void RunMonitor::finish() {
  const Failure outcome = finalOutcome();
  std::optional<double> objective;
  if (!m_streams.empty() && m_streams.front().done && !m_streams.front().done->objective.empty()) {
    objective = m_streams.front().done->objective.front();
  }
  // The final status is what every reader of the run log goes by: one the run log may take
  // later (a lost connection) is retried with the refusals' backoff, the run still followed.
  if (auto r = setStatus(outcome.status, outcome.error, objective); !r && !r.error().permanent) {
    noteStoreRefusal(r.message());
    return;
  }
  m_finished = true;
  stopFollowing();
  (void)m_store.releaseLease(m_lease).get();
  qCInfo(lcRunMonitor, "run %lld ended: %s", static_cast<long long>(m_runId),
         spec::to_string(outcome.status).data());
  emit finished(outcome.status, outcome.error);
}

Result<void> RunMonitor::setStatus(spec::RunStatus status, const QString& error,
                                   std::optional<double> objective) {
  auto r = m_store.setRunStatus(m_runId, status, error, objective).get();
  if (!r) {
    qCWarning(lcRunMonitor, "run %lld: %s", static_cast<long long>(m_runId), r.message().c_str());
    return r;  // m_status stays: a `running` not stored is set again on the next poll
  }
  if (status == m_status) return ok();
  m_status = status;
  emit statusChanged(status);
  return ok();
}

void RunMonitor::stopFollowing() {
  m_active = false;
  m_pollTimer.stop();
  m_leaseKeeper.reset();
}

}  // namespace shardscope::backend
