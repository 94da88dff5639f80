// Study: ask/tell over the run log; see study.h for the life of a trial.
#include "backend/sweep/study.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QLoggingCategory>
#include <QSysInfo>
#include <QUuid>

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/sweep/autotune.h"
#include "search/nsga2.h"
#include "spec/events.h"
#include "spec/experiment.h"
#include "spec/experiment_query.h"

Q_LOGGING_CATEGORY(lcStudy, "shardscope.backend.search.study")

namespace shardscope::search {
namespace {

using backend::RunRecord;
using spec::RunStatus;

// Metric key of the ASHA rungs a trial reached: step = rung, value = the value recorded there.
const QString kRungKey = QStringLiteral("search.rung");

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27U)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31U);
}

QString directionName(Direction d) {
  return d == Direction::Minimize ? QStringLiteral("minimize") : QStringLiteral("maximize");
}

bool better(double a, double b, Direction d) { return d == Direction::Minimize ? a < b : a > b; }

std::string studyLabel(const QString& name) { return "study '" + name.toStdString() + "'"; }

// The [search] section of `exp`, parsed; an experiment without one is no study.
Result<SearchSpace> spaceOf(const spec::Experiment& exp) {
  if (!exp.search.present) {
    return fail(exp.source +
                ": no [search] section: a study needs one (objectives, sampler and "
                "[search.space.\"<field>\"] tables; see docs/config.md)");
  }
  return parse_search_space(exp.search.toml, exp.source);
}

}  // namespace

QJsonObject autoChoiceJson(const AutoChoice& choice) {
  QString then;
  for (const auto& n : spec::kSamplers) {
    if (n.kind == choice.then) then = QString::fromUtf8(n.name.data(), qsizetype(n.name.size()));
  }
  return QJsonObject{{"gp_trials", static_cast<qint64>(choice.gp_trials)},
                     {"then", then},
                     {"reason", QString::fromStdString(choice.reason)}};
}

Result<std::optional<AutoChoice>> storedAutoChoice(const QJsonObject& state) {
  const QJsonValue value = state.value("auto");
  if (value.isUndefined() || value.isNull()) return std::optional<AutoChoice>();
  const QJsonObject o = value.toObject();
  AutoChoice c;
  // A double from JSON is range-checked before the cast (1e300 would not fit an integer).
  const double n = o.value("gp_trials").toDouble(-1.0);
  if (!value.isObject() || !(n >= 0.0 && n <= 1e9) || n != std::floor(n)) {
    return fail(
        "the study's state: auto.gp_trials must be a whole number from 0 to 1e9; the run log "
        "was changed by hand, create the study again");
  }
  c.gp_trials = static_cast<std::int64_t>(n);
  const std::string then = o.value("then").toString().toStdString();
  const auto kind = spec::kind_of(spec::kSamplers, then);
  if (!kind || (*kind != spec::SamplerKind::tpe && *kind != spec::SamplerKind::cmaes &&
                *kind != spec::SamplerKind::nsga2)) {
    return fail("the study's state: auto.then is \"" + then +
                "\", not tpe, cmaes or nsga2; the run log was changed by hand, create the "
                "study again");
  }
  c.then = *kind;
  c.reason = o.value("reason").toString().toStdString();
  return std::optional<AutoChoice>(std::move(c));
}

QJsonObject paramsToJson(const TrialParams& params) {
  QJsonObject out;
  for (const auto& [name, value] : params) {
    const QString key = QString::fromStdString(name);
    if (const auto* d = std::get_if<double>(&value)) {
      out.insert(key, *d);
    } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
      out.insert(key, static_cast<qint64>(*i));
    } else if (const auto* b = std::get_if<bool>(&value)) {
      out.insert(key, *b);
    } else {
      out.insert(key, QString::fromStdString(std::get<std::string>(value)));
    }
  }
  return out;
}

TrialParams paramsFromJson(const SearchSpace& space, const QJsonObject& json) {
  TrialParams out;
  for (const Param& p : space.params) {
    const QJsonValue v = json.value(QString::fromStdString(p.name));
    if (v.isUndefined() || v.isNull()) continue;
    switch (p.type) {
      case ParamType::Float:
        out[p.name] = v.toDouble();
        break;
      case ParamType::Int:
        out[p.name] = static_cast<std::int64_t>(std::llround(v.toDouble()));
        break;
      case ParamType::Bool:
        out[p.name] = v.toBool();
        break;
      case ParamType::Categorical:
        for (const ParamValue& choice : p.choices) {
          if (paramsToJson({{p.name, choice}}).value(QString::fromStdString(p.name)) == v) {
            out[p.name] = choice;
          }
        }
        break;
    }
  }
  return out;
}

