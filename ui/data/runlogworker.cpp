#include "ui/data/runlogworker.h"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include <QLoggingCategory>
#include <QScopeGuard>
#include <QSysInfo>

#include <algorithm>
#include <limits>

#include "backend/store/db.h"
#include "backend/store/runschema.h"
#include "backend/store/runstore.h"
#include "backend/store/runusage.h"
#include "spec/experiment_query.h"

Q_LOGGING_CATEGORY(lcRunLogWorker, "shardscope.ui.runlogworker")

namespace shardscope::ui {

namespace {

bool perRank(const QString& key) {
  return key.startsWith(QStringLiteral("mem.")) || key.startsWith(QStringLiteral("sys."));
}

QString hostOf(const backend::RunRecord& run) {
  const QString kind = run.location.value(QStringLiteral("kind")).toString();
  QString host = run.location.value(QStringLiteral("host")).toString();
  if (!host.isEmpty()) return host;
  return kind.isEmpty() ? QString() : QStringLiteral("local");
}

}  // namespace

RunLogWorker::RunLogWorker(int pollMs, QObject* parent) : RunLogSignals(parent), m_pollMs(pollMs) {}

QStringList RunLogWorker::plottedKeys() {
  return {
      QStringLiteral("loss"),          QStringLiteral("eval.loss"),    QStringLiteral("lr"),
      QStringLiteral("grad_norm"),     QStringLiteral("tokens_per_s"), QStringLiteral("mfu"),
      QStringLiteral("mem.allocated"), QStringLiteral("mem.reserved"), QStringLiteral("mem.peak"),
      QStringLiteral("sys.gpu_util"),  QStringLiteral("sys.power_w")};
}

void RunLogWorker::open(const QString& path) {
  m_path = path;
  // A run log file that does not exist yet (`shardscope --db new.db`, the default path on a
  // fresh account) is created here, empty, folder and all: the runs this dashboard's Launch
  // records go into it, and a reader of a missing file would never see them.
  if (!backend::isPostgresSpec(path) && !QFileInfo::exists(path)) {
    QDir().mkpath(QFileInfo(path).absolutePath());
    if (auto store = backend::RunStore::open(path); !store) {
      emit opened(false, QString::fromStdString(store.message()));
      return;
    }
  }
  // The panels read read-only: a log of an older schema (File > Open of an old file) is
  // migrated first, here in the worker's thread, by opening it once for writing.
  bool older = false;
  if (auto probe = backend::RunReader::open(path)) {
    auto version = backend::runSchemaVersion(probe->db());
    // A server's database that no program used yet (version 0) gets its tables here too: the
    // team's run log is the database, not a file someone wrote.
    older = version && *version < backend::kRunSchemaVersion &&
            (*version >= 1 || backend::isPostgresSpec(path));
  }
  if (older) {
    if (auto store = backend::RunStore::open(path); !store) {
      emit opened(false, QString::fromStdString(store.message()));
      return;
    }
  }
  auto reader = backend::RunReader::open(path);
  if (!reader) {
    emit opened(false, QString::fromStdString(reader.message()));
    return;
  }
  m_reader.emplace(std::move(*reader));
  // Another run log: the watched runs' answers are read again from its rows (same ids, other
  // runs), and their images from its run directories.
  m_sampleAfter.clear();
  m_sampleAttempt.clear();
  m_sampleBest.clear();
  m_thumbnailsSent.clear();
  m_samplesReset = true;
  if (m_pollTimer == nullptr) {
    // Created here, in the worker's thread, so its timeouts run here too.
    m_pollTimer = new QTimer(this);
    connect(m_pollTimer, &QTimer::timeout, this, &RunLogWorker::poll);
  }
  m_pollTimer->start(m_pollMs);
  emit opened(true, path);
  m_dataVersion = -1;
  m_calibrationsSent = false;  // another run log: its own corrections
  m_sweepPrint = 0;
  m_overlayEnded.clear();
  m_phasesReset = true;  // another run log's run of the same id: read it whole
  m_sinceRefresh.invalidate();
  poll();
}

// A commit by any process (a supervisor, the CLI) changes the reader's data_version.
void RunLogWorker::poll() {
  auto version = m_reader->dataVersion();
  if (!version) return report(version.error());
  if (*version == m_dataVersion) return;
  // Changed, but the last refresh was recent and costly: the next poll reads it.
  if (m_sinceRefresh.isValid() && double(m_sinceRefresh.elapsed()) < 2 * m_refreshMs) return;
  m_dataVersion = *version;
  refresh();
}

// A retried run's curve was cut back to the step its retry resumes from (or to nothing) and the
// new attempt writes it on from there: the steps delivered past that point are stale. Such a run
// is read whole again (its next chunk resets the plotted series), so a plot shows one curve: the
// failed attempt's steps up to the checkpoint, then the retry's.
void RunLogWorker::forgetRetried(const std::vector<backend::RunRecord>& fresh) {
  QHash<qint64, int> before;
  for (const auto& run : m_runs) before.insert(run.id, run.attempt);
  for (const auto& run : fresh) {
    const auto it = before.constFind(run.id);
    if (it == before.constEnd() || *it == run.attempt) continue;
    m_seen.remove(run.id);
    m_curveSeen.remove(run.id);
    m_overlaySeen.remove(run.id);
    if (run.id == m_phasesRun) m_phasesReset = true;
  }
}

void RunLogWorker::sync(quint64 token) {
  refresh();
  emit synced(token);
}

// Summaries first (what the first paint shows), curves last and in batches. The sweep's
// summaries need only the run rows, so they go out before the run table's last steps are read
// (10,000 index seeks): the GUI draws the Compare plots meanwhile.
void RunLogWorker::refresh() {
  if (!m_reader) return;
  QElapsedTimer cost;
  cost.start();
  const auto measured = qScopeGuard([&] {
    m_refreshMs = double(cost.nsecsElapsed()) / 1e6;
    m_sinceRefresh.start();
  });
  auto runs = m_reader->listRuns();
  if (!runs) return report(runs.error());
  forgetRetried(*runs);
  m_runs = std::move(*runs);
  loadSweep();
  loadRuns();
  loadHosts();
  loadAutotune();
  loadCalibrations();
  loadLog();
  loadSeries();
  loadOverlay();
  loadPhases();
  loadSamples();
  queueSweepCurves();
}

void RunLogWorker::report(const Error& error) {
  const QString message = QString::fromStdString(error.message);
  qCWarning(lcRunLogWorker, "%s: %s", qPrintable(backend::displaySpec(m_path)),
            qPrintable(message));
  if (message != m_lastError) emit failed(message);
  m_lastError = message;
}

void RunLogWorker::loadRuns() {
  if (!m_reader) return;
  auto lastLoss = m_reader->lastSteps(QStringLiteral("loss"));
  if (!lastLoss) return report(lastLoss.error());
  auto tags = m_reader->allTags(backend::TagOwner::run);
  if (!tags) return report(tags.error());
  auto known = m_reader->knownTags();
  if (!known) return report(known.error());
  auto notes = m_reader->allNotes(backend::TagOwner::run);
  if (!notes) return report(notes.error());
  auto verdicts = m_reader->verdictCounts();
  if (!verdicts) return report(verdicts.error());
  auto groups = m_reader->allGroups();
  if (!groups) return report(groups.error());
  auto knownGroups = m_reader->groups();
  if (!knownGroups) return report(knownGroups.error());
  auto usage =
      backend::runUsage(*m_reader, m_runs, double(QDateTime::currentMSecsSinceEpoch()) / 1000.0);
  if (!usage) return report(usage.error());
  QHash<QString, QString> colors;
  QStringList names;
  for (const auto& tag : *known) {
    colors.insert(tag.name, tag.color);
    names.append(tag.name);
  }
  emit knownTagsLoaded(names);
  QStringList groupNames;
  QList<qint64> groupIds;
  for (const auto& group : *knownGroups) {
    groupNames.append(group.name);
    groupIds.append(group.id);
  }
  emit knownGroupsLoaded(groupNames, groupIds);
  QVector<RunSummary> out;
  out.reserve(static_cast<qsizetype>(m_runs.size()));
  for (const auto& run : m_runs) {
    RunSummary row{run, lastLoss->value(run.id, -1), hostOf(run)};
    row.tags = tags->value(run.id);
    for (const QString& tag : std::as_const(row.tags)) row.tagColors.append(colors.value(tag));
    row.note = notes->value(run.id);
    row.groups = groups->value(run.id);
    row.verdicts = verdicts->value(run.id);
    row.usage = usage->value(run.id);
    row.priceHost = backend::usageHost(run);
    if (run.status == spec::RunStatus::running) loadProgress(row);
    out.append(std::move(row));
  }
  loadQueryValues(out);
  auto studies = m_reader->listStudies();
  if (!studies) return report(studies.error());
  emit studiesLoaded(QVector<backend::StudyRecord>(studies->begin(), studies->end()));
  emit runsLoaded(out);
}

// Read again only when a run completed (or a completed one was retried, or deleted): the query
// reads every completed run's hello and mem events.
void RunLogWorker::loadCalibrations() {
  if (!m_reader) return;
  QList<QPair<qint64, int>> complete;
  for (const auto& run : m_runs)
    if (run.status == spec::RunStatus::complete) complete.append({run.id, run.attempt});
  if (m_calibrationsSent && complete == m_calibratedRuns) return;
  auto table = m_reader->memoryCalibrations();
  if (!table) return report(table.error());
  m_calibratedRuns = std::move(complete);
  m_calibrationsSent = true;
  emit calibrationsLoaded(MemoryCalibrations{std::move(*table)});
}

// A running run's stored events bytes (every rank's read offset) and whether a live follower
// holds its lease: a few primary-key reads per running run.
void RunLogWorker::loadProgress(RunSummary& row) {
  const backend::RunRecord& run = row.record;
  qint64 bytes = 0;
  for (int rank = 0; rank < std::max(1, run.worldSize); ++rank) {
    auto offset = m_reader->offset(run.id, rank, backend::RankFile::events);
    if (!offset) return report(offset.error());
    bytes += *offset;
  }
  row.eventBytes = bytes;
  auto lease = m_reader->lease(run.id);
  if (!lease) return report(lease.error());
  row.followed = lease->has_value() && backend::RunStore::leaseHolderAlive(
                                           **lease, QSysInfo::machineHostName(), kLeaseStaleS);
}

backend::RunStore* RunLogWorker::writer() {
  if (m_store && m_store->path() == m_path) return m_store.get();
  m_store.reset();
  auto store = backend::RunStore::open(m_path);
  if (!store) {
    emit edited(false, QString::fromStdString(store.message()));
    return nullptr;
  }
  m_store = std::move(*store);
  return m_store.get();
}

void RunLogWorker::writeEdit(const std::function<Result<void>(backend::RunStore&)>& write,
                             const QString& done) {
  backend::RunStore* store = writer();
  if (store == nullptr) return;
  if (auto r = write(*store); !r) {
    emit edited(false, QString::fromStdString(r.message()));
    return;
  }
  emit edited(true, done);
  refresh();
}

void RunLogWorker::editTags(const QList<qint64>& runIds, const QStringList& add,
                            const QStringList& remove) {
  QStringList parts;
  for (const QString& tag : add) parts << "+" + tag;
  for (const QString& tag : remove) parts << "-" + tag;
  writeEdit(
      [&](backend::RunStore& store) -> Result<void> {
        for (qint64 id : runIds) {
          if (auto r = store.editTags(backend::TagOwner::run, id, add, remove).get(); !r) return r;
        }
        return ok();
      },
      tr("Tags %1 on %n run(s)", nullptr, static_cast<int>(runIds.size())).arg(parts.join(' ')));
}

void RunLogWorker::setNote(qint64 runId, const QString& note) {
  writeEdit(
      [&](backend::RunStore& store) {
        return store.setNote(backend::TagOwner::run, runId, note).get();
      },
      note.isEmpty() ? tr("Note cleared") : tr("Note saved"));
}

void RunLogWorker::editGroup(const QString& name, const QList<qint64>& add,
                             const QList<qint64>& remove) {
  const auto count = add.isEmpty() ? remove.size() : add.size();
  const QString runs = count == 1 ? tr("1 run") : tr("%1 runs").arg(count);
  writeEdit(
      [&](backend::RunStore& store) {
        return store.editGroup(name, add, remove, backend::RunStore::GroupMissing::create).get();
      },
      add.isEmpty() ? tr("%1 taken out of group %2").arg(runs, name)
                    : tr("%1 added to group %2").arg(runs, name));
}

void RunLogWorker::renameGroup(const QString& from, const QString& to) {
  writeEdit([&](backend::RunStore& store) { return store.renameGroup(from, to).get(); },
            tr("group %1 renamed %2").arg(from, to));
}

void RunLogWorker::deleteGroup(const QString& name) {
  writeEdit([&](backend::RunStore& store) { return store.deleteGroup(name).get(); },
            tr("group %1 deleted; its runs stay").arg(name));
}

void RunLogWorker::setQueryKeys(const QStringList& params, const QStringList& metrics) {
  if (params == m_queryParams && metrics == m_queryMetrics) return;
  m_queryParams = params;
  m_queryMetrics = metrics;
  loadRuns();
}

QVariant RunLogWorker::experimentValue(qint64 experimentId, const QString& key) {
  auto it = m_experimentToml.find(experimentId);
  if (it == m_experimentToml.end()) {
    auto record = m_reader->experiment(experimentId);
    QString toml;
    if (record && record->has_value()) toml = (*record)->toml;
    it = m_experimentToml.insert(experimentId, toml);
  }
  const QString text =
      QString::fromStdString(spec::toml_value_at(it->toStdString(), key.toStdString()));
  if (text.isEmpty()) return {};
  bool numeric = false;
  const double number = text.toDouble(&numeric);
  if (numeric) return number;
  if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"') &&
      text.back() == text.front())
    return text.mid(1, text.size() - 2);
  return text;
}

