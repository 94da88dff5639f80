#include "backend/sweep/pbtreplay.h"

#include "backend/sweep/study.h"

namespace shardscope::backend {

std::vector<std::string> pbtSegmentOverrides(const search::PbtConfig& config,
                                             const PbtSegment& segment, bool withValues) {
  std::vector<std::string> out;
  if (withValues) {
    for (const auto& [name, value] : segment.params)
      out.emplace_back(search::experiment_override(name, value));
  }
  // The segment's end is the run's: its checkpoint there is the end-of-run one.
  out.emplace_back("train.max_steps=" + std::to_string(segment.endStep));
  out.emplace_back("train.ckpt_every=" + std::to_string(config.interval_steps));
  out.emplace_back("train.ckpt_at_end=true");
  return out;
}

Result<LaunchedRun> startNextSegment(RunStore& store, qint64 runId, const spec::Experiment& exp,
                                     const PbtSegment& segment) {
  auto reader = store.reader();
  if (!reader) return reader.error();
  auto found = reader->run(runId);
  if (!found) return found.error();
  if (!*found) return fail("run " + std::to_string(runId) + " is not in the run log");
  const RunRecord before = **found;
  const std::string label = "run " + before.name.toStdString();
  auto resume = RunLifecycle::resumeArguments(*reader, before, before.attempt);
  if (!resume) return resume.error();
  if (resume->isEmpty()) {
    return fail(label + ": attempt " + std::to_string(before.attempt) +
                " wrote no sharded checkpoint to go on from");
  }
  const QJsonObject params = search::paramsToJson(segment.params);
  auto attempt = store.beginNextSegment(runId, params).get();
  if (!attempt) return attempt.error();
  RunRecord next = before;
  next.attempt = *attempt;
  next.params = params;
  AttemptOptions options;
  options.extraArgs = *resume;
  return RunLifecycle::startAttemptInSibling(store, std::move(next), QStringLiteral("segment"),
                                             segment.segment, exp, options);
}

}  // namespace shardscope::backend
