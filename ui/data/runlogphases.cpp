// RunLogWorker's reads for the Timeline: the watched run's `phase.*` metrics, read on from the
// last step every rank has, and the straggler verdict over all of them.
#include <QFileInfo>
#include <QHash>

#include <algorithm>
#include <limits>

#include "backend/monitor/eventstream.h"
#include "backend/monitor/unittrace.h"
#include "ui/data/runlogworker.h"

namespace shardscope::ui {
namespace {

bool samePhases(const spec::PhasesEvent& a, const spec::PhasesEvent& b) {
  return std::all_of(backend::kPhaseMetrics.begin(), backend::kPhaseMetrics.end(),
                     [&](const auto& m) { return a.*m.field == b.*m.field; });
}

}  // namespace

void RunLogWorker::loadUnitStep(qint64 runId, qint64 step) {
  UnitStepData data;
  data.runId = runId;
  data.step = step;
  QString runDir;
  for (const auto& run : m_runs)
    if (run.id == runId) runDir = run.runDir;
  const QString howTo =
      tr("set [trace] every_n_steps in the experiment (docs/config.md) to "
         "record one step in N per unit");
  if (runDir.isEmpty() || !QFileInfo(runDir + QStringLiteral("/trace")).isDir()) {
    data.message = tr("This run has no per-unit trace here (%1); %2.")
                       .arg(runDir.isEmpty() ? tr("run not found") : runDir + "/trace", howTo);
    emit unitStepLoaded(data);
    return;
  }
  auto trace = backend::readUnitTrace(runDir);
  if (!trace) {
    data.message = QString::fromStdString(trace.message());
  } else if (auto it = trace->steps.find(step); it != trace->steps.end()) {
    data.found = true;
    data.detail = it->second;
  } else {
    QStringList recorded;
    for (const auto& [s, detail] : trace->steps) recorded << QString::number(s);
    data.message = tr("Step %1 was not recorded in detail (recorded: %2); %3.")
                       .arg(step)
                       .arg(recorded.isEmpty() ? tr("none") : recorded.join(", "), howTo);
  }
  emit unitStepLoaded(data);
}

void RunLogWorker::watchPhases(qint64 runId) {
  m_phasesRun = runId;
  m_phases.clear();
  m_phasesReset = true;
  loadPhases();
}

void RunLogWorker::loadPhases() {
  if (!m_reader || m_phasesRun < 0) return;
  if (m_phasesReset) m_phases.clear();
  // Read on from the last step every rank has (a rank behind the others re-reads a few steps;
  // they are replaced, not added). phase.wall first: a step whose wall was read is whole, as the
  // monitor stores one event's metrics in one transaction; later keys may hold newer steps,
  // which are left for the next read.
  // Until every rank of the run has a step, read from the start: a rank that had none at the
  // last read may commit steps below the others' last one.
  int world = 0;
  for (const auto& run : m_runs)
    if (run.id == m_phasesRun) world = run.worldSize;
  qint64 after = -1;
  if (!m_phases.empty() && static_cast<int>(m_phases.size()) >= world) {
    after = std::numeric_limits<qint64>::max();
    for (const auto& [rank, steps] : m_phases)
      after = std::min(after, steps.empty() ? qint64(-1) : steps.rbegin()->first);
  }
  QHash<int, std::map<qint64, spec::PhasesEvent>> fresh;
  for (const auto& metric : backend::kPhaseMetrics) {
    auto points = m_reader->metric(m_phasesRun, QLatin1String(metric.key), after);
    if (!points) return report(points.error());
    const bool first = &metric == &backend::kPhaseMetrics.front();
    for (const auto& p : *points) {
      auto& steps = fresh[p.rank];
      auto it = steps.find(p.step);
      if (it == steps.end()) {
        if (!first) continue;  // committed after phase.wall was read
        it = steps.emplace(p.step, spec::PhasesEvent{}).first;
        it->second.step = p.step;
      }
      it->second.*metric.field = p.value;
    }
  }
  PhasesDelta delta;
  delta.runId = m_phasesRun;
  delta.reset = m_phasesReset;
  QList<int> ranks = fresh.keys();
  std::sort(ranks.begin(), ranks.end());
  for (int rank : ranks) {
    auto& stored = m_phases[rank];
    for (const auto& [step, e] : fresh.value(rank)) {
      const auto it = stored.find(step);
      if (it != stored.end() && samePhases(it->second, e)) continue;
      stored[step] = e;
      delta.points.append({rank, e});
    }
  }
  if (delta.points.isEmpty() && !m_phasesReset) return;
  m_phasesReset = false;
  const auto verdict = backend::nameStraggler(m_phases);
  delta.verdict = verdict.text;
  delta.slowest = verdict.slowest;
  emit phasesLoaded(delta);
}

}  // namespace shardscope::ui

namespace shardscope::ui {

// phase.wall first, then phase.comm_exposed: the monitor stores one event's metrics in one
// transaction, so a step whose wall was read has its exposed time too; a step only the second
// read saw waits for the next pass. Ranks commit separately: read from the lowest step any rank
// has delivered and keep, per rank, only what is new.
void RunLogWorker::appendExposedShare(const backend::RunRecord& run, bool fresh,
                                      QVector<SeriesChunk>& out) {
  auto& seen = m_seen[run.id][QLatin1String(kExposedShareKey)];
  const int ranks = std::max(1, run.worldSize);
  qint64 after = std::numeric_limits<qint64>::max();
  for (int rank = 0; rank < ranks; ++rank) after = std::min(after, seen.value(rank, -1));
  auto walls = m_reader->metric(run.id, QLatin1String(kPhaseWallKey), after);
  if (!walls) return report(walls.error());
  auto exposed = m_reader->metric(run.id, QStringLiteral("phase.comm_exposed"), after);
  if (!exposed) return report(exposed.error());
  QHash<QPair<int, qint64>, double> exposedAt;
  for (const auto& p : *exposed) exposedAt.insert({p.rank, p.step}, p.value);
  QHash<int, SeriesChunk> byRank;
  for (const auto& wall : *walls) {
    if (wall.rank >= ranks || wall.step <= seen.value(wall.rank, -1)) continue;
    const auto it = exposedAt.constFind({wall.rank, wall.step});
    if (it == exposedAt.constEnd()) continue;
    SeriesChunk& chunk = byRank[wall.rank];
    chunk.steps.append(double(wall.step));
    // A zero wall (a step too short for the clock) has no share: NaN, drawn as a gap.
    chunk.values.append(wall.value > 0 ? *it / wall.value
                                       : std::numeric_limits<double>::quiet_NaN());
    chunk.times.append(wall.time);
  }
  for (auto c = byRank.begin(); c != byRank.end(); ++c) {
    seen[c.key()] = qint64(c->steps.last());
    c->runId = run.id;
    c->runName = run.name;
    c->key = QLatin1String(kExposedShareKey);
    c->rank = c.key();
    c->reset = fresh;
    out.append(std::move(c.value()));
  }
}

}  // namespace shardscope::ui