Result<ParamValue> parseParamValue(const SearchSpace& space, const std::string& name,
                                   const std::string& text) {
  const int index = space.index_of(name);
  if (index < 0) {
    return fail("--set " + name + ": not a parameter of the search space; searched are the " +
                "[search.space.\"...\"] tables of the experiment");
  }
  const Param& p = space.params[static_cast<std::size_t>(index)];
  std::optional<ParamValue> value;
  if (p.type == ParamType::Float || p.type == ParamType::Int) {
    std::size_t used = 0;
    try {
      const double d = std::stod(text, &used);
      if (used == text.size()) {
        value = p.type == ParamType::Float ? ParamValue(d)
                                           : ParamValue(static_cast<std::int64_t>(std::llround(d)));
      }
    } catch (const std::exception&) {
      value.reset();
    }
  } else {
    for (const ParamValue& choice : p.values()) {
      if (format_value(choice) == text) value = choice;
    }
  }
  if (!value || !p.contains(*value)) {
    std::string accepts;
    if (p.numeric()) {
      accepts = "a number in [" + format_value(p.low) + ", " + format_value(p.high) + "]" +
                (p.step > 0 ? " on its step grid" : "");
    } else {
      for (const ParamValue& choice : p.values())
        accepts += (accepts.empty() ? "" : ", ") + format_value(choice);
    }
    return fail("--set " + name + "=" + text + ": not a value of search.space.\"" + name +
                "\"; it accepts " + accepts);
  }
  return *value;
}

TrialState trialStateOf(RunStatus status) {
  switch (status) {
    case RunStatus::queued:
    case RunStatus::running:
      return TrialState::Running;
    case RunStatus::complete:
      return TrialState::Complete;
    case RunStatus::pruned:
      return TrialState::Pruned;
    case RunStatus::oom:
      return TrialState::Oom;
    case RunStatus::infeasible:
      return TrialState::Infeasible;
    case RunStatus::stopped:
    case RunStatus::failed:
      return TrialState::Failed;
  }
  return TrialState::Failed;
}

const char* trialStateName(TrialState state) {
  switch (state) {
    case TrialState::Running:
      return "running";
    case TrialState::Complete:
      return "complete";
    case TrialState::Pruned:
      return "pruned";
    case TrialState::Failed:
      return "failed";
    case TrialState::Infeasible:
      return "infeasible";
    case TrialState::Oom:
      return "oom";
  }
  return "failed";
}

Study::Study(backend::RunStore& store, backend::RunReader reader, backend::StudyRecord record,
             SearchSpace space)
    : m_store(&store),
      m_reader(std::make_unique<backend::RunReader>(std::move(reader))),
      m_record(std::move(record)),
      m_space(std::move(space)) {
  m_maxRetries = m_record.state.value("max_retries").toInt(kDefaultMaxRetries);
  m_pruner = make_pruner(m_space.pruner);
}

std::string Study::samplerText() const {
  return m_auto ? m_space.sampler.type + ": " + describe(*m_auto) : m_space.sampler.type;
}

Study::Study(Study&&) noexcept = default;
Study& Study::operator=(Study&&) noexcept = default;
Study::~Study() = default;

bool Study::overridableOnExistingStudy(const std::string& key) {
  return key == "search.concurrency" || key == "search.timeout_s" || key == "search.stop_grace_s" ||
         key == "search.on_oom";
}

Result<void> Study::checkOverrides(const spec::Experiment& effective,
                                   const std::vector<std::string>& overrides) const {
  const std::string stored = m_record.config.toStdString();
  for (const std::string& override : overrides) {
    const std::string key = override.substr(0, override.find('='));
    if (key.rfind("search.", 0) != 0 || overridableOnExistingStudy(key)) continue;
    const std::string before = spec::toml_value_at(stored, key);
    const std::string after = spec::toml_value_at(effective.search.toml, key);
    if (before == after) continue;
    std::string message = "--set " + override + ": ";
    message += studyLabel(name());
    message += " exists with " + key + " = ";
    message += before.empty() ? std::string("(unset)") : before;
    message +=
        "; an existing study's search space is fixed (only search.concurrency, "
        "search.timeout_s, search.stop_grace_s and search.on_oom may change): drop the override, "
        "or "
        "start a new study with --name";
    return fail(message);
  }
  return ok();
}

