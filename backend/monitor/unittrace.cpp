#include "backend/monitor/unittrace.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHash>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QRegularExpression>

#include <algorithm>
#include <cmath>
#include <deque>

namespace shardscope::backend {
namespace {

std::string where(const QString& path, qint64 line) {
  return path.toStdString() + ":" + std::to_string(line);
}

/// An issue waiting for its wait record.
struct Issued {
  double ms = 0;
  qint64 bytes = 0;
};

/// One file's reading state: issues not yet waited, by (step, micro, op, unit, phase).
class FileReader {
 public:
  FileReader(const QString& path, int rank, UnitTrace& into)
      : m_path(path), m_rank(rank), m_into(into) {}

  Result<void> record(const QJsonObject& o, qint64 line);

 private:
  Result<double> number(const QJsonObject& o, const char* key, qint64 line) const {
    const auto v = o.value(QLatin1String(key));
    if (!v.isDouble())
      return fail(where(m_path, line) + ": the record has no number \"" + key +
                  "\": not a shardtrain per-unit trace, or one written before step-relative "
                  "times (record it again with this shardtrain)");
    return v.toDouble();
  }
  /// The record's step: a whole number a step counter can hold (a double out of qint64's range
  /// would make the conversion undefined).
  Result<qint64> stepOf(const QJsonObject& o, qint64 line) const {
    auto v = number(o, "step", line);
    if (!v) return v.error();
    if (!(*v >= 0 && *v <= 9e15) || std::trunc(*v) != *v)
      return fail(where(m_path, line) + ": \"step\" is " +
                  QString::number(*v, 'g', QLocale::FloatingPointShortest).toStdString() +
                  ", want a whole number from 0 (a step counter)");
    return static_cast<qint64>(*v);
  }
  UnitTraceRank& rankOf(qint64 step) {
    auto& s = m_into.steps[step];
    s.step = step;
    auto& r = s.ranks[m_rank];
    r.rank = m_rank;
    return r;
  }

