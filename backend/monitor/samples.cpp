#include "backend/monitor/samples.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>

#include <algorithm>

namespace shardscope::backend {
namespace {

bool wanted(const spec::SampleEvent& e, std::optional<qint64> step) {
  return !step || e.step == *step;
}

}  // namespace

Result<std::vector<spec::SampleEvent>> samplesOfRun(RunReader& reader, qint64 runId,
                                                    std::optional<qint64> step) {
  auto rows = reader.events(runId, 0);
  if (!rows) return rows.error();
  int attempt = 0;
  for (const auto& row : *rows) attempt = std::max(attempt, row.attempt);
  std::vector<spec::SampleEvent> out;
  for (const auto& row : *rows) {
    if (row.kind != QLatin1String("sample") || row.attempt != attempt) continue;
    auto event = spec::parse_event(std::string_view(row.json.constData(), size_t(row.json.size())));
    if (!event)
      return fail("run " + std::to_string(runId) + ": a stored sample event: " + event.message());
    const auto& e = std::get<spec::SampleEvent>(event->body);
    if (wanted(e, step)) out.push_back(e);
  }
  return out;
}

Result<std::vector<spec::SampleEvent>> samplesOfRunDir(const QString& runDir,
                                                       std::optional<qint64> step) {
  QFile file(QDir(runDir).filePath(QStringLiteral("events-rank-0.jsonl")));
  if (!file.open(QIODevice::ReadOnly))
    return fail("cannot read " + file.fileName().toStdString() + ": " +
                file.errorString().toStdString() +
                "; give a run directory (with events-rank-0.jsonl), or a run's id or name");
  std::vector<spec::SampleEvent> out;
  for (qint64 line = 1; !file.atEnd(); ++line) {
    const QByteArray bytes = file.readLine().trimmed();
    if (!bytes.contains("\"sample\"")) continue;
    auto event = spec::parse_event(std::string_view(bytes.constData(), size_t(bytes.size())));
    if (!event) {
      return fail(file.fileName().toStdString() + ":" + std::to_string(line) + ": " +
                  event.message());
    }
    if (const auto* e = std::get_if<spec::SampleEvent>(&event->body); e && wanted(*e, step))
      out.push_back(*e);
  }
  return out;
}

QJsonObject sampleToJson(const spec::SampleEvent& s) {
  QJsonObject o;
  o["step"] = qint64(s.step);
  o["probe"] = QString::fromStdString(s.probe);
  o["prompt"] = QString::fromStdString(s.prompt);
  QJsonArray images;
  for (const auto& image : s.images) images.append(QString::fromStdString(image));
  o["images"] = images;
  o["text"] = QString::fromStdString(s.text);
  o["tokens"] = qint64(s.tokens);
  if (s.reference) o["reference"] = QString::fromStdString(*s.reference);
  if (s.exact_match) o["exact_match"] = *s.exact_match;
  if (s.f1) o["f1"] = *s.f1;
  if (s.cer) o["cer"] = *s.cer;
  return o;
}

}  // namespace shardscope::backend