void RunLogWorker::loadQueryValues(QVector<RunSummary>& rows) {
  for (const QString& key : std::as_const(m_queryMetrics)) {
    auto values = m_reader->lastAndBest(key);
    if (!values) return report(values.error());
    for (RunSummary& row : rows) {
      if (auto it = values->constFind(row.record.id); it != values->cend()) {
        row.last.insert(key, it->last);
        row.best.insert(key, it->lowest);
      }
    }
  }
  if (m_queryParams.isEmpty()) return;
  m_experimentToml.clear();  // an experiment row never changes, but a reopened log may differ
  for (RunSummary& row : rows) {
    for (const QString& key : std::as_const(m_queryParams)) {
      // The run's own value (a trial's sample, an override), else its experiment file's.
      const QJsonValue own = row.record.params.value(key);
      if (!own.isUndefined()) {
        row.values.insert(key, own.toVariant());
      } else if (row.record.experimentId) {
        const QVariant fromFile = experimentValue(*row.record.experimentId, key);
        if (fromFile.isValid()) row.values.insert(key, fromFile);
      }
    }
  }
}

void RunLogWorker::watchRuns(const QList<qint64>& runIds, int generation) {
  m_watchedRuns = runIds;
  m_watchGeneration = generation;
  // A new selection starts from empty plots (PlotsPanel::setRuns clears them), so every watched
  // run is sent whole again, also one that stays selected: keeping its delivered steps sent it
  // nothing, and a run still selected after the change showed no curve.
  m_seen.clear();
  loadSeries();
}

