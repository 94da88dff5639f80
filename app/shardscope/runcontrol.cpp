#include "app/shardscope/runcontrol.h"

#include <QCoreApplication>
#include <QLoggingCategory>
#include <QProcess>
#include <QTimer>

#include <memory>

#include "backend/launch/launchers.h"
#include "backend/store/runreader.h"

Q_LOGGING_CATEGORY(lcRunControl, "shardscope.app.runcontrol")

namespace shardscope::app {

namespace {

// Runs in the control thread: attach and send the graceful stop; the handle stays alive (owned
// by `context`) for the grace period plus a margin, so its SIGKILL timer can fire.
Result<void> stopRun(QObject* context, const QString& dbPath, qint64 runId, int graceS) {
  auto reader = backend::RunReader::open(dbPath);
  if (!reader) return reader.error();
  auto run = reader->run(runId);
  if (!run) return run.error();
  if (!*run)
    return fail("run " + std::to_string(runId) + " is no longer in " + dbPath.toStdString());
  const backend::RunRecord& record = **run;
  if (record.location.isEmpty()) {
    return fail("run " + record.name.toStdString() +
                " has no recorded location (it never started)");
  }
  auto location = backend::RunLocation::fromJson(record.location);
  if (!location) return location.error();
  auto launcher = backend::makeLauncher(location->kind, graceS);
  if (!launcher) return launcher.error();
  auto handle = (*launcher)->attach(*location);
  if (!handle) return handle.error();
  backend::RunHandle* raw = handle->release();
  raw->setParent(context);
  raw->stop();
  QTimer::singleShot((graceS + 5) * 1000, raw, &QObject::deleteLater);
  return ok();
}

}  // namespace

RunControl::RunControl(QString dbPath, int graceS, QObject* parent)
    : QObject(parent), m_context(new QObject), m_dbPath(std::move(dbPath)), m_graceS(graceS) {
  m_thread.setObjectName(QStringLiteral("run-control"));
  m_context->moveToThread(&m_thread);
  connect(&m_thread, &QThread::finished, m_context, &QObject::deleteLater);
  m_thread.start();
}

RunControl::~RunControl() {
  m_thread.quit();
  m_thread.wait();
}

void RunControl::stop(qint64 runId, const QString& runName) {
  QMetaObject::invokeMethod(m_context, [this, runId, runName] {
    const Result<void> done = stopRun(m_context, m_dbPath, runId, m_graceS);
    const QString text =
        done ? tr("Stop sent to %1").arg(runName)
             : tr("Could not stop %1: %2").arg(runName, QString::fromStdString(done.message()));
    qCInfo(lcRunControl, "%s", qPrintable(text));
    emit message(text);
  });
}

void RunControl::launch(const QString& experimentPath) {
  const QString cli = QCoreApplication::applicationDirPath() + QStringLiteral("/shardscope-cli");
  auto* process = new QProcess(this);
  process->setProcessChannelMode(QProcess::MergedChannels);
  connect(process, &QProcess::finished, this, [this, process, experimentPath](int code) {
    const QString output = QString::fromUtf8(process->readAll()).trimmed();
    const QString text = code == 0 ? tr("Started run %1 of %2").arg(output, experimentPath)
                                   : tr("Could not start %1: %2").arg(experimentPath, output);
    qCInfo(lcRunControl, "%s", qPrintable(text));
    emit message(text);
    process->deleteLater();
  });
  connect(process, &QProcess::errorOccurred, this, [this, process, cli](QProcess::ProcessError) {
    emit message(tr("Could not run %1: %2").arg(cli, process->errorString()));
  });
  process->start(cli, {QStringLiteral("--db"), m_dbPath, QStringLiteral("run"),
                       QStringLiteral("--detach"), experimentPath});
}

}  // namespace shardscope::app
