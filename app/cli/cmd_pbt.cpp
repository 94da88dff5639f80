#include "app/cli/cmd_pbt.h"

#include <QCoreApplication>
#include <QJsonArray>

#include <cstdio>
#include <string>

#include "backend/sweep/pbtloop.h"

namespace shardscope::cli {

namespace {

std::string valuesText(const search::TrialParams& params) {
  std::string out;
  for (const auto& [name, value] : params) {
    out += (out.empty() ? "" : " ") + name + "=" + search::format_value(value);
  }
  return out;
}

std::string valueText(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", *v);
  return buf;
}

backend::PbtLineage lineageOf(const search::Study& study) {
  return backend::PbtLineage::fromJson(study.space(),
                                       study.record().state.value(QLatin1String("pbt")).toObject());
}

bool minimizing(const search::Study& study) {
  return study.space().objectives.empty() ||
         study.space().objectives.front().direction == search::Direction::Minimize;
}

void printSchedule(const std::vector<backend::PbtSegment>& schedule) {
  if (schedule.empty()) return;
  std::printf("best member %d's schedule:\n", schedule.back().member);
  for (const backend::PbtSegment& s : schedule) {
    std::printf("  steps %lld-%lld  member %d (run %lld)  %s\n",
                static_cast<long long>(s.startStep + 1), static_cast<long long>(s.endStep),
                s.member, static_cast<long long>(s.runId), valuesText(s.params).c_str());
  }
}

}  // namespace

void printPbtLineage(const search::Study& study) {
  if (!study.space().pbt) return;
  const backend::PbtLineage lineage = lineageOf(study);
  std::printf(
      "pbt:        population %d, %zu segments recorded (first values drawn at random from "
      "search.seed; the sampler and n_trials are not used)\n",
      lineage.population, lineage.segments.size());
  for (const backend::PbtSegment& s : lineage.segments) {
    std::string from = "from scratch";
    if (s.fromMember >= 0) {
      from = (s.exploited ? "exploits member " : "continues member ") +
             std::to_string(s.fromMember) + " (run " + std::to_string(s.fromRunId) + ") at step " +
             std::to_string(s.startStep);
    }
    std::printf("  segment %d member %d  trial %lld run %lld  %s  %s  %s -> %s\n", s.segment,
                s.member, static_cast<long long>(s.trial), static_cast<long long>(s.runId),
                from.c_str(), valuesText(s.params).c_str(), s.state.toStdString().c_str(),
                valueText(s.value).c_str());
  }
  printSchedule(lineage.bestSchedule(minimizing(study)));
}

QJsonObject pbtJson(const search::Study& study) {
  if (!study.space().pbt) return {};
  const backend::PbtLineage lineage = lineageOf(study);
  QJsonObject json = lineage.toJson();
  QJsonArray schedule;
  for (const backend::PbtSegment& s : lineage.bestSchedule(minimizing(study))) {
    schedule.append(QJsonObject{{"segment", s.segment},
                                {"member", s.member},
                                {"run", s.runId},
                                {"start_step", s.startStep},
                                {"end_step", s.endStep},
                                {"params", search::paramsToJson(s.params)}});
  }
  json.insert(QStringLiteral("best_schedule"), schedule);
  return json;
}

void runPbtSweep(backend::RunStore& store, backend::SweptStudy opened,
                 const backend::SweepInput& input, const backend::SweepLoop::Options& options) {
  orExit(backend::PbtLoop::check(input), kExitUsage);
  backend::PbtLoop loop(store, std::move(opened.study), input, options);
  const search::PbtConfig& pbt = *loop.study().space().pbt;
  std::printf("study %s: population-based training, %d members, %d segments of %lld steps\n",
              qPrintable(loop.study().name()), pbt.population, loop.segmentCount(),
              static_cast<long long>(pbt.interval_steps));
  std::fflush(stdout);
  QObject::connect(&loop, &backend::PbtLoop::segmentStarting,
                   [](int segment, int member, int from, const search::TrialParams& params) {
                     std::printf("segment %d member %d start%s: %s\n", segment, member,
                                 from >= 0 && from != member
                                     ? (" from member " + std::to_string(from)).c_str()
                                     : "",
                                 valuesText(params).c_str());
                     std::fflush(stdout);
                   });
  QObject::connect(&loop, &backend::PbtLoop::segmentRetried, [](int segment, int member, int n) {
    std::printf("segment %d member %d failed: attempt %d runs it again\n", segment, member, n);
    std::fflush(stdout);
  });
  QObject::connect(&loop, &backend::PbtLoop::segmentEnded, [](const backend::PbtSegment& s) {
    std::printf("segment %d member %d %s %s\n", s.segment, s.member, s.state.toStdString().c_str(),
                valueText(s.value).c_str());
    std::fflush(stdout);
  });
  QObject::connect(&loop, &backend::PbtLoop::ended, [] { QCoreApplication::quit(); });
  orExit(loop.start());
  QCoreApplication::exec();
  orExit(loop.finish());
  printSchedule(loop.lineage().bestSchedule(minimizing(loop.study())));
  std::fflush(stdout);
  if (!loop.lineage().bestMember(minimizing(loop.study()))) {
    exitWith(kExitFailed, "no segment completed");
  }
}

}  // namespace shardscope::cli
