#include "backend/store/storewriter.h"

#include <QLoggingCategory>

#include <chrono>
#include <utility>

#include "backend/store/storesql.h"

Q_LOGGING_CATEGORY(lcStoreWriter, "shardscope.backend.storewriter")

namespace shardscope::backend {

// ------------------------------------------------------------------------------- WriteContext

Result<Statement*> WriteContext::statement(const std::string& sql) {
  auto it = m_statements.find(sql);
  if (it == m_statements.end()) {
    auto stmt = m_db.prepare(sql);
    if (!stmt) return stmt.error();
    it = m_statements.emplace(sql, std::move(*stmt)).first;
  }
  // A statement that failed halfway (or whose last row was not read) is rewound here.
  it->second.reset();
  it->second.clearBindings();
  return &it->second;
}

Result<qint64> WriteContext::metricKeyId(const QString& key) {
  if (auto it = m_keys.constFind(key); it != m_keys.constEnd()) return *it;
  if (auto it = m_stagedKeys.constFind(key); it != m_stagedKeys.constEnd()) return *it;
  const std::string utf8 = key.toStdString();
  auto select = statement("SELECT id FROM metric_keys WHERE name = ?1");
  if (!select) return select.error();
  if (auto r = (*select)->bindText(1, utf8); !r) return r.error();
  auto found = (*select)->step();
  if (!found) return found.error();
  if (*found) {
    const qint64 id = (*select)->columnInt64(0);
    (*select)->reset();
    m_stagedKeys.insert(key, id);
    return id;
  }
  auto insert = statement("INSERT INTO metric_keys(name) VALUES (?1) RETURNING id");
  if (!insert) return insert.error();
  if (auto r = (*insert)->bindText(1, utf8); !r) return r.error();
  auto id = storesql::insertedId(**insert);
  if (!id) return id.error();
  m_stagedKeys.insert(key, *id);
  return *id;
}

void WriteContext::committed() {
  m_keys.insert(m_stagedKeys);
  m_stagedKeys.clear();
}

void WriteContext::rolledBack() {
  // Keys inserted by the lost transaction do not exist; neither do its changes.
  m_stagedKeys.clear();
  m_changes = {};
}

ChangeSet WriteContext::takeChanges() { return std::exchange(m_changes, {}); }

// -------------------------------------------------------------------------------- StoreWriter

StoreWriter::StoreWriter(Db db, Options options, CommitHook onCommit)
    : m_db(std::move(db)),
      m_options(options),
      m_onCommit(std::move(onCommit)),
      m_thread([this] { loop(); }) {}

StoreWriter::~StoreWriter() {
  {
    const std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  m_wake.notify_one();
  m_thread.join();
}

void StoreWriter::enqueue(std::unique_ptr<WriteJob> job) {
  {
    const std::lock_guard lock(m_mutex);
    m_queuedRows += job->rows;
    m_urgent = m_urgent || job->urgent;
    m_queue.push_back(std::move(job));
  }
  m_wake.notify_one();
}

void StoreWriter::flush() {
  auto done = submit<bool>(
      1, [](WriteContext&) -> Result<bool> { return true; }, true);
  (void)done.get();
}

std::deque<std::unique_ptr<WriteJob>> StoreWriter::takeBatch(std::unique_lock<std::mutex>& lock) {
  m_wake.wait(lock, [this] { return m_stopping || !m_queue.empty(); });
  // Batching: give a trickle of small jobs a moment to gather into one transaction.
  if (!m_stopping && !m_urgent && m_queuedRows < m_options.maxBatchRows) {
    m_wake.wait_for(lock, std::chrono::milliseconds(m_options.flushIntervalMs), [this] {
      return m_stopping || m_urgent || m_queuedRows >= m_options.maxBatchRows;
    });
  }
  std::deque<std::unique_ptr<WriteJob>> batch;
  std::size_t rows = 0;
  while (!m_queue.empty() && (batch.empty() || rows < m_options.maxBatchRows)) {
    rows += m_queue.front()->rows;
    batch.push_back(std::move(m_queue.front()));
    m_queue.pop_front();
  }
  m_queuedRows -= rows;
  if (m_queue.empty()) m_urgent = false;
  return batch;
}

void StoreWriter::loop() {
  WriteContext context(m_db);
  m_context = &context;
  for (;;) {
    std::deque<std::unique_ptr<WriteJob>> batch;
    {
      std::unique_lock lock(m_mutex);
      batch = takeBatch(lock);
      if (batch.empty() && m_stopping) break;
    }
    if (!batch.empty()) runBatch(batch);
  }
  m_context = nullptr;
}

Result<void> StoreWriter::runInSavepoint(WriteJob& job) {
  auto begin = m_context->statement("SAVEPOINT job");
  if (!begin) return begin.error();
  if (auto r = (*begin)->step(); !r) return r.error();
  auto staged = m_context->stagedKeys();
  auto result = job.run(*m_context);
  // SQLite itself rolls back the whole transaction on some errors (a full disk, an I/O error),
  // and a PostgreSQL connection that dropped has none either: then there is no savepoint left,
  // and the batch is lost. (A PostgreSQL statement that failed leaves the transaction open
  // but aborted: ROLLBACK TO below restores it, as in SQLite.)
  if (!m_db.inTransaction()) {
    return result ? fail(m_db.path().toStdString() + ": the transaction was rolled back") : result;
  }
  if (!result) {
    auto undo = m_context->statement("ROLLBACK TO job");
    if (!undo) return undo.error();
    if (auto r = (*undo)->step(); !r) return r.error();
    // The keys this job inserted went with its savepoint: before, they stayed staged, the batch
    // committed them as known, and every later metric of those names pointed at no key.
    m_context->restoreStagedKeys(std::move(staged));
  }
  auto release = m_context->statement("RELEASE job");
  if (!release) return release.error();
  if (auto r = (*release)->step(); !r) return r.error();
  return ok();
}

void StoreWriter::runBatch(std::deque<std::unique_ptr<WriteJob>>& batch) {
  std::optional<Error> lost;
  {
    auto txn = m_db.transaction();
    if (!txn) {
      lost = txn.error();
    } else {
      for (auto& job : batch) {
        if (auto r = runInSavepoint(*job); !r) {
          lost = r.error();
          break;
        }
      }
      if (!lost) {
        if (auto r = txn->commit(); !r) lost = r.error();
      }
    }
  }  // a transaction that did not commit is rolled back here, before any future is ready
  if (lost) {
    qCWarning(lcStoreWriter, "%s", lost->message.c_str());
    m_context->rolledBack();
    for (auto& job : batch) job->finish(&*lost);
    return;
  }
  m_context->committed();
  const ChangeSet changes = m_context->takeChanges();
  if (!changes.empty() && m_onCommit) m_onCommit(changes);
  for (auto& job : batch) job->finish(nullptr);
}

}  // namespace shardscope::backend