void RunLogWorker::loadSeries() {
  if (!m_reader) return;
  QVector<SeriesChunk> chunks;
  for (qint64 id : std::as_const(m_watchedRuns)) {
    auto it =
        std::find_if(m_runs.begin(), m_runs.end(), [id](const auto& r) { return r.id == id; });
    if (it != m_runs.end()) loadSeriesOf(*it, chunks);
  }
  if (!chunks.isEmpty()) emit seriesLoaded(chunks);
  emit seriesPassDone(m_watchedRuns, m_watchGeneration);
}

// Ranks store their rows in separate transactions, so rank 1 may lag rank 0: ask from the lowest
// step any rank has reached and keep, per rank, only the steps it has not delivered yet.
void RunLogWorker::loadSeriesOf(const backend::RunRecord& run, QVector<SeriesChunk>& out) {
  auto keys = m_reader->metricKeys(run.id);
  if (!keys) return report(keys.error());
  const bool fresh = !m_seen.contains(run.id);
  auto& seenKeys = m_seen[run.id];
  qint64 peakTo = -1;  // the last step of the memory peaks delivered in this pass
  for (const QString& key : plottedKeys()) {
    if (!keys->contains(key)) continue;
    auto& seen = seenKeys[key];
    const int ranks = perRank(key) ? std::max(1, run.worldSize) : 1;
    qint64 after = std::numeric_limits<qint64>::max();
    for (int rank = 0; rank < ranks; ++rank) after = std::min(after, seen.value(rank, -1));
    auto points = m_reader->metric(run.id, key, after);
    if (!points) return report(points.error());
    QHash<int, SeriesChunk> byRank;
    for (const auto& point : *points) {
      if (point.rank >= ranks || point.step <= seen.value(point.rank, -1)) continue;
      SeriesChunk& chunk = byRank[point.rank];
      chunk.steps.append(double(point.step));
      chunk.values.append(point.value);
      chunk.times.append(point.time);
    }
    for (auto c = byRank.begin(); c != byRank.end(); ++c) {
      seen[c.key()] = qint64(c->steps.last());
      if (key == QLatin1String("mem.peak")) peakTo = std::max(peakTo, seen[c.key()]);
      c->runId = run.id;
      c->runName = run.name;
      c->key = key;
      c->rank = c.key();
      c->reset = fresh;
      out.append(std::move(c.value()));
    }
  }
  if (peakTo >= 0) appendEstimate(run, peakTo, out);
  if (keys->contains(QLatin1String(kPhaseWallKey))) appendExposedShare(run, fresh, out);
}

