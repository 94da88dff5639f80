#include "app/cli/cmd_pbt.h"

#include <QCoreApplication>
#include <QJsonArray>

#include <cstdio>
#include <memory>
#include <string>

#include "app/cli/launching.h"
#include "backend/sweep/pbtloop.h"
#include "backend/sweep/pbtreplay.h"

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
  QObject::connect(&loop, &backend::PbtLoop::segmentReattached,
                   [](int segment, int member, qint64 runId) {
                     std::printf("segment %d member %d reattached (run %lld)\n", segment, member,
                                 static_cast<long long>(runId));
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
  const QString name = loop.study().name();
  QObject::connect(&loop, &backend::PbtLoop::controlChanged, [name](backend::StudyControl c) {
    const char* what = c == backend::StudyControl::pause ? "paused: no new segment"
                       : c == backend::StudyControl::stop
                           ? "stopped: the running segments are told to stop"
                           : "resumed";
    std::printf("study %s %s\n", qPrintable(name), what);
    std::fflush(stdout);
  });
  QObject::connect(&loop, &backend::PbtLoop::ended, [] { QCoreApplication::quit(); });
  orExit(loop.start());
  QCoreApplication::exec();
  orExit(loop.finish());
  printSchedule(loop.lineage().bestSchedule(minimizing(loop.study())));
  std::fflush(stdout);
  if (loop.stopped()) {
    std::printf("study %s stopped by the user\n", qPrintable(name));
    std::fflush(stdout);
    throw VerbExit{kExitStopped};
  }
  if (!loop.lineage().bestMember(minimizing(loop.study()))) {
    exitWith(kExitFailed, "no segment completed");
  }
}

namespace {

// Follows one segment's ranks to their end, recording the location once the lease is held;
// exits with the run's code unless it completed.
void followSegment(const Globals& g, backend::RunStore& store, backend::LaunchedRun& launched,
                   const backend::PbtSegment& s) {
  std::printf("pbt-replay: run %s (id %lld) segment %d, steps %lld-%lld: %s\n",
              qPrintable(launched.run.name), static_cast<long long>(launched.run.id), s.segment,
              static_cast<long long>(s.startStep + 1), static_cast<long long>(s.endStep),
              valuesText(s.params).c_str());
  std::fflush(stdout);
  backend::FollowOptions options;
  options.maxSteps = s.endStep;
  const qint64 id = launched.run.id;
  options.location = launched.location;
  const auto outcome = orExit(followRun(store, *launched.handle, id, options, true));
  if (!outcome.followed)
    exitWith(kExitError, "run " + std::to_string(id) + " is followed elsewhere");
  if (outcome.status != spec::RunStatus::complete) {
    std::printf("pbt-replay: segment %d ended %s\n", s.segment,
                std::string(spec::to_string(outcome.status)).c_str());
    throw VerbExit{exitCodeFor(outcome.status)};
  }
  (void)g;
}

void pbtReplayVerb(const Globals& g, const std::string& name) {
  auto store = openStore(g);
  const search::Study study = orExit(search::Study::open(*store, QString::fromStdString(name)));
  if (!study.space().pbt) exitWith(kExitUsage, "study " + name + " has no [search.pbt]");
  const auto schedule = lineageOf(study).bestSchedule(minimizing(study));
  if (schedule.empty()) exitWith(kExitFailed, "study " + name + " has no complete segment yet");
  const QString path = study.record().state.value(QLatin1String("source")).toString();
  const backend::RunLifecycle life = lifecycle(g);
  const search::PbtConfig& pbt = *study.space().pbt;
  printSchedule(schedule);
  std::optional<qint64> runId;
  for (const backend::PbtSegment& s : schedule) {
    const auto overrides = backend::pbtSegmentOverrides(pbt, s, true);
    backend::LoadReport report;
    auto exp = life.loadForRun(path, overrides, &report);
    if (!exp) exitWith(report.invalid ? kExitUsage : kExitError, exp.message());
    backend::LaunchedRun launched = runId
                                        ? orExit(backend::startNextSegment(*store, *runId, *exp, s))
                                        : orExit(life.launch(*store, *exp, path, overrides));
    runId = launched.run.id;
    followSegment(g, *store, launched, s);
  }
  auto reader = orExit(store->reader());
  const auto final = orExit(reader.run(*runId));
  std::printf("pbt-replay: run %s (id %lld) complete", qPrintable(final->name),
              static_cast<long long>(*runId));
  if (final->objective) std::printf(", objective %.6g", *final->objective);
  std::printf("\n");
}

}  // namespace

void addPbtReplayVerb(CLI::App& app, Globals& g) {
  auto name = std::make_shared<std::string>();
  auto* verb =
      app.add_subcommand("pbt-replay",
                         "Run the best member's schedule of a PBT study as one run (one attempt a "
                         "segment, each resuming the last's checkpoint with the segment's values)");
  verb->add_option("STUDY", *name, "A study of an experiment with [search.pbt]")->required();
  verb->callback([name, &g] { pbtReplayVerb(g, *name); });
}

}  // namespace shardscope::cli
