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
#include "backend/search/autotune.h"

#include <QElapsedTimer>
#include <QLoggingCategory>

#include <algorithm>
#include <string_view>

#include "backend/search/trialrunner.h"
#include "trainer/spec/events.h"

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

}  // namespace

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
      m_options(options),
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

std::vector<std::string> Autotuner::measureOverrides() const {
  return {"train.max_steps=" + std::to_string(m_options.warmup + m_options.steps)};
}

Result<TuneOutcome> Autotuner::run(const Report& report) {
  m_report = report;
  m_outcome = {};
  m_outcome.cpuTarget = cpuFromConfig(m_base);
  m_error.clear();
  QElapsedTimer clock;
  clock.start();
  DescentLimits limits;
  limits.minGain = m_options.minGain;
  limits.stop = [&] {
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
  if (!m_error.empty()) return fail(m_error);
  // The winner: the best measured candidate. Usually the descent's end point; a candidate the
  // descent passed over (under the minimum gain, or at a point a later move left) can have
  // measured higher, and the measurement is what counts.
  for (const TuneCandidate& c : m_outcome.candidates) {
    if (c.status != TuneStatus::measured) continue;
    if (!m_outcome.winner || c.value > m_outcome.candidates[*m_outcome.winner].value)
      m_outcome.winner = c.number;
  }
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
  std::vector<std::string> overrides = tuneOverrides(c.settings);
  for (const std::string& o : measureOverrides()) overrides.push_back(o);
  auto launched = m_lifecycle.launch(m_store, exp, m_experimentPath, overrides);
  if (!launched) {
    c.error = QString::fromStdString(launched.message());
    return;
  }
  c.runId = launched->run.id;
  c.runName = launched->run.name;
  FollowOptions options;
  options.maxSteps = exp.train.max_steps;
  const QJsonObject location = launched->location;
  const qint64 runId = c.runId;
  options.onFollowing = [this, runId, location] {
    if (auto r = m_store.setRunLocation(runId, location).get(); !r)
      qCWarning(lcAutotune) << "run" << runId << r.message().c_str();
  };
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
  switch (followed->status) {
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
