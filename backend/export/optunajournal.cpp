// The journal is one JSON object a line, replayed in order by optuna's JournalStorage
// (optuna/storages/journal/_storage.py): op 0 creates the study (study_id 0 in a new file),
// ops 2 and 3 set study attributes, op 4 creates a trial whole (state, values, params as
// internal values with their distributions, attributes, intermediate values). Trial numbers are
// the order of the op-4 lines, so trials are written by number.
#include "backend/export/optunajournal.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSaveFile>
#include <QTimeZone>

#include <cmath>
#include <cstdio>
#include <map>
#include <variant>

namespace shardscope::backend {
namespace {

using search::Param;
using search::ParamType;
using search::ParamValue;

// optuna.trial.TrialState and optuna.study.StudyDirection values.
enum OptunaState { kRunning = 0, kComplete = 1, kPruned = 2, kFail = 3, kWaiting = 4 };
enum OptunaOp {
  kCreateStudy = 0,
  kSetStudyUserAttr = 2,
  kSetStudySystemAttr = 3,
  kCreateTrial = 4
};

QByteArray line(const QJsonObject& object) {
  return QJsonDocument(object).toJson(QJsonDocument::Compact);
}

QJsonValue jsonValue(const ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<qint64>(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return QString::fromStdString(std::get<std::string>(v));
}

// optuna.distributions.distribution_to_json() of the parameter's distribution.
QString distributionJson(const Param& p) {
  QJsonObject attributes;
  QString name;
  if (p.type == ParamType::Float) {
    name = QStringLiteral("FloatDistribution");
    attributes = {{"low", p.low},
                  {"high", p.high},
                  {"log", p.log},
                  {"step", p.step > 0.0 ? QJsonValue(p.step) : QJsonValue()}};
  } else if (p.type == ParamType::Int) {
    name = QStringLiteral("IntDistribution");
    attributes = {{"low", static_cast<qint64>(std::llround(p.low))},
                  {"high", static_cast<qint64>(std::llround(p.high))},
                  {"log", p.log},
                  {"step", static_cast<qint64>(p.step > 0.0 ? std::llround(p.step) : 1)}};
  } else {
    name = QStringLiteral("CategoricalDistribution");
    QJsonArray choices;
    for (const ParamValue& c : p.values()) choices.append(jsonValue(c));
    attributes = {{"choices", choices}};
  }
  return QString::fromUtf8(line({{"name", name}, {"attributes", attributes}}));
}

// Optuna's internal representation: the number itself (never its log), or a categorical's
// choice index.
QJsonValue internalValue(const Param& p, const ParamValue& v) {
  if (p.type == ParamType::Float) {
    if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  }
  if (p.numeric()) return jsonValue(v);
  return static_cast<qint64>(std::llround(p.to_internal(v)));
}

// ISO 8601 with microseconds and the UTC offset, as datetime.isoformat() writes it.
QJsonValue isoTime(std::optional<double> unixSeconds) {
  if (!unixSeconds) return {};
  const auto us = static_cast<qint64>(std::llround(*unixSeconds * 1e6));
  const QDateTime t = QDateTime::fromMSecsSinceEpoch(us / 1000, QTimeZone::utc());
  return t.toString(QStringLiteral("yyyy-MM-ddTHH:mm:ss.")) +
         QStringLiteral("%1+00:00").arg(us % 1000000, 6, 10, QLatin1Char('0'));
}

// A number as Python's json module reads it: NaN and +-Infinity included (JSON has no word for
// them; QJsonDocument would write null).
QByteArray pythonNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  QByteArray text(buf);
  if (!text.contains('.') && !text.contains('e')) text += ".0";  // a float, as Python reads it
  return text;
}

int optunaState(spec::RunStatus status, search::TrialState state) {
  switch (status) {
    case spec::RunStatus::queued:
      return kWaiting;
    case spec::RunStatus::running:
      return kRunning;
    case spec::RunStatus::pruned:
      return kPruned;
    case spec::RunStatus::complete:
      // A complete run without one value per objective is a failed trial (Study::trials()).
      return state == search::TrialState::Complete ? kComplete : kFail;
    default:
      return kFail;
  }
}

void count(OptunaExport& out, int state) {
  switch (state) {
    case kComplete:
      ++out.complete;
      break;
    case kPruned:
      ++out.pruned;
      break;
    case kRunning:
      ++out.running;
      break;
    case kWaiting:
      ++out.waiting;
      break;
    default:
      ++out.fail;
  }
}

QJsonObject studyHeader(const search::Study& study, const QString& worker) {
  QJsonArray directions;
  for (const auto& o : study.space().objectives) {
    directions.append(o.direction == search::Direction::Minimize ? 1 : 2);
  }
  return {{"op_code", kCreateStudy},
          {"worker_id", worker},
          {"study_name", study.name()},
          {"directions", directions}};
}

QByteArray studyLines(const search::Study& study, const QString& worker) {
  QJsonArray metricNames;
  for (const auto& o : study.space().objectives) {
    metricNames.append(QString::fromStdString(o.metric));
  }
  QByteArray out = line(studyHeader(study, worker)) + '\n';
  // study.set_metric_names() keeps the names here; optuna-dashboard labels the axes with them.
  out += line({{"op_code", kSetStudySystemAttr},
               {"worker_id", worker},
               {"study_id", 0},
               {"system_attr", QJsonObject{{"study:metric_names", metricNames}}}}) +
         '\n';
  const std::map<QString, QJsonValue> attrs = {
      {"shardscope_sampler", QString::fromStdString(study.space().sampler.type)},
      {"shardscope_pruner", QString::fromStdString(study.space().pruner.type)},
      {"shardscope_status", studyStatusName(study.record().status)}};
  for (const auto& [key, value] : attrs) {
    out += line({{"op_code", kSetStudyUserAttr},
                 {"worker_id", worker},
                 {"study_id", 0},
                 {"user_attr", QJsonObject{{key, value}}}}) +
           '\n';
  }
  return out;
}

QByteArray intermediateJson(const std::map<std::int64_t, double>& values) {
  QByteArray out = "{";
  for (const auto& [step, value] : values) {
    if (out.size() > 1) out += ',';
    out += '"' + QByteArray::number(static_cast<qint64>(step)) + "\":" + pythonNumber(value);
  }
  return out + '}';
}

// The intermediate values of a trial: what was reported through Study::report() (the pruner's
// view), completed by the run's own `eval.*` rows of the first objective (the trial runner keeps
// evals it did not judge, a fast trial's last ones, out of the reported curve). The eval metric
// is the objective's `eval.X`, else the run's only `eval.*` metric, as the trial runner reads it.
Result<std::map<std::int64_t, double>> intermediateValues(RunReader& reader, qint64 runId,
                                                          const std::string& firstObjective,
                                                          std::map<std::int64_t, double> reported) {
  auto keys = reader.metricKeys(runId);
  if (!keys) return keys.error();
  QString evalKey = QString::fromStdString(firstObjective);
  if (!evalKey.startsWith(QLatin1String("eval."))) {
    const QStringList evals = keys->filter(QRegularExpression(QStringLiteral("^eval\\.")));
    evalKey = evals.size() == 1 ? evals.front() : QString();
  }
  if (evalKey.isEmpty() || !keys->contains(evalKey)) return reported;
  auto points = reader.metric(runId, evalKey);
  if (!points) return points.error();
  for (const MetricPoint& p : *points) reported[p.step] = p.value;
  return reported;
}

QJsonValue trialValues(const search::StudyTrial& t, int state, std::size_t objectives) {
  QJsonArray values;
  if (state == kComplete) {
    for (const double v : t.trial.values) values.append(v);
  } else if (state == kPruned && objectives == 1 && !t.trial.intermediate.empty()) {
    // optuna's tell(state=PRUNED) stores the last intermediate value when it is finite.
    const double last = t.trial.intermediate.rbegin()->second;
    if (std::isfinite(last)) values.append(last);
  }
  return values.isEmpty() ? QJsonValue() : QJsonValue(values);
}

QByteArray trialLine(const search::Study& study, const search::StudyTrial& t, const RunRecord& run,
                     const QString& worker, int state) {
  QJsonObject distributions;
  QJsonObject params;
  for (const Param& p : study.space().params) {
    const auto value = t.trial.params.find(p.name);
    if (value == t.trial.params.end()) continue;  // inactive conditional parameter
    const QString name = QString::fromStdString(p.name);
    distributions[name] = distributionJson(p);
    params[name] = internalValue(p, value->second);
  }
  QJsonObject userAttrs{{"shardscope_status", QString::fromUtf8(spec::to_string(t.status).data())},
                        {"shardscope_run", run.name},
                        {"shardscope_trial_number", static_cast<qint64>(t.trial.number)}};
  if (!t.error.isEmpty()) userAttrs[QStringLiteral("shardscope_error")] = t.error;
  QJsonObject log{
      {"op_code", kCreateTrial},
      {"worker_id", worker},
      {"study_id", 0},
      {"state", state},
      {"datetime_start",
       state == kWaiting ? QJsonValue() : isoTime(run.startedAt.value_or(run.createdAt))},
      {"values", trialValues(t, state, study.space().objectives.size())},
      {"distributions", distributions},
      {"params", params},
      {"user_attrs", userAttrs},
      {"system_attrs", QJsonObject()}};
  // The reader parses datetime_complete whenever the key is present, so only finished trials
  // carry it.
  if (state != kRunning && state != kWaiting) {
    log[QStringLiteral("datetime_complete")] = isoTime(run.endedAt.value_or(run.createdAt));
  }
  QByteArray text = line(log);
  text.chop(1);  // the closing brace: intermediate values may hold NaN, spliced in by hand
  return text + ",\"intermediate_values\":" + intermediateJson(t.trial.intermediate) + "}\n";
}

}  // namespace

Result<OptunaExport> writeOptunaJournal(search::Study& study, RunReader& reader,
                                        const QString& path) {
  if (QFileInfo::exists(path)) {
    return fail(path.toStdString() +
                ": already exists; give a new file (appending to a journal would merge this "
                "study's operations into another's)");
  }
  auto trials = study.trials(/*withCurves=*/true);
  if (!trials) return trials.error();
  auto runs = reader.trials(study.id());
  if (!runs) return runs.error();
  std::map<qint64, RunRecord> runById;
  for (RunRecord& r : *runs) runById[r.id] = std::move(r);

  const QString worker =
      QStringLiteral("shardscope-export-%1").arg(QCoreApplication::applicationPid());
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) {
    return fail(path.toStdString() + ": cannot create it: " + file.errorString().toStdString() +
                "; check that its folder exists and is writable");
  }
  QByteArray text = studyLines(study, worker);
  OptunaExport out;
  const std::string firstObjective = study.space().objectives.front().metric;
  for (search::StudyTrial& t : *trials) {
    auto curve = intermediateValues(reader, t.runId, firstObjective, t.trial.intermediate);
    if (!curve) return curve.error();
    t.trial.intermediate = std::move(*curve);
    const int state = optunaState(t.status, t.trial.state);
    count(out, state);
    text += trialLine(study, t, runById[t.runId], worker, state);
  }
  if (file.write(text) != text.size() || !file.commit()) {
    return fail(path.toStdString() + ": write failed: " + file.errorString().toStdString());
  }
  return out;
}

}  // namespace shardscope::backend