Result<Study> Study::create(backend::RunStore& store, const QString& experimentPath,
                            const CreateOptions& options) {
  const std::string path = experimentPath.toStdString();
  if (!options.overrides.empty()) {
    spec::LoadOptions noPaths;
    noPaths.check_paths = false;
    auto exp = spec::load_experiment(path, options.overrides, noPaths);
    if (!exp) return exp.error();
    return create(store, *exp, options);
  }
  // Without overrides only [search] is read: `study create` serves drivers whose parameters are
  // their own names, not experiment fields.
  auto file = spec::load_search_file(path);
  if (!file) return file.error();
  auto space = parse_search_space(file->search_toml, path);
  if (!space) return space.error();
  return create(store, *space, file->search_toml, path, file->text, options);
}

Result<Study> Study::create(backend::RunStore& store, const spec::Experiment& exp,
                            const CreateOptions& options) {
  auto space = spaceOf(exp);
  if (!space) return space.error();
  return create(store, *space, exp.search.toml, exp.source, spec::write_experiment_toml(exp),
                options);
}

Result<Study> Study::create(backend::RunStore& store, SearchSpace space,
                            const std::string& searchToml, const std::string& source,
                            const std::string& experimentToml, const CreateOptions& options) {
  // The sampler is made before anything is stored: one the space cannot feed is the input's
  // error, and the study keeps it.
  auto sampler = make_sampler(space);
  if (!sampler) return fail(source + ": " + sampler.message());
  std::optional<AutoChoice> choice;
  if (const auto* made = dynamic_cast<const AutoSampler*>(sampler->get())) choice = made->choice();
  if (options.maxRetries < 0) {
    return fail("--max-retries: " + std::to_string(options.maxRetries) +
                " is negative; give 0 (never retry) or more");
  }
  const QString name = options.name.isEmpty() ? QString::fromStdString(space.name) : options.name;
  const QString absolute = QFileInfo(QString::fromStdString(source)).absoluteFilePath();
  backend::ExperimentRecord experiment;
  experiment.name = name;
  experiment.source = absolute;
  experiment.toml = QString::fromStdString(experimentToml);
  auto experimentId = store.createExperiment(experiment).get();
  if (!experimentId) return experimentId.error();
  backend::NewStudy study;
  study.name = name;
  study.experimentId = *experimentId;
  study.config = QString::fromStdString(searchToml);
  for (const Objective& o : space.objectives) {
    study.objectives << QString::fromStdString(o.metric);
    study.directions << directionName(o.direction);
  }
  study.sampler = QString::fromStdString(space.sampler.type);
  study.seed = static_cast<qint64>(space.seed);
  study.state = QJsonObject{{"max_retries", options.maxRetries}, {"source", absolute}};
  if (choice) study.state.insert("auto", autoChoiceJson(*choice));
  auto id = store.createStudy(study).get();
  if (!id) return id.error();
  qCInfo(lcStudy) << "created study" << name << "from" << absolute;
  auto reader = store.reader();
  if (!reader) return reader.error();
  auto record = reader->study(*id);
  if (!record) return record.error();
  if (!*record) return fail(studyLabel(name) + " vanished from the run log after its creation");
  Study created(store, std::move(*reader), **record, std::move(space));
  created.m_sampler = std::move(*sampler);
  created.m_auto = std::move(choice);
  return created;
}

