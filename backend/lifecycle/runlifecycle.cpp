// Attaching to, following, stopping and adopting runs; starting them is in runstart.cpp.
#include "backend/lifecycle/runlifecycle.h"

#include <QDeadlineTimer>
#include <QDir>
#include <QEventLoop>
#include <QFileInfo>
#include <QLoggingCategory>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QSysInfo>
#include <QTimer>
#include <QUrl>

#include <algorithm>

#include "backend/launch/launchers.h"
#include "backend/launch/localprocess.h"
#include "backend/lifecycle/runfollower.h"
#include "backend/monitor/runmonitor.h"
#include "backend/store/db.h"
#include "backend/store/retrypolicy.h"

Q_LOGGING_CATEGORY(lcLifecycle, "shardscope.backend.lifecycle")

namespace shardscope::backend {

RunLifecycle::RunLifecycle(Settings settings) : m_settings(std::move(settings)) {
  if (m_settings.runsRoot.isEmpty()) m_settings.runsRoot = runsRootFor(m_settings.dbPath);
}

QString RunLifecycle::runsRootFor(const QString& dbPath) {
  if (isPostgresSpec(dbPath)) {
    // A run log on a server has no folder beside it: each process that runs trials keeps their
    // run directories in its user's data folder, one folder per server and database.
    const QUrl url(dbPath);
    QString name =
        QString("%1_%2_%3").arg(url.host(), QString::number(url.port(5432)), url.path().mid(1));
    name.replace(QRegularExpression("[^A-Za-z0-9._-]"), "_");
    return QDir(QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation))
        .filePath("shardscope/pg-" + name + "-runs");
  }
  if (!dbPath.isEmpty()) {
    // Beside the run log, one folder per run log: two logs in one folder (a.db, b.db) would
    // otherwise both put study 1's trial 0 in runs/study-1/trial-0, one over the other.
    const QFileInfo db(dbPath);
    const QString name = db.fileName() == QLatin1String("runs.db")
                             ? QStringLiteral("runs")
                             : db.completeBaseName() + QStringLiteral("-runs");
    return db.absoluteDir().filePath(name);
  }
  return QDir(QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation))
      .filePath("shardscope/runs");
}

Result<std::unique_ptr<RunHandle>> RunLifecycle::attach(const RunRecord& run, int graceS) {
  if (run.location.isEmpty()) {
    return fail("run " + run.name.toStdString() +
                " has no recorded location (it never started); nothing to attach to");
  }
  auto location = RunLocation::fromJson(run.location);
  if (!location) return location.error();
  auto launcher = makeLauncher(location->kind, graceS);
  if (!launcher) return launcher.error();
  return (*launcher)->attach(*location);
}

