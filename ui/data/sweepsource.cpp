#include "ui/data/sweepsource.h"

#include <QDateTime>
#include <QJsonArray>
#include <QMap>
#include <QSet>
#include <QSysInfo>

#include <algorithm>
#include <limits>

#include "backend/store/runstore.h"
#include "backend/store/runusage.h"
#include "backend/sweep/autotune.h"
#include "backend/sweep/study.h"

namespace shardscope::ui {

namespace {

// The newest study of each experiment (a study re-created for the same experiment wins).
QHash<qint64, const backend::StudyRecord*> studyPerExperiment(
    const std::vector<backend::StudyRecord>& studies) {
  QHash<qint64, const backend::StudyRecord*> out;
  for (const auto& study : studies) {
    if (!study.experimentId) continue;
    const backend::StudyRecord* known = out.value(*study.experimentId, nullptr);
    if (known == nullptr || study.id > known->id) out.insert(*study.experimentId, &study);
  }
  return out;
}

// Metric keys of up to kKeySample members spread over the sweep (always the first and last).
Result<QStringList> sampledKeys(backend::RunReader& reader,
                                const std::vector<const backend::RunRecord*>& members) {
  QStringList keys;
  const auto n = static_cast<qsizetype>(members.size());
  const qsizetype samples = std::min<qsizetype>(n, ExperimentSweepSource::kKeySample);
  qsizetype previous = -1;
  for (qsizetype i = 0; i < samples; ++i) {
    const qsizetype at = samples == 1 ? 0 : i * (n - 1) / (samples - 1);
    if (at == previous) continue;
    previous = at;
    auto runKeys = reader.metricKeys(members[size_t(at)]->id);
    if (!runKeys) return runKeys.error();
    for (const QString& key : *runKeys) {
      if (!keys.contains(key)) keys.append(key);
    }
  }
  return keys;
}

}  // namespace

QList<qint64> ExperimentSweepSource::sweepIds(const std::vector<backend::RunRecord>& runs) const {
  QList<qint64> ids;
  QSet<qint64> seen;
  for (const auto& run : runs) {
    if (run.experimentId && !seen.contains(*run.experimentId)) {
      seen.insert(*run.experimentId);
      ids.append(*run.experimentId);
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

qint64 ExperimentSweepSource::largest(const std::vector<backend::RunRecord>& runs) {
  QMap<qint64, int> counts;
  for (const auto& run : runs) {
    if (run.experimentId) ++counts[*run.experimentId];
  }
  qint64 best = -1;
  int bestCount = 0;
  for (auto it = counts.cbegin(); it != counts.cend(); ++it) {
    if (it.value() >= bestCount) {  // ids grow with time: >= prefers the newest on ties
      best = it.key();
      bestCount = it.value();
    }
  }
  return best;
}

QString ExperimentSweepSource::objectiveKey(const QStringList& keys) {
  if (keys.contains(QStringLiteral("eval.loss"))) return QStringLiteral("eval.loss");
  for (const QString& key : keys) {
    if (key.startsWith(QStringLiteral("eval."))) return key;
  }
  return QStringLiteral("loss");
}

Result<SweepData> ExperimentSweepSource::load(backend::RunReader& reader,
                                              const std::vector<backend::RunRecord>& runs,
                                              qint64 id) const {
  SweepData data;
  data.experimentId = id;
  data.experimentIds = sweepIds(runs);
  auto studies = reader.listStudies();
  if (!studies) return studies.error();
  const auto perExperiment = studyPerExperiment(*studies);
  for (auto it = perExperiment.cbegin(); it != perExperiment.cend(); ++it)
    data.names.insert(it.key(), it.value()->name);
  // The user's groups of runs (schema 12) are sweeps too, listed after the experiments.
  auto groups = reader.groups();
  if (!groups) return groups.error();
  for (const auto& group : *groups) {
    if (group.runs == 0) continue;
    data.experimentIds.append(groupSweepId(group.id));
    data.names.insert(groupSweepId(group.id), QStringLiteral("group ") + group.name);
  }
  QSet<qint64> groupMembers;
  if (const qint64 groupId = groupOfSweep(id); groupId >= 0) {
    auto members = reader.groupRuns(groupId);
    if (!members) return members.error();
    groupMembers = QSet<qint64>(members->begin(), members->end());
  }
  // A group is no study: its runs may come from several, or none.
  const backend::StudyRecord* study =
      groupOfSweep(id) >= 0 ? nullptr : perExperiment.value(id, nullptr);
  QHash<qint64, int> candidateOfRun;  // an autotune's: run id -> candidate number
  if (study != nullptr) {
    data.study = {study->id,         study->name,
                  study->config,     study->objectives,
                  study->directions, study->status == backend::StudyStatus::running,
                  study->sweepPid,   study->sweepHost,
                  study->sampler,    study->kind == backend::StudyKind::autotune};
    // A malformed stored choice shows as none here; opening the study names the field.
    if (auto choice = search::storedAutoChoice(study->state); choice && *choice)
      data.study.samplerChoice = QString::fromStdString(search::describe(**choice));
    data.pbt = pbtFromStudy(*study);
    if (data.study.autotune) {
      data.autotune = autotuneFromStudy(*study);
      for (const AutotuneCandidate& c : std::as_const(data.autotune->candidates)) {
        if (c.runId > 0) candidateOfRun.insert(c.runId, c.number);
      }
    }
  }
  std::vector<const backend::RunRecord*> members;
  for (const auto& run : runs) {
    if (groupOfSweep(id) >= 0 ? groupMembers.contains(run.id)
                              : run.experimentId && *run.experimentId == id)
      members.push_back(&run);
  }
  // listRuns() is newest first; a history reads oldest first.
  std::sort(members.begin(), members.end(), [](const auto* a, const auto* b) {
    return a->createdAt != b->createdAt ? a->createdAt < b->createdAt : a->id < b->id;
  });
  auto keys = sampledKeys(reader, members);
  if (!keys) return keys.error();
  data.objectiveKey = objectiveKey(*keys);
  // An autotune's runs have no eval: their steps' throughput (or MFU) is what it compares.
  if (data.autotune && keys->contains(data.autotune->objective))
    data.objectiveKey = data.autotune->objective;
  data.trials.reserve(static_cast<qsizetype>(members.size()));
  std::vector<backend::RunRecord> memberRuns;
  memberRuns.reserve(members.size());
  for (const auto* run : members) memberRuns.push_back(*run);
  auto usage =
      backend::runUsage(reader, memberRuns, double(QDateTime::currentMSecsSinceEpoch()) / 1000.0);
  if (!usage) return usage.error();
  for (const auto* run : members) {
    SweepTrial trial{run->id,        run->name, run->status, run->params, run->objective,
                     run->createdAt, {},        {},          {},          {}};
    if (study != nullptr && run->studyId == study->id) {
      trial.trialNumber = run->trialNumber;
      trial.objectiveValues = run->objectiveValues;
    }
    if (const auto it = candidateOfRun.constFind(run->id); it != candidateOfRun.cend())
      trial.trialNumber = *it;
    trial.usage = usage->value(run->id);
    trial.started = run->startedAt.has_value();
    data.trials.append(std::move(trial));
  }
  return data;
}

Result<QVector<SeriesChunk>> readCurves(backend::RunReader& reader, const QList<qint64>& runIds,
                                        const QString& key,
                                        const QHash<qint64, qint64>& afterSteps) {
  // One statement from the lowest step any of them has; each run keeps what is past its own.
  qint64 lowest = std::numeric_limits<qint64>::max();
  for (qint64 id : runIds) lowest = std::min(lowest, afterSteps.value(id, -1));
  auto points = reader.metricOfRuns(runIds, key, 0, lowest);
  if (!points) return points.error();
  QVector<SeriesChunk> out;
  out.reserve(runIds.size());
  for (qint64 id : runIds) {
    SeriesChunk chunk;
    chunk.runId = id;
    chunk.key = key;
    chunk.reset = !afterSteps.contains(id);
    const qint64 after = afterSteps.value(id, -1);
    if (const auto it = points->constFind(id); it != points->cend()) {
      for (const auto& point : *it) {
        if (point.step <= after) continue;
        chunk.steps.append(double(point.step));
        chunk.values.append(point.value);
      }
    }
    out.append(std::move(chunk));
  }
  return out;
}

}  // namespace shardscope::ui

namespace shardscope::ui {

std::optional<PbtData> pbtFromStudy(const backend::StudyRecord& study) {
  const QJsonValue stored = study.state.value(QLatin1String("pbt"));
  if (!stored.isObject()) return std::nullopt;
  // The experiment as stored with the study: its [search] names the parameters (a malformed one
  // shows no lineage here; opening the study names the field).
  auto space = search::parse_search_space(study.config.toStdString());
  if (!space || !space->pbt) return std::nullopt;
  PbtData data;
  data.lineage = backend::PbtLineage::fromJson(*space, stored.toObject());
  data.intervalSteps = space->pbt->interval_steps;
  for (const std::string& name : space->pbt->mutable_params) {
    const QString param = QString::fromStdString(name);
    data.mutableParams.append(param);
    const int at = space->index_of(name);
    if (at >= 0 && space->params[std::size_t(at)].log) data.logParams.append(param);
  }
  const bool minimize = space->objectives.empty() ||
                        space->objectives.front().direction == search::Direction::Minimize;
  data.best = data.lineage.bestSchedule(minimize);
  return data;
}

AutotuneData autotuneFromStudy(const backend::StudyRecord& study) {
  const auto number = [](const QJsonValue& v) {
    return v.isDouble() ? v.toDouble() : std::numeric_limits<double>::quiet_NaN();
  };
  AutotuneData data;
  data.name = study.name;
  data.studyId = study.id;
  data.running = study.status == backend::StudyStatus::running;
  data.stopped = study.status == backend::StudyStatus::stopped;
  data.pid = study.sweepPid;
  data.host = study.sweepHost;
  const QJsonObject& state = study.state;
  data.objective = state.value(QStringLiteral("objective")).toString();
  if (data.objective.isEmpty() && !study.objectives.isEmpty())
    data.objective = study.objectives.first();
  for (const auto& v : state.value(QStringLiteral("candidates")).toArray()) {
    const QJsonObject o = v.toObject();
    AutotuneCandidate c;
    c.number = o.value(QStringLiteral("number")).toInt();
    c.settings = o.value(QStringLiteral("settings")).toObject();
    c.status = o.value(QStringLiteral("status")).toString();
    c.tokensPerS = number(o.value(QStringLiteral("tokens_per_s")));
    c.mfu = number(o.value(QStringLiteral("mfu")));
    c.estimateBytes = o.value(QStringLiteral("estimate_bytes")).toInteger();
    c.peakBytes = o.value(QStringLiteral("peak_bytes")).toInteger();
    c.runId = o.value(QStringLiteral("run_id")).toInteger();
    c.runName = o.value(QStringLiteral("run")).toString();
    c.duplicateOf = o.value(QStringLiteral("duplicate_of")).toInt(-1);
    c.error = o.value(QStringLiteral("error")).toString();
    data.candidates.append(std::move(c));
  }
  data.winner = state.value(QStringLiteral("winner")).toInt(-1);
  data.winnerFile = state.value(QStringLiteral("winner_file")).toString();
  data.error = state.value(QStringLiteral("error")).toString();
  return data;
}

bool sweepProcessGone(const SweepStudy& study) {
  // An autotune is no sweep to adopt: its record stays as its process left it.
  if (study.autotune) return false;
  if (study.studyId < 0 || !study.running) return false;
  if (study.sweepPid <= 0) return true;
  // Another machine's process is judged by the CLI (`study show`), which reads its heartbeat
  // fresh; here only a pid of this machine can be checked without a read.
  return study.sweepHost == QSysInfo::machineHostName() &&
         !backend::RunStore::processAlive(study.sweepPid);
}

}  // namespace shardscope::ui
