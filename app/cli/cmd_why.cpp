// `why RUN`: why a sharded run is slow, from its ranks' phases (backend/monitor/straggler.h):
// the straggler named, each rank's mean phases. RUN is a run of the run log (id or name) or a run
// directory (its events-rank-N.jsonl files), so a run started outside Shardscope can be asked too.
#include <QFileInfo>

#include <cstdio>
#include <iostream>

#include "app/cli/cli_common.h"
#include "backend/monitor/straggler.h"

namespace shardscope::cli {
namespace {

void whyVerb(const Globals& g, const std::string& runArg) {
  const QString asPath = QString::fromStdString(runArg);
  backend::RankPhases phases;
  QString what;
  if (QFileInfo(asPath).isDir()) {
    phases = orExit(backend::phasesOfRunDir(asPath));
    what = QFileInfo(asPath).absoluteFilePath();
  } else {
    auto reader = openReader(g);
    const auto run = findRun(reader, runArg);
    phases = orExit(backend::phasesOfRun(reader, run.id));
    what = run.name;
  }
  const auto verdict = backend::nameStraggler(phases);
  if (g.json) {
    QJsonObject o = backend::verdictToJson(verdict);
    o["run"] = what;
    printJson(o);
    return;
  }
  std::cout << what.toStdString() << ": " << verdict.text.toStdString() << '\n';
  if (verdict.steps == 0) return;
  std::printf("\nmean seconds a step over %lld steps\n", static_cast<long long>(verdict.steps));
  std::printf("%-5s %8s %8s %8s %8s %8s %8s %8s %8s %8s %7s\n", "rank", "wall", "data", "forward",
              "backward", "optim", "waiting", "in-fl.", "copy", "other", "slowest");
  for (const auto& [rank, s] : verdict.perRank) {
    std::printf("%-5d %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %6.0f%%\n", rank,
                s.wall, s.data, s.forward, s.backward, s.optimizer, s.commExposed, s.commTotal,
                s.copy, s.other,
                100.0 * static_cast<double>(s.slowestSteps) / static_cast<double>(verdict.steps));
  }
}

}  // namespace

void addWhyVerb(CLI::App& app, Globals& g) {
  auto runArg = std::make_shared<std::string>();
  CLI::App* why = app.add_subcommand(
      "why", "Why a run is slow: each rank's phases a step and the straggler named");
  why->add_option("RUN", *runArg, "Run id or name, or a run directory")->required();
  why->callback([&g, runArg] { whyVerb(g, *runArg); });
}

}  // namespace shardscope::cli
