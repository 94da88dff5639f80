#include "app/cli/follower.h"

#include <unistd.h>
#include <QCoreApplication>
#include <QEventLoop>
#include <QLoggingCategory>
#include <QUuid>

#include <cmath>
#include <string_view>

#include "backend/launch/locallauncher.h"

Q_LOGGING_CATEGORY(lcRunFollower, "shardscope.cli.follower")

namespace shardscope::cli {

using backend::EventRow;
using backend::FileChunk;
using backend::MetricRow;
using backend::RankFile;
using spec::RunStatus;

namespace {

constexpr qint64 kChunkBytes = 4 << 20;
constexpr double kLeaseStaleS = 15;
constexpr int kPollMs = 100;
constexpr int kLeaseRenewMs = 3000;

QString qstr(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

// How a rank ended, as the launcher saw it.
QString exitReason(const backend::RankState& s) {
  if (s.signal != 0)
    return QStringLiteral("rank %1 was killed by signal %2").arg(s.rank).arg(s.signal);
  if (s.exitCode > 0)
    return QStringLiteral("rank %1 exited with code %2").arg(s.rank).arg(s.exitCode);
  return QStringLiteral("rank %1 ended without a done event").arg(s.rank);
}

}  // namespace

RunFollower::RunFollower(backend::RunStore& store, backend::RunHandle& handle, qint64 runId,
                         qint64 maxSteps)
    : m_store(store), m_handle(handle), m_runId(runId), m_maxSteps(maxSteps) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  m_lease = {runId, static_cast<qint64>(::getpid()), QString::fromLocal8Bit(host),
             QUuid::createUuid().toString(QUuid::WithoutBraces), 0};
  m_pollTimer.setInterval(kPollMs);
  connect(&m_pollTimer, &QTimer::timeout, this, &RunFollower::poll);
  m_leaseTimer.setInterval(kLeaseRenewMs);
  connect(&m_leaseTimer, &QTimer::timeout, this, [this] {
    m_lease.heartbeat = spec::unix_time_now();
    auto renewed = m_store.renewLease(m_lease).get();
    if (!renewed) qCWarning(lcRunFollower).noquote() << QString::fromStdString(renewed.message());
  });
  connect(&m_handle, &backend::RunHandle::filesGrew, this, &RunFollower::poll);
  connect(&m_handle, &backend::RunHandle::ranksChanged, this, &RunFollower::poll);
  if (auto* local = qobject_cast<backend::LocalRunHandle*>(&m_handle)) {
    connect(local, &backend::LocalRunHandle::rankFailed, this, [this](int, const QString& reason) {
      if (m_launcherReason.isEmpty()) m_launcherReason = reason;
    });
  }
}

RunFollower::~RunFollower() {
  if (m_leaseTimer.isActive()) (void)m_store.releaseLease(m_lease).get();
}

Result<bool> RunFollower::begin() {
  m_lease.heartbeat = spec::unix_time_now();
  auto outcome = m_store.acquireLease(m_lease, kLeaseStaleS).get();
  if (!outcome) return outcome.error();
  if (!outcome->acquired) return false;
  auto reader = m_store.reader();
  if (!reader) return reader.error();
  m_ranks.assign(static_cast<std::size_t>(m_handle.location().worldSize), RankStream{});
  for (int r = 0; r < static_cast<int>(m_ranks.size()); ++r) {
    auto events = reader->offset(m_runId, r, RankFile::events);
    auto log = reader->offset(m_runId, r, RankFile::log);
    if (!events) return events.error();
    if (!log) return log.error();
    m_ranks[r].eventsOffset = *events;
    m_ranks[r].logOffset = *log;
  }
  m_leaseTimer.start();
  return true;
}

spec::RunStatus RunFollower::followToEnd() {
  m_pollTimer.start();
  poll();
  QEventLoop loop;
  QTimer check;
  check.setInterval(kPollMs);
  connect(&check, &QTimer::timeout, &loop, [&] {
    if (m_finished) loop.quit();
  });
  check.start();
  if (!m_finished) loop.exec();
  return m_status;
}

void RunFollower::requestStop() {
  m_stopRequested = true;
  m_handle.stop();
}

void RunFollower::poll() {
  if (m_finished) return;
  // Read the exits before the files: a rank's last words are in its file before its exit shows.
  const bool exited = allExited();
  for (int r = 0; r < static_cast<int>(m_ranks.size()); ++r) {
    auto events = drainEvents(r);
    auto log = drainLog(r);
    if (!events || !log) {
      qCWarning(lcRunFollower).noquote()
          << QString::fromStdString(events ? log.message() : events.message());
    }
  }
  // A rank that ended normally without `done` (or one that failed while others still run):
  // judging the stream is ours, so end the others.
  if (!exited && !m_stopRequested) {
    const QList<backend::RankState> states = m_handle.ranks();
    for (const auto& s : states) {
      if (s.phase == backend::RankState::Phase::exited &&
          s.rank < static_cast<int>(m_ranks.size()) && !m_ranks[s.rank].done &&
          m_launcherReason.isEmpty()) {
        m_launcherReason = exitReason(s);
        const QString& words = m_ranks[s.rank].lastLogLine;
        if (!words.isEmpty()) m_launcherReason += QStringLiteral("; its last words: ") + words;
        m_handle.stop();
      }
    }
  }
  if (exited) finish();
}

Result<void> RunFollower::drainEvents(int rank) {
  RankStream& rs = m_ranks[rank];
  auto bytes = m_handle.readEvents(rank, rs.eventsOffset, kChunkBytes);
  if (!bytes) return bytes.error();
  const qsizetype end = bytes->lastIndexOf('\n');
  if (end < 0) return ok();
  FileChunk chunk;
  chunk.runId = m_runId;
  chunk.rank = rank;
  chunk.file = RankFile::events;
  chunk.startOffset = rs.eventsOffset;
  chunk.endOffset = rs.eventsOffset + end + 1;
  qsizetype pos = 0;
  while (pos <= end) {
    const qsizetype nl = bytes->indexOf('\n', pos);
    const QByteArray line = bytes->mid(pos, nl - pos);
    const qint64 lineOffset = rs.eventsOffset + pos;
    pos = nl + 1;
    if (line.trimmed().isEmpty()) continue;
    auto event = spec::parse_event(std::string_view(line.constData(), line.size()));
    if (!event) {
      chunk.logs.push_back({m_runId, rank, RankFile::events, lineOffset, QString::fromUtf8(line)});
      chunk.anomalies.push_back({m_runId, rank, backend::Anomaly::Kind::malformed, -1, lineOffset,
                                 QString::fromStdString(event.message())});
      continue;
    }
    takeEvent(rank, *event, chunk, lineOffset, line);
  }
  auto receipt = m_store.ingest(std::move(chunk)).get();
  if (!receipt) return receipt.error();
  rs.eventsOffset = receipt->offset;
  return ok();
}

void RunFollower::takeEvent(int rank, const spec::Event& event, FileChunk& chunk, qint64 lineOffset,
                            const QByteArray& line) {
  RankStream& rs = m_ranks[rank];
  const qint64 seq = event.env.seq;
  if (seq >= 0 && rs.lastSeq >= 0 && seq != rs.lastSeq + 1) {
    const auto kind =
        seq <= rs.lastSeq ? backend::Anomaly::Kind::repeat : backend::Anomaly::Kind::gap;
    chunk.anomalies.push_back({m_runId, rank, kind, seq, lineOffset,
                               QStringLiteral("seq %1 after %2").arg(seq).arg(rs.lastSeq)});
  }
  if (seq >= 0) rs.lastSeq = seq;
  chunk.events.push_back(
      EventRow{0, m_runId, rank, seq, qstr(spec::kind_name(event.body)), line, lineOffset});
  const double t = std::isfinite(event.env.t) ? event.env.t : spec::unix_time_now();
  auto metric = [&](qint64 step, const QString& key, double value) {
    chunk.metrics.push_back(MetricRow{m_runId, step, key, value, rank, t});
  };
  if (const auto* s = std::get_if<spec::StepEvent>(&event.body)) {
    metric(s->step, "loss", s->loss);
    metric(s->step, "lr", s->lr);
    metric(s->step, "grad_norm", s->grad_norm);
    metric(s->step, "tokens_per_s", s->tokens_per_s);
    metric(s->step, "mfu", s->mfu);
    if (rank == 0 && onProgress) {
      if (m_firstStepT < 0) {
        m_firstStepT = t;
        m_firstStep = s->step;
      }
      Progress p{s->step, m_maxSteps, s->loss, -1};
      if (s->step > m_firstStep && m_maxSteps > 0) {
        p.etaS = (t - m_firstStepT) / double(s->step - m_firstStep) * double(m_maxSteps - s->step);
      }
      onProgress(p);
    }
  } else if (const auto* e = std::get_if<spec::EvalEvent>(&event.body)) {
    for (const auto& [name, value] : e->metrics) metric(e->step, "eval." + qstr(name), value);
  } else if (const auto* m = std::get_if<spec::MemEvent>(&event.body)) {
    metric(m->step, "mem.allocated", double(m->allocated));
    metric(m->step, "mem.reserved", double(m->reserved));
    metric(m->step, "mem.peak", double(m->peak));
    metric(m->step, "mem.rss", double(m->rss));
  } else if (const auto* d = std::get_if<spec::DoneEvent>(&event.body)) {
    rs.done = true;
    rs.doneStatus = d->status;
    rs.objective = d->objective;
  } else if (const auto* err = std::get_if<spec::ErrorEvent>(&event.body)) {
    if (!rs.hasError) {
      rs.hasError = true;
      rs.error = *err;
    }
  }
}

Result<void> RunFollower::drainLog(int rank) {
  RankStream& rs = m_ranks[rank];
  auto bytes = m_handle.readLog(rank, rs.logOffset, kChunkBytes);
  if (!bytes) return bytes.error();
  const qsizetype end = bytes->lastIndexOf('\n');
  if (end < 0) return ok();
  FileChunk chunk{m_runId, rank, RankFile::log, rs.logOffset, rs.logOffset + end + 1, {}, {},
                  {},      {}};
  qsizetype pos = 0;
  while (pos <= end) {
    const qsizetype nl = bytes->indexOf('\n', pos);
    const QString text = QString::fromUtf8(bytes->mid(pos, nl - pos));
    if (!text.trimmed().isEmpty()) rs.lastLogLine = text;
    chunk.logs.push_back({m_runId, rank, RankFile::log, rs.logOffset + pos, text});
    pos = nl + 1;
  }
  auto receipt = m_store.ingest(std::move(chunk)).get();
  if (!receipt) return receipt.error();
  rs.logOffset = receipt->offset;
  return ok();
}

bool RunFollower::allExited() const {
  const QList<backend::RankState> states = m_handle.ranks();
  if (states.isEmpty()) return false;
  for (const auto& s : states) {
    if (s.phase != backend::RankState::Phase::exited) return false;
  }
  return true;
}

void RunFollower::finish() {
  m_status = decide();
  std::optional<double> objective;
  if (m_status == RunStatus::complete && !m_ranks.empty() && !m_ranks[0].objective.empty()) {
    objective = m_ranks[0].objective.front();
  }
  auto recorded = m_store.setRunStatus(m_runId, m_status, m_error, objective).get();
  if (!recorded) {
    qCWarning(lcRunFollower).noquote() << QString::fromStdString(recorded.message());
  }
  m_pollTimer.stop();
  m_leaseTimer.stop();
  (void)m_store.releaseLease(m_lease).get();
  m_finished = true;
}

RunStatus RunFollower::decide() {
  int firstError = -1;
  bool allComplete = !m_ranks.empty();
  bool anyStopped = false;
  for (int r = 0; r < static_cast<int>(m_ranks.size()); ++r) {
    const RankStream& rs = m_ranks[r];
    if (rs.hasError && firstError < 0) firstError = r;
    if (rs.hasError && rs.error.kind == spec::ErrorKind::oom) {
      m_error = lastWords(r);
      return RunStatus::oom;
    }
    allComplete = allComplete && rs.done && rs.doneStatus == spec::DoneStatus::complete;
    anyStopped = anyStopped || (rs.done && rs.doneStatus == spec::DoneStatus::stopped);
  }
  if (firstError < 0 && allComplete) return RunStatus::complete;
  if (firstError < 0 && anyStopped && m_launcherReason.isEmpty()) return RunStatus::stopped;
  if (firstError < 0 && m_stopRequested) return RunStatus::stopped;
  m_error = firstError >= 0 ? lastWords(firstError) : m_launcherReason;
  if (m_error.isEmpty()) m_error = QStringLiteral("the ranks ended without a done event");
  return RunStatus::failed;
}

QString RunFollower::lastWords(int rank) const {
  const spec::ErrorEvent& e = m_ranks[rank].error;
  QString text = QStringLiteral("rank %1: %2: %3")
                     .arg(rank)
                     .arg(qstr(spec::to_string(e.kind)), QString::fromStdString(e.message));
  if (!e.hint.empty()) text += QStringLiteral(" (%1)").arg(QString::fromStdString(e.hint));
  return text;
}

}  // namespace shardscope::cli
