#include "backend/sweep/pbtreplay.h"

#include <cmath>

#include "backend/sweep/study.h"

namespace shardscope::backend {

namespace {

// A value as a TOML literal for a --set override (floats keep a decimal point).
std::string tomlValue(const search::ParamValue& value) {
  std::string text = search::format_value(value);
  if (const auto* d = std::get_if<double>(&value);
      d && std::isfinite(*d) && text.find_first_of(".eE") == std::string::npos)
    text += ".0";
  if (const auto* s = std::get_if<std::string>(&value)) {
    std::string out = "\"";
    for (const char c : *s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out + "\"";
  }
  return text;
}

}  // namespace

std::vector<std::string> pbtSegmentOverrides(const search::PbtConfig& config,
                                             const PbtSegment& segment, bool withValues) {
  std::vector<std::string> out;
  if (withValues) {
    for (const auto& [name, value] : segment.params)
      out.emplace_back(name + "=" + tomlValue(value));
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
  QString base = before.runDir;
  if (const qsizetype cut = base.lastIndexOf(QStringLiteral("-segment-")); cut > 0)
    base.truncate(cut);
  LaunchedRun out;
  out.run = before;
  out.run.attempt = *attempt;
  out.run.params = params;
  out.run.status = spec::RunStatus::running;
  out.run.error.clear();
  out.run.runDir = base + QStringLiteral("-segment-%1").arg(segment.segment);
  const auto failRun = [&](const std::string& why) -> Error {
    (void)store.setRunStatus(runId, spec::RunStatus::failed, QString::fromStdString(why)).get();
    return fail(label + ": " + why);
  };
  if (auto r = store.setRunDir(runId, out.run.runDir).get(); !r) return failRun(r.message());
  AttemptOptions options;
  options.extraArgs = *resume;
  auto handle = RunLifecycle::startAttempt(store, out.run, exp, options);
  if (!handle) return failRun(handle.message());
  out.location = (*handle)->location().toJson();
  out.handle = std::move(*handle);
  return out;
}

}  // namespace shardscope::backend