// The estimate rank 0's `hello` announced, as a flat series from step 0 to the last peak
// delivered (replaced each time the peaks grow), so each rank's measured peak reads against it.
void RunLogWorker::appendEstimate(const backend::RunRecord& run, qint64 lastStep,
                                  QVector<SeriesChunk>& out) {
  auto known = m_estimates.find(run.id);
  if (known == m_estimates.end()) {
    auto hello = m_reader->lastEvent(run.id, 0, QStringLiteral("hello"));
    if (!hello) return report(hello.error());
    if (!hello->has_value()) return;  // not yet: asked again with the next peaks
    const QJsonValue v = QJsonDocument::fromJson((*hello)->json).object().value("mem_estimate");
    known = m_estimates.insert(run.id, v.isDouble() ? v.toInteger() : 0);
  }
  if (*known <= 0) return;  // the trainer had no estimate
  SeriesChunk c;
  c.runId = run.id;
  c.runName = run.name;
  c.key = QStringLiteral("mem.estimate");
  c.reset = true;
  c.steps = {0.0, double(lastStep)};
  c.values = {double(*known), double(*known)};
  out.append(std::move(c));
}

void RunLogWorker::watchLog(qint64 runId, int rank, int limit) {
  m_logRun = runId;
  m_logRank = rank;
  m_logLimit = limit;
  loadLog();
}