Result<FollowOutcome> RunLifecycle::follow(RunStore& store, RunHandle& handle, qint64 runId,
                                           const FollowOptions& options) {
  RunFollower follower(store, runId, handle);
  if (options.onStall) {
    follower.setStallAfter(options.stallAfterS);
    QObject::connect(&follower, &RunFollower::stalled, &follower, options.onStall);
  }
  // Connected before start(): a run that ended before the follower came reports its steps
  // during start(), and the progress lines must still show them.
  double firstT = -1;
  qint64 firstStep = 0;
  QObject::connect(&follower, &RunFollower::stepReached, &follower,
                   [&](qint64 step, double loss, double t) {
                     if (!options.onStep) return;
                     if (firstT < 0) {
                       firstT = t;
                       firstStep = step;
                     }
                     FollowProgress p{step, options.maxSteps, loss, -1};
                     if (step > firstStep && options.maxSteps > 0) {
                       p.etaS = (t - firstT) / double(step - firstStep) *
                                double(std::max<qint64>(0, options.maxSteps - step));
                     }
                     options.onStep(p);
                   });
  // A run log that cannot take the monitor's start now (a lost server; an error that may pass)
  // is waited for: the ranks run on, and the monitor reads their files from the start when it
  // comes. Returning the error would end this process and leave them unfollowed.
  for (int tries = 1;; ++tries) {
    auto started = follower.start();
    if (started) break;
    if (follower.refused()) return FollowOutcome{false, spec::RunStatus::running};
    if (started.error().permanent || !kLaunchRetry.mayRetry(tries)) return started.error();
    const int delayMs = kLaunchRetry.delayMs(tries);
    qCWarning(lcLifecycle,
              "run %lld: its monitor waits for the run log: %s (try %d; the next in %.1f s)",
              static_cast<long long>(runId), started.message().c_str(), tries, delayMs / 1000.0);
    QEventLoop wait;
    QTimer::singleShot(delayMs, &wait, &QEventLoop::quit);
    wait.exec();
    if (options.stopRequested && options.stopRequested()) handle.stop();
  }
  // The location is recorded once this process holds the lease: before that, a concurrent `ls`
  // could take the run for an orphan. A run log that refuses it now (the server went down just
  // after the monitor's first rows) is asked again while the monitor follows, as the monitor's
  // own rows are: ending here would leave the ranks running unfollowed.
  bool locationPending = !options.location.isEmpty();
  int locationTries = 0;
  QTimer locationRetry;
  locationRetry.setSingleShot(true);
  const auto recordLocation = [&] {
    auto recorded = store.setRunLocation(runId, options.location).get();
    ++locationTries;
    if (recorded || recorded.error().permanent || !kLaunchRetry.mayRetry(locationTries)) {
      locationPending = false;
      if (!recorded) {
        qCWarning(lcLifecycle, "run %lld: its location is not recorded: %s",
                  static_cast<long long>(runId), recorded.message().c_str());
      }
      return;
    }
    const int delayMs = kLaunchRetry.delayMs(locationTries);
    qCWarning(lcLifecycle,
              "run %lld: the run log did not take its location: %s (try %d; the next in %.1f s)",
              static_cast<long long>(runId), recorded.message().c_str(), locationTries,
              delayMs / 1000.0);
    locationRetry.start(delayMs);
  };
  QObject::connect(&locationRetry, &QTimer::timeout, &locationRetry, recordLocation);
  if (locationPending) recordLocation();
  QString lost;
  QEventLoop loop;
  QObject::connect(&follower, &RunFollower::finished, &loop, &QEventLoop::quit);
  QObject::connect(&follower, &RunFollower::leaseLost, &loop, [&](const QString& message) {
    lost = message;
    loop.quit();
  });
  QTimer requests;
  if (options.stopRequested) {
    QObject::connect(&requests, &QTimer::timeout, &loop, [&] {
      if (options.stopRequested()) handle.stop();
    });
    requests.start(100);
  }
  if (options.stopAtOnce) handle.stop();
  if (!follower.isFinished()) loop.exec();
  // A run that ended while its location waited: the run log took the final status, so it
  // answers again; the location's remaining tries come now.
  while (locationPending) {
    QEventLoop wait;
    QObject::connect(&locationRetry, &QTimer::timeout, &wait, &QEventLoop::quit);
    if (!locationRetry.isActive()) locationRetry.start(0);
    wait.exec();
  }
  if (!lost.isEmpty()) return fail(lost.toStdString());
  return FollowOutcome{true, follower.status()};
}

Result<void> RunLifecycle::steerSweep(qint64 studyId, StudyControl control) const {
  auto store = RunStore::open(m_settings.dbPath);
  if (!store) return store.error();
  return (*store)->setStudyControl(studyId, control).get();
}

Result<void> RunLifecycle::requestTrial(qint64 runId, TrialRequest request) const {
  auto store = RunStore::open(m_settings.dbPath);
  if (!store) return store.error();
  return (*store)->requestTrial(runId, request).get();
}

Result<void> RunLifecycle::stop(QObject* context, qint64 runId, int graceS) const {
  auto reader = RunReader::open(m_settings.dbPath);
  if (!reader) return reader.error();
  auto run = reader->run(runId);
  if (!run) return run.error();
  if (!*run) {
    return fail("run " + std::to_string(runId) + " is no longer in " +
                displaySpec(m_settings.dbPath).toStdString());
  }
  const RunRecord& record = **run;
  if (record.location.isEmpty()) {
    return fail("run " + record.name.toStdString() +
                " has no recorded location (it never started)");
  }
  auto handle = attach(record, graceS);
  if (!handle) return handle.error();
  RunHandle* raw = handle->release();
  raw->setParent(context);
  raw->stop();
  QTimer::singleShot((graceS + 5) * 1000, raw, &QObject::deleteLater);
  return ok();
}

