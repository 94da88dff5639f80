#include "backend/store/runusage.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSettings>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace shardscope::backend {

namespace {

constexpr char kPriceGroup[] = "cost/price_per_hour";

// Up to this many runs, runUsage reads only theirs (by id); beyond, every run in one pass.
constexpr std::size_t kFewRuns = 200;

// The dashboard's organisation and application name (app/shardscope/main.cpp sets both), so
// that any process reads the dashboard's settings.
constexpr char kSettingsName[] = "Shardscope";

QJsonObject parse(const std::string& json) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(json)).object();
}

bool onGpu(const QJsonObject& hello) {
  return hello.value("device").toObject().value("type").toString() == QLatin1String("cuda");
}

}  // namespace

RunUsage usageOf(const RunRecord& run, bool gpu, const std::vector<AttemptSpan>& earlier,
                 double now) {
  double seconds = 0;
  if (run.startedAt) {
    const double end = run.endedAt                              ? *run.endedAt
                       : run.status == spec::RunStatus::running ? now
                                                                : *run.startedAt;
    seconds += std::max(0.0, end - *run.startedAt);
  }
  for (const AttemptSpan& span : earlier) seconds += std::max(0.0, span.end - span.start);
  return {std::max(1, run.worldSize) * seconds / 3600.0, gpu};
}

Result<QHash<qint64, RunUsage>> runUsage(RunReader& reader, const std::vector<RunRecord>& runs,
                                         double now) {
  if (runs.empty()) return QHash<qint64, RunUsage>{};
  // Only `runs` when they are few (`show RUN`, a sweep's members): their ids, which the run log
  // itself numbered, written into the statement; every run otherwise (the runs table).
  std::string only;
  if (runs.size() <= kFewRuns) {
    only = " AND r.id IN (";
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (i > 0) only += ',';
      only += std::to_string(runs[i].id);
    }
    only += ")";
  }
  // Each run's current attempt's rank-0 hello, through the events index (run, attempt, rank,
  // kind): one lookup per run, never a scan of the events.
  auto devices = reader.db().prepare(
      "SELECT r.id, (SELECT e.json FROM events e WHERE e.run_id = r.id AND e.attempt = r.attempt "
      "AND e.rank = 0 AND e.kind = 'hello' ORDER BY e.seq LIMIT 1) FROM runs r WHERE 1 = 1" +
      only);
  if (!devices) return devices.error();
  QHash<qint64, bool> gpu;
  for (;;) {
    auto row = devices->step();
    if (!row) return row.error();
    if (!*row) break;
    if (!devices->columnIsNull(1))
      gpu[devices->columnInt64(0)] = onGpu(parse(devices->columnText(1)));
  }
  // Earlier attempts (a resumed, retried or replanned run): hello's time to the last done or
  // error. An attempt killed without either has no known end and counts nothing.
  auto spans = reader.db().prepare(
      "SELECT e.run_id, e.attempt, e.kind, e.json FROM runs r JOIN events e ON e.run_id = r.id "
      "AND e.attempt < r.attempt AND e.rank = 0 AND e.kind IN ('hello', 'done', 'error') "
      "WHERE r.attempt > 0" +
      only + " ORDER BY e.run_id, e.attempt, e.file_offset");
  if (!spans) return spans.error();
  std::map<std::pair<qint64, int>, AttemptSpan> earlier;
  for (;;) {
    auto row = spans->step();
    if (!row) return row.error();
    if (!*row) break;
    const qint64 runId = spans->columnInt64(0);
    const int attempt = static_cast<int>(spans->columnInt64(1));
    const QJsonObject event = parse(spans->columnText(3));
    const double t = event.value("t").toDouble(std::nan(""));
    if (!std::isfinite(t)) continue;
    auto [it, added] = earlier.try_emplace({runId, attempt}, AttemptSpan{attempt, -1, -1});
    if (spans->columnText(2) == "hello") {
      if (it->second.start < 0) it->second.start = t;
      if (!gpu.contains(runId)) gpu[runId] = onGpu(event);
    } else {
      it->second.end = t;
    }
  }
  QHash<qint64, std::vector<AttemptSpan>> byRun;
  for (const auto& [key, span] : earlier)
    if (span.start >= 0 && span.end >= span.start) byRun[key.first].push_back(span);
  QHash<qint64, RunUsage> usage;
  for (const RunRecord& run : runs)
    usage.insert(run.id, usageOf(run, gpu.value(run.id), byRun.value(run.id), now));
  return usage;
}

QString hoursText(double hours) {
  if (hours >= 10) return QString::number(hours, 'f', 1);
  if (hours >= 0.01 || hours == 0) return QString::number(hours, 'f', 3);
  return QString::number(hours, 'g', 2);
}

QString usageHost(const RunRecord& run) {
  QString host = run.location.value("host").toString();
  if (!host.isEmpty()) return host;
  const QJsonArray hosts = run.location.value("hosts").toArray();
  if (!hosts.isEmpty()) return hosts.first().toString();
  return run.location.isEmpty() ? QString() : QStringLiteral("local");
}

HostPrices loadHostPrices() {
  QSettings settings{QString::fromLatin1(kSettingsName), QString::fromLatin1(kSettingsName)};
  settings.beginGroup(QLatin1String(kPriceGroup));
  HostPrices prices;
  for (const QString& host : settings.childKeys()) {
    bool ok = false;
    const double price = settings.value(host).toDouble(&ok);
    if (ok && price > 0) prices.insert(host, price);
  }
  return prices;
}

void saveHostPrices(const HostPrices& prices) {
  QSettings settings{QString::fromLatin1(kSettingsName), QString::fromLatin1(kSettingsName)};
  settings.remove(QLatin1String(kPriceGroup));
  settings.beginGroup(QLatin1String(kPriceGroup));
  for (auto it = prices.begin(); it != prices.end(); ++it)
    if (it.value() > 0) settings.setValue(it.key(), it.value());
}

std::optional<double> usageCost(const RunUsage& usage, const QString& host,
                                const HostPrices& prices) {
  const auto it = prices.find(host);
  if (it == prices.end()) return std::nullopt;
  return usage.hours * it.value();
}

}  // namespace shardscope::backend
