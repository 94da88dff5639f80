#include "ui/hosts/hostworker.h"

#include <QLoggingCategory>

#include "backend/ssh/knownhosts.h"
#include "backend/ssh/sshconfig.h"
#include "backend/store/runstore.h"

Q_LOGGING_CATEGORY(lcHostWorker, "shardscope.ui.hostworker")

namespace shardscope::ui {

namespace {

// Opens the run log for one write; RunStore's writer thread is this worker's, never the GUI's.
Result<void> writeHost(const QString& dbPath, const backend::HostRecord& host, bool trusted) {
  auto store = backend::RunStore::open(dbPath);
  if (!store) return store.error();
  if (auto saved = (*store)->saveHost(host).get(); !saved) return saved;
  if (trusted) return (*store)->trustHost(host.alias, host.fingerprint).get();
  return {};
}

}  // namespace

void HostWorker::check(const backend::HostCheckRequest& request) {
  qCInfo(lcHostWorker, "checking %s", qPrintable(request.alias));
  const backend::HostCheckOutcome outcome = backend::runHostCheck(
      request, [&](const backend::CheckStep& step) { emit stepReported(request.alias, step); });
  if (outcome.offer) emit keyOffered(*outcome.offer);
  emit checkFinished(request.alias, outcome);
}

void HostWorker::trust(const backend::HostCheckRequest& request, const QString& fingerprint,
                       const QString& dbPath) {
  auto config = backend::SshConfig::load(request.sshConfigPath.toStdString());
  if (!config) {
    emit trustFinished(request.alias, false, QString::fromStdString(config.message()));
    return;
  }
  const backend::KnownHosts known(request.knownHostsPath.toStdString());
  const backend::SshTarget target = config->target(request.alias.toStdString(), known.path());
  auto trusted = known.trust(target, fingerprint.toStdString());
  if (!trusted) {
    emit trustFinished(request.alias, false, QString::fromStdString(trusted.message()));
    return;
  }
  if (!dbPath.isEmpty()) {
    const backend::HostRecord host{request.alias, QString::fromStdString(target.host),
                                   target.port,   QString::fromStdString(target.user),
                                   fingerprint,   std::nullopt};
    if (auto written = writeHost(dbPath, host, true); !written) {
      emit trustFinished(request.alias, false, QString::fromStdString(written.message()));
      return;
    }
  }
  emit trustFinished(request.alias, true, QString::fromStdString(*trusted));
}

void HostWorker::save(const backend::HostRecord& host, const QString& dbPath) {
  auto written = writeHost(dbPath, host, false);
  emit saveFinished(host.alias, bool(written),
                    written ? QString() : QString::fromStdString(written.message()));
}

HostJobs::HostJobs(QObject* parent) : QObject(parent), m_worker(new HostWorker) {
  qRegisterMetaType<backend::CheckStep>();
  qRegisterMetaType<backend::HostKeyOffer>();
  qRegisterMetaType<backend::HostCheckOutcome>();
  m_worker->moveToThread(&m_thread);
  connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
  m_thread.setObjectName(QStringLiteral("host-checks"));
  m_thread.start();
}

HostJobs::~HostJobs() {
  m_thread.quit();
  m_thread.wait();
}

void HostJobs::check(const backend::HostCheckRequest& request) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, request] { w->check(request); });
}

void HostJobs::trust(const backend::HostCheckRequest& request, const QString& fingerprint,
                     const QString& dbPath) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, request, fingerprint, dbPath] {
    w->trust(request, fingerprint, dbPath);
  });
}

void HostJobs::save(const backend::HostRecord& host, const QString& dbPath) {
  QMetaObject::invokeMethod(m_worker, [w = m_worker, host, dbPath] { w->save(host, dbPath); });
}

}  // namespace shardscope::ui