Result<qint64> RunLifecycle::spawnSupervisor(const RunRecord& run, bool replanOnOom) const {
  const QString id = QString::number(run.id);
  QStringList argv{m_settings.supervisor, QStringLiteral("supervise"), id};
  if (replanOnOom) argv << QStringLiteral("--replan-on-oom");
  auto pid = spawnDetached(argv, QDir(run.runDir).filePath("supervisor.log"));
  if (!pid) return fail("the supervisor of run " + id.toStdString() + ": " + pid.message());
  return pid;
}

Result<qint64> RunLifecycle::spawnDetached(const QStringList& argv, const QString& logPath) const {
  if (argv.isEmpty()) return fail("nothing to start");
  localproc::SpawnSpec spec;
  spec.program = argv.front();
  spec.args = argv.mid(1);
  // The run log never on the command line, which every local user reads (kDbEnvironmentVariable).
  spec.env = localproc::environmentWith(
      {QString::fromLatin1(kDbEnvironmentVariable) + QLatin1Char('=') + m_settings.dbPath});
  spec.stdoutPath = logPath;
  spec.stderrPath = logPath;
  spec.detached = true;
  auto spawned = localproc::spawnInSession(spec);
  if (!spawned) return spawned.error();
  return spawned->pid;
}

Result<RunRecord> RunLifecycle::stopAndWait(RunStore& store, const RunRecord& run, int waitS) {
  auto handle = attach(run);
  if (!handle) return handle.error();
  FollowOptions options;
  options.stopAtOnce = true;
  auto outcome = follow(store, **handle, run.id, options);
  if (!outcome) return outcome.error();
  auto reader = store.reader();
  if (!reader) return reader.error();
  std::optional<RunRecord> last;
  if (outcome->followed) {
    auto found = reader->run(run.id);
    if (!found) return found.error();
    last = *found;
  } else {
    // Another process follows the run and records its end; the event loop runs meanwhile, for
    // the handle's SIGKILL after the grace.
    (*handle)->stop();
    QDeadlineTimer deadline{std::chrono::seconds(waitS)};
    QEventLoop loop;
    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, &loop, [&] {
      auto found = reader->run(run.id);
      if (found && *found) last = **found;
      if ((last && spec::is_final(last->status)) || deadline.hasExpired()) loop.quit();
    });
    poll.start(200);
    loop.exec();
  }
  if (!last || !spec::is_final(last->status)) {
    return fail("run " + run.name.toStdString() + " did not end within " + std::to_string(waitS) +
                " s after the stop request");
  }
  return *last;
}

std::vector<Adoption> RunLifecycle::adoptOrphans(RunReader& reader,
                                                 const std::vector<RunRecord>& runs) const {
  std::vector<Adoption> adopted;
  const QString here = QSysInfo::machineHostName();
  for (const RunRecord& run : runs) {
    if (spec::is_final(run.status) || run.location.isEmpty()) continue;
    if (run.studyId) continue;  // its sweep follows it (adoptSweep)
    if (run.host != here) {
      // Another machine's run: its processes, its pids and its lease's liveness can only be
      // judged there. Reported, never touched (a supervisor here would find no rank and end it).
      const std::string where = run.host.isEmpty()
                                    ? std::string("an unknown host (recorded before schema 8)")
                                    : "host " + run.host.toStdString();
      adopted.push_back({run.id, run.name, 0,
                         "run " + run.name.toStdString() + " was launched on " + where +
                             ", not on this one (" + here.toStdString() +
                             "): not adopted; `shardscope-cli supervise " + std::to_string(run.id) +
                             "` on its own host takes it over"});
      continue;
    }
    auto lease = reader.lease(run.id);
    if (!lease) {
      qCWarning(lcLifecycle, "run %lld: %s", static_cast<long long>(run.id),
                lease.message().c_str());
      continue;
    }
    if (*lease && RunStore::leaseHolderAlive(**lease, QSysInfo::machineHostName(),
                                             RunMonitor::Options{}.staleAfterS))
      continue;
    Adoption a{run.id, run.name, 0, {}};
    if (auto pid = spawnSupervisor(run)) {
      a.supervisorPid = *pid;
    } else {
      a.error = pid.message();
    }
    adopted.push_back(std::move(a));
  }
  return adopted;
}

}  // namespace shardscope::backend