void RunLogWorker::loadLog() {
  if (!m_reader || m_logRun < 0) return;
  auto lines = m_reader->logLines(m_logRun, m_logRank, m_logLimit);
  if (!lines) return report(lines.error());
  LogSnapshot snapshot{m_logRun, m_logRank, {}};
  for (const auto& line : *lines) snapshot.lines.append(line.text);
  emit logLoaded(snapshot);
}

void RunLogWorker::watchSweep(qint64 experimentId) {
  // The sweep already delivered (the largest one, now asked for by its id): nothing to re-read;
  // the next refresh re-reads it anyway.
  const bool delivered = m_reader && experimentId >= 0 && experimentId == m_curveSweep;
  m_sweep = experimentId;
  if (delivered) return;
  m_sweepPrint = 0;  // another sweep: delivered whatever it holds
  loadSweep();
  loadOverlay();
  queueSweepCurves();
}

void RunLogWorker::loadSweep() {
  if (!m_reader || m_sweep == -2) return;
  const qint64 id = m_sweep >= 0 ? m_sweep : ExperimentSweepSource::largest(m_runs);
  if (id < 0) {
    SweepData none;
    none.experimentIds = m_sweepSource.sweepIds(m_runs);
    m_curveSweep = -1;
    m_curveMembers.clear();
    m_curveQueue.clear();
    emit sweepLoaded(none);
    return;
  }
  auto sweep = m_sweepSource.load(*m_reader, m_runs, id);
  if (!sweep) return report(sweep.error());
  const quint64 print = sweepPrint(*sweep);
  if (print == m_sweepPrint && id == m_curveSweep) return;  // nothing it shows has changed
  m_sweepPrint = print;
  m_curveMembers.clear();
  for (const SweepTrial& trial : std::as_const(sweep->trials)) m_curveMembers.insert(trial.runId);
  if (id != m_curveSweep || sweep->objectiveKey != m_curveKey) {
    // Another sweep or key: every curve is delivered afresh.
    m_curveSweep = id;
    m_curveKey = sweep->objectiveKey;
    m_curveSeen.clear();
    m_curveQueue.clear();
    m_curvePassDone = false;
  }
  emit sweepLoaded(*sweep);
}

