// The autotuner (see autotune.h).
//
// Measurement. A candidate runs warm-up + measured optimizer steps with a `step` event every step
// and no evaluation or checkpoint (they would land in some steps and not others). The first
// steps pay for thread pools, allocator growth and the first gathers, so the warm-up steps are
// left out; the median of the rest resists the odd step a busy host slows down, which a mean
// over so few steps does not. `tokens_per_s` of a `step` event counts every rank's tokens, so
// the per-rank figure divides it by the world size (what the issue compares across shapes).
//
// The target. Offload moves shards and optimizer state to host memory; on a CPU run they are
// there already and the trainer leaves them where they are, so offload candidates of a CPU run
// are duplicates. The target is known from shard.device ("cpu" or "cuda"), or for "auto" from
// the first measured run's `hello` event (device.type); until then nothing is a duplicate.
#include "backend/sweep/autotune.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QLoggingCategory>
#include <QSysInfo>

#include <algorithm>
#include <string_view>

#include "backend/sweep/trialrunner.h"
#include "spec/events.h"

Q_LOGGING_CATEGORY(lcAutotune, "shardscope.search.autotune")

namespace shardscope::backend {

namespace {

double median(std::vector<double> values) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::optional<bool> cpuFromConfig(const spec::Experiment& exp) {
  if (exp.shard.device == "cpu") return true;
  if (exp.shard.device == "cuda") return false;
  return std::nullopt;
}

// The run row's error, for a candidate that failed or ran out of memory.
QString runError(RunStore& store, qint64 runId) {
  auto reader = store.reader();
  if (!reader) return QString::fromStdString(reader.message());
  auto run = reader->run(runId);
  if (!run || !*run) return {};
  return (*run)->error;
}

QJsonValue finite(double v) { return std::isfinite(v) ? QJsonValue(v) : QJsonValue(); }

// The candidate's settings as run-log params, {field: value} as the study state holds them.
QJsonObject settingsJson(const TuneSettings& s) {
  QJsonObject settings;
  for (const auto& [field, value] : tuneValues(s)) {
    const QString key = QString::fromStdString(field);
    if (const bool* flag = std::get_if<bool>(&value)) {
      settings[key] = *flag;
    } else if (const std::int64_t* number = std::get_if<std::int64_t>(&value)) {
      settings[key] = qint64(*number);
    } else {
      settings[key] = QString::fromStdString(std::get<std::string>(value));
    }
  }
  return settings;
}

}  // namespace

const char* tuneObjectiveName(TuneObjective objective) {
  return objective == TuneObjective::mfu ? "mfu" : "tokens_per_s";
}

QJsonObject tuneCandidateJson(const TuneCandidate& c) {
  return {{"number", c.number},
          {"settings", settingsJson(c.settings)},
          {"estimate_bytes", c.estimateBytes},
          {"peak_bytes", c.peakBytes > 0 ? QJsonValue(c.peakBytes) : QJsonValue()},
          {"tokens_per_s", finite(c.tokensPerS)},
          {"mfu", finite(c.mfu)},
          {"status", QString::fromLatin1(tuneStatusName(c.status))},
          {"run_id", c.runId > 0 ? QJsonValue(c.runId) : QJsonValue()},
          {"run", c.runName},
          {"duplicate_of", c.duplicateOf >= 0 ? QJsonValue(c.duplicateOf) : QJsonValue()},
          {"error", c.error}};
}

const char* tuneStatusName(TuneStatus status) {
  switch (status) {
    case TuneStatus::measured:
      return "measured";
    case TuneStatus::infeasible:
      return "infeasible";
    case TuneStatus::oom:
      return "oom";
    case TuneStatus::failed:
      return "failed";
    case TuneStatus::duplicate:
      return "duplicate";
    case TuneStatus::stopped:
      return "stopped";
  }
  return "failed";
}

Autotuner::Autotuner(RunStore& store, RunLifecycle lifecycle, QString experimentPath,
                     spec::Experiment base, spec::DeviceBudget budget, Options options,
                     Follow follow)
    : m_store(store),
      m_lifecycle(std::move(lifecycle)),
      m_experimentPath(std::move(experimentPath)),
      m_base(std::move(base)),
      m_budget(std::move(budget)),
      m_options(std::move(options)),
      m_follow(std::move(follow)) {}

spec::Experiment Autotuner::candidateExperiment(const TuneSettings& s) const {
  spec::Experiment exp = m_base;
  applyTune(exp, s);
  exp.experiment.name = m_base.experiment.name + "-autotune";
  exp.train.max_steps = m_options.warmup + m_options.steps;
  exp.train.lr_warmup_steps = std::min(exp.train.lr_warmup_steps, exp.train.max_steps);
  exp.train.log_every = 1;
  exp.train.mem_every = exp.train.max_steps;  // one `mem` at the end: the peak of the whole run
  exp.train.ckpt_every = 0;
  exp.train.ckpt_at_end = false;
  exp.eval.every = 0;
  return exp;
}

Autotuner::~Autotuner() {
  if (m_studyId > 0 && !m_finished) {
    if (auto r = finish(m_winnerFile); !r) qCWarning(lcAutotune) << r.message().c_str();
  }
}

// One experiment row for every candidate (the experiment as given: each run's trial.toml holds
// its candidate's settings and the measurement's step counts), and the study naming it.
Result<void> Autotuner::openStudy() {
  const QString toml = QString::fromStdString(spec::write_experiment_toml(m_base));
  const QString name = QString::fromStdString(m_base.experiment.name);
  auto experiment =
      m_store.createExperiment({0, name, QFileInfo(m_experimentPath).absoluteFilePath(), toml, 0})
          .get();
  if (!experiment) return experiment.error();
  m_experimentId = *experiment;
  auto reader = m_store.reader();
  if (!reader) return reader.error();
  QString studyName = m_options.studyName;
  if (studyName.isEmpty()) {
    const QString stem = name + QStringLiteral("-autotune");
    for (int n = 1; studyName.isEmpty() && n < 10000; ++n) {
      const QString candidate = n == 1 ? stem : QStringLiteral("%1-%2").arg(stem).arg(n);
      auto taken = reader->studyByName(candidate);
      if (!taken) return taken.error();
      if (!*taken) studyName = candidate;
    }
  }
  NewStudy study;
  study.name = studyName;
  study.experimentId = m_experimentId;
  study.config = toml;
  study.objectives = {QString::fromLatin1(tuneObjectiveName(m_options.objective))};
  study.directions = {QStringLiteral("maximize")};
  study.kind = StudyKind::autotune;
  study.state = studyState();
  auto id = m_store.createStudy(study).get();
  if (!id) {
    return fail("autotune: study " + studyName.toStdString() + ": " + id.message() +
                (m_options.studyName.isEmpty() ? "" : "; choose another --name"));
  }
  m_studyId = *id;
  m_studyName = studyName;
  m_reader.emplace(std::move(*reader));
  return publish();
}

QJsonObject Autotuner::studyState() const {
  QJsonArray candidates;
  for (const TuneCandidate& c : m_outcome.candidates) candidates.append(tuneCandidateJson(c));
  return {{"kind", QString::fromLatin1(kAutotuneKind)},
          {"objective", QString::fromLatin1(tuneObjectiveName(m_options.objective))},
          {"source", QFileInfo(m_experimentPath).absoluteFilePath()},
          {"budget_bytes", qint64(m_budget.bytes)},
          {"candidates", candidates},
          {"winner", m_outcome.winner ? QJsonValue(*m_outcome.winner) : QJsonValue()},
          {"winner_file", m_winnerFile.isEmpty() ? QJsonValue() : QJsonValue(m_winnerFile)},
          {"stopped", m_outcome.stopped},
          {"out_of_time", m_outcome.outOfTime},
          {"error", QString::fromStdString(m_error)}};
}

// The study's state, and the stamp that says this process runs it (the dashboard tells a live
// autotune from one whose process died by it).
Result<void> Autotuner::publish() {
  if (m_studyId <= 0) return ok();
  if (auto r = m_store.setStudyState(m_studyId, studyState()).get(); !r) return r;
  return m_store
      .stampSweep(m_studyId, QCoreApplication::applicationPid(), QSysInfo::machineHostName())
      .get();
}

Result<void> Autotuner::finish(const QString& winnerFile) {
  if (m_studyId <= 0 || m_finished) return ok();
  m_finished = true;
  m_winnerFile = winnerFile;
  if (auto r = publish(); !r) return r;
  const bool ended = m_outcome.stopped || !m_error.empty();
  if (auto r =
          m_store.setStudyStatus(m_studyId, ended ? StudyStatus::stopped : StudyStatus::complete)
              .get();
      !r)
    return r;
  return m_store
      .clearSweepStamp(m_studyId, QCoreApplication::applicationPid(), QSysInfo::machineHostName())
      .get();
}

bool Autotuner::stopAsked() {
  if (m_stopAsked || !m_reader || m_studyId <= 0) return m_stopAsked;
  const qint64 now = m_clock.elapsed();
  if (m_controlReadMs >= 0 && now - m_controlReadMs < kControlPollMs) return false;
  m_controlReadMs = now;
  auto study = m_reader->study(m_studyId);
  if (study && *study && (*study)->control == StudyControl::stop) {
    qCInfo(lcAutotune) << "study" << m_studyName << "asked to stop";
    m_stopAsked = true;
  }
  return m_stopAsked;
}

Result<TuneOutcome> Autotuner::run(const Report& report) {
  m_report = report;
  m_outcome = {};
  m_outcome.cpuTarget = cpuFromConfig(m_base);
  m_error.clear();
  m_clock.start();
  if (m_studyId <= 0) {
    if (auto opened = openStudy(); !opened) return opened.error();
  }
  QElapsedTimer clock;
  clock.start();
  DescentLimits limits;
  limits.minGain = m_options.minGain;
  limits.stop = [&] {
    if (!m_outcome.stopped && stopAsked()) m_outcome.stopped = true;
    if (m_outcome.stopped || !m_error.empty()) return true;
    // The time budget never stops the first run: a search that measured nothing has no answer
    // to give, however short the budget.
    const bool anyRan = std::any_of(m_outcome.candidates.begin(), m_outcome.candidates.end(),
                                    [](const TuneCandidate& c) { return c.runId != 0; });
    const double budgetMs = m_options.budgetMinutes * 60000.0;
    if (budgetMs > 0 && anyRan && double(clock.elapsed()) >= budgetMs) m_outcome.outOfTime = true;
    return m_outcome.outOfTime;
  };
  const TuneDomain domain = tuneDomain(m_base);
  (void)coordinateDescent(
      tuneStarts(tuneSettingsOf(m_base), domain), domain,
      [this](const TuneSettings& s) { return consider(s); }, limits);
  if (!m_error.empty()) {
    if (auto r = finish({}); !r) qCWarning(lcAutotune) << r.message().c_str();
    return fail(m_error);
  }
  // The winner: the best measured candidate. Usually the descent's end point; a candidate the
  // descent passed over (under the minimum gain, or at a point a later move left) can have
  // measured higher, and the measurement is what counts.
  for (const TuneCandidate& c : m_outcome.candidates) {
    if (c.status != TuneStatus::measured) continue;
    if (!m_outcome.winner || c.value > m_outcome.candidates[*m_outcome.winner].value)
      m_outcome.winner = c.number;
  }
  if (auto r = publish(); !r) return r.error();
  return m_outcome;
}

TuneMeasure Autotuner::consider(const TuneSettings& s) {
  TuneCandidate c;
  c.number = static_cast<int>(m_outcome.candidates.size());
  c.settings = s;
  // What the search learns: a duplicate teaches what its original taught.
  TuneStatus taught = TuneStatus::failed;
  auto settle = [&]() -> TuneMeasure {
    if (c.status != TuneStatus::duplicate) taught = c.status;
    m_outcome.candidates.push_back(c);
    if (auto r = publish(); !r) m_error = r.message();
    if (m_report) m_report(c);
    TuneMeasure m;
    if (taught == TuneStatus::measured) m.value = c.value;
    m.outOfMemory = taught == TuneStatus::infeasible || taught == TuneStatus::oom;
    return m;
  };
  if (m_outcome.cpuTarget) {
    // The first candidate with the same settings on this target is never a duplicate itself.
    const TuneSettings here = onTarget(s, *m_outcome.cpuTarget);
    for (const TuneCandidate& e : m_outcome.candidates) {
      if (onTarget(e.settings, *m_outcome.cpuTarget) != here) continue;
      c.status = TuneStatus::duplicate;
      c.duplicateOf = e.number;
      c.estimateBytes = e.estimateBytes;
      c.tokensPerS = e.tokensPerS;
      c.mfu = e.mfu;
      c.peakBytes = e.peakBytes;
      c.value = e.value;
      c.error = e.error;
      taught = e.status;
      return settle();
    }
  }
  // A combination the experiment's validation refuses (activation checkpointing without wrap
  // units) is no configuration at all: not a candidate, and nothing for the search to learn.
  const spec::Experiment exp = candidateExperiment(s);
  if (auto valid = spec::validate_for_launch(exp); !valid) {
    qCInfo(lcAutotune) << "not a candidate:" << valid.message().c_str();
    return {};
  }
  auto check = estimateAgainstBudget(exp, m_budget);
  if (!check) {
    c.error = QString::fromStdString(check.message());
    return settle();
  }
  c.estimateBytes = check->need;
  if (!check->over.isEmpty()) {
    c.status = TuneStatus::infeasible;
    c.error = check->over;
    return settle();
  }
  measure(c);
  return settle();
}

// Runs candidate `c` as an ordinary run and settles its status from how the run ended.
void Autotuner::measure(TuneCandidate& c) {
  const spec::Experiment exp = candidateExperiment(c.settings);
  // The overrides become the run's params: the tuned settings only (the measurement's step
  // counts are the same for every candidate and are in its trial.toml).
  const std::vector<std::string> overrides = tuneOverrides(c.settings);
  auto launched =
      m_lifecycle.launch(m_store, exp, m_experimentPath, overrides,
                         m_experimentId > 0 ? std::optional(m_experimentId) : std::nullopt);
  if (!launched) {
    c.error = QString::fromStdString(launched.message());
    return;
  }
  c.runId = launched->run.id;
  c.runName = launched->run.name;
  FollowOptions options;
  options.maxSteps = exp.train.max_steps;
  options.location = launched->location;
  options.stopRequested = [this] { return stopAsked(); };
  auto followed = m_follow(m_store, *launched->handle, c.runId, options);
  if (!followed) {
    m_error = followed.message();
    c.error = QString::fromStdString(m_error);
    return;
  }
  if (!followed->followed) {
    c.error = QStringLiteral("run %1 is followed by another process").arg(c.runName);
    return;
  }
  // A run the user's stop ended early (before its ranks could stop gracefully, it fails) was
  // stopped, not a failure of its configuration.
  const bool stoppedEarly = m_stopAsked && followed->status != spec::RunStatus::complete &&
                            followed->status != spec::RunStatus::oom;
  switch (stoppedEarly ? spec::RunStatus::stopped : followed->status) {
    case spec::RunStatus::complete:
      readSteps(c);
      return;
    case spec::RunStatus::oom:
      c.status = TuneStatus::oom;
      break;
    case spec::RunStatus::stopped:
      c.status = TuneStatus::stopped;
      m_outcome.stopped = true;
      break;
    default:
      c.status = TuneStatus::failed;
      break;
  }
  c.error = runError(m_store, c.runId);
  if (c.error.isEmpty()) c.error = QString::fromUtf8(spec::to_string(followed->status));
}

// The medians of rank 0's measured `step` events, and the target's device from its `hello`.
void Autotuner::readSteps(TuneCandidate& c) {
  m_store.flush();
  auto reader = m_store.reader();
  if (!reader) {
    c.error = QString::fromStdString(reader.message());
    return;
  }
  auto rows = reader->events(c.runId, 0);
  if (!rows) {
    c.error = QString::fromStdString(rows.message());
    return;
  }
  std::vector<double> tokens;
  std::vector<double> mfu;
  int world = std::max(1, spec::launch_world_size(m_base.launch));
  for (const EventRow& row : *rows) {
    if (row.kind != QLatin1String("step") && row.kind != QLatin1String("hello")) continue;
    auto event = spec::parse_event(std::string_view(row.json.constData(), size_t(row.json.size())),
                                   spec::ParseMode::lenient);
    if (!event) continue;
    if (const auto* hello = std::get_if<spec::HelloEvent>(&event->body)) {
      if (!m_outcome.cpuTarget && hello->device) m_outcome.cpuTarget = hello->device->type == "cpu";
      world = std::max(1, static_cast<int>(hello->world_size));
    } else if (const auto* step = std::get_if<spec::StepEvent>(&event->body)) {
      if (step->step <= m_options.warmup) continue;
      tokens.push_back(step->tokens_per_s / world);
      mfu.push_back(step->mfu);
    }
  }
  if (tokens.empty()) {
    c.error = QStringLiteral("no step event after the %1 warm-up steps").arg(m_options.warmup);
    return;
  }
  readPeak(*reader, c);
  c.tokensPerS = median(tokens);
  c.mfu = median(mfu);
  c.value = m_options.objective == TuneObjective::mfu ? c.mfu : c.tokensPerS;
  c.status = TuneStatus::measured;
  // The run's objective is what the search compares, so a sweep's views rank the candidates.
  if (std::isfinite(c.value)) {
    if (auto r = m_store.setRunStatus(c.runId, spec::RunStatus::complete, {}, c.value).get(); !r)
      qCWarning(lcAutotune) << "run" << c.runId << r.message().c_str();
  }
}

// The highest peak among the ranks' last `mem` events: the GPU's caching allocator where the
// budget is a GPU's and the rank reported one, else the trainer's counting allocator (what the
// estimate's total models on CPU).
void Autotuner::readPeak(RunReader& reader, TuneCandidate& c) const {
  const int ranks = std::max(1, spec::launch_world_size(m_base.launch));
  for (int rank = 0; rank < ranks; ++rank) {
    auto row = reader.lastEvent(c.runId, rank, "mem");
    if (!row || !*row) continue;
    const QByteArray& json = (**row).json;
    auto event = spec::parse_event(std::string_view(json.constData(), size_t(json.size())),
                                   spec::ParseMode::lenient);
    if (!event) continue;
    const auto* mem = std::get_if<spec::MemEvent>(&event->body);
    if (mem == nullptr) continue;
    const qint64 peak = m_budget.gpu && mem->cuda_peak ? *mem->cuda_peak : mem->peak;
    c.peakBytes = std::max(c.peakBytes, peak);
  }
}

}  // namespace shardscope::backend
