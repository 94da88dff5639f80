// `logs RUN [--rank N] [--follow]` (a rank's stderr lines, and events lines that did not parse)
// and `export RUN --format csv|json` (every metric row: run,step,key,value,rank,time).
#include <QCoreApplication>
#include <QJsonArray>
#include <QThread>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "app/cli/cli_common.h"

namespace shardscope::cli {
namespace {

struct LogsArgs {
  std::string run;
  int rank = 0;
  bool follow = false;
};

void logsVerb(const Globals& g, const LogsArgs& args) {
  auto reader = openReader(g);
  auto run = findRun(reader, args.run);
  if (args.rank < 0 || (run.worldSize > 0 && args.rank >= run.worldSize)) {
    exitWith(kExitUsage, "--rank: run " + run.name.toStdString() + " has ranks 0.." +
                             std::to_string(run.worldSize - 1) + ", not " +
                             std::to_string(args.rank));
  }
  std::size_t printed = 0;
  for (;;) {
    // Whether the run had ended is read before the lines, so the last lines are never missed.
    const bool ended = spec::is_final(run.status);
    const auto lines = orExit(reader.logLines(run.id, args.rank));
    for (std::size_t i = printed; i < lines.size(); ++i) {
      const auto& line = lines[i];
      if (g.json) {
        printJson({{"rank", line.rank},
                   {"file", backend::rankFileName(line.file)},
                   {"offset", line.offset},
                   {"text", line.text}});
      } else {
        std::cout << line.text.toStdString() << '\n';
      }
    }
    std::cout << std::flush;
    printed = lines.size();
    if (!args.follow || ended) return;
    QThread::msleep(300);
    auto again = orExit(reader.run(run.id));
    if (again) run = *again;
  }
}

struct Row {
  qint64 step;
  QString key;
  double value;
  int rank;
  double time;
};

std::vector<Row> allRows(backend::RunReader& reader, qint64 runId) {
  std::vector<Row> rows;
  for (const QString& key : orExit(reader.metricKeys(runId))) {
    for (const auto& p : orExit(reader.metric(runId, key))) {
      rows.push_back({p.step, key, p.value, p.rank, p.time});
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.step != b.step) return a.step < b.step;
    if (a.key != b.key) return a.key < b.key;
    return a.rank < b.rank;
  });
  return rows;
}

// A number as CSV/JSON text: 17 significant digits (round-trips), empty for NaN/inf in CSV.
std::string number(double v) {
  if (!std::isfinite(v)) return {};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void exportVerb(const Globals& g, const std::string& runArg, const std::string& format) {
  auto reader = openReader(g);
  const auto run = findRun(reader, runArg);
  const auto rows = allRows(reader, run.id);
  if (format == "csv") {
    std::cout << "run,step,key,value,rank,time\n";
    for (const auto& r : rows) {
      std::cout << run.id << ',' << r.step << ',' << r.key.toStdString() << ',' << number(r.value)
                << ',' << r.rank << ',' << number(r.time) << '\n';
    }
    return;
  }
  QJsonArray metrics;
  for (const auto& r : rows) {
    metrics.append(
        QJsonObject{{"step", r.step},
                    {"key", r.key},
                    {"value", std::isfinite(r.value) ? QJsonValue(r.value) : QJsonValue()},
                    {"rank", r.rank},
                    {"time", r.time}});
  }
  printJson({{"run", runToJson(run)}, {"metrics", metrics}});
}

}  // namespace

void addLogsVerb(CLI::App& app, Globals& g) {
  auto args = std::make_shared<LogsArgs>();
  CLI::App* logs = app.add_subcommand("logs", "Print a rank's log lines from the run log");
  logs->add_option("RUN", args->run, "Run id or name")->required();
  logs->add_option("--rank", args->rank, "Rank whose log to print (default 0)");
  logs->add_flag("--follow,-f", args->follow, "Keep printing new lines until the run ends");
  logs->callback([&g, args] { logsVerb(g, *args); });
}

void addExportVerb(CLI::App& app, Globals& g) {
  auto runArg = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("csv");
  CLI::App* exp = app.add_subcommand("export", "Write a run's metrics as CSV or JSON to stdout");
  exp->add_option("RUN", *runArg, "Run id or name")->required();
  exp->add_option("--format", *format, "csv (default) or json")
      ->check(CLI::IsMember({"csv", "json"}));
  exp->callback([&g, runArg, format] { exportVerb(g, *runArg, *format); });
}

}  // namespace shardscope::cli
