// prune_replay: replays recorded learning curves through our pruner and prints each decision,
// the C++ side of the pruner reference test (reference_pruners.py runs Optuna on the same file).
// Input JSON: {"direction": "minimize"|"maximize", "pruner": "<TOML line: pruner = {...}>",
//              "events": [["report", trial, step, value|null], ["finish", trial], ...]}
// Output: one line "trial step 0|1" per report of a trial that was not pruned before it.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cstdio>
#include <limits>
#include <map>

#include "search/pruner.h"
#include "search/space.h"

using namespace shardscope::search;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: prune_replay CURVES.json\n");
    return 2;
  }
  QFile file(QString::fromLocal8Bit(argv[1]));
  if (!file.open(QIODevice::ReadOnly)) {
    std::fprintf(stderr, "prune_replay: cannot read %s\n", argv[1]);
    return 2;
  }
  const QJsonObject root = QJsonDocument::fromJson(file.readAll()).object();
  const std::string toml = "[search]\n" + root["pruner"].toString().toStdString() +
                           "\n[search.space.x]\ntype = \"bool\"\n";
  auto space = parse_search_space(toml, "replay");
  if (!space) {
    std::fprintf(stderr, "prune_replay: %s\n", space.message().c_str());
    return 2;
  }
  const Direction dir =
      root["direction"].toString() == "maximize" ? Direction::Maximize : Direction::Minimize;
  auto pruner = make_pruner(space->pruner);
  std::vector<Trial> trials;
  std::map<std::int64_t, std::size_t> index;
  for (const QJsonValue& ev : root["events"].toArray()) {
    const QJsonArray e = ev.toArray();
    const auto number = static_cast<std::int64_t>(e[1].toInteger());
    if (index.count(number) == 0) {
      index[number] = trials.size();
      Trial t;
      t.number = number;
      trials.push_back(t);
    }
    Trial& t = trials[index[number]];
    if (t.state != TrialState::Running) continue;
    if (e[0].toString() == "finish") {
      t.state = TrialState::Complete;
      t.values = {t.intermediate.empty() ? 0.0 : t.intermediate.rbegin()->second};
      continue;
    }
    const auto step = static_cast<std::int64_t>(e[2].toInteger());
    t.intermediate[step] =
        e[3].isNull() ? std::numeric_limits<double>::quiet_NaN() : e[3].toDouble();
    const PruneDecision d = pruner->should_prune(t, trials, dir);
    for (const auto& [rung, value] : d.rungs) t.rungs[rung] = value;
    if (d.prune) t.state = TrialState::Pruned;
    std::printf("%lld %lld %d\n", static_cast<long long>(number), static_cast<long long>(step),
                d.prune ? 1 : 0);
  }
  return 0;
}