Result<Study> Study::open(backend::RunStore& store, const QString& name) {
  auto reader = store.reader();
  if (!reader) return reader.error();
  auto record = reader->studyByName(name);
  if (!record) return record.error();
  if (!*record) {
    return fail(studyLabel(name) +
                " is not in the run log: `study ls` lists the studies, `study create` makes one");
  }
  if ((*record)->kind == backend::StudyKind::autotune) {
    return fail(studyLabel(name) +
                " is an autotune's record, not a sweep: `autotune` printed its candidates, `ls` "
                "lists their runs and the dashboard's Compare panel shows them");
  }
  const std::string source = (*record)->state.value("source").toString().toStdString();
  auto space =
      spec::stored_search_space((*record)->config.toStdString(), source.empty() ? "study" : source);
  if (!space) return fail(studyLabel(name) + ": its stored search space: " + space.message());
  // The sampler the study was created with: its column, not the text's default (a study made
  // before "auto" became the default, with no sampler in its text, goes on with tpe).
  const std::string column = (*record)->sampler.toStdString();
  if (spec::kind_of(spec::kSamplers, column) && column != space->sampler.type) {
    space->sampler.type = column;
  }
  auto choice = storedAutoChoice((*record)->state);
  if (!choice) return fail(studyLabel(name) + ": " + choice.message());
  Study study(store, std::move(*reader), **record, std::move(*space));
  if (study.m_space.sampler.type == "auto" && *choice) {
    if (((*choice)->then == spec::SamplerKind::nsga2) != (study.m_space.objectives.size() > 1)) {
      return fail(studyLabel(name) +
                  ": the study's state: auto.then does not fit the study's objectives (nsga2 is "
                  "for several, tpe and cmaes for one); the run log was changed by hand, create "
                  "the study again");
    }
    study.m_sampler = std::make_unique<AutoSampler>(study.m_space, **choice);
    study.m_auto = std::move(*choice);
    return study;
  }
  auto sampler = make_sampler(study.m_space);
  if (!sampler) return fail(studyLabel(name) + ": " + sampler.message());
  if (const auto* made = dynamic_cast<const AutoSampler*>(sampler->get()))
    study.m_auto = made->choice();
  study.m_sampler = std::move(*sampler);
  return study;
}

Result<Study> Study::latest(backend::RunStore& store) {
  auto reader = store.reader();
  if (!reader) return reader.error();
  auto studies = reader->listStudies();
  if (!studies) return studies.error();
  // Newest first; an autotune's record is no sweep to show.
  for (const auto& study : *studies) {
    if (study.kind != backend::StudyKind::autotune) return open(store, study.name);
  }
  return fail("the run log has no study yet: create one with `study create NAME EXP.toml`");
}

