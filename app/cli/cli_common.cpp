#include "app/cli/cli_common.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>

#include <cmath>
#include <cstdio>
#include <iostream>

#include "app/cli/verbexit.h"
#include "backend/lifecycle/runlifecycle.h"
#include "backend/store/db.h"
#include "spec/search_names.h"

namespace shardscope::cli {

using backend::RunReader;
using backend::RunRecord;
using backend::RunStore;
using backend::StudyRecord;

void exitWith(int code, const std::string& message) {
  if (!message.empty()) std::cerr << "error: " << message << '\n';
  throw VerbExit{code};
}

QString dbPath(const Globals& g) {
  return g.dbPath.empty() ? RunStore::defaultPath() : QString::fromStdString(g.dbPath);
}

std::unique_ptr<RunStore> openStore(const Globals& g) { return orExit(RunStore::open(dbPath(g))); }

RunReader openReader(const Globals& g) {
  const QString path = dbPath(g);
  if (!backend::isPostgresSpec(path) && !QFileInfo::exists(path)) {
    exitWith(kExitError, "run log " + backend::displaySpec(path).toStdString() +
                             " does not exist yet; start a run first or pass --db PATH");
  }
  return orExit(RunReader::open(path));
}

RunRecord findRun(RunReader& reader, const std::string& run) {
  const QString text = QString::fromStdString(run);
  bool numeric = false;
  const qint64 id = text.toLongLong(&numeric);
  std::optional<RunRecord> found;
  if (numeric) found = orExit(reader.run(id));
  if (!found) found = orExit(reader.runByName(text));
  if (!found) {
    exitWith(kExitError, "no run with id or name \"" + run +
                             "\" in this run log; `shardscope-cli ls` lists the runs");
  }
  return *found;
}

StudyRecord findStudy(RunReader& reader, const std::string& study) {
  const QString text = QString::fromStdString(study);
  bool numeric = false;
  const qint64 id = text.toLongLong(&numeric);
  std::optional<StudyRecord> found;
  if (numeric) found = orExit(reader.study(id));
  if (!found) found = orExit(reader.studyByName(text));
  if (!found) {
    exitWith(kExitError, "no study with id or name \"" + study +
                             "\" in this run log; `shardscope-cli study ls` lists the studies");
  }
  return *found;
}

QString runsRoot(const Globals& g) {
  return backend::RunLifecycle::runsRootFor(QString::fromStdString(g.dbPath));
}

namespace {

QJsonValue optionalNumber(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return QJsonValue(QJsonValue::Null);
  return *v;
}

}  // namespace

QJsonObject runToJson(const RunRecord& run) {
  QJsonObject o;
  o["id"] = run.id;
  o["name"] = run.name;
  o["status"] = QString::fromUtf8(spec::to_string(run.status).data(),
                                  static_cast<qsizetype>(spec::to_string(run.status).size()));
  o["run_dir"] = run.runDir;
  o["params"] = run.params;
  o["objective"] = optionalNumber(run.objective);
  o["error"] = run.error.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(run.error);
  o["world_size"] = run.worldSize;
  o["experiment_id"] = run.experimentId ? QJsonValue(*run.experimentId) : QJsonValue();
  o["location"] = run.location;
  o["created_at"] = run.createdAt;
  o["started_at"] = optionalNumber(run.startedAt);
  o["ended_at"] = optionalNumber(run.endedAt);
  o["archived_at"] = optionalNumber(run.archivedAt);
  return o;
}

std::string objectiveValuesText(const std::vector<double>& values,
                                const std::vector<spec::Objective>& objectives) {
  std::string list;
  bool waiting = false;
  bool known = false;
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::string item;
    if (std::isnan(values[i]) && i < objectives.size() &&
        objectives[i].metric == spec::kGoodRateObjective) {
      waiting = true;
      item = "?";
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", values[i]);
      item = buf;
      known = true;
    }
    list += (list.empty() ? "" : ",") + item;
  }
  if (!waiting) return list;
  const std::string note = "(" + std::string(spec::kGoodRateObjective) + ": waiting for verdicts)";
  return known ? list + " " + note : note;
}

void printJson(const QJsonObject& object) {
  std::cout << QJsonDocument(object).toJson(QJsonDocument::Compact).toStdString() << '\n';
}

int exitCodeFor(spec::RunStatus status) {
  using spec::RunStatus;
  switch (status) {
    case RunStatus::complete:
      return kExitOk;
    case RunStatus::stopped:
    case RunStatus::pruned:
      return kExitStopped;
    case RunStatus::failed:
    case RunStatus::oom:
    case RunStatus::infeasible:
      return kExitFailed;
    case RunStatus::queued:
    case RunStatus::running:
      break;
  }
  return kExitOk;
}

}  // namespace shardscope::cli