// Which trials have points not delivered yet: one statement (the last step per run) instead of
// a query per trial. They are read by loadCurveBatch(), posted to this thread's event loop.
void RunLogWorker::queueSweepCurves() {
  if (!m_reader || m_sweep == -2 || m_curveSweep < 0) return;
  auto last = m_reader->lastSteps(m_curveKey);
  if (!last) return report(last.error());
  QList<qint64> queue;
  for (const auto& run : m_runs) {
    if (!m_curveMembers.contains(run.id)) continue;
    if (last->value(run.id, -1) > m_curveSeen.value(run.id, -1)) queue.append(run.id);
  }
  m_curveLast = std::move(*last);
  std::reverse(queue.begin(), queue.end());  // listRuns() is newest first: read oldest first
  // Every curve delivered and nothing new: no empty pass (its "last" batch would make the panel
  // replot thousands of curves for nothing, at every commit of another experiment's run).
  if (queue.isEmpty() && m_curvePassDone && !m_curveBatchPosted) return;
  m_curveQueue = queue;
  m_curveDone = 0;
  m_curveTotal = static_cast<int>(queue.size());
  if (!m_curveBatchPosted) {
    m_curveBatchPosted = true;
    QMetaObject::invokeMethod(this, &RunLogWorker::loadCurveBatch, Qt::QueuedConnection);
  }
}

