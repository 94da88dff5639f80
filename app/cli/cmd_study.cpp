// `study create|ask|tell|report|should-prune|enqueue|ls|show|pause|resume|stop|prune-trial|
// stop-trial|adopt`: ask/tell over the run log for
// scripts (as Optuna's CLI offers), on backend/sweep/study.h. docs/cli.md documents each verb,
// its output and the JSON of `show --json`.
#include <QJsonArray>
#include <QSysInfo>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "app/cli/cli_common.h"
#include "app/cli/cmd_pbt.h"
#include "app/cli/launching.h"
#include "backend/sweep/study.h"
#include "spec/search_names.h"

namespace shardscope::cli {

void addStudyVerb(CLI::App& app, Globals& g);

namespace {

using search::Study;
using search::StudyTrial;

// What the study verbs parse; one instance shared by every `study` subcommand.
struct StudyArgs {
  std::string name;
  std::string experiment;
  std::int64_t trial = 0;
  std::int64_t step = 0;
  std::string value;
  std::vector<std::string> values;
  std::string state;
  std::string reason;
  std::vector<std::string> sets;
  int maxRetries = Study::kDefaultMaxRetries;
  qint64 ownerPid = -1;
};

QJsonValue number(double v) { return std::isfinite(v) ? QJsonValue(v) : QJsonValue(); }

QJsonArray valuesJson(const std::vector<double>& values) {
  QJsonArray out;
  for (const double v : values) out.append(number(v));
  return out;
}

QJsonObject trialJson(const StudyTrial& t) {
  return QJsonObject{{"number", static_cast<qint64>(t.trial.number)},
                     {"run_id", t.runId},
                     {"state", search::trialStateName(t.trial.state)},
                     {"status", QString::fromUtf8(spec::to_string(t.status).data())},
                     {"attempt", t.attempt},
                     {"values", valuesJson(t.trial.values)},
                     {"params", search::paramsToJson(t.trial.params)},
                     {"error", t.error},
                     {"replan", t.replan.isEmpty() ? QJsonValue() : QJsonValue(t.replan)}};
}

std::string paramsText(const search::TrialParams& params) {
  std::string out;
  for (const auto& [name, value] : params) {
    out += (out.empty() ? "" : " ") + name + "=" + search::format_value(value);
  }
  return out;
}

// Parses a number given on the command line; exits 2 naming `what` when it is not one.
double parseNumber(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  try {
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
    used = 0;
  }
  exitWith(kExitUsage, what + ": '" + text + "' is not a number");
}

void createVerb(const Globals& g, const StudyArgs& a) {
  auto store = openStore(g);
  Study::CreateOptions options;
  options.name = QString::fromStdString(a.name);
  options.maxRetries = a.maxRetries;
  auto study =
      orExit(Study::create(*store, QString::fromStdString(a.experiment), options), kExitUsage);
  if (g.json) {
    printJson({{"id", study.id()}, {"name", study.name()}});
    return;
  }
  std::cout << "created study " << study.name().toStdString() << " (id " << study.id()
            << "): sampler " << study.samplerText() << ", n_trials " << study.space().n_trials
            << ", max retries " << study.maxRetries() << '\n';
}

void askVerb(const Globals& g, const StudyArgs& a) {
  auto store = openStore(g);
  auto study = orExit(Study::open(*store, QString::fromStdString(a.name)));
  search::AskOptions options;
  // The process that will tell the result: by default this command's parent (the script).
  options.ownerPid = a.ownerPid >= 0 ? a.ownerPid : static_cast<qint64>(::getppid());
  const auto asked = orExit(study.ask(options));
  if (g.json) {
    printJson({{"number", static_cast<qint64>(asked.number)},
               {"run_id", asked.runId},
               {"attempt", asked.attempt},
               {"params", search::paramsToJson(asked.params)}});
    return;
  }
  std::cout << asked.number << ' ' << paramsText(asked.params) << '\n';
}

void tellVerb(const Globals& g, const StudyArgs& a) {
  auto store = openStore(g);
  auto study = orExit(Study::open(*store, QString::fromStdString(a.name)));
  if (!a.state.empty()) {
    if (!a.values.empty()) exitWith(kExitUsage, "tell: give VALUE... or --state, not both");
    const auto state =
        a.state == "pruned" ? search::TrialState::Pruned : search::TrialState::Failed;
    orExit(study.tell(a.trial, state, QString::fromStdString(a.reason)));
    return;
  }
  if (a.values.empty()) {
    exitWith(kExitUsage, "tell: give one VALUE per objective, or --state pruned|failed");
  }
  std::vector<double> values;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    values.push_back(parseNumber(a.values[i], "tell: VALUE " + std::to_string(i + 1)));
  }
  orExit(study.tell(a.trial, values));
}

void reportVerb(const Globals& g, const StudyArgs& a) {
  auto store = openStore(g);
  auto study = orExit(Study::open(*store, QString::fromStdString(a.name)));
  orExit(study.report(a.trial, a.step, parseNumber(a.value, "report: VALUE")));
}

void shouldPruneVerb(const Globals& g, const StudyArgs& a) {
  auto store = openStore(g);
  auto study = orExit(Study::open(*store, QString::fromStdString(a.name)));
  const bool prune = orExit(study.shouldPrune(a.trial));
  if (g.json) {
    printJson({{"number", static_cast<qint64>(a.trial)}, {"prune", prune}});
  } else {
    std::cout << (prune ? "yes" : "no") << '\n';
  }
  throw VerbExit{prune ? kExitStopped : kExitOk};
}

void enqueueVerb(const Globals& g, const StudyArgs& a) {
  auto store = openStore(g);
  auto study = orExit(Study::open(*store, QString::fromStdString(a.name)));
  search::TrialParams params;
  for (const std::string& set : a.sets) {
    const auto eq = set.find('=');
    if (eq == std::string::npos || eq == 0) {
      exitWith(kExitUsage, "--set " + set + ": write it as KEY=VALUE, e.g. --set train.lr=1e-3");
    }
    const std::string key = set.substr(0, eq);
    params[key] =
        orExit(search::parseParamValue(study.space(), key, set.substr(eq + 1)), kExitUsage);
  }
  const auto numberOut = orExit(study.enqueue(params), kExitUsage);
  if (g.json) {
    printJson({{"number", static_cast<qint64>(numberOut)}});
  } else {
    std::cout << numberOut << '\n';
  }
}

void lsVerb(const Globals& g) {
  auto reader = openReader(g);
  const auto studies = orExit(reader.listStudies());
  QJsonArray array;
  if (!g.json) {
    std::printf("%-5s %-24s %-9s %-8s %-7s %s\n", "ID", "NAME", "STATUS", "SAMPLER", "TRIALS",
                "OBJECTIVES");
  }
  for (const auto& s : studies) {
    const auto trials = orExit(reader.trials(s.id));
    const QString status = backend::studyStatusName(s.status);
    if (g.json) {
      array.append(QJsonObject{{"id", s.id},
                               {"name", s.name},
                               {"status", status},
                               {"kind", backend::studyKindName(s.kind)},
                               {"sampler", s.sampler},
                               {"trials", static_cast<qint64>(trials.size())},
                               {"objectives", QJsonArray::fromStringList(s.objectives)},
                               {"directions", QJsonArray::fromStringList(s.directions)}});
      continue;
    }
    std::printf("%-5lld %-24s %-9s %-8s %-7zu %s\n", static_cast<long long>(s.id),
                s.name.toStdString().c_str(), status.toStdString().c_str(),
                (s.kind == backend::StudyKind::autotune ? QStringLiteral("(autotune)") : s.sampler)
                    .toStdString()
                    .c_str(),
                trials.size(), s.objectives.join(",").toStdString().c_str());
  }
  if (g.json) printJson({{"studies", array}});
}

// Whether a process feeds a running study's sweep (schema v6), for show.
bool sweepFed(const backend::StudyRecord& record) {
  return backend::RunStore::sweepAlive(record, QSysInfo::machineHostName(),
                                       backend::RunStore::kSweepStaleS);
}

QJsonObject summaryJson(const Study& study, const search::StudySummary& s) {
  QJsonArray objectives;
  for (const auto& o : study.space().objectives) {
    objectives.append(QJsonObject{
        {"metric", QString::fromStdString(o.metric)},
        {"direction", o.direction == search::Direction::Minimize ? "minimize" : "maximize"}});
  }
  QJsonArray pareto;
  for (const auto& t : s.pareto) pareto.append(trialJson(t));
  QJsonArray importance;
  for (const auto& p : s.importance) {
    importance.append(
        QJsonObject{{"name", QString::fromStdString(p.name)}, {"importance", p.importance}});
  }
  QJsonArray trials;
  for (const auto& t : s.trials) trials.append(trialJson(t));
  const search::StudyCounts& c = s.counts;
  return QJsonObject{
      {"id", study.id()},
      {"name", study.name()},
      {"status", backend::studyStatusName(study.record().status)},
      {"sampler", QString::fromStdString(study.space().sampler.type)},
      // sampler = "auto": which sampler proposes which trials (null for any other sampler).
      {"auto", study.autoChoice().has_value()
                   ? QJsonValue(search::autoChoiceJson(*study.autoChoice()))
                   : QJsonValue()},
      {"n_trials", static_cast<qint64>(study.space().n_trials)},
      {"max_retries", study.maxRetries()},
      {"sweep_process", study.record().sweepPid > 0
                            ? QJsonValue(QJsonObject{{"pid", study.record().sweepPid},
                                                     {"host", study.record().sweepHost},
                                                     {"alive", sweepFed(study.record())}})
                            : QJsonValue()},
      {"objectives", objectives},
      {"counts", QJsonObject{{"queued", c.queued},
                             {"running", c.running},
                             {"complete", c.complete},
                             {"pruned", c.pruned},
                             {"failed", c.failed},
                             {"infeasible", c.infeasible},
                             {"oom", c.oom}}},
      {"best", s.best ? QJsonValue(trialJson(*s.best)) : QJsonValue()},
      {"pareto", pareto},
      {"importance", importance},
      {"trials", trials}};
}

void printSummary(const Study& study, const search::StudySummary& s) {
  const search::StudyCounts& c = s.counts;
  std::cout << "study:      " << study.name().toStdString() << " (id " << study.id() << ", "
            << backend::studyStatusName(study.record().status).toStdString() << ")\n";
  // Population-based training uses neither the sampler nor n_trials: say what applies.
  if (const auto& pbt = study.space().pbt) {
    std::cout << "search:     population-based training: " << pbt->population
              << " members, segments of " << pbt->interval_steps << " steps\n"
              << "trials:     " << s.trials.size() << " segment runs (";
  } else {
    std::cout << "sampler:    " << study.samplerText() << '\n'
              << "trials:     " << s.trials.size() << " of " << study.space().n_trials << " (";
  }
  std::cout << c.complete << " complete, " << c.running << " running, " << c.queued << " queued, "
            << c.pruned << " pruned, " << c.failed << " failed, " << c.infeasible + c.oom
            << " infeasible/oom)\n";
  const backend::StudyRecord& record = study.record();
  if (record.status == backend::StudyStatus::running) {
    if (sweepFed(record)) {
      std::cout << "sweep:      process " << record.sweepPid << " on "
                << record.sweepHost.toStdString() << '\n';
    } else {
      std::cout << "sweep:      no process feeds it (it was killed or crashed); go on with "
                   "`shardscope-cli study adopt "
                << study.name().toStdString() << "`\n";
    }
  }
  const auto& objectives = study.space().objectives;
  if (s.best) {
    std::cout << "best:       trial " << s.best->trial.number << " values "
              << objectiveValuesText(s.best->trial.values, objectives) << "  "
              << paramsText(s.best->trial.params) << '\n';
  }
  // A search by verdicts: the complete trials whose answers nobody has marked yet have no value
  // (not "nan"); say which, and how to give them one.
  std::string waiting;
  int nWaiting = 0;
  for (const auto& t : s.trials) {
    if (t.trial.state != search::TrialState::Complete) continue;
    const auto& v = t.trial.values;
    for (std::size_t i = 0; i < v.size() && i < objectives.size(); ++i) {
      if (std::isnan(v[i]) && objectives[i].metric == spec::kGoodRateObjective) {
        waiting += (waiting.empty() ? "" : " ") + std::to_string(t.trial.number);
        ++nWaiting;
        break;
      }
    }
  }
  if (nWaiting > 0) {
    std::cout << "waiting:    " << nWaiting << " complete trial(s) (" << waiting
              << "): probes.good_rate waits for verdicts; mark their answers in the Samples "
                 "view or with `shardscope-cli verdict RUN PROBE STEP good|bad`\n";
  }
  if (study.space().objectives.size() > 1) {
    std::cout << "pareto:     " << s.pareto.size() << " trials:";
    for (const auto& t : s.pareto) std::cout << ' ' << t.trial.number;
    std::cout << '\n';
  }
  for (const auto& p : s.importance) {
    std::printf("importance: %-24s %.3f\n", p.name.c_str(), p.importance);
  }
  for (const auto& t : s.trials) {
    if (t.replan.isEmpty()) continue;
    std::cout << "replanned:  trial " << t.trial.number << " (" << spec::to_string(t.status)
              << "): " << t.replan.toStdString() << '\n';
  }
}

void showVerb(const Globals& g, const StudyArgs& a) {
  auto store = openStore(g);
  auto study = a.name.empty() ? orExit(Study::latest(*store))
                              : orExit(Study::open(*store, QString::fromStdString(a.name)));
  const auto summary = orExit(study.summary());
  if (g.json) {
    QJsonObject json = summaryJson(study, summary);
    if (study.space().pbt) json.insert(QStringLiteral("pbt"), pbtJson(study));
    printJson(json);
  } else {
    printSummary(study, summary);
    printPbtLineage(study);
  }
}

// pause, resume, stop: what the process running the study's sweep should do (it reads the run
// log within a second; backend/sweep/sweepcontrol.h).
void controlVerb(const Globals& g, const StudyArgs& a, backend::StudyControl control) {
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  auto record = orExit(reader.studyByName(QString::fromStdString(a.name)));
  if (!record) exitWith(kExitUsage, "no study named " + a.name + " in the run log (see study ls)");
  orExit(store->setStudyControl(record->id, control).get());
  const char* what = control == backend::StudyControl::pause  ? "pause"
                     : control == backend::StudyControl::stop ? "stop"
                                                              : "resume";
  std::cout << "study " << a.name << ": " << what
            << " asked; the process running its sweep carries it out\n";
}

// adopt: starts the sweep of a running study whose process died again (it reattaches the
// trials left running); refused while a process feeds it.
void adoptVerb(const Globals& g, const StudyArgs& a) {
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  auto record = orExit(reader.studyByName(QString::fromStdString(a.name)));
  if (!record) exitWith(kExitUsage, "no study named " + a.name + " in the run log (see study ls)");
  const auto started = orExit(lifecycle(g).adoptSweep(reader, record->id));
  std::cout << "study " << a.name << ": sweep started again (pid " << started.pid << "), log "
            << started.logPath.toStdString() << '\n';
}

// prune-trial, stop-trial: asks the sweep running trial TRIAL to prune or stop it.
void trialRequestVerb(const Globals& g, const StudyArgs& a, backend::TrialRequest request) {
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  auto record = orExit(reader.studyByName(QString::fromStdString(a.name)));
  if (!record) exitWith(kExitUsage, "no study named " + a.name + " in the run log (see study ls)");
  std::optional<qint64> runId;
  for (const backend::RunRecord& run : orExit(reader.trials(record->id))) {
    if (run.trialNumber == a.trial) runId = run.id;
  }
  if (!runId) {
    exitWith(kExitUsage, "study " + a.name + " has no trial " + std::to_string(a.trial) +
                             " (see study show " + a.name + ")");
  }
  orExit(store->requestTrial(*runId, request).get());
  std::cout << "study " << a.name << " trial " << a.trial << ": "
            << (request == backend::TrialRequest::prune ? "prune" : "stop")
            << " asked; the process running its sweep carries it out\n";
}

// The subcommands that take NAME TRIAL: tell, report, should-prune.
void addTrialVerbs(CLI::App* study, Globals& g, const std::shared_ptr<StudyArgs>& a) {
  CLI::App* tell = study->add_subcommand("tell", "Tell a trial's objective values or its end");
  tell->add_option("NAME", a->name, "Study name")->required();
  tell->add_option("TRIAL", a->trial, "Trial number")->required();
  tell->add_option("VALUE", a->values, "One value per objective, in their order");
  tell->add_option("--state", a->state, "End the trial without values")
      ->check(CLI::IsMember({"pruned", "failed"}));
  tell->add_option("--reason", a->reason, "Why it failed (stored with the trial)");
  tell->callback([&g, a] { tellVerb(g, *a); });

  CLI::App* report = study->add_subcommand("report", "Record an intermediate value of a trial");
  report->add_option("NAME", a->name, "Study name")->required();
  report->add_option("TRIAL", a->trial, "Trial number")->required();
  report->add_option("STEP", a->step, "Step of the value")->required();
  report->add_option("VALUE", a->value, "Value of the first objective at STEP")->required();
  report->callback([&g, a] { reportVerb(g, *a); });

  CLI::App* prune =
      study->add_subcommand("should-prune", "Ask the pruner: prints yes (exit 4) or no (exit 0)");
  prune->add_option("NAME", a->name, "Study name")->required();
  prune->add_option("TRIAL", a->trial, "Trial number")->required();
  prune->callback([&g, a] { shouldPruneVerb(g, *a); });

  CLI::App* pruneTrial = study->add_subcommand(
      "prune-trial", "Ask the running sweep to prune a trial now (it ends pruned)");
  pruneTrial->add_option("NAME", a->name, "Study name")->required();
  pruneTrial->add_option("TRIAL", a->trial, "Trial number")->required();
  pruneTrial->callback([&g, a] { trialRequestVerb(g, *a, backend::TrialRequest::prune); });

  CLI::App* stopTrial = study->add_subcommand(
      "stop-trial", "Ask the running sweep to stop a trial (it ends stopped, never retried)");
  stopTrial->add_option("NAME", a->name, "Study name")->required();
  stopTrial->add_option("TRIAL", a->trial, "Trial number")->required();
  stopTrial->callback([&g, a] { trialRequestVerb(g, *a, backend::TrialRequest::stop); });
}

}  // namespace

