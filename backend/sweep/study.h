// Study: ask/tell over the run log. A study is a row of `studies` plus one run per trial;
// everything a sampler or pruner needs is read back from those rows on every call, so any
// number of processes can ask and tell on one study, and a process started after another was
// killed continues with the next trial numbers and every told result.
//
// Lifecycle of a trial's run: enqueue() -> queued; ask() -> running (a new number, or the
// lowest queued one, or a failed one with retries left: same number and params, attempt + 1);
// tell() -> complete / pruned / failed (a non-finite value is failed). A running trial whose
// asking process (AskOptions::ownerPid, kept as an ask lease: token kAskLeaseToken plus a tag of
// the one ask) or whose follower (the sweep's RunMonitor lease) is gone from this machine is
// lost: the next ask() records it failed ("lost"), so it is retried like any failed trial. The
// ask lease is written in the transaction that claims or starts the trial (RunStore::claimTrial),
// so no asked trial is ever running without one. An ask whose answer the run log lost (the
// connection dropped after its COMMIT reached the server) keeps its token, and the next ask of
// this Study presents it again: the store hands back the trial that token already took (an
// idempotent ask) instead of taking a second one and leaving the first running for good. A
// restarted sweep first reattaches the launched ones whose follower died (orphanedTrials()): their
// ranks outlive the sweep, so it follows them to their own end instead. Samplers keep no hidden
// state (each replays the trial list), and the random source of trial n is seeded from (seed, n),
// so nothing else needs to live in setStudyState; the state holds the study's own settings
// (max_retries) and, for sampler = "auto", the choice made when the study was created ("auto":
// gp_trials, then, reason), which a resumed study keeps even if the rule has changed since.
// The sampler is the one the study's `sampler` column names: a study created before "auto" was
// the default, with no sampler in its text, stays "tpe".
#pragma once

#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "search/autosampler.h"
#include "search/importance.h"
#include "search/pruner.h"
#include "search/sampler.h"
#include "search/space.h"
#include "search/trial.h"
#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::search {

/// A trial handed out by Study::ask().
struct AskedTrial {
  std::int64_t number = 0;
  qint64 runId = 0;
  TrialParams params;
  int attempt = 0;        // 0: first try; n: the nth retry of a failed or lost trial
  bool enqueued = false;  // the values came from enqueue() or a retry, not from the sampler
};

struct AskOptions {
  /// The process that will tell the result (0: none). When set, a lease records it, and once
  /// that process is gone from this machine the trial is lost and retried. The trial runner
  /// leaves it 0 and follows the run under its own lease.
  qint64 ownerPid = 0;
};

/// One trial with what the run log knows beyond the search view.
struct StudyTrial {
  Trial trial;
  qint64 runId = 0;
  spec::RunStatus status = spec::RunStatus::queued;  // the run's own status
  int attempt = 0;
  QString error;  // why it failed (empty otherwise)
  /// Its plans after running out of memory (search.on_oom = "replan"): the `replan` entry of its
  /// run's params (RunLifecycle::replannedParams); empty when it ran in the experiment's plan.
  QString replan;
};

/// Trials per state.
struct StudyCounts {
  int queued = 0;  // enqueued, not asked yet
  int running = 0;
  int complete = 0;
  int pruned = 0;
  int failed = 0;
  int infeasible = 0;
  int oom = 0;
};

/// What `study show` prints and the GUI's comparison view reads.
struct StudySummary {
  std::optional<StudyTrial> best;           // see Study::summary()
  std::vector<StudyTrial> pareto;           // Pareto-optimal complete trials, by number
  std::vector<ParamImportance> importance;  // empty while fewer than 2 trials are complete
  StudyCounts counts;
  std::vector<StudyTrial> trials;  // every trial, by number
};

class Study {
 public:
  /// Retries of a failed or lost trial when `study create` gives no --max-retries.
  static constexpr int kDefaultMaxRetries = 1;
  /// The lease token of a trial asked by a process that will tell it itself: this alone (an
  /// older ask), or followed by ':' and the tag of one ask (isAskLease).
  static constexpr const char* kAskLeaseToken = "study-ask";
  /// True when a lease's token is an asker's (kAskLeaseToken, alone or with an ask's tag).
  static bool isAskLease(const QString& token);