void RunLogWorker::loadCurveBatch() {
  m_curveBatchPosted = false;
  if (!m_reader || m_curveSweep < 0) return;
  SweepCurves batch;
  batch.experimentId = m_curveSweep;
  batch.key = m_curveKey;
  qsizetype points = 0;
  while (!m_curveQueue.isEmpty() && points < m_curveBatchRows) {
    // The next runs whose points (told by their last steps) fill the batch, read in one
    // statement: a server answered the sweep's 10,000 curves one round trip each.
    QList<qint64> group;
    qint64 expected = 0;
    while (!m_curveQueue.isEmpty() && group.size() < kCurveRunsPerRead &&
           points + expected < m_curveBatchRows) {
      const qint64 id = m_curveQueue.takeFirst();
      group.append(id);
      expected += std::max<qint64>(1, m_curveLast.value(id, 0) - m_curveSeen.value(id, -1));
    }
    auto chunks = readCurves(*m_reader, group, m_curveKey, m_curveSeen);
    if (!chunks) {
      m_curveQueue.clear();
      return report(chunks.error());
    }
    m_curveDone += static_cast<int>(group.size());
    for (SeriesChunk& chunk : *chunks) {
      if (chunk.steps.isEmpty()) continue;
      m_curveSeen.insert(chunk.runId, qint64(chunk.steps.last()));
      points += chunk.steps.size();
      batch.chunks.append(std::move(chunk));
    }
  }
  batch.done = m_curveDone;
  batch.total = m_curveTotal;
  batch.last = m_curveQueue.isEmpty();
  m_curvePassDone = batch.last;
  emit sweepCurvesLoaded(batch);
  if (!batch.last) {
    m_curveBatchPosted = true;
    QMetaObject::invokeMethod(this, &RunLogWorker::loadCurveBatch, Qt::QueuedConnection);
  }
}

void RunLogWorker::loadExperiment(qint64 experimentId) {
  if (!m_reader) return;
  auto experiment = m_reader->experiment(experimentId);
  if (!experiment) return report(experiment.error());
  if (!*experiment) return;  // deleted meanwhile: the builder keeps what it shows
  const backend::ExperimentRecord& e = **experiment;
  emit experimentLoaded(e.id, e.name, e.source, e.toml);
}

void RunLogWorker::loadTrialFigures(qint64 experimentId, const QList<qint64>& runIds) {
  if (!m_reader) return;
  auto figures = m_reader->runFigures(runIds);
  if (!figures) return report(figures.error());
  TrialFigures out;
  out.experimentId = experimentId;
  for (auto it = figures->cbegin(); it != figures->cend(); ++it) {
    if (it->mfu) out.mfu.insert(it.key(), *it->mfu);
    if (it->exposedShare) out.exposedShare.insert(it.key(), *it->exposedShare);
  }
  emit trialFiguresLoaded(out);
}

void RunLogWorker::setCurveBatchRows(int rows) { m_curveBatchRows = std::max(1, rows); }

void RunLogWorker::watchOverlay(const QList<qint64>& runIds) {
  m_overlayRuns = runIds;
  for (auto it = m_overlaySeen.begin(); it != m_overlaySeen.end();) {
    it = runIds.contains(it.key()) ? std::next(it) : m_overlaySeen.erase(it);
  }
  const QSet<qint64> watched(runIds.cbegin(), runIds.cend());
  m_overlayEnded.intersect(watched);
  m_overlayAsked = true;
  loadOverlay();
}

