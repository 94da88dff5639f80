// HostWorker: everything the Hosts panel does that may block (DNS, SSH, known_hosts and run-log
// writes) runs here, in the worker's own thread; results come back as queued signals. HostWorker
// is driven only through HostJobs, which owns the thread.
#pragma once

#include <QObject>
#include <QThread>

#include "backend/ssh/hostcheck.h"
#include "backend/store/runrecords.h"

namespace shardscope::ui {

class HostWorker : public QObject {
  Q_OBJECT

 public:
  /// The step-by-step check; reports each step, then the key offer (if any), then finished.
  void check(const backend::HostCheckRequest& request);
  /// Adds the key the host offers to known_hosts when its fingerprint is `fingerprint`, and
  /// records the trust in the run log at `dbPath` (skipped when empty).
  void trust(const backend::HostCheckRequest& request, const QString& fingerprint,
             const QString& dbPath);
  /// Saves `host` in the run log at `dbPath`.
  void save(const backend::HostRecord& host, const QString& dbPath);

 signals:
  void stepReported(const QString& alias, const shardscope::backend::CheckStep& step);
  void keyOffered(const shardscope::backend::HostKeyOffer& offer);
  void checkFinished(const QString& alias, const shardscope::backend::HostCheckOutcome& outcome);
  void trustFinished(const QString& alias, bool ok, const QString& message);
  void saveFinished(const QString& alias, bool ok, const QString& message);
};

/// Owns the worker thread; each call posts one job to it.
class HostJobs : public QObject {
  Q_OBJECT

 public:
  explicit HostJobs(QObject* parent = nullptr);
  ~HostJobs() override;
  HostWorker* worker() const { return m_worker; }
  void check(const backend::HostCheckRequest& request);
  void trust(const backend::HostCheckRequest& request, const QString& fingerprint,
             const QString& dbPath);
  void save(const backend::HostRecord& host, const QString& dbPath);
  /// The thread the jobs run in (tests compare it with the GUI thread).
  const QThread* thread() const { return &m_thread; }

 private:
  QThread m_thread;
  HostWorker* m_worker = nullptr;
};

}  // namespace shardscope::ui