  struct CreateOptions {
    QString name;  // empty: search.name, whose default is the experiment file's stem
    int maxRetries = kDefaultMaxRetries;
    /// "dotted.key=value" overrides (sweep --set) applied to the file before the study keeps it.
    std::vector<std::string> overrides;
  };
  /// [search] fields an override may change on an existing study: they steer this process's
  /// sweep (slots, time budget, prune grace), not the study's search space.
  static bool overridableOnExistingStudy(const std::string& key);

  /// A new study from the [search] section of `experiment` (parsed once by the caller, overrides
  /// applied: CreateOptions::overrides are not read here). The study stores the section's
  /// canonical form (spec::Experiment::search.toml), the experiment row the whole experiment.
  [[nodiscard]] static Result<Study> create(backend::RunStore& store,
                                            const spec::Experiment& experiment,
                                            const CreateOptions& options);
  /// The same from the experiment file at `experimentPath`, read once, as `study create` names
  /// it: with CreateOptions::overrides the whole experiment is read and validated; without, its
  /// [search] section alone (a driver's parameters may be names of its own).
  [[nodiscard]] static Result<Study> create(backend::RunStore& store, const QString& experimentPath,
                                            const CreateOptions& options);
  /// The study called `name` in the run log.
  [[nodiscard]] static Result<Study> open(backend::RunStore& store, const QString& name);
  /// The most recently created study.
  [[nodiscard]] static Result<Study> latest(backend::RunStore& store);

  Study(Study&&) noexcept;
  Study& operator=(Study&&) noexcept;
  ~Study();

  qint64 id() const { return m_record.id; }
  const QString& name() const { return m_record.name; }
  const backend::StudyRecord& record() const { return m_record; }
  const SearchSpace& space() const { return m_space; }
  /// sampler = "auto": the choice the study stored (which sampler proposes which trials);
  /// empty for any other sampler.
  const std::optional<AutoChoice>& autoChoice() const { return m_auto; }
  /// The sampler in words: its name, and for auto the choice ("auto: gp for trials 0-99, then
  /// tpe (a space of 2 parameters)").
  std::string samplerText() const;
  int maxRetries() const { return m_maxRetries; }

  /// The next trial: a queued (enqueued) one, else a failed one with retries left, else a new
  /// number with values from the sampler. Fails once n_trials numbers are taken and none waits.
  [[nodiscard]] Result<AskedTrial> ask(const AskOptions& options = {});
  /// As ask(), but nullopt (not an error) once every number is taken and none waits.
  [[nodiscard]] Result<std::optional<AskedTrial>> tryAsk(const AskOptions& options = {});
  /// Completes trial `number` with one value per objective (non-finite: recorded failed).
  [[nodiscard]] Result<void> tell(std::int64_t number, const std::vector<double>& values);
  /// Ends trial `number` as pruned, failed (or oom / infeasible) without values.
  [[nodiscard]] Result<void> tell(std::int64_t number, TrialState state,
                                  const QString& reason = {});
  /// Records an intermediate value of the first objective at `step` (what pruners read).
  [[nodiscard]] Result<void> report(std::int64_t number, std::int64_t step, double value);
  /// The configured pruner's verdict on trial `number` after its latest report, against every
  /// trial's recorded values; rungs it reaches are stored (they must survive a restart).
  [[nodiscard]] Result<bool> shouldPrune(std::int64_t number);
  /// A queued trial with fixed values (every active parameter), handed out before new ones.
  [[nodiscard]] Result<std::int64_t> enqueue(const TrialParams& params);
  /// Records every running trial whose asking process is gone (see the file comment) as failed;
  /// returns how many. ask() calls it first.
  [[nodiscard]] Result<int> failLostTrials();
  /// Running trials that a sweep launched and whose following process (the RunMonitor lease's
  /// holder, or the asking sweep killed between starting the ranks and following them) is gone
  /// from this machine, by number: a restarted sweep reattaches them (their ranks may still run)
  /// before it asks, so they are not failed as lost.
  [[nodiscard]] Result<std::vector<StudyTrial>> orphanedTrials();
  /// Refuses `overrides` (applied to `effective`, the experiment as the sweep parsed it) that
  /// change this existing study's search space: a `search.*` value other than the ones
  /// overridableOnExistingStudy() allows that differs from the study's stored one. The message
  /// names the study and the field.
  [[nodiscard]] Result<void> checkOverrides(const spec::Experiment& effective,
                                            const std::vector<std::string>& overrides) const;
  /// Every trial of the study, by number.
  [[nodiscard]] Result<std::vector<StudyTrial>> trials(bool withCurves = false);
  /// Best trial (one objective: the best complete value; several: the Pareto-optimal trial best
  /// on the first objective), Pareto front, importance, counts, trials.
  [[nodiscard]] Result<StudySummary> summary();

