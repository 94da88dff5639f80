// `ls` (every run but the archived ones, newest first; --all: those too) and `show RUN` (one run,
// with its last metrics).
#include <QJsonArray>
#include <QJsonDocument>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "app/cli/cli_common.h"
#include "app/cli/launching.h"

namespace shardscope::cli {
namespace {

std::string statusName(spec::RunStatus s) { return std::string(spec::to_string(s)); }

void lsVerb(const Globals& g, bool all) {
  auto reader = openReader(g);
  auto runs = orExit(reader.listRuns());
  adoptOrphans(g, reader, runs);
  if (!all) std::erase_if(runs, [](const auto& r) { return r.archivedAt.has_value(); });
  if (g.json) {
    QJsonArray array;
    for (const auto& r : runs) array.append(runToJson(r));
    printJson({{"runs", array}});
    return;
  }
  std::printf("%-6s %-28s %-10s %-12s %s\n", "ID", "NAME", "STATUS", "OBJECTIVE", "RUN DIR");
  for (const auto& r : runs) {
    const std::string objective = r.objective ? std::to_string(*r.objective) : "-";
    const QString name = r.archivedAt ? r.name + " (archived)" : r.name;
    std::printf("%-6lld %-28s %-10s %-12s %s\n", static_cast<long long>(r.id),
                name.toStdString().c_str(), statusName(r.status).c_str(), objective.c_str(),
                r.runDir.toStdString().c_str());
  }
}

// The last value of each metric key (rank 0 when it has one).
QJsonObject lastMetrics(backend::RunReader& reader, qint64 runId) {
  QJsonObject last;
  for (const QString& key : orExit(reader.metricKeys(runId))) {
    const auto points = orExit(reader.metric(runId, key));
    if (points.empty()) continue;
    const auto& p = points.back();
    last[key] = QJsonObject{{"step", p.step},
                            {"value", std::isfinite(p.value) ? QJsonValue(p.value) : QJsonValue()},
                            {"rank", p.rank}};
  }
  return last;
}

// The per-rank memory estimate rank 0's `hello` event carried (bytes), null before it came or
// when it had none (0: a model the trainer could not estimate).
QJsonValue memEstimate(backend::RunReader& reader, qint64 runId) {
  auto hello = reader.lastEvent(runId, 0, QStringLiteral("hello"));
  if (!hello || !hello->has_value()) return QJsonValue();
  const QJsonValue v = QJsonDocument::fromJson((*hello)->json).object().value("mem_estimate");
  return v.isDouble() && v.toInteger() > 0 ? QJsonValue(v.toInteger()) : QJsonValue();
}

void showVerb(const Globals& g, const std::string& runArg) {
  auto reader = openReader(g);
  const auto run = findRun(reader, runArg);
  adoptOrphans(g, reader, {run});
  QJsonObject o = runToJson(run);
  o["metrics"] = lastMetrics(reader, run.id);
  o["mem_estimate"] = memEstimate(reader, run.id);
  if (g.json) {
    printJson(o);
    return;
  }
  std::cout << "id:         " << run.id << '\n'
            << "name:       " << run.name.toStdString() << '\n'
            << "status:     " << statusName(run.status) << '\n'
            << "run_dir:    " << run.runDir.toStdString() << '\n'
            << "world_size: " << run.worldSize << '\n';
  if (run.objective) std::cout << "objective:  " << *run.objective << '\n';
  if (!run.error.isEmpty()) std::cout << "error:      " << run.error.toStdString() << '\n';
  // Which plan a run replanned after running out of memory ran, and why (its params).
  if (run.params.contains(QLatin1String(backend::kReplanParam)))
    std::cout << "replan:     "
              << run.params.value(QLatin1String(backend::kReplanParam)).toString().toStdString()
              << '\n';
  if (o["mem_estimate"].isDouble())
    std::cout << "estimate:   " << o["mem_estimate"].toInteger() << " bytes per rank\n";
  const QJsonObject metrics = o["metrics"].toObject();
  for (auto it = metrics.begin(); it != metrics.end(); ++it) {
    const QJsonObject m = it.value().toObject();
    std::cout << "  " << it.key().toStdString() << " = " << m["value"].toDouble() << " (step "
              << m["step"].toInteger() << ")\n";
  }
}

}  // namespace

void addLsVerb(CLI::App& app, Globals& g) {
  auto all = std::make_shared<bool>(false);
  CLI::App* ls = app.add_subcommand("ls", "List the runs in the run log, newest first");
  ls->add_flag("--all", *all, "Archived runs too (shardscope-cli archive)");
  ls->callback([&g, all] { lsVerb(g, *all); });
}

void addShowVerb(CLI::App& app, Globals& g) {
  auto runArg = std::make_shared<std::string>();
  CLI::App* show = app.add_subcommand("show", "Show one run: status, error, objective, metrics");
  show->add_option("RUN", *runArg, "Run id or name")->required();
  show->callback([&g, runArg] { showVerb(g, *runArg); });
}

}  // namespace shardscope::cli
