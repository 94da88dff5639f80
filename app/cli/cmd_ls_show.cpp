// `ls` (every run but the archived ones, newest first; --all: those too) and `show RUN` (one run,
// with its last metrics).
#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "app/cli/cli_common.h"
#include "app/cli/launching.h"
#include "backend/monitor/oommemory.h"
#include "backend/store/runusage.h"

namespace shardscope::cli {
namespace {

std::string statusName(spec::RunStatus s) { return std::string(spec::to_string(s)); }

// A run's device-hours and cost as `ls` and `show` print them (backend/store/runusage.h).
QJsonObject usageJson(const backend::RunUsage& usage, const backend::RunRecord& run,
                      const backend::HostPrices& prices) {
  const QString host = backend::usageHost(run);
  const auto cost = backend::usageCost(usage, host, prices);
  return {{"hours", usage.hours},
          {"device", usage.gpu ? "gpu" : "cpu"},
          {"host", host},
          {"cost", cost ? QJsonValue(*cost) : QJsonValue()}};
}

// --price HOST=PRICE over the dashboard's saved prices.
backend::HostPrices prices(const std::vector<std::string>& given) {
  backend::HostPrices prices = backend::loadHostPrices();
  for (const std::string& text : given) {
    const QString pair = QString::fromStdString(text);
    const qsizetype eq = pair.indexOf('=');
    bool ok = false;
    const double price = eq > 0 ? pair.mid(eq + 1).toDouble(&ok) : 0;
    if (!ok || price < 0) {
      exitWith(kExitUsage, "--price " + text +
                               ": give HOST=PRICE, a price per device-hour "
                               "(local=2.5)");
    }
    prices.insert(pair.left(eq), price);
  }
  return prices;
}

std::string hoursText(const QJsonObject& usage) {
  return (backend::hoursText(usage["hours"].toDouble()) +
          (usage["device"].toString() == "gpu" ? " GPU" : " CPU"))
      .toStdString();
}

std::string costText(const QJsonObject& usage) {
  if (!usage["cost"].isDouble()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", usage["cost"].toDouble());
  return buf;
}

void lsVerb(const Globals& g, bool all, const std::vector<std::string>& givenPrices) {
  auto reader = openReader(g);
  auto runs = orExit(reader.listRuns());
  adoptOrphans(g, reader, runs);
  if (!all) std::erase_if(runs, [](const auto& r) { return r.archivedAt.has_value(); });
  const backend::HostPrices hostPrices = prices(givenPrices);
  const auto usage =
      orExit(backend::runUsage(reader, runs, QDateTime::currentMSecsSinceEpoch() / 1000.0));
  if (g.json) {
    QJsonArray array;
    for (const auto& r : runs) {
      QJsonObject o = runToJson(r);
      o["usage"] = usageJson(usage.value(r.id), r, hostPrices);
      array.append(o);
    }
    printJson({{"runs", array}});
    return;
  }
  std::printf("%-6s %-28s %-10s %-12s %-14s %-9s %s\n", "ID", "NAME", "STATUS", "OBJECTIVE",
              "DEVICE-HOURS", "COST", "RUN DIR");
  for (const auto& r : runs) {
    const std::string objective = r.objective ? std::to_string(*r.objective) : "-";
    const QString name = r.archivedAt ? r.name + " (archived)" : r.name;
    const QJsonObject u = usageJson(usage.value(r.id), r, hostPrices);
    std::printf("%-6lld %-28s %-10s %-12s %-14s %-9s %s\n", static_cast<long long>(r.id),
                name.toStdString().c_str(), statusName(r.status).c_str(), objective.c_str(),
                hoursText(u).c_str(), costText(u).c_str(), r.runDir.toStdString().c_str());
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

// Each rank's allocator view at its oom (backend/monitor/oommemory.h): [{rank, device, request,
// allocated, peak, limit | reserved, largest_free, ..., snapshot}], empty without one.
QJsonArray oomMemory(backend::RunReader& reader, const backend::RunRecord& run) {
  QJsonArray out;
  for (const auto& [rank, memory] :
       orExit(backend::oomMemoryOfRun(reader, run.id, std::max(run.worldSize, 1)))) {
    QJsonObject o = backend::oomMemoryToJson(memory, run.runDir);
    o["rank"] = rank;
    out.append(o);
  }
  return out;
}

void showVerb(const Globals& g, const std::string& runArg) {
  auto reader = openReader(g);
  const auto run = findRun(reader, runArg);
  adoptOrphans(g, reader, {run});
  QJsonObject o = runToJson(run);
  o["metrics"] = lastMetrics(reader, run.id);
  o["mem_estimate"] = memEstimate(reader, run.id);
  o["oom_memory"] = oomMemory(reader, run);
  const auto usage =
      orExit(backend::runUsage(reader, {run}, QDateTime::currentMSecsSinceEpoch() / 1000.0));
  o["usage"] = usageJson(usage.value(run.id), run, backend::loadHostPrices());
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
  // An oom's allocator lines continue the error, indented under it.
  if (!run.error.isEmpty())
    std::cout << "error:      "
              << QString(run.error).replace('\n', QStringLiteral("\n            ")).toStdString()
              << '\n';
  // Which plan a run replanned after running out of memory ran, and why (its params).
  if (run.params.contains(QLatin1String(backend::kReplanParam)))
    std::cout << "replan:     "
              << run.params.value(QLatin1String(backend::kReplanParam)).toString().toStdString()
              << '\n';
  std::cout << "usage:      " << hoursText(o["usage"].toObject()) << "-hours, cost "
            << costText(o["usage"].toObject()) << '\n';
  if (o["mem_estimate"].isDouble())
    std::cout << "estimate:   " << o["mem_estimate"].toInteger() << " bytes per rank\n";
  // Every rank that ran out of memory, with what its allocator saw (the error names one).
  for (const auto& [rank, memory] :
       orExit(backend::oomMemoryOfRun(reader, run.id, std::max(run.worldSize, 1)))) {
    std::cout << "oom:        rank " << rank << ": " << backend::oomMemoryText(memory).toStdString()
              << '\n';
    if (memory.snapshot)
      std::cout << "            " << backend::oomSnapshotLine(memory, run.runDir).toStdString()
                << '\n';
  }
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
  auto given = std::make_shared<std::vector<std::string>>();
  CLI::App* ls = app.add_subcommand("ls", "List the runs in the run log, newest first");
  ls->add_flag("--all", *all, "Archived runs too (shardscope-cli archive)");
  ls->add_option("--price", *given,
                 "A price per device-hour for a host's runs, over the dashboard's Settings "
                 "(repeatable)")
      ->type_name("HOST=PRICE");
  ls->callback([&g, all, given] { lsVerb(g, *all, *given); });
}

void addShowVerb(CLI::App& app, Globals& g) {
  auto runArg = std::make_shared<std::string>();
  CLI::App* show = app.add_subcommand("show", "Show one run: status, error, objective, metrics");
  show->add_option("RUN", *runArg, "Run id or name")->required();
  show->callback([&g, runArg] { showVerb(g, *runArg); });
}

}  // namespace shardscope::cli