 private:
  Study(backend::RunStore& store, backend::RunReader reader, backend::StudyRecord record,
        SearchSpace space);
  /// Stores a study of `space` (its canonical text `searchToml`, read from `source`; the
  /// experiment row keeps `experimentToml`) and opens it without reading it back.
  static Result<Study> create(backend::RunStore& store, SearchSpace space,
                              const std::string& searchToml, const std::string& source,
                              const std::string& experimentToml, const CreateOptions& options);
  Result<StudyTrial> findTrial(std::int64_t number, bool withCurves);
  Result<std::optional<AskedTrial>> askNew(const std::optional<backend::LeaseRecord>& lease);
  /// The trial of run `id` as the run log has it (parameters and attempt).
  Result<AskedTrial> stored(const backend::TrialId& id);
  /// The lease an ask of `options` writes with its trial (none without an owner), its token
  /// m_askToken (made on the first try of an ask, kept while the run log's answer is lost).
  std::optional<backend::LeaseRecord> askLease(const AskOptions& options);
  /// True when run `runId` has a stored location: its ranks were started.
  bool launched(qint64 runId) const;
  Result<void> finish(std::int64_t number, spec::RunStatus status,
                      const std::vector<double>& values, const QString& error);

  backend::RunStore* m_store;
  std::unique_ptr<backend::RunReader> m_reader;
  backend::StudyRecord m_record;
  SearchSpace m_space;
  int m_maxRetries = kDefaultMaxRetries;
  // The ask lease token of the ask under way: empty between asks; kept when the run log's
  // answer to a claim or start was lost (it may have taken a trial), so the next try finds it.
  QString m_askToken;
  std::unique_ptr<Sampler> m_sampler;
  std::unique_ptr<Pruner> m_pruner;
  std::optional<AutoChoice> m_auto;
};

/// The study state's form of an auto choice: {"gp_trials": N, "then": "cmaes", "reason": ...}.
QJsonObject autoChoiceJson(const AutoChoice& choice);
/// The auto choice in a study's state (its "auto" object); nullopt when it has none, an error
/// naming the field when it is malformed.
Result<std::optional<AutoChoice>> storedAutoChoice(const QJsonObject& state);

/// Values of `params` as the run log stores them (numbers, strings, bools).
QJsonObject paramsToJson(const TrialParams& params);
/// Stored values back into typed values of `space` (unknown names are dropped).
TrialParams paramsFromJson(const SearchSpace& space, const QJsonObject& json);
/// `text` as a value of parameter `name` of `space` ("k=v" of `study enqueue --set`); an error
/// names the parameter and what it accepts.
Result<ParamValue> parseParamValue(const SearchSpace& space, const std::string& name,
                                   const std::string& text);
/// The search view of a run's status (queued and running are pending; stopped counts as failed).
TrialState trialStateOf(spec::RunStatus status);
/// "running", "complete", ... as the run log names the state.
const char* trialStateName(TrialState state);

}  // namespace shardscope::search
