#include "backend/sweep/pbtlineage.h"

#include <QJsonArray>

#include <algorithm>

#include "backend/sweep/study.h"

namespace shardscope::backend {

const PbtSegment* PbtLineage::at(int segment, int member) const {
  for (const PbtSegment& s : segments) {
    if (s.segment == segment && s.member == member) return &s;
  }
  return nullptr;
}

PbtSegment* PbtLineage::at(int segment, int member) {
  return const_cast<PbtSegment*>(std::as_const(*this).at(segment, member));
}

std::optional<int> PbtLineage::bestMember(bool minimize) const {
  int last = -1;
  for (const PbtSegment& s : segments) {
    if (s.state == QLatin1String("complete")) last = std::max(last, s.segment);
  }
  std::optional<int> best;
  std::optional<double> bestValue;
  for (const PbtSegment& s : segments) {
    if (s.segment != last || !s.value) continue;
    if (!bestValue || (minimize ? *s.value < *bestValue : *s.value > *bestValue)) {
      best = s.member;
      bestValue = s.value;
    }
  }
  return best;
}

std::vector<PbtSegment> PbtLineage::bestSchedule(bool minimize) const {
  std::vector<PbtSegment> chain;
  const auto best = bestMember(minimize);
  if (!best) return chain;
  int last = 0;
  for (const PbtSegment& s : segments) {
    if (s.member == *best && s.value) last = std::max(last, s.segment);
  }
  const PbtSegment* s = at(last, *best);
  while (s != nullptr) {
    chain.push_back(*s);
    s = s->segment > 0 && s->fromMember >= 0 ? at(s->segment - 1, s->fromMember) : nullptr;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

QJsonObject PbtLineage::toJson() const {
  QJsonArray rows;
  for (const PbtSegment& s : segments) {
    QJsonObject row{{"member", s.member},
                    {"segment", s.segment},
                    {"trial", s.trial},
                    {"run", s.runId},
                    {"start_step", s.startStep},
                    {"end_step", s.endStep},
                    {"from_member", s.fromMember},
                    {"from_run", s.fromRunId},
                    {"from_checkpoint", s.fromCheckpoint},
                    {"exploited", s.exploited},
                    {"params", search::paramsToJson(s.params)},
                    {"state", s.state}};
    if (s.value) row.insert(QStringLiteral("value"), *s.value);
    rows.append(row);
  }
  return QJsonObject{{"population", population}, {"segments", rows}};
}

PbtLineage PbtLineage::fromJson(const search::SearchSpace& space, const QJsonObject& json) {
  PbtLineage lineage;
  lineage.population = json.value(QLatin1String("population")).toInt();
  const QJsonArray rows = json.value(QLatin1String("segments")).toArray();
  for (const auto& v : rows) {
    const QJsonObject row = v.toObject();
    PbtSegment s;
    s.member = row.value(QLatin1String("member")).toInt();
    s.segment = row.value(QLatin1String("segment")).toInt();
    s.trial = row.value(QLatin1String("trial")).toInteger();
    s.runId = row.value(QLatin1String("run")).toInteger();
    s.startStep = row.value(QLatin1String("start_step")).toInteger();
    s.endStep = row.value(QLatin1String("end_step")).toInteger();
    s.fromMember = row.value(QLatin1String("from_member")).toInt(-1);
    s.fromRunId = row.value(QLatin1String("from_run")).toInteger();
    s.fromCheckpoint = row.value(QLatin1String("from_checkpoint")).toString();
    s.exploited = row.value(QLatin1String("exploited")).toBool();
    s.params = search::paramsFromJson(space, row.value(QLatin1String("params")).toObject());
    if (row.value(QLatin1String("value")).isDouble())
      s.value = row.value(QLatin1String("value")).toDouble();
    s.state = row.value(QLatin1String("state")).toString();
    lineage.segments.push_back(std::move(s));
  }
  return lineage;
}

}  // namespace shardscope::backend
