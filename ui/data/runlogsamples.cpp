// RunLogWorker's reads for the Samples view: the watched runs' `sample` events, read on from the
// last event row seen of each run (rank 0), their probe images' thumbnails, and the step of each
// run's best value of the watched objective, and their verdicts (delivered whole when they
// changed: a few hundred rows at most, read again on every refresh).
#include <QDir>
#include <QImageReader>

#include <cmath>

#include "spec/events.h"
#include "ui/data/runlogworker.h"

namespace shardscope::ui {
namespace {

constexpr int kThumbnailPx = 64;

SampleCell cellOf(const spec::SampleEvent& e, const QString& runDir) {
  SampleCell c;
  c.step = e.step;
  c.probe = QString::fromStdString(e.probe);
  c.prompt = QString::fromStdString(e.prompt);
  for (const auto& image : e.images)
    c.images << QDir(runDir).filePath(QString::fromStdString(image));
  c.text = QString::fromStdString(e.text);
  c.tokens = e.tokens;
  if (e.reference) c.reference = QString::fromStdString(*e.reference);
  c.exactMatch = e.exact_match;
  c.f1 = e.f1;
  c.cer = e.cer;
  return c;
}

}  // namespace

void RunLogWorker::watchSamples(const QList<qint64>& runIds, const QString& objectiveKey,
                                bool minimize) {
  m_sampleRuns = runIds;
  m_sampleObjective = objectiveKey;
  m_sampleMinimize = minimize;
  m_sampleAfter.clear();
  m_sampleAttempt.clear();
  m_sampleBest.clear();
  m_sampleVerdicts.clear();
  m_samplesReset = true;
  loadSamples();
}

std::optional<qint64> RunLogWorker::bestSampleStep(qint64 runId) {
  if (m_sampleObjective.isEmpty()) return std::nullopt;
  auto points = m_reader->metric(runId, m_sampleObjective);
  if (!points) {
    report(points.error());
    return std::nullopt;
  }
  std::optional<qint64> best;
  double bestValue = 0;
  for (const auto& p : *points) {
    if (p.rank != 0 || !std::isfinite(p.value)) continue;
    if (!best || (m_sampleMinimize ? p.value < bestValue : p.value > bestValue)) {
      best = p.step;
      bestValue = p.value;
    }
  }
  return best;
}

bool RunLogWorker::readVerdicts(qint64 runId, RunSamples& chunk) {
  auto marks = m_reader->verdicts(runId);
  if (!marks) {
    report(marks.error());
    return false;
  }
  QHash<AnswerKey, backend::Verdict> verdicts;
  for (const auto& mark : *marks) verdicts.insert({mark.probe, mark.step}, mark.verdict);
  const auto seen = m_sampleVerdicts.constFind(runId);
  const bool moved = chunk.reset || seen == m_sampleVerdicts.constEnd() || *seen != verdicts;
  if (!moved) return false;
  m_sampleVerdicts.insert(runId, verdicts);
  chunk.verdictsChanged = true;
  chunk.verdicts = std::move(verdicts);
  return true;
}

void RunLogWorker::setVerdicts(const QVector<VerdictEdit>& edits) {
  const QString who = backend::verdictAuthor();
  const QString what = edits.isEmpty() || !edits.front().verdict
                           ? tr("cleared")
                           : QString::fromLatin1(backend::verdictName(*edits.front().verdict));
  writeEdit(
      [&](backend::RunStore& store) -> Result<void> {
        for (const VerdictEdit& edit : edits) {
          if (auto r = store.setVerdict(edit.runId, edit.probe, edit.step, edit.verdict, who).get();
              !r)
            return r;
        }
        return ok();
      },
      tr("%n answer(s) marked %1", nullptr, int(edits.size())).arg(what));
}

void RunLogWorker::loadSamples() {
  if (!m_reader) return;
  SamplesDelta delta;
  delta.runIds = m_sampleRuns;
  delta.reset = m_samplesReset;
  for (qint64 runId : m_sampleRuns) {
    RunSamples chunk;
    chunk.runId = runId;
    QString runDir;
    for (const auto& run : m_runs) {
      if (run.id != runId) continue;
      runDir = run.runDir;
      chunk.name = run.name;
    }
    // A run read for the first time in this watch resets its column(s); later reads add to them.
    chunk.reset = !m_sampleAfter.contains(runId);
    const qint64 after = m_sampleAfter.value(runId, 0);
    m_sampleAfter.insert(runId, after);
    auto rows = m_reader->events(runId, 0, after);
    if (!rows) return report(rows.error());
    int& attempt = m_sampleAttempt[runId];
    for (const auto& row : *rows) {
      m_sampleAfter[runId] = std::max(m_sampleAfter.value(runId), row.id);
      if (row.attempt < attempt) continue;
      if (row.attempt > attempt) {  // a retry: its answers replace the failed attempt's
        attempt = row.attempt;
        chunk.reset = true;
        chunk.samples.clear();
      }
      if (row.kind != QLatin1String("sample")) continue;
      auto event =
          spec::parse_event(std::string_view(row.json.constData(), size_t(row.json.size())));
      if (!event) {
        report(
            Error{"run " + std::to_string(runId) + ": a stored sample event: " + event.message()});
        continue;
      }
      chunk.samples.append(cellOf(std::get<spec::SampleEvent>(event->body), runDir));
    }
    const bool verdictsMoved = readVerdicts(runId, chunk);
    if (!chunk.reset && rows->empty() && !verdictsMoved) continue;
    const auto best = bestSampleStep(runId);
    const bool bestMoved = !m_sampleBest.contains(runId) || m_sampleBest.value(runId) != best;
    m_sampleBest[runId] = best;
    chunk.bestStep = best;
    if (!chunk.reset && chunk.samples.isEmpty() && !bestMoved && !verdictsMoved) continue;
    for (const auto& cell : chunk.samples) {
      for (const QString& path : cell.images) {
        if (m_thumbnailsSent.contains(path)) continue;
        m_thumbnailsSent.insert(path);
        QImageReader reader(path);
        const QImage image = reader.read();
        if (!image.isNull())
          delta.thumbnails.insert(path,
                                  image.scaled(kThumbnailPx, kThumbnailPx, Qt::KeepAspectRatio,
                                               Qt::SmoothTransformation));
      }
    }
    delta.runs.append(std::move(chunk));
  }
  if (delta.runs.isEmpty() && !m_samplesReset) return;
  m_samplesReset = false;
  emit samplesLoaded(delta);
}

}  // namespace shardscope::ui