  QString m_path;
  int m_rank;
  UnitTrace& m_into;
  QHash<QString, std::deque<Issued>> m_issued;
};

Result<void> FileReader::record(const QJsonObject& o, qint64 line) {
  const QString op = o.value(QLatin1String("op")).toString();
  if (op.isEmpty())
    return fail(where(m_path, line) + ": the record has no \"op\": not a per-unit trace line");
  if (op == QLatin1String("stopped")) {
    m_into.stoppedRanks.push_back(m_rank);
    return ok();
  }
  const bool collective = op == QLatin1String("all_gather") ||
                          op == QLatin1String("reduce_scatter") ||
                          op == QLatin1String("all_reduce");
  if (!collective && op != QLatin1String("compute")) return ok();  // placement, load, free, ...
  if (o.contains(QLatin1String("gpu_ms"))) return ok();  // CUDA's event times (--trace on CUDA)
  const QString unit = o.value(QLatin1String("unit")).toString();
  const QString phase = o.value(QLatin1String("phase")).toString();
  if (unit.isEmpty() || phase.isEmpty())
    return fail(where(m_path, line) + ": a \"" + op.toStdString() +
                "\" record without \"unit\" or \"phase\"");
  auto step = stepOf(o, line);
  if (!step) return step.error();
  auto ms = number(o, "ms", line);
  if (!ms) return ms.error();
  const int micro = o.value(QLatin1String("micro")).toInt();
  UnitSpan span;
  span.unit = unit;
  span.phase = phase;
  span.micro = micro;
  span.start = *ms;
  if (!collective) {
    if (phase != QLatin1String("forward") && phase != QLatin1String("backward"))
      return fail(where(m_path, line) + ": compute phase \"" + phase.toStdString() +
                  "\", want forward or backward");
    auto end = number(o, "end_ms", line);
    if (!end) return end.error();
    span.kind = phase == QLatin1String("forward") ? UnitSpanKind::forward : UnitSpanKind::backward;
    span.end = *end;
    rankOf(*step).spans.push_back(span);
    return ok();
  }
  const QString key = QString::number(*step) + u'/' + QString::number(micro) + u'/' + op + u'/' +
                      unit + u'/' + phase;
  const QString stage = o.value(QLatin1String("stage")).toString();
  if (stage == QLatin1String("issue")) {
    m_issued[key].push_back({*ms, o.value(QLatin1String("bytes")).toInteger()});
    // The forward order of units: the first rank's forward gathers.
    auto& s = m_into.steps[*step];
    if (op == QLatin1String("all_gather") && !s.units.contains(unit)) s.units.append(unit);
    return ok();
  }
  if (stage != QLatin1String("wait")) return ok();
  auto done = number(o, "done_ms", line);
  if (!done) return done.error();
  auto& queue = m_issued[key];
  if (queue.empty())
    return fail(where(m_path, line) + ": a wait of " + op.toStdString() + " of " +
                unit.toStdString() + " with no issue before it");
  const Issued issued = queue.front();
  queue.pop_front();
  span.kind =
      op == QLatin1String("all_gather") ? UnitSpanKind::allGather : UnitSpanKind::reduceScatter;
  span.start = issued.ms;
  span.waitFrom = *ms;
  span.end = *done;
  span.bytes = issued.bytes;
  rankOf(*step).spans.push_back(span);
  return ok();
}

}  // namespace

const char* unitSpanKindName(UnitSpanKind kind) {
  switch (kind) {
    case UnitSpanKind::allGather:
      return "all_gather";
    case UnitSpanKind::reduceScatter:
      return "reduce_scatter";
    case UnitSpanKind::forward:
      return "forward";
    case UnitSpanKind::backward:
      return "backward";
  }
  return "?";
}

double UnitTraceRank::end() const {
  double out = 0;
  for (const auto& s : spans) out = std::max(out, s.end);
  return out;
}

double UnitTraceStep::end() const {
  double out = 0;
  for (const auto& [rank, r] : ranks) out = std::max(out, r.end());
  return out;
}

Result<void> readUnitTraceFile(const QString& path, int rank, UnitTrace& into) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly))
    return fail("cannot read " + path.toStdString() + ": " + file.errorString().toStdString());
  FileReader reader(path, rank, into);
  qint64 number = 0;
  while (!file.atEnd()) {
    const QByteArray line = file.readLine();
    ++number;
    if (line.trimmed().isEmpty()) continue;
    QJsonParseError error{};
    const auto doc = QJsonDocument::fromJson(line, &error);
    if (error.error != QJsonParseError::NoError || !doc.isObject()) {
      // A rank killed mid-write leaves a last line without its end: drop it, keep the rest.
      if (!line.endsWith('\n') && file.atEnd()) {
        into.truncatedRanks.push_back(rank);
        break;
      }
      return fail(
          where(path, number) + ": not a JSON object (" +
          (doc.isNull() ? error.errorString().toStdString() : std::string("not an object")) +
          "): a per-unit trace has one JSON object a line");
    }
    if (auto r = reader.record(doc.object(), number); !r) return r;
  }
  return ok();
}

Result<UnitTrace> readUnitTrace(const QString& where) {
  const QFileInfo info(where);
  UnitTrace out;
  if (info.isDir()) {
    const QDir dir(QDir(where).filePath(QStringLiteral("trace")));
    const QRegularExpression name(QStringLiteral("^rank-(\\d+)\\.jsonl$"));
    const auto files = dir.entryList({QStringLiteral("rank-*.jsonl")}, QDir::Files, QDir::Name);
    int read = 0;
    for (const QString& file : files) {
      const auto m = name.match(file);
      if (!m.hasMatch()) continue;
      if (auto r = readUnitTraceFile(dir.filePath(file), m.captured(1).toInt(), out); !r)
        return r.error();
      ++read;
    }
    if (read == 0)
      return fail(where.toStdString() +
                  " has no trace/rank-R.jsonl: the run recorded no step in detail (set "
                  "[trace] every_n_steps)");
    return out;
  }
  if (!info.isFile())
    return fail("no per-unit trace at " + where.toStdString() +
                ": give a run directory or the FILE of shardtrain --trace FILE");
  if (auto r = readUnitTraceFile(where, 0, out); !r) return r.error();
  for (int rank = 1; QFileInfo::exists(where + ".rank-" + QString::number(rank)); ++rank)
    if (auto r = readUnitTraceFile(where + ".rank-" + QString::number(rank), rank, out); !r)
      return r.error();
  return out;
}

}  // namespace shardscope::backend