Result<std::vector<StudyTrial>> Study::trials(bool withCurves) {
  auto runs = m_reader->trials(m_record.id);
  if (!runs) return runs.error();
  const QString key = QString::fromStdString(m_space.objectives.front().metric);
  std::vector<StudyTrial> out;
  out.reserve(runs->size());
  for (const RunRecord& run : *runs) {
    StudyTrial t;
    t.runId = run.id;
    t.status = run.status;
    t.attempt = run.attempt;
    t.error = run.error;
    t.replan = run.params.value(QLatin1String(backend::kReplanParam)).toString();
    t.trial.number = run.trialNumber.value_or(0);
    t.trial.state = trialStateOf(run.status);
    t.trial.params = paramsFromJson(m_space, run.params);
    if (run.objectiveValues) t.trial.values = *run.objectiveValues;
    // A complete trial without one value per objective cannot be ranked: count it as failed.
    if (t.trial.state == TrialState::Complete && t.trial.values.size() != m_space.objectives.size())
      t.trial.state = TrialState::Failed;
    if (withCurves) {
      auto curve = m_reader->metric(run.id, key);
      if (!curve) return curve.error();
      for (const auto& point : *curve) t.trial.intermediate[point.step] = point.value;
      auto rungs = m_reader->metric(run.id, kRungKey);
      if (!rungs) return rungs.error();
      for (const auto& point : *rungs) t.trial.rungs[static_cast<int>(point.step)] = point.value;
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<StudyTrial> Study::findTrial(std::int64_t number, bool withCurves) {
  auto all = trials(withCurves);
  if (!all) return all.error();
  for (StudyTrial& t : *all) {
    if (t.trial.number == number) return std::move(t);
  }
  return fail(studyLabel(name()) + " has no trial " + std::to_string(number) +
              ": `study ask` hands out trial numbers, `study show " + name().toStdString() +
              "` lists them");
}

Result<std::vector<StudyTrial>> Study::orphanedTrials() {
  auto all = trials(false);
  if (!all) return all.error();
  const QString host = QSysInfo::machineHostName();
  std::vector<StudyTrial> out;
  for (StudyTrial& t : *all) {
    if (t.trial.state != TrialState::Running || t.status != RunStatus::running) continue;
    auto lease = m_reader->lease(t.runId);
    if (!lease) return lease.error();
    if (*lease && ((*lease)->host != host || backend::RunStore::processAlive((*lease)->pid)))
      continue;
    // No follower's lease yet (the asker's, or none): its sweep died between starting the ranks
    // and following them. Launched (a stored location), it is left running, not lost.
    if ((!*lease || isAskLease((*lease)->token)) && !launched(t.runId)) continue;
    out.push_back(std::move(t));
  }
  return out;
}

bool Study::launched(qint64 runId) const {
  auto run = m_reader->run(runId);
  return run && *run && !(*run)->location.isEmpty();
}

Result<int> Study::failLostTrials() {
  auto all = trials(false);
  if (!all) return all.error();
  const QString host = QSysInfo::machineHostName();
  int lost = 0;
  for (const StudyTrial& t : *all) {
    if (t.trial.state != TrialState::Running) continue;
    auto lease = m_reader->lease(t.runId);
    if (!lease) return lease.error();
    // The asker (an ask lease) or the sweep that runs it (its monitor's lease) is gone.
    if (!*lease || (*lease)->host != host || backend::RunStore::processAlive((*lease)->pid))
      continue;
    const bool asker = isAskLease((*lease)->token);
    // A sweep killed after starting the ranks, before following them: orphanedTrials' to adopt.
    if (asker && t.status == RunStatus::running && launched(t.runId)) continue;
    const QString why = QStringLiteral("lost: process %1, which %2 trial %3, ended before %4")
                            .arg((*lease)->pid)
                            .arg(asker ? QStringLiteral("asked") : QStringLiteral("followed"))
                            .arg(t.trial.number)
                            .arg(asker ? QStringLiteral("telling it") : QStringLiteral("its end"));
    // Another asker may have recorded it first; only this call's own success counts.
    if (m_store->finishTrial(t.runId, RunStatus::failed, {}, why).get()) {
      qCInfo(lcStudy) << name() << why;
      ++lost;
    }
  }
  return lost;
}

bool Study::isAskLease(const QString& token) {
  return token == QLatin1String(kAskLeaseToken) ||
         token.startsWith(QLatin1String(kAskLeaseToken) + QLatin1Char(':'));
}

std::optional<backend::LeaseRecord> Study::askLease(const AskOptions& options) {
  if (options.ownerPid <= 0) return std::nullopt;
  if (m_askToken.isEmpty()) {
    m_askToken = QLatin1String(kAskLeaseToken) + QLatin1Char(':') +
                 QUuid::createUuid().toString(QUuid::WithoutBraces);
  }
  // The owner's liveness is judged by its pid (failLostTrials), never by a heartbeat.
  return backend::LeaseRecord{0, options.ownerPid, QSysInfo::machineHostName(), m_askToken,
                              spec::unix_time_now()};
}

Result<AskedTrial> Study::stored(const backend::TrialId& id) {
  auto run = m_reader->run(id.runId);
  if (!run) return run.error();
  if (!*run) return fail("run " + std::to_string(id.runId) + " vanished from the run log");
  AskedTrial asked;
  asked.number = id.number;
  asked.runId = id.runId;
  asked.params = paramsFromJson(m_space, (*run)->params);
  asked.attempt = (*run)->attempt;
  asked.enqueued = true;
  return asked;
}

Result<AskedTrial> Study::ask(const AskOptions& options) {
  auto asked = tryAsk(options);
  if (!asked) return asked.error();
  if (!*asked) {
    return fail(studyLabel(name()) + " has all its " + std::to_string(m_space.n_trials) +
                " trials (search.n_trials) and none waits for a retry: raise search.n_trials "
                "in a new study to search further");
  }
  return std::move(**asked);
}

Result<std::optional<AskedTrial>> Study::tryAsk(const AskOptions& options) {
  if (auto lost = failLostTrials(); !lost) return lost.error();
  const std::optional<backend::LeaseRecord> lease = askLease(options);
  auto asked = [&]() -> Result<std::optional<AskedTrial>> {
    auto claim =
        m_store->claimTrial(m_record.id, m_maxRetries, m_space.retry_from_checkpoint, lease).get();
    if (!claim) return claim.error();
    if (!*claim) return askNew(lease);
    auto trial = stored(**claim);
    if (!trial) return trial.error();
    return std::optional<AskedTrial>(std::move(*trial));
  }();
  // An answer the run log lost may hide a trial taken with this token: the next try presents it
  // again (RunStore::claimTrial). Any other end closes the ask.
  if (asked || asked.error().permanent) m_askToken.clear();
  return asked;
}

Result<std::optional<AskedTrial>> Study::askNew(const std::optional<backend::LeaseRecord>& lease) {
  // Trial n's draws depend only on (seed, n) and the trials before it: a restarted study
  // proposes what the killed one would have. Two askers reading the same history would draw the
  // same parameters for the same n; the store starts a trial only under the number it was
  // sampled for, so the one that loses reads the new history (the winner's trial pending in it)
  // and samples again. Each retry means another asker made progress, so few askers converge
  // quickly; past kAttempts the trial takes the next free number with the draws it has.
  constexpr int kAttempts = 64;
  for (int attempt = 1;; ++attempt) {
    auto all = trials(true);
    if (!all) return all.error();
    if (static_cast<std::int64_t>(all->size()) >= m_space.n_trials)
      return std::optional<AskedTrial>();
    std::vector<Trial> finished;
    std::vector<Trial> pending;
    std::int64_t next = 0;
    for (StudyTrial& t : *all) {
      next = std::max(next, t.trial.number + 1);
      (t.trial.state == TrialState::Running ? pending : finished).push_back(std::move(t.trial));
    }
    Rng rng(splitmix(m_space.seed ^ splitmix(static_cast<std::uint64_t>(next))));
    auto params = m_sampler->sample(m_space, finished, pending, rng);
    if (!params) return fail(studyLabel(name()) + ": " + params.message());
    if (auto r = m_space.check(*params); !r) return fail(studyLabel(name()) + ": " + r.message());
    backend::NewTrial trial;
    trial.studyId = m_record.id;
    trial.params = paramsToJson(*params);
    if (attempt < kAttempts) trial.trialNumber = next;
    // The count above is a hint; the store counts again inside the insert's transaction, so
    // concurrent askers never take more than n_trials numbers.
    auto started = m_store->startTrialRunWithin(trial, m_space.n_trials, lease).get();
    if (!started) return started.error();
    switch (started->outcome) {
      case backend::TrialStart::Outcome::Full:
        return std::optional<AskedTrial>();
      case backend::TrialStart::Outcome::Stale:
        continue;
      case backend::TrialStart::Outcome::Started:
        break;
    }
    if (started->again) {  // an earlier try's trial: its own parameters
      auto again = stored(started->id);
      if (!again) return again.error();
      again->enqueued = false;
      return std::optional<AskedTrial>(std::move(*again));
    }
    AskedTrial asked;
    asked.number = started->id.number;
    asked.runId = started->id.runId;
    asked.params = std::move(*params);
    return std::optional<AskedTrial>(std::move(asked));
  }
}

Result<void> Study::finish(std::int64_t number, RunStatus status, const std::vector<double>& values,
                           const QString& error) {
  auto trial = findTrial(number, false);
  if (!trial) return trial.error();
  if (trial->trial.state != TrialState::Running) {
    return fail(studyLabel(name()) + " trial " + std::to_string(number) + " already ended (" +
                trialStateName(trial->trial.state) + "): a trial is told once; ask for a new one");
  }
  if (auto r = m_store->finishTrial(trial->runId, status, values, error).get(); !r) {
    return fail(studyLabel(name()) + " trial " + std::to_string(number) + ": " + r.message());
  }
  return ok();
}

Result<void> Study::tell(std::int64_t number, const std::vector<double>& values) {
  const std::size_t want = m_space.objectives.size();
  if (values.size() != want) {
    std::string names;
    for (const Objective& o : m_space.objectives) names += (names.empty() ? "" : ", ") + o.metric;
    return fail(studyLabel(name()) + " trial " + std::to_string(number) + ": " +
                std::to_string(values.size()) + " value(s) told but the study has " +
                std::to_string(want) + " objective(s) (" + names +
                "): give one value per objective, in that order");
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return finish(number, RunStatus::failed, values,
                    QStringLiteral("objective %1 (%2) is not finite")
                        .arg(i)
                        .arg(QString::fromStdString(m_space.objectives[i].metric)));
    }
  }
  return finish(number, RunStatus::complete, values, {});
}

Result<void> Study::tell(std::int64_t number, TrialState state, const QString& reason) {
  switch (state) {
    case TrialState::Pruned:
      return finish(number, RunStatus::pruned, {}, reason);
    case TrialState::Failed:
      return finish(number, RunStatus::failed, {}, reason);
    case TrialState::Oom:
      return finish(number, RunStatus::oom, {}, reason);
    case TrialState::Infeasible:
      return finish(number, RunStatus::infeasible, {}, reason);
    case TrialState::Complete:
    case TrialState::Running:
      break;
  }
  return fail(studyLabel(name()) + " trial " + std::to_string(number) + ": a state told without " +
              "values must be pruned, failed, oom or infeasible; a complete trial is told its "
              "values");
}

Result<void> Study::report(std::int64_t number, std::int64_t step, double value) {
  if (!std::isfinite(value)) {
    return fail(studyLabel(name()) + " trial " + std::to_string(number) + " step " +
                std::to_string(step) +
                ": the reported value is not finite; tell the trial "
                "failed instead");
  }
  auto trial = findTrial(number, false);
  if (!trial) return trial.error();
  if (trial->trial.state != TrialState::Running) {
    return fail(studyLabel(name()) + " trial " + std::to_string(number) + " already ended (" +
                trialStateName(trial->trial.state) + "): report values while it runs");
  }
  backend::MetricRow row;
  row.runId = trial->runId;
  row.step = step;
  row.key = QString::fromStdString(m_space.objectives.front().metric);
  row.value = value;
  row.time = spec::unix_time_now();
  return m_store->appendMetrics({row}).get();
}

Result<bool> Study::shouldPrune(std::int64_t number) {
  auto all = trials(true);
  if (!all) return all.error();
  std::vector<Trial> plain;
  const StudyTrial* target = nullptr;
  for (const StudyTrial& t : *all) {
    plain.push_back(t.trial);
    if (t.trial.number == number) target = &t;
  }
  if (target == nullptr) return findTrial(number, false).error();
  if (target->trial.state != TrialState::Running) {
    return fail(studyLabel(name()) + " trial " + std::to_string(number) + " already ended (" +
                trialStateName(target->trial.state) + "): only a running trial can be pruned");
  }
  if (target->trial.intermediate.empty()) return false;
  const PruneDecision decision =
      m_pruner->should_prune(target->trial, plain, m_space.objectives.front().direction);
  std::vector<backend::MetricRow> rows;
  for (const auto& [rung, value] : decision.rungs) {
    backend::MetricRow row;
    row.runId = target->runId;
    row.step = rung;
    row.key = kRungKey;
    row.value = value;
    row.time = spec::unix_time_now();
    rows.push_back(row);
  }
  if (!rows.empty()) {
    if (auto r = m_store->appendMetrics(std::move(rows)).get(); !r) return r.error();
  }
  return decision.prune;
}

Result<std::int64_t> Study::enqueue(const TrialParams& params) {
  if (auto r = m_space.check(params); !r) {
    return fail(studyLabel(name()) + ": enqueued values: " + r.message());
  }
  backend::NewTrial trial;
  trial.studyId = m_record.id;
  trial.params = paramsToJson(params);
  auto id = m_store->createTrialRun(trial).get();
  if (!id) return id.error();
  return id->number;
}

Result<StudySummary> Study::summary() {
  auto all = trials(false);
  if (!all) return all.error();
  StudySummary s;
  std::vector<Trial> plain;
  for (const StudyTrial& t : *all) {
    plain.push_back(t.trial);
    StudyCounts& c = s.counts;
    switch (t.trial.state) {
      case TrialState::Running:
        ++(t.status == RunStatus::queued ? c.queued : c.running);
        break;
      case TrialState::Complete:
        ++c.complete;
        break;
      case TrialState::Pruned:
        ++c.pruned;
        break;
      case TrialState::Failed:
        ++c.failed;
        break;
      case TrialState::Infeasible:
        ++c.infeasible;
        break;
      case TrialState::Oom:
        ++c.oom;
        break;
    }
  }
  for (const std::size_t i : pareto_front(plain, m_space.objectives)) s.pareto.push_back((*all)[i]);
  const Direction first = m_space.objectives.front().direction;
  const std::vector<StudyTrial>& pool = m_space.objectives.size() == 1 ? *all : s.pareto;
  for (const StudyTrial& t : pool) {
    if (t.trial.state != TrialState::Complete || !std::isfinite(t.trial.values.front())) continue;
    if (!s.best || better(t.trial.values.front(), s.best->trial.values.front(), first)) s.best = t;
  }
  if (auto importance = param_importance(m_space, plain); importance) {
    s.importance = std::move(*importance);
  }
  s.trials = std::move(*all);
  return s;
}

}  // namespace shardscope::search