// A few runs' "loss", read whole the first time and then from the last step delivered.
void RunLogWorker::loadOverlay() {
  if (!m_reader || m_sweep == -2) return;
  SweepCurves batch;
  batch.experimentId = m_curveSweep;
  batch.set = CurveSet::overlay;
  batch.key = QStringLiteral("loss");
  QSet<qint64> ended;  // overlay runs whose status is final now
  if (!m_overlayRuns.isEmpty()) {
    for (const auto& run : m_runs)
      if (spec::is_final(run.status)) ended.insert(run.id);
  }
  QList<qint64> toRead;
  for (qint64 id : std::as_const(m_overlayRuns)) {
    if (m_overlayEnded.contains(id)) {
      if (ended.contains(id)) continue;  // read whole after it ended: nothing new
      m_overlayEnded.remove(id);         // retried: live again
    }
    toRead.append(id);
  }
  auto chunks = readCurves(*m_reader, toRead, batch.key, m_overlaySeen);
  if (!chunks) return report(chunks.error());
  for (SeriesChunk& chunk : *chunks) {
    const qint64 id = chunk.runId;
    if (!chunk.steps.isEmpty()) m_overlaySeen.insert(id, qint64(chunk.steps.last()));
    if (chunk.reset) m_overlaySeen.insert(id, m_overlaySeen.value(id, -1));
    if (ended.contains(id)) m_overlayEnded.insert(id);  // its status was final before this read
    if (chunk.reset || !chunk.steps.isEmpty()) batch.chunks.append(std::move(chunk));
  }
  batch.done = batch.total = static_cast<int>(m_overlayRuns.size());
  batch.last = true;
  if (batch.chunks.isEmpty() && !m_overlayAsked) return;  // nothing new for the overlay
  m_overlayAsked = false;
  emit sweepCurvesLoaded(batch);
}

quint64 RunLogWorker::sweepPrint(const SweepData& sweep) {
  size_t h = qHashMulti(0, sweep.experimentId, sweep.objectiveKey, sweep.experimentIds.size(),
                        sweep.study.studyId, sweep.study.name, sweep.study.running,
                        sweep.study.sweepPid, sweep.study.sweepHost, sweep.study.config,
                        sweep.study.objectives, sweep.study.directions, sweep.trials.size());
  if (sweep.autotune) {
    h = qHashMulti(h, sweep.autotune->candidates.size(), sweep.autotune->winner,
                   sweep.autotune->winnerFile, sweep.autotune->running);
    for (const AutotuneCandidate& c : sweep.autotune->candidates) h = qHashMulti(h, c.status);
  }
  for (auto it = sweep.names.cbegin(); it != sweep.names.cend(); ++it)
    h = qHashMulti(h, it.key(), it.value());
  for (const SweepTrial& t : sweep.trials) {
    h = qHashMulti(h, t.runId, int(t.status), t.objective.value_or(-1.0), t.objective.has_value(),
                   t.trialNumber.value_or(-1));
    if (t.objectiveValues) {
      for (double v : *t.objectiveValues) h = qHashMulti(h, v);
    }
    for (auto p = t.params.constBegin(); p != t.params.constEnd(); ++p)
      h = qHashMulti(h, p.key(), p.value().toVariant().toString());
  }
  return quint64(h) | 1;  // never 0, which means "nothing delivered"
}

void RunLogWorker::watchAutotune(const QString& name) {
  m_autotune = name;
  m_autotuneShown.reset();
  loadAutotune();
}

void RunLogWorker::loadAutotune() {
  if (!m_reader || m_autotune.isEmpty()) return;
  auto study = m_reader->studyByName(m_autotune);
  if (!study) return report(study.error());
  // The state is rewritten whenever a candidate settles: it, the status and the sweep's pid are
  // what shows, compared as stored (no rebuild nor re-serialisation on a poll that changed none).
  AutotuneShown now;
  if (*study) now = {true, (*study)->state, (*study)->status, (*study)->sweepPid};
  if (m_autotuneShown && *m_autotuneShown == now) return;
  m_autotuneShown = now;
  AutotuneData data;
  data.name = m_autotune;
  if (*study) data = autotuneFromStudy(**study);
  emit autotuneLoaded(data);
}

void RunLogWorker::loadHosts() {
  auto hosts = m_reader->hosts();
  if (!hosts) return report(hosts.error());
  QVector<HostSummary> out;
  for (const auto& host : *hosts) {
    QString address = host.hostname + QLatin1Char(':') + QString::number(host.port);
    if (!host.user.isEmpty()) address.prepend(host.user + QLatin1Char('@'));
    out.append({host.alias, address, host.fingerprint, host.trustedAt.has_value()});
  }
  emit hostsLoaded(out);
}

}  // namespace shardscope::ui
