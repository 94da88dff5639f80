// RunMonitor: follows one run through its RunHandle. It tails every rank's events and log files
// from the offsets stored in the run log, stores each chunk's rows with its new offset (so a
// kill -9 of the monitor loses and duplicates nothing), and decides the run's status:
//   running   on the first `hello`
//   failed    as soon as a rank exits without `done` (with its last error event or last log
//             lines); the monitor then stops the other ranks
//   oom       when any rank reported an `error` of kind oom
//   complete / stopped / failed from the ranks' `done` events once every rank has exited.
// It also tells a stall: no new event from any rank for stallAfterS while every rank lives
// (stalled, once per stall; a new event re-arms it). The status stays running.
// A monitor holds a lease on its run (pid + heartbeat); a second one refuses to follow a run
// whose holder is alive, and takes over (catching up from the stored offsets) when it is not.
#pragma once

#include <QDeadlineTimer>
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "backend/launch/launcher.h"
#include "backend/monitor/eventstream.h"
#include "backend/monitor/leasekeeper.h"
#include "backend/store/runstore.h"
#include "spec/result.h"
#include "spec/status.h"

namespace shardscope::backend {

class RunMonitor : public QObject {
  Q_OBJECT
 public:
  struct Options {
    int pollMs = 200;               ///< file poll interval (the handle's filesGrew also polls)
    int heartbeatMs = 2000;         ///< lease heartbeat interval
    double staleAfterS = 10;        ///< a holder silent this long is taken over
    qint64 maxReadBytes = 1 << 20;  ///< bytes read per file per poll
    int lastWordsLines = 5;         ///< stderr lines quoted when a rank dies without an error
    /// After the run log refuses a write that may pass (a full disk, a lost server), the next
    /// try waits pollMs, then twice as long each time, up to this; the rank files keep the lines.
    int maxRetryMs = 10000;
    double stallAfterS = 0;  ///< no event this long while every rank lives: stalled(); 0 = never
  };

  /// `store` and `handle` must outlive the monitor.
  RunMonitor(RunStore& store, qint64 runId, RunHandle& handle, const Options& options,
             QObject* parent = nullptr);
  RunMonitor(RunStore& store, qint64 runId, RunHandle& handle, QObject* parent = nullptr);
  ~RunMonitor() override;

  /// Takes the lease and starts following from the stored offsets. Fails when another live
  /// monitor follows the run (the message names its pid and host). One that failed on the run
  /// log (an error that may pass) may be called again; it takes the lease as the same holder.
  [[nodiscard]] Result<void> start();
  /// The live monitor that refused us the lease in the last start(), if that was the reason.
  const std::optional<LeaseRecord>& refusedBy() const { return m_refusedBy; }
  /// True when the lease was taken from a stale or dead holder.
  bool tookOver() const { return m_tookOver; }
  bool isFinished() const { return m_finished; }
  spec::RunStatus status() const { return m_status; }
  /// Malformed event lines seen by this monitor (each also stored as a log line).
  int malformedLines() const;
  /// Options::stallAfterS from now on (0: never report a stall).
  void setStallAfter(double seconds) { m_options.stallAfterS = seconds; }

 public slots:
  /// Reads what is new and updates the status (also runs on the poll timer).
  void poll();

 signals:
  void statusChanged(spec::RunStatus status);
  /// Every rank has exited and every line is stored.
  void finished(spec::RunStatus status, const QString& error);
  /// Another monitor took the lease; this one stopped following.
  void leaseLost(const QString& message);
  /// Rank 0 reported a training step, once per step event in file order (its loss, and the event's
  /// unix time `t`).
  void stepReached(qint64 step, double loss, double t);
  /// No rank wrote an event for `silentS` seconds (>= Options::stallAfterS) while every rank
  /// lives. Once per stall: an event from any rank re-arms it.
  void stalled(double silentS);

 private:
  struct Failure {
    spec::RunStatus status = spec::RunStatus::failed;
    QString error;
  };

  /// A chunk on its way into the run log, kept until the store answers.
  struct Ingesting {
    FileChunk chunk;
    RunStore::Pending<IngestReceipt> receipt;
  };

  Result<void> restoreStreams();
  Result<bool> readRank(EventStream& stream, bool exited, std::vector<Ingesting>& out);
  Result<QByteArray> readRankFile(const EventStream& stream, RankFile file);
  Result<bool> noticeOutsideChange(EventStream& stream, RankFile file, bool exited,
                                   std::vector<Ingesting>& out);
  /// A chunk the run log refused for good (Error::permanent) goes in line by line; a line
  /// refused for good alone is stored as a log line with an anomaly instead. A refusal that may
  /// pass stops the split there, and the next poll reads on from what the run log holds.
  Result<void> ingestLineByLine(const FileChunk& chunk);
  void emitSteps(const FileChunk& chunk);
  void noteReadOutcome(EventStream& stream, const Result<bool>& outcome);
  /// A poll whose rows the run log refused: warns and sets when the next try may run.
  void noteStoreRefusal(const std::string& why);
  void decide(const QList<RankState>& ranks, bool caughtUp);
  /// After a poll: an event arrived (re-arm), or the ranks live and the silence is a stall.
  void watchStall(const QList<RankState>& ranks, bool eventsArrived);
  /// Stores the run's status; m_status follows only what was stored.
  Result<void> setStatus(spec::RunStatus status, const QString& error,
                         std::optional<double> objective = std::nullopt);
  Failure describeDeath(const RankState& rank, const EventStream& stream) const;
  Failure finalOutcome() const;
  void finish();
  void stopFollowing();
  int worldSize() const;

  RunStore& m_store;
  qint64 m_runId;
  int m_attempt = 0;  // the run's attempt when the streams were restored
  RunHandle& m_handle;
  Options m_options;
  LeaseRecord m_lease;
  std::optional<RunReader> m_reader;
  std::vector<EventStream> m_streams;
  QTimer m_pollTimer;
  std::unique_ptr<LeaseKeeper> m_leaseKeeper;  // while following
  spec::RunStatus m_status = spec::RunStatus::queued;
  std::optional<Failure> m_failure;
  std::optional<LeaseRecord> m_refusedBy;
  bool m_active = false;
  bool m_finished = false;
  bool m_stopSent = false;
  bool m_tookOver = false;
  bool m_polling = false;
  int m_storeFailures = 0;   // polls in a row whose rows the run log refused
  QDeadlineTimer m_retryAt;  // while m_storeFailures > 0: no poll before it (the backoff)
  // The run log refused a poll's rows and was not read back since: m_streams are ahead of it
  // (offsets past the refused lines, a done event it never stored). The next poll rebuilds them.
  bool m_streamsAhead = false;
  QElapsedTimer m_sinceEvent;  // since the last new event line (or start())
  bool m_stallReported = false;
  // Per rank, the highest seq of an event line kept as a log line (refused for good): the run
  // log's own highest seq stops below it, and restoring from that alone would report the lines
  // set aside as missing events.
  std::map<int, qint64> m_asideSeq;
  // Rank files deleted from outside while followed: read to their end for good (their rank
  // writes on into an unlinked file nobody can read).
  std::set<std::pair<int, RankFile>> m_gone;
};

}  // namespace shardscope::backend
