#include "app/cli/launching.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <QDir>
#include <QEventLoop>
#include <QLoggingCategory>
#include <QSysInfo>
#include <QTimer>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "backend/launch/launchers.h"
#include "backend/monitor/runmonitor.h"

Q_LOGGING_CATEGORY(lcCliLaunching, "shardscope.cli.launching")

namespace shardscope::cli {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void onInterrupt(int /*sig*/) { g_interrupted = true; }

}  // namespace

Result<std::unique_ptr<backend::RunHandle>> attachRun(const backend::RunRecord& run) {
  if (run.location.isEmpty()) {
    return fail("run " + run.name.toStdString() +
                " has no recorded location (it never started); nothing to attach to");
  }
  auto location = backend::RunLocation::fromJson(run.location);
  if (!location) return location.error();
  auto launcher = backend::makeLauncher(location->kind);
  if (!launcher) return launcher.error();
  return (*launcher)->attach(*location);
}

Result<FollowOutcome> followRun(backend::RunStore& store, backend::RunHandle& handle, qint64 runId,
                                const FollowOptions& options) {
  backend::RunMonitor monitor(store, runId, handle);
  // Connected before start(): a run that ended before the follower came reports its steps
  // during start(), and the progress lines must still show them.
  double firstT = -1;
  qint64 firstStep = 0;
  QObject::connect(&monitor, &backend::RunMonitor::stepReached, &monitor,
                   [&](qint64 step, double loss, double t) {
                     if (!options.onStep) return;
                     if (firstT < 0) {
                       firstT = t;
                       firstStep = step;
                     }
                     Progress p{step, options.maxSteps, loss, -1};
                     if (step > firstStep && options.maxSteps > 0) {
                       p.etaS = (t - firstT) / double(step - firstStep) *
                                double(std::max<qint64>(0, options.maxSteps - step));
                     }
                     options.onStep(p);
                   });
  if (auto started = monitor.start(); !started) {
    if (monitor.refusedBy()) return FollowOutcome{false, spec::RunStatus::running};
    return started.error();
  }
  if (options.onFollowing) options.onFollowing();
  QString lost;
  QEventLoop loop;
  QObject::connect(&monitor, &backend::RunMonitor::finished, &loop, &QEventLoop::quit);
  QObject::connect(&monitor, &backend::RunMonitor::leaseLost, &loop, [&](const QString& message) {
    lost = message;
    loop.quit();
  });
  QTimer interrupts;
  if (options.stopOnInterrupt) {
    g_interrupted = false;
    std::signal(SIGINT, onInterrupt);
    std::signal(SIGTERM, onInterrupt);
    QObject::connect(&interrupts, &QTimer::timeout, &loop, [&] {
      if (!g_interrupted.exchange(false)) return;
      std::cerr << "\nstopping the run (graceful)...\n";
      handle.stop();
    });
    interrupts.start(100);
  }
  if (options.stopAtOnce) handle.stop();
  if (!monitor.isFinished()) loop.exec();
  if (!lost.isEmpty()) return fail(lost.toStdString());
  return FollowOutcome{true, monitor.status()};
}

Result<qint64> spawnSupervisor(const Globals& g, const backend::RunRecord& run) {
  const std::string db = dbPath(g).toStdString();
  const std::string id = std::to_string(run.id);
  const std::string log = QDir(run.runDir).filePath("supervisor.log").toStdString();
  int pipeFds[2];
  if (::pipe(pipeFds) != 0) return fail("pipe failed: cannot start the supervisor");
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return fail("fork failed: cannot start the supervisor");
  if (child == 0) {
    ::close(pipeFds[0]);
    ::setsid();
    const pid_t grandchild = ::fork();
    if (grandchild != 0) {
      (void)!::write(pipeFds[1], &grandchild, sizeof grandchild);
      ::_exit(0);
    }
    ::close(pipeFds[1]);
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in >= 0) ::dup2(in, 0);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    const char* argv[] = {g.self.c_str(), "--db", db.c_str(), "supervise", id.c_str(), nullptr};
    ::execv(g.self.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(pipeFds[1]);
  pid_t supervisor = -1;
  const bool read = ::read(pipeFds[0], &supervisor, sizeof supervisor) == sizeof supervisor;
  ::close(pipeFds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!read || supervisor <= 0) return fail("the supervisor of run " + id + " did not start");
  return qint64(supervisor);
}

int adoptOrphans(const Globals& g, backend::RunReader& reader,
                 const std::vector<backend::RunRecord>& runs) {
  int started = 0;
  for (const backend::RunRecord& run : runs) {
    if (spec::is_final(run.status) || run.location.isEmpty()) continue;
    auto lease = reader.lease(run.id);
    if (!lease) {
      qCWarning(lcCliLaunching, "run %lld: %s", static_cast<long long>(run.id),
                lease.message().c_str());
      continue;
    }
    if (*lease && backend::RunStore::leaseHolderAlive(**lease, QSysInfo::machineHostName(),
                                                      backend::RunMonitor::Options{}.staleAfterS))
      continue;
    auto pid = spawnSupervisor(g, run);
    if (!pid) {
      std::cerr << "warning: " << pid.message() << '\n';
      continue;
    }
    std::cerr << "note: run " << run.name.toStdString() << " had no live follower; supervisor "
              << *pid << " took it over\n";
    ++started;
  }
  return started;
}

}  // namespace shardscope::cli
