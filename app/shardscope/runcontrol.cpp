#include "app/shardscope/runcontrol.h"

#include "backend/store/db.h"
#include "backend/sweep/trialrunner.h"
#include "spec/search_space.h"

#include <QLoggingCategory>

#include <memory>

Q_LOGGING_CATEGORY(lcRunControl, "shardscope.app.runcontrol")

namespace shardscope::app {

namespace {

// Runs in the control thread: the run (or the sweep) is started and handed to its own process.
QString launchText(const backend::RunLifecycle& life, const QString& path, bool replanOnOom) {
  // Read once: a [search] makes it a sweep (its own process reads it then), else a run.
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  auto shape = spec::load_experiment(path.toStdString(), {}, noPaths);
  if (!shape) {
    return QObject::tr("Could not start %1: %2").arg(path, QString::fromStdString(shape.message()));
  }
  if (shape->search.present) {
    auto space = spec::parse_search_space(shape->search.toml, shape->source);
    if (!space) {
      return QObject::tr("Could not start %1: %2")
          .arg(path, QString::fromStdString(space.message()));
    }
    auto sweep = life.startSweep(path, QString::fromStdString(space->name));
    if (!sweep) {
      return QObject::tr("Could not start %1: %2")
          .arg(path, QString::fromStdString(sweep.message()));
    }
    return QObject::tr("Started sweep %1 of %2 (pid %3, log %4)")
        .arg(sweep->study, path)
        .arg(sweep->pid)
        .arg(sweep->logPath);
  }
  backend::LoadReport report;
  auto exp = life.prepareForRun(std::move(*shape), &report);
  if (!report.demoDataWritten.isEmpty()) {
    qCInfo(lcRunControl, "generated the demo data in %s", qPrintable(report.demoDataWritten));
  }
  if (!exp) {
    return QObject::tr("Could not start %1: %2").arg(path, QString::fromStdString(exp.message()));
  }
  auto store = backend::RunStore::open(life.settings().dbPath);
  if (!store) {
    return QObject::tr("Could not start %1: %2").arg(path, QString::fromStdString(store.message()));
  }
  auto run = life.startDetached(**store, *exp, path, {}, replanOnOom);
  if (!run) {
    return QObject::tr("Could not start %1: %2").arg(path, QString::fromStdString(run.message()));
  }
  if (!run->warning.empty()) qCWarning(lcRunControl, "%s", run->warning.c_str());
  return replanOnOom ? QObject::tr("Started run %1 of %2 (replanned if it runs out of memory)")
                           .arg(run->name, path)
                     : QObject::tr("Started run %1 of %2").arg(run->name, path);
}

}  // namespace

RunControl::RunControl(backend::RunLifecycle::Settings settings, int graceS, QObject* parent)
    : QObject(parent), m_context(new QObject), m_lifecycle(std::move(settings)), m_graceS(graceS) {
  m_thread.setObjectName(QStringLiteral("run-control"));
  m_context->moveToThread(&m_thread);
  connect(&m_thread, &QThread::finished, m_context, &QObject::deleteLater);
  m_thread.start();
}

RunControl::~RunControl() {
  m_thread.quit();
  m_thread.wait();
}

void RunControl::say(const QString& text) {
  qCInfo(lcRunControl, "%s", qPrintable(text));
  emit message(text);
}

void RunControl::sayRequest(const Result<void>& done, const QString& verb, const QString& target) {
  say(done ? tr("%1 sent to %2").arg(verb, target)
           : tr("Could not %1 %2: %3")
                 .arg(verb.toLower(), target, QString::fromStdString(done.message())));
}

void RunControl::stop(qint64 runId, const QString& runName) {
  QMetaObject::invokeMethod(m_context, [this, runId, runName] {
    sayRequest(m_lifecycle.stop(m_context, runId, m_graceS), tr("Stop"), runName);
  });
}

void RunControl::steerSweep(qint64 studyId, const QString& name, backend::StudyControl control) {
  QMetaObject::invokeMethod(m_context, [this, studyId, name, control] {
    const QString verb = control == backend::StudyControl::pause  ? tr("Pause")
                         : control == backend::StudyControl::stop ? tr("Stop")
                                                                  : tr("Resume");
    sayRequest(m_lifecycle.steerSweep(studyId, control), verb, tr("sweep %1").arg(name));
  });
}

void RunControl::adoptSweep(qint64 studyId, const QString& name) {
  QMetaObject::invokeMethod(m_context, [this, studyId, name] {
    QString text;
    auto reader = backend::RunReader::open(m_lifecycle.settings().dbPath);
    auto started = reader ? m_lifecycle.adoptSweep(*reader, studyId)
                          : Result<backend::StartedSweep>(reader.error());
    if (started) {
      text = tr("Sweep %1 started again (pid %2); its log: %3")
                 .arg(name)
                 .arg(started->pid)
                 .arg(started->logPath);
    } else {
      text =
          tr("Could not adopt sweep %1: %2").arg(name, QString::fromStdString(started.message()));
    }
    say(text);
  });
}

void RunControl::setRunLog(const QString& path) {
  QMetaObject::invokeMethod(m_context, [this, path] {
    if (path == m_lifecycle.settings().dbPath) return;
    backend::RunLifecycle::Settings settings = m_lifecycle.settings();
    settings.dbPath = path;
    settings.runsRoot = backend::RunLifecycle::runsRootFor(path);
    m_lifecycle = backend::RunLifecycle(std::move(settings));
    qCInfo(lcRunControl, "acting on %s", qPrintable(backend::displaySpec(path)));
  });
}

void RunControl::requestTrial(qint64 runId, const QString& runName, backend::TrialRequest request) {
  QMetaObject::invokeMethod(m_context, [this, runId, runName, request] {
    const QString verb = request == backend::TrialRequest::prune ? tr("Prune") : tr("Stop");
    sayRequest(m_lifecycle.requestTrial(runId, request), verb, tr("trial %1").arg(runName));
  });
}

void RunControl::resume(qint64 runId, const QString& runName) {
  QMetaObject::invokeMethod(m_context, [this, runId, runName] {
    QString text;
    auto store = backend::RunStore::open(m_lifecycle.settings().dbPath);
    auto started = store ? m_lifecycle.resumeDetached(**store, runId)
                         : Result<backend::StartedRun>(store.error());
    if (started) {
      text = tr("Resumed %1 from its checkpoint (attempt in %2)").arg(runName, started->runDir);
    } else {
      text = tr("Could not resume %1: %2").arg(runName, QString::fromStdString(started.message()));
    }
    say(text);
  });
}

void RunControl::resumeFromCheckpoint(qint64 runId, const QString& runName, qint64 step) {
  QMetaObject::invokeMethod(m_context, [this, runId, runName, step] {
    auto store = backend::RunStore::open(m_lifecycle.settings().dbPath);
    auto started = store ? m_lifecycle.startFromCheckpoint(**store, runId, step)
                         : Result<backend::StartedRun>(store.error());
    say(started ? tr("Started %1 from step %2 of %3").arg(started->name).arg(step).arg(runName)
                : tr("Could not start a run from step %1 of %2: %3")
                      .arg(step)
                      .arg(runName, QString::fromStdString(started.message())));
  });
}

void RunControl::launch(const QString& experimentPath) {
  QMetaObject::invokeMethod(m_context, [this, experimentPath] {
    const QString text = launchText(m_lifecycle, experimentPath, m_replanOnOom.load());
    say(text);
  });
}

void RunControl::setReplanOnOom(bool on) { m_replanOnOom = on; }

void RunControl::autotune(const QString& experimentPath, const QString& study,
                          const QString& objective, double budgetMinutes, int steps, int warmup) {
  QMetaObject::invokeMethod(m_context, [=, this] {
    const auto failed = [&](const std::string& why) {
      const QString text = tr("Could not start the autotune of %1: %2")
                               .arg(experimentPath, QString::fromStdString(why));
      say(text);
      emit autotuneFailed(study, text);
    };
    // What the verb would refuse at once is said here, where the builder shows it.
    auto exp = m_lifecycle.loadForRun(experimentPath, {});
    if (!exp) return failed(exp.message());
    if (auto budget = backend::budgetFor(*exp); !budget) return failed(budget.message());
    backend::RunLifecycle::AutotuneRequest request;
    request.studyName = study;
    request.objective = objective;
    request.budgetMinutes = budgetMinutes;
    request.steps = steps;
    request.warmup = warmup;
    auto started = m_lifecycle.startAutotune(experimentPath, request);
    if (!started) return failed(started.message());
    const QString text = tr("Started autotune %1 of %2 (pid %3, log %4)")
                             .arg(study, experimentPath)
                             .arg(started->pid)
                             .arg(started->logPath);
    say(text);
    emit autotuneStarted(study, started->pid, started->logPath);
  });
}

}  // namespace shardscope::app