void addStudyVerb(CLI::App& app, Globals& g) {
  auto a = std::make_shared<StudyArgs>();
  CLI::App* study = app.add_subcommand("study", "Ask/tell studies (searches) in the run log");
  study->fallthrough();
  study->require_subcommand(1);

  CLI::App* create = study->add_subcommand("create", "Create a study from an experiment file");
  create->add_option("NAME", a->name, "Study name (unique in the run log)")->required();
  create->add_option("EXP", a->experiment, "Experiment file with a [search] section")->required();
  create->add_option("--max-retries", a->maxRetries, "Retries of a failed or lost trial")
      ->check(CLI::NonNegativeNumber);
  create->callback([&g, a] { createVerb(g, *a); });

  CLI::App* ask = study->add_subcommand("ask", "Take the next trial: its number and values");
  ask->add_option("NAME", a->name, "Study name")->required();
  ask->add_option("--owner-pid", a->ownerPid,
                  "Process that will tell the trial (default: the caller; 0: none)");
  ask->callback([&g, a] { askVerb(g, *a); });

  addTrialVerbs(study, g, a);

  CLI::App* enqueue = study->add_subcommand("enqueue", "Queue a trial with fixed values");
  enqueue->add_option("NAME", a->name, "Study name")->required();
  enqueue->add_option("--set", a->sets, "KEY=VALUE, one per active parameter")->required();
  enqueue->callback([&g, a] { enqueueVerb(g, *a); });

  study->add_subcommand("ls", "List the studies, newest first")->callback([&g] { lsVerb(g); });

  const std::pair<const char*, const char*> controls[] = {
      {"pause", "Ask the running sweep to start no new trial (running ones go on)"},
      {"resume", "Ask a paused sweep to start trials again"},
      {"stop", "Ask the running sweep to stop its trials and end"}};
  for (const auto& [verb, help] : controls) {
    CLI::App* sub = study->add_subcommand(verb, help);
    sub->add_option("NAME", a->name, "Study name")->required();
    const backend::StudyControl control =
        std::string(verb) == "pause"  ? backend::StudyControl::pause
        : std::string(verb) == "stop" ? backend::StudyControl::stop
                                      : backend::StudyControl::run;
    sub->callback([&g, a, control] { controlVerb(g, *a, control); });
  }

  CLI::App* adopt = study->add_subcommand(
      "adopt",
      "Start again the sweep of a running study whose process died (it reattaches the "
      "trials left running and goes on)");
  adopt->add_option("NAME", a->name, "Study name")->required();
  adopt->callback([&g, a] { adoptVerb(g, *a); });

  CLI::App* show = study->add_subcommand("show", "Best trial, Pareto front, importance, trials");
  show->add_option("NAME", a->name, "Study name (default: the latest study)");
  show->callback([&g, a] { showVerb(g, *a); });
}

}  // namespace shardscope::cli
