// Helper of tst_adoption: one process that adopts a study's sweep (RunLifecycle::adoptSweep) when
// told to, so that several can race for it.
//
//   adopt_racer DB STUDY_ID SUPERVISOR RUNS_ROOT
//
// Prints "ready", waits for a line on stdin, adopts, and prints "started PID" (the sweep process
// it started) or "refused MESSAGE".
#include <QCoreApplication>

#include <cstdio>
#include <iostream>
#include <string>

#include "backend/lifecycle/runlifecycle.h"
#include "backend/store/runreader.h"

using namespace shardscope::backend;

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  const QStringList args = app.arguments();
  if (args.size() != 5) {
    std::fprintf(stderr, "usage: adopt_racer DB STUDY_ID SUPERVISOR RUNS_ROOT\n");
    return 1;
  }
  auto reader = RunReader::open(args[1]);
  if (!reader) {
    std::fprintf(stderr, "adopt_racer: %s\n", reader.message().c_str());
    return 1;
  }
  RunLifecycle lifecycle({args[1], args[4], args[3], {}, 1000});
  std::printf("ready\n");
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line);
  auto started = lifecycle.adoptSweep(*reader, args[2].toLongLong());
  if (started) {
    std::printf("started %lld\n", static_cast<long long>(started->pid));
  } else {
    std::printf("refused %s\n", started.message().c_str());
  }
  return 0;
}
