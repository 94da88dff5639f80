// StoreWriter: the run log's one writer thread (RunStore's internals). Callers queue jobs; the
// thread runs as many as are waiting (up to maxBatchRows, or what arrived within
// flushIntervalMs) in one transaction, each job inside its own savepoint so one bad job fails
// alone, and fulfils every job's future only after COMMIT returned.
#pragma once

#include <QHash>
#include <QSet>
#include <QString>

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "backend/store/db.h"
#include "spec/result.h"

namespace shardscope::backend {

/// What a batch changed, for RunStore's coalesced signals.
struct ChangeSet {
  bool runs = false;        ///< runs, their status or leases changed
  QSet<qint64> metricRuns;  ///< runs that got metric rows
  QSet<qint64> eventRuns;   ///< runs that got event or log rows
  bool hosts = false;
  bool studies = false;  ///< a study was created or changed (schema v3)
  bool empty() const {
    return !runs && !hosts && !studies && metricRuns.isEmpty() && eventRuns.isEmpty();
  }
};

/// The writer connection as a job sees it: cached statements and metric-key ids.
class WriteContext {
 public:
  explicit WriteContext(Db& db) : m_db(db) {}

  Db& db() { return m_db; }
  /// A prepared statement for `sql`, prepared once per connection, reset and unbound.
  [[nodiscard]] Result<Statement*> statement(const std::string& sql);
  /// The id of metric name `key`, inserting it when new.
  [[nodiscard]] Result<qint64> metricKeyId(const QString& key);
  ChangeSet& changes() { return m_changes; }

  // The writer's bookkeeping around a transaction, and around one job's savepoint: the metric
  // keys a rolled-back savepoint inserted do not exist (a later commit must not record them).
  void committed();
  void rolledBack();
  ChangeSet takeChanges();
  QHash<QString, qint64> stagedKeys() const { return m_stagedKeys; }
  void restoreStagedKeys(QHash<QString, qint64> keys) { m_stagedKeys = std::move(keys); }

 private:
  Db& m_db;
  std::unordered_map<std::string, Statement> m_statements;
  QHash<QString, qint64> m_keys;        // committed metric keys
  QHash<QString, qint64> m_stagedKeys;  // inserted by the open transaction
  ChangeSet m_changes;
};

/// One queued unit of work (type-erased; see StoreWriter::submit).
class WriteJob {
 public:
  virtual ~WriteJob() = default;
  /// Runs inside the batch's transaction; an error rolls back this job's savepoint only.
  virtual Result<void> run(WriteContext& context) = 0;
  /// Fulfils the future: with the job's result, or with `batchError` when the batch was lost.
  virtual void finish(const Error* batchError) = 0;
  std::size_t rows = 1;
  bool urgent = false;
};

class StoreWriter {
 public:
  struct Options {
    std::size_t maxBatchRows = 50000;  ///< rows per transaction before a commit is forced
    int flushIntervalMs = 2;           ///< longest wait for more jobs before committing
  };
  using CommitHook = std::function<void(const ChangeSet&)>;

  /// Takes the connection and starts the thread; `onCommit` runs on the writer thread.
  StoreWriter(Db db, Options options, CommitHook onCommit);
  StoreWriter(const StoreWriter&) = delete;
  StoreWriter& operator=(const StoreWriter&) = delete;
  /// Commits what is queued, then stops the thread.
  ~StoreWriter();

  /// Queues `fn` (which writes about `rows` rows); the future is ready after its commit.
  template <class T>
  std::future<Result<T>> submit(std::size_t rows, std::function<Result<T>(WriteContext&)> fn,
                                bool urgent = false);
  /// Waits until every job queued before the call is committed (or failed).
  void flush();

 private:
  void enqueue(std::unique_ptr<WriteJob> job);
  void loop();
  std::deque<std::unique_ptr<WriteJob>> takeBatch(std::unique_lock<std::mutex>& lock);
  void runBatch(std::deque<std::unique_ptr<WriteJob>>& batch);
  Result<void> runInSavepoint(WriteJob& job);

  Db m_db;
  Options m_options;
  CommitHook m_onCommit;
  WriteContext* m_context = nullptr;  // the writer thread's, while it runs
  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::deque<std::unique_ptr<WriteJob>> m_queue;
  std::size_t m_queuedRows = 0;
  bool m_urgent = false;
  bool m_stopping = false;
  std::thread m_thread;  // last: starts after every member above exists
};

namespace detail {

template <class T>
class TypedJob final : public WriteJob {
 public:
  explicit TypedJob(std::function<Result<T>(WriteContext&)> fn) : m_fn(std::move(fn)) {}
  std::future<Result<T>> future() { return m_promise.get_future(); }

  Result<void> run(WriteContext& context) override {
    m_result.emplace(m_fn(context));
    if (!m_result->ok()) return m_result->error();
    return ok();
  }
  void finish(const Error* batchError) override {
    if (batchError) {
      m_promise.set_value(Result<T>(*batchError));
    } else if (m_result) {
      m_promise.set_value(std::move(*m_result));
    } else {
      m_promise.set_value(Result<T>(fail("run log: the write was dropped before it ran")));
    }
  }

 private:
  std::function<Result<T>(WriteContext&)> m_fn;
  std::promise<Result<T>> m_promise;
  std::optional<Result<T>> m_result;
};

}  // namespace detail

template <class T>
std::future<Result<T>> StoreWriter::submit(std::size_t rows,
                                           std::function<Result<T>(WriteContext&)> fn,
                                           bool urgent) {
  auto job = std::make_unique<detail::TypedJob<T>>(std::move(fn));
  job->rows = rows == 0 ? 1 : rows;
  job->urgent = urgent;
  auto future = job->future();
  enqueue(std::move(job));
  return future;
}

}  // namespace shardscope::backend
