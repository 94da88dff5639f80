#include "backend/monitor/straggler.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QRegularExpression>

#include <array>
#include <utility>

#include "backend/monitor/eventstream.h"

namespace shardscope::backend {
namespace {

// The compute phases a straggler can be slow in (what the verdict names).
constexpr std::array<std::pair<const char*, double RankPhaseSummary::*>, 5> kCompute{{
    {"forward", &RankPhaseSummary::forward},
    {"backward", &RankPhaseSummary::backward},
    {"optimizer", &RankPhaseSummary::optimizer},
    {"data", &RankPhaseSummary::data},
    {"copy", &RankPhaseSummary::copy},
}};

double busy(const spec::PhasesEvent& e) { return e.wall - e.comm_exposed; }

QString percent(double share) { return QString::number(100.0 * share, 'f', 0) + QLatin1Char('%'); }

}  // namespace

StragglerVerdict nameStraggler(const RankPhases& phases) {
  StragglerVerdict v;
  v.ranks = static_cast<int>(phases.size());
  if (phases.empty()) {
    v.text = QStringLiteral(
        "no phases recorded: the run has no `phases` events (a CUDA run, a run with "
        "SHARDSCOPE_PHASES=0, or a trainer older than 2026-11-29)");
    return v;
  }
  // The steps every rank reported.
  std::map<qint64, int> seen;
  for (const auto& [rank, steps] : phases)
    for (const auto& [step, e] : steps) ++seen[step];
  for (const auto& [rank, steps] : phases) v.perRank[rank].rank = rank;
  for (const auto& [step, count] : seen) {
    if (count != v.ranks) continue;
    ++v.steps;
    int slowest = -1;
    double most = -1;
    for (const auto& [rank, steps] : phases) {
      const auto& e = steps.at(step);
      auto& s = v.perRank[rank];
      ++s.steps;
      s.wall += e.wall;
      s.data += e.data;
      s.forward += e.forward;
      s.backward += e.backward;
      s.optimizer += e.optimizer;
      s.commExposed += e.comm_exposed;
      s.commTotal += e.comm_total;
      s.copy += e.copy;
      s.other += e.other;
      if (busy(e) > most) {
        most = busy(e);
        slowest = rank;
      }
    }
    ++v.perRank[slowest].slowestSteps;
  }
  if (v.steps == 0) {
    v.text = QStringLiteral("no step has phases from every rank yet");
    return v;
  }
  for (auto& [rank, s] : v.perRank) {
    const auto n = static_cast<double>(s.steps);
    for (double* x : {&s.wall, &s.data, &s.forward, &s.backward, &s.optimizer, &s.commExposed,
                      &s.commTotal, &s.copy, &s.other})
      *x /= n;
  }
  if (v.ranks < 2) {
    const auto& s = v.perRank.begin()->second;
    v.text = QStringLiteral(
                 "one rank: no straggler to name; a step takes %1 s, %2 of it waiting "
                 "on collectives")
                 .arg(s.wall, 0, 'g', 3)
                 .arg(percent(s.wall > 0 ? s.commExposed / s.wall : 0));
    return v;
  }
  for (const auto& [rank, s] : v.perRank) {
    if (v.slowest < 0 || s.slowestSteps > v.perRank.at(v.slowest).slowestSteps) v.slowest = rank;
  }
  const auto& worst = v.perRank.at(v.slowest);
  v.slowestShare = static_cast<double>(worst.slowestSteps) / static_cast<double>(v.steps);
  double othersBusy = 0;
  double othersWait = 0;
  for (const auto& [rank, s] : v.perRank) {
    if (rank == v.slowest) continue;
    othersBusy += s.busy();
    othersWait += s.wall > 0 ? s.commExposed / s.wall : 0;
  }
  const double others = static_cast<double>(v.ranks - 1);
  othersBusy /= others;
  v.othersWaitShare = othersWait / others;
  v.busyRatio = othersBusy > 0 ? worst.busy() / othersBusy : 0;
  for (const auto& [name, member] : kCompute) {
    double mean = 0;
    for (const auto& [rank, s] : v.perRank)
      if (rank != v.slowest) mean += s.*member / others;
    const double ratio = mean > 1e-9 ? worst.*member / mean : 0;
    if (ratio > v.phaseRatio) {
      v.phaseRatio = ratio;
      v.phase = QString::fromLatin1(name);
    }
  }
  const QString othersName = v.ranks == 2 ? QStringLiteral("rank %1").arg(v.slowest == 0 ? 1 : 0)
                                          : QStringLiteral("the others");
  const QString othersOf = v.ranks == 2 ? QStringLiteral("rank %1's").arg(v.slowest == 0 ? 1 : 0)
                                        : QStringLiteral("the others'");
  if (v.busyRatio < 1.05) {
    v.text = QStringLiteral(
                 "no rank stands out: the busiest rank changes from step to step "
                 "(rank %1 on %2 of %3 steps, its busy time within 5% of %4); the "
                 "ranks spend %5 of each step waiting on collectives")
                 .arg(v.slowest)
                 .arg(percent(v.slowestShare))
                 .arg(v.steps)
                 .arg(othersOf)
                 .arg(percent(v.othersWaitShare));
  } else {
    v.text = QStringLiteral(
                 "rank %1 was the slowest on %2 of %3 steps: its %4 is %5x %6 (busy "
                 "%7x); %8 spent %9 of each step waiting for it")
                 .arg(v.slowest)
                 .arg(percent(v.slowestShare))
                 .arg(v.steps)
                 .arg(v.phase)
                 .arg(v.phaseRatio, 0, 'f', 1)
                 .arg(othersOf)
                 .arg(v.busyRatio, 0, 'f', 2)
                 .arg(othersName)
                 .arg(percent(v.othersWaitShare));
  }
  return v;
}

Result<RankPhases> phasesOfRun(RunReader& reader, qint64 runId) {
  RankPhases out;
  for (const auto& m : kPhaseMetrics) {
    auto points = reader.metric(runId, QLatin1String(m.key));
    if (!points) return points.error();
    for (const auto& p : *points) {
      auto& e = out[p.rank][p.step];
      e.step = p.step;
      e.*m.field = p.value;
    }
  }
  return out;
}

Result<RankPhases> phasesOfRunDir(const QString& runDir) {
  const QDir dir(runDir);
  if (!dir.exists()) return fail("no run directory " + runDir.toStdString());
  const QStringList files = dir.entryList({QStringLiteral("events-rank-*.jsonl")}, QDir::Files);
  if (files.isEmpty()) {
    return fail(runDir.toStdString() +
                " has no events-rank-N.jsonl: give a run directory, or a run's id or name");
  }
  RankPhases out;
  for (const QString& name : files) {
    QFile file(dir.filePath(name));
    if (!file.open(QIODevice::ReadOnly))
      return fail("cannot read " + file.fileName().toStdString() + ": " +
                  file.errorString().toStdString());
    while (!file.atEnd()) {
      const QByteArray line = file.readLine(1 << 20);
      if (!line.contains("\"phases\"")) continue;
      auto event = spec::parse_event(line.toStdString());
      if (!event) continue;  // a cut or foreign line: the monitor keeps those, `why` skips them
      if (const auto* p = std::get_if<spec::PhasesEvent>(&event->body))
        out[event->env.rank][p->step] = *p;
    }
  }
  return out;
}

QJsonObject verdictToJson(const StragglerVerdict& v) {
  QJsonArray ranks;
  for (const auto& [rank, s] : v.perRank) {
    ranks.append(QJsonObject{{"rank", rank},
                             {"steps", s.steps},
                             {"slowest_steps", s.slowestSteps},
                             {"wall", s.wall},
                             {"data", s.data},
                             {"forward", s.forward},
                             {"backward", s.backward},
                             {"optimizer", s.optimizer},
                             {"comm_exposed", s.commExposed},
                             {"comm_total", s.commTotal},
                             {"copy", s.copy},
                             {"other", s.other}});
  }
  QJsonObject o{{"steps", v.steps}, {"ranks", v.ranks}, {"verdict", v.text}, {"per_rank", ranks}};
  if (v.slowest >= 0) {
    o["slowest"] =
        QJsonObject{{"rank", v.slowest},         {"share_of_steps", v.slowestShare},
                    {"phase", v.phase},          {"phase_ratio", v.phaseRatio},
                    {"busy_ratio", v.busyRatio}, {"others_wait_share", v.othersWaitShare}};
  }
  return o;
}

}  // namespace shardscope::backend
