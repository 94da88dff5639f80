#include "backend/monitor/oommemory.h"

#include <QDir>

namespace shardscope::backend {
namespace {

// Bytes for people, in the largest binary unit that keeps one before the point: "812 B",
// "72.6 KiB", "4.0 MiB", "80.0 GiB" (a CPU rank's tensors are KiB to GiB, a GPU's GiB).
QString bytesText(qint64 bytes) {
  if (bytes < 1024) return QString::number(bytes) + QStringLiteral(" B");
  double value = double(bytes) / 1024.0;
  const char* unit = "KiB";
  for (const char* next : {"MiB", "GiB", "TiB"}) {
    if (value < 1024.0) break;
    value /= 1024.0;
    unit = next;
  }
  return QString::number(value, 'f', 1) + ' ' + QLatin1String(unit);
}

}  // namespace

QString oomMemoryText(const spec::OomMemory& m) {
  QString text =
      QString("%1 allocator: request %2, allocated %3")
          .arg(QString::fromStdString(m.device), bytesText(m.request), bytesText(m.allocated));
  if (m.limit) {
    text += QString(", limit %1 (%2 left under it)")
                .arg(bytesText(*m.limit), bytesText(std::max<qint64>(0, *m.limit - m.allocated)));
  }
  if (m.reserved) text += ", reserved " + bytesText(*m.reserved);
  if (m.largest_free) text += ", largest free block " + bytesText(*m.largest_free);
  text += ", peak " + bytesText(m.peak);
  if (m.device_free && m.capacity)
    text +=
        QString(", device %1 free of %2").arg(bytesText(*m.device_free), bytesText(*m.capacity));
  return text;
}

QString oomSnapshotPath(const spec::OomMemory& m, const QString& runDir) {
  if (!m.snapshot) return {};
  const QString path = QString::fromStdString(*m.snapshot);
  return runDir.isEmpty() ? path : QDir(runDir).filePath(path);
}

QString oomSnapshotLine(const spec::OomMemory& m, const QString& runDir) {
  if (!m.snapshot) return {};
  return QString("memory snapshot: %1, open with %2")
      .arg(oomSnapshotPath(m, runDir), QLatin1String(kMemoryVizUrl));
}

QJsonObject oomMemoryToJson(const spec::OomMemory& m, const QString& runDir) {
  QJsonObject o{{"device", QString::fromStdString(m.device)},
                {"request", qint64(m.request)},
                {"allocated", qint64(m.allocated)},
                {"peak", qint64(m.peak)}};
  for (const auto& [key, value] :
       {std::pair{"limit", &m.limit}, std::pair{"reserved", &m.reserved},
        std::pair{"largest_free", &m.largest_free}, std::pair{"capacity", &m.capacity},
        std::pair{"device_free", &m.device_free}}) {
    if (*value) o[QLatin1String(key)] = qint64(**value);
  }
  if (m.snapshot) o["snapshot"] = oomSnapshotPath(m, runDir);
  return o;
}

Result<std::vector<RankOomMemory>> oomMemoryOfRun(RunReader& reader, qint64 runId, int worldSize) {
  std::vector<RankOomMemory> out;
  for (int rank = 0; rank < worldSize; ++rank) {
    auto row = reader.lastEvent(runId, rank, QStringLiteral("error"));
    if (!row) return row.error();
    if (!row->has_value()) continue;
    const QByteArray& json = (*row)->json;
    auto event = spec::parse_event(std::string_view(json.constData(), size_t(json.size())));
    if (!event) {
      return fail("run " + std::to_string(runId) + " rank " + std::to_string(rank) +
                  ": a stored error event: " + event.message());
    }
    const auto* error = std::get_if<spec::ErrorEvent>(&event->body);
    if (error && error->kind == spec::ErrorKind::oom && error->memory)
      out.push_back({rank, *error->memory});
  }
  return out;
}

}  // namespace shardscope::backend
