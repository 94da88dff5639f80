#include "backend/export/tensorboardexport.h"

#include <QDir>
#include <QDirIterator>
#include <QVariant>

#include <algorithm>
#include <map>
#include <variant>

#include "backend/export/tfevents.h"

namespace shardscope::backend {
namespace {

using tfevents::EventFileWriter;
using tfevents::SessionStatus;

// Completed runs succeeded; failures of every kind failed; a pruned or stopped trial ended on
// purpose without a result, which the plugin has no word for.
SessionStatus sessionStatus(spec::RunStatus status) {
  switch (status) {
    case spec::RunStatus::complete:
      return SessionStatus::success;
    case spec::RunStatus::failed:
    case spec::RunStatus::oom:
    case spec::RunStatus::infeasible:
      return SessionStatus::failure;
    case spec::RunStatus::queued:
    case spec::RunStatus::running:
      return SessionStatus::running;
    default:
      return SessionStatus::unknown;
  }
}

bool holdsEventFiles(const QString& dir) {
  QDirIterator it(dir, {QStringLiteral("*tfevents*")}, QDir::Files, QDirIterator::Subdirectories);
  return it.hasNext();
}

// metric key -> rank -> points, from the run log.
using RankCurves = std::map<int, std::map<QString, std::vector<MetricPoint>>>;

Result<RankCurves> readCurves(RunReader& reader, qint64 runId) {
  auto keys = reader.metricKeys(runId);
  if (!keys) return keys.error();
  RankCurves curves;
  for (const QString& key : *keys) {
    auto points = reader.metric(runId, key);
    if (!points) return points.error();
    for (const MetricPoint& p : *points) curves[p.rank][key].push_back(p);
  }
  return curves;
}

Result<void> writeRank(const QString& dir, double wallTime,
                       const std::map<QString, std::vector<MetricPoint>>& curves,
                       TensorBoardExport& out) {
  auto writer = EventFileWriter::create(dir, wallTime);
  if (!writer) return writer.error();
  for (const auto& [key, points] : curves) {
    const QString tag = tensorBoardTag(key);
    for (const MetricPoint& p : points) {
      if (auto r = (*writer)->write(tfevents::scalarEvent(p.time, p.step, tag, p.value)); !r) {
        return r;
      }
      ++out.scalars;
    }
  }
  out.files << (*writer)->path();
  return (*writer)->close();
}

// The objective values of a complete run by metric name: a trial's one per study objective,
// else the trainer's `done` objective as "objective". A pruned trial may have told values of a
// run that went on to its end; they are not its result, and the HParams table would rank them.
Result<std::map<QString, double>> objectiveValues(RunReader& reader, const RunRecord& run) {
  std::map<QString, double> values;
  if (run.status != spec::RunStatus::complete) return values;
  if (run.studyId && run.objectiveValues) {
    auto study = reader.study(*run.studyId);
    if (!study) return study.error();
    const QStringList names = *study ? (*study)->objectives : QStringList();
    for (std::size_t i = 0; i < run.objectiveValues->size(); ++i) {
      const auto at = static_cast<qsizetype>(i);
      values[at < names.size() ? names[at] : QString::number(at)] = (*run.objectiveValues)[i];
    }
  } else if (run.objective) {
    values[QStringLiteral("objective")] = *run.objective;
  }
  return values;
}

Result<void> writeSession(RunReader& reader, const RunRecord& run, const QString& dir,
                          qint64 lastStep, TensorBoardExport& out) {
  auto objectives = objectiveValues(reader, run);
  if (!objectives) return objectives.error();
  if (run.params.isEmpty() && objectives->empty()) return ok();
  const double start = run.startedAt.value_or(run.createdAt);
  const double end = run.endedAt.value_or(start);
  auto writer = EventFileWriter::create(dir, start);
  if (!writer) return writer.error();
  std::map<QString, QVariant> hparams;
  for (auto it = run.params.begin(); it != run.params.end(); ++it) {
    hparams[it.key()] = it.value().toVariant();
  }
  if (auto r = (*writer)->write(tfevents::sessionStartEvent(start, hparams, {}, start)); !r) {
    return r;
  }
  for (const auto& [name, value] : *objectives) {
    const QString tag = QStringLiteral("objective/") + tensorBoardTag(name);
    if (auto r = (*writer)->write(tfevents::scalarEvent(end, lastStep, tag, value)); !r) return r;
    ++out.scalars;
  }
  if (spec::is_final(run.status)) {
    const auto event = tfevents::sessionEndEvent(end, sessionStatus(run.status), end);
    if (auto r = (*writer)->write(event); !r) return r;
  }
  out.files.prepend((*writer)->path());
  out.hparams = true;
  return (*writer)->close();
}

QVariant variantOf(const search::ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<qlonglong>(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return QString::fromStdString(std::get<std::string>(v));
}

// A parameter's HParams domain: a numeric range, or the choices (typed by what they hold: all
// bools, all numbers, else strings).
tfevents::HParamInfo hparamInfo(const search::Param& p) {
  using Type = tfevents::HParamInfo::Type;
  tfevents::HParamInfo info;
  info.name = QString::fromStdString(p.name);
  if (p.numeric()) {
    info.interval = std::make_pair(p.low, p.high);
    return info;
  }
  bool bools = true;
  bool numbers = true;
  for (const search::ParamValue& v : p.values()) {
    bools = bools && std::holds_alternative<bool>(v);
    numbers =
        numbers && (std::holds_alternative<double>(v) || std::holds_alternative<std::int64_t>(v));
    info.discrete << variantOf(v);
  }
  info.type = bools ? Type::boolean : numbers ? Type::float64 : Type::string;
  return info;
}

}  // namespace

QString tensorBoardTag(const QString& metricKey) {
  QString tag = metricKey;
  return tag.replace(QLatin1Char('.'), QLatin1Char('/'));
}

Result<TensorBoardExport> exportRunToTensorBoard(RunReader& reader, const RunRecord& run,
                                                 const QString& dir) {
  if (holdsEventFiles(dir)) {
    return fail(dir.toStdString() +
                ": already holds TensorBoard event files; export into a new or empty folder "
                "(TensorBoard would show both copies)");
  }
  auto curves = readCurves(reader, run.id);
  if (!curves) return curves.error();
  TensorBoardExport out;
  qint64 lastStep = 0;
  const double created = run.startedAt.value_or(run.createdAt);
  for (const auto& [rank, byKey] : *curves) {
    for (const auto& [key, points] : byKey) {
      if (!points.empty()) lastStep = std::max(lastStep, points.back().step);
    }
    const QString rankDir = QDir(dir).filePath(QStringLiteral("rank_%1").arg(rank));
    if (auto r = writeRank(rankDir, created, byKey, out); !r) return r.error();
  }
  if (auto r = writeSession(reader, run, dir, lastStep, out); !r) return r.error();
  if (out.files.isEmpty()) {
    return fail("run " + run.name.toStdString() +
                " has no metrics and no parameters yet: nothing to export");
  }
  return out;
}

Result<TensorBoardStudyExport> exportStudyToTensorBoard(search::Study& study, RunReader& reader,
                                                        const QString& dir) {
  if (holdsEventFiles(dir)) {
    return fail(dir.toStdString() +
                ": already holds TensorBoard event files; export into a new "
                "or empty folder (TensorBoard would show both copies)");
  }
  std::vector<tfevents::HParamInfo> hparams;
  for (const search::Param& p : study.space().params) hparams.push_back(hparamInfo(p));
  QStringList metrics;
  for (const search::Objective& o : study.space().objectives) {
    metrics << QStringLiteral("objective/") + tensorBoardTag(QString::fromStdString(o.metric));
  }
  auto writer = EventFileWriter::create(dir, study.record().createdAt);
  if (!writer) return writer.error();
  const auto experiment =
      tfevents::experimentEvent(study.record().createdAt, study.name(), hparams, metrics);
  if (auto r = (*writer)->write(experiment); !r) return r.error();
  if (auto r = (*writer)->close(); !r) return r.error();
  TensorBoardStudyExport out;
  out.experimentFile = (*writer)->path();
  auto runs = reader.trials(study.id());
  if (!runs) return runs.error();
  for (const RunRecord& run : *runs) {
    auto written = exportRunToTensorBoard(reader, run, QDir(dir).filePath(run.name));
    if (!written) return written.error();
    out.scalars += written->scalars;
    out.runs.emplace_back(run.name, std::move(*written));
  }
  return out;
}

}  // namespace shardscope::backend
