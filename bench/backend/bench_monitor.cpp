// bench_monitor: how fast a RunMonitor turns a kill -9 of one rank into a failed run (median
// over N runs of 2 fake ranks), and this process's RSS while it follows 100 live runs of one
// fake rank each. Prints figures; not a test.
//   bench_monitor FAKETRAINER [RUNS_FOR_LATENCY=7] [LIVE_RUNS=100]
#include <signal.h>
#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "backend/launch/locallauncher.h"
#include "backend/monitor/runmonitor.h"
#include "backend/store/runstore.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

constexpr int kDeadlineMs = 60000;

double rssMiB() {
  QFile status("/proc/self/status");
  if (!status.open(QIODevice::ReadOnly)) return -1;
  for (const QByteArray& line : status.readAll().split('\n')) {
    if (line.startsWith("VmRSS:"))
      return line.mid(6).trimmed().split(' ').first().toDouble() / 1024;
  }
  return -1;
}

// A started run of `world` fake ranks with its monitor.
struct Followed {
  std::unique_ptr<RunHandle> handle;
  std::unique_ptr<RunMonitor> monitor;
  qint64 lastStep = -1;
};

Result<Followed> startRun(RunStore& store, const QString& root, const QString& fake, int world,
                          int stepMs) {
  static int serial = 0;
  const QString name = QString("bench-%1").arg(++serial);
  auto id = store.createRun({std::nullopt, name, root + "/" + name, {}, world}).get();
  if (!id) return id.error();
  LaunchRequest req;
  req.runId = *id;
  req.runName = name;
  req.localRunDir = root + "/" + name;
  QDir().mkpath(req.localRunDir);
  QFile toml(req.localRunDir + "/trial.toml");
  if (!toml.open(QIODevice::WriteOnly))
    return fail("cannot write " + req.localRunDir.toStdString());
  toml.write("[train]\nmax_steps = 100000\n");
  toml.close();
  req.launch.nproc_per_node = world;
  req.launch.trainer = fake.toStdString();
  req.launch.grace_s = 2;
  req.trainerArgs = {"train",  "trial.toml", "--steps",
                     "100000", "--step-ms",  QString::number(stepMs)};
  LocalLauncher launcher;
  auto handle = launcher.start(req);
  if (!handle) return handle.error();
  Followed f;
  f.handle = std::move(handle).value();
  f.monitor = std::make_unique<RunMonitor>(store, *id, *f.handle);
  if (auto r = f.monitor->start(); !r) return r.error();
  return f;
}

// Milliseconds from SIGKILL of rank 1 to the run's `failed`, one run.
Result<double> detectionMs(RunStore& store, const QString& root, const QString& fake) {
  auto run = startRun(store, root, fake, 2, 50);
  if (!run) return run.error();
  Followed& f = *run;
  QObject::connect(f.monitor.get(), &RunMonitor::stepReached,
                   [&f](qint64 step, double, double) { f.lastStep = step; });
  if (!QTest::qWaitFor([&] { return f.lastStep >= 2; }, kDeadlineMs)) {
    return fail("the ranks made no progress");
  }
  QElapsedTimer timer;
  ::kill(pid_t(f.handle->location().pids.at(1)), SIGKILL);
  timer.start();
  if (!QTest::qWaitFor([&] { return f.monitor->status() == spec::RunStatus::failed; },
                       kDeadlineMs)) {
    return fail("the run did not turn failed");
  }
  const double ms = double(timer.nsecsElapsed()) / 1e6;
  if (!QTest::qWaitFor([&] { return f.monitor->isFinished(); }, kDeadlineMs)) {
    return fail("the run did not end after its rank was killed");
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  const QStringList args = app.arguments();
  if (args.size() < 2) {
    std::fprintf(stderr, "usage: bench_monitor FAKETRAINER [RUNS_FOR_LATENCY] [LIVE_RUNS]\n");
    return 2;
  }
  const QString& fake = args.at(1);
  const int latencyRuns = args.size() > 2 ? args.at(2).toInt() : 7;
  const int liveRuns = args.size() > 3 ? args.at(3).toInt() : 100;
  QTemporaryDir temp;
  auto store = RunStore::open(temp.filePath("runs.db"));
  if (!store) {
    std::fprintf(stderr, "bench_monitor: %s\n", store.message().c_str());
    return 1;
  }
  std::vector<double> latencies;
  for (int i = 0; i < latencyRuns; ++i) {
    auto ms = detectionMs(**store, temp.path(), fake);
    if (!ms) {
      std::fprintf(stderr, "bench_monitor: %s\n", ms.message().c_str());
      return 1;
    }
    latencies.push_back(*ms);
  }
  std::sort(latencies.begin(), latencies.end());
  std::printf("%-44s %10.0f (min %.0f, max %.0f, N=%d)\n", "kill -9 of a rank -> failed, median ms",
              latencies[latencies.size() / 2], latencies.front(), latencies.back(), latencyRuns);

  const double before = rssMiB();
  std::vector<Followed> live;
  for (int i = 0; i < liveRuns; ++i) {
    auto run = startRun(**store, temp.path(), fake, 1, 200);
    if (!run) {
      std::fprintf(stderr, "bench_monitor: run %d: %s\n", i, run.message().c_str());
      break;
    }
    live.push_back(std::move(run).value());
  }
  QTest::qWait(15000);  // every monitor polls and stores its run's rows meanwhile
  std::printf("%-44s %10.1f (before: %.1f)\n",
              qPrintable(QString("RSS following %1 live runs, MiB").arg(live.size())), rssMiB(),
              before);
  for (Followed& f : live) f.handle->kill();
  const bool ended = QTest::qWaitFor(
      [&] {
        return std::all_of(live.begin(), live.end(),
                           [](const Followed& f) { return f.monitor->isFinished(); });
      },
      kDeadlineMs);
  if (!ended) std::fprintf(stderr, "bench_monitor: some killed runs did not end within 60 s\n");
  return ended ? 0 : 1;
}
