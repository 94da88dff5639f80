// monitor_follower (tests only): a backend process that follows one run with RunMonitor until
// it ends, over a DirRunHandle. tst_runmonitor kills it with SIGKILL mid-run and starts another.
//   monitor_follower DB RUN_ID RUN_DIR PID...
// Prints "following took-over=0|1", then "finished STATUS"; exit 3 when the lease is refused.
#include <QCoreApplication>

#include <cstdio>

#include "backend/monitor/runmonitor.h"
#include "tests/backend/monitor/dirrunhandle.h"

using namespace shardscope;
using namespace shardscope::backend;

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  const QStringList args = app.arguments();
  if (args.size() < 5) {
    std::fprintf(stderr, "usage: monitor_follower DB RUN_ID RUN_DIR PID...\n");
    return 2;
  }
  QList<qint64> pids;
  for (qsizetype i = 4; i < args.size(); ++i) pids << args[i].toLongLong();
  auto store = RunStore::open(args[1]);
  if (!store) {
    std::fprintf(stderr, "%s\n", store.message().c_str());
    return 1;
  }
  DirRunHandle handle(args[3], pids);
  RunMonitor::Options options;
  options.pollMs = 50;
  options.heartbeatMs = 200;
  options.staleAfterS = 5;
  options.maxRetryMs = 2000;  // tst_pgfaults' disk-full test bounds the tries with it
  RunMonitor monitor(**store, args[2].toLongLong(), handle, options);
  QObject::connect(&monitor, &RunMonitor::finished, &app, [&](spec::RunStatus status) {
    std::printf("finished %s\n", spec::to_string(status).data());
    std::fflush(stdout);
    app.quit();
  });
  QObject::connect(&monitor, &RunMonitor::leaseLost, &app, [&](const QString& message) {
    std::printf("lease lost: %s\n", qPrintable(message));
    app.exit(4);
  });
  if (auto r = monitor.start(); !r) {
    std::printf("refused: %s\n", r.message().c_str());
    return 3;
  }
  std::printf("following took-over=%d\n", monitor.tookOver() ? 1 : 0);
  std::fflush(stdout);
  if (monitor.isFinished()) return 0;
  return app.exec();
}
