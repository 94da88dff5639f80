// RunReader::memoryCalibrations: what the completed runs measured against what the estimate said,
// by the kind of run (spec/calibration.h). Read from the events every run already stores (rank
// by rank: `hello.mem_estimate`, `mem.peak`), so no schema step is needed and a run log written
// before this query existed calibrates as well.
#include <QHash>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/store/runreader.h"
#include "spec/estimate.h"
#include "spec/events.h"
#include "spec/experiment.h"

Q_LOGGING_CATEGORY(lcRunCalibration, "shardscope.backend.runcalibration")

namespace shardscope::backend {

namespace {

// One rank of one run: what it was told to expect and the most it held.
struct RankMemory {
  std::int64_t estimate = 0;
  int worldSize = 0;
  int localWorldSize = 0;
  std::int64_t paramsTotal = 0;
  bool gpu = false;
  std::int64_t peak = 0;
  std::optional<spec::DataBound> bound;  // what the estimate's rows were bounded by (chat data)
};

// A completed run: its experiment and the dotted overrides it ran with (a trial's values, a
// replan's plan); other params ("replan": the plan's story) are no fields.
struct CompletedRun {
  std::string toml;
  std::vector<std::string> overrides;
};

std::vector<std::string> overridesOf(const QString& paramsJson) {
  std::vector<std::string> out;
  const QJsonObject params = QJsonDocument::fromJson(paramsJson.toUtf8()).object();
  for (auto it = params.begin(); it != params.end(); ++it) {
    if (!it.key().contains(QLatin1Char('.'))) continue;
    const QJsonValue v = it.value();
    QString text;
    if (v.isBool()) {
      text = v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
    } else if (v.isDouble()) {
      text = QString::number(v.toDouble(), 'g', 17);
    } else if (v.isString()) {
      text = v.toString();  // as the override was written (bare words parse as strings)
    } else {
      continue;
    }
    out.push_back((it.key() + QLatin1Char('=') + text).toStdString());
  }
  return out;
}

void noteEvent(RankMemory& rank, const std::string& json) {
  auto event = spec::parse_event(json, spec::ParseMode::lenient);
  if (!event) return;
  if (const auto* hello = std::get_if<spec::HelloEvent>(&event->body)) {
    rank.estimate = hello->mem_estimate;
    rank.worldSize = hello->world_size;
    rank.localWorldSize = hello->local_world_size;
    rank.paramsTotal = hello->params_total;
    rank.gpu = hello->device && hello->device->type == "cuda";
    rank.bound = hello->data_bound;
  } else if (const auto* mem = std::get_if<spec::MemEvent>(&event->body)) {
    rank.peak = std::max(rank.peak, mem->cuda_peak ? *mem->cuda_peak : mem->peak);
  }
}

}  // namespace

Result<spec::Calibrations> RunReader::memoryCalibrations() {
  std::map<qint64, CompletedRun> runs;
  {
    auto stmt = m_db.prepare(
        "SELECT r.id, r.params, COALESCE(x.toml, '') FROM runs r "
        "LEFT JOIN experiments x ON x.id = r.experiment_id WHERE r.status = 'complete'");
    if (!stmt) return stmt.error();
    for (;;) {
      auto row = stmt->step();
      if (!row) return row.error();
      if (!*row) break;
      runs[stmt->columnInt64(0)] = {stmt->columnText(2),
                                    overridesOf(QString::fromStdString(stmt->columnText(1)))};
    }
  }
  std::map<qint64, std::map<int, RankMemory>> ranks;
  {
    auto stmt = m_db.prepare(
        "SELECT e.run_id, e.rank, e.json FROM events e JOIN runs r ON r.id = e.run_id "
        "AND e.attempt = r.attempt WHERE r.status = 'complete' AND e.kind IN ('hello', 'mem')");
    if (!stmt) return stmt.error();
    for (;;) {
      auto row = stmt->step();
      if (!row) return row.error();
      if (!*row) break;
      noteEvent(ranks[stmt->columnInt64(0)][int(stmt->columnInt64(1))], stmt->columnText(2));
    }
  }
  spec::LoadOptions options;
  options.check_paths = false;  // the data may be gone; the key needs none of it
  std::map<std::string, std::vector<double>> ratios;
  for (const auto& [id, byRank] : ranks) {
    const auto run = runs.find(id);
    if (run == runs.end() || run->second.toml.empty()) continue;
    double ratio = 0;
    const RankMemory* first = nullptr;
    for (const auto& [rank, m] : byRank) {
      if (m.estimate <= 0 || m.peak <= 0) continue;
      ratio = std::max(ratio, double(m.peak) / double(m.estimate));
      if (first == nullptr) first = &m;
    }
    if (first == nullptr) continue;
    const std::string name = "run " + std::to_string(id);
    auto exp = spec::parse_experiment(run->second.toml, name, run->second.overrides, options);
    if (!exp) exp = spec::parse_experiment(run->second.toml, name, {}, options);
    if (!exp) {
      qCDebug(lcRunCalibration) << "left out:" << exp.message().c_str();
      continue;
    }
    // A run estimated by other formulas (a shardtrain from before a change of spec/estimate.cpp)
    // measured a ratio to a figure these formulas no longer give: applied to today's figure it
    // would correct what is already right. The run counts only when these formulas, for its
    // experiment and world, say what its hello said (a model they cannot read now is kept).
    if (first->worldSize > 0) {
      auto now = spec::estimate_memory(*exp, first->worldSize, std::max(1, first->localWorldSize),
                                       first->bound ? &*first->bound : nullptr);
      if (now && now->total != first->estimate) {
        qCDebug(lcRunCalibration) << "left out run" << id << ": estimated" << first->estimate
                                  << "by other formulas (now" << now->total << ")";
        continue;
      }
    }
    ratios[spec::calibration_key(*exp, first->paramsTotal, first->gpu)].push_back(ratio);
  }
  spec::Calibrations out;
  for (auto& [key, values] : ratios) out[key] = spec::robust_calibration(std::move(values));
  return out;
}

}  // namespace shardscope::backend
