// Shared pieces of the shardscope-cli verbs: the options every verb accepts (--db, --json), the
// exit codes, opening the run log, finding a run by id or name, and a run as JSON.
#pragma once

#include <CLI/CLI.hpp>
#include <QJsonObject>
#include <QString>

#include <memory>
#include <string>
#include <vector>

#include "app/cli/verbexit.h"
#include "backend/store/runreader.h"
#include "backend/store/runrecords.h"
#include "backend/store/runstore.h"
#include "spec/result.h"
#include "spec/search_space.h"

namespace shardscope::cli {

/// Exit codes (docs/cli.md): 0 ok, 1 error, 2 usage or validation, 3 run failed or oom,
/// 4 stopped or pruned.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,
  kExitUsage = 2,
  kExitFailed = 3,
  kExitStopped = 4
};

/// Options shared by every verb; filled by CLI11 before a verb's callback runs.
struct Globals {
  std::string dbPath;  // --db; empty: RunStore::defaultPath()
  bool json = false;   // --json: machine-readable output
  std::string self;    // argv[0] as an absolute path (the supervisor re-executes it)
};

/// Ends the verb with `code` after printing `message` (if any) to stderr as "error: ...".
[[noreturn]] void exitWith(int code, const std::string& message = {});

/// The run log file the verb uses: --db or the default in the user's data folder.
QString dbPath(const Globals& g);
/// Opens the run log for writing (creating it); exits 1 with the store's message on failure.
std::unique_ptr<backend::RunStore> openStore(const Globals& g);
/// Opens a reader on the run log; exits 1 when the file does not exist yet.
backend::RunReader openReader(const Globals& g);
/// The run named by RUN (a numeric id or the unique name); exits 1 naming RUN when unknown.
backend::RunRecord findRun(backend::RunReader& reader, const std::string& run);
/// The study named by STUDY (a numeric id or the unique name); exits 1 naming it when unknown.
backend::StudyRecord findStudy(backend::RunReader& reader, const std::string& study);
/// Folder that holds run directories: next to --db ("<db folder>/runs"), else
/// $XDG_DATA_HOME/shardscope/runs.
QString runsRoot(const Globals& g);

/// A run as `show --json` prints it (every field documented in docs/cli.md).
QJsonObject runToJson(const backend::RunRecord& run);
/// Prints a JSON value compactly on one line to stdout.
void printJson(const QJsonObject& object);
/// A trial's objective values as the sweep and `study show` print them: "%.6g" each, joined by
/// ",". A probes.good_rate value that is not known yet (NaN: no answer of the trial is marked)
/// is no number: "?" in the list, and " (probes.good_rate: waiting for verdicts)" after it (alone
/// when it is the only value), never "nan".
std::string objectiveValuesText(const std::vector<double>& values,
                                const std::vector<spec::Objective>& objectives);
/// Exit code for a final status: 0 complete, 3 failed/oom/infeasible, 4 stopped/pruned.
int exitCodeFor(spec::RunStatus status);
/// Unwraps a Result or exits 1 with its message.
template <class T>
T orExit(Result<T> result, int code = kExitError) {
  if (!result) exitWith(code, result.message());
  return std::move(result).value();
}
/// Unwraps a Result<void> or exits with its message.
inline void orExit(const Result<void>& result, int code = kExitError) {
  if (!result) exitWith(code, result.message());
}

// Verb registration: each adds one subcommand to `app`, whose callback does the work.
void addRunVerbs(CLI::App& app, Globals& g);  // run, and the hidden supervise
void addLsVerb(CLI::App& app, Globals& g);
void addShowVerb(CLI::App& app, Globals& g);
void addLogsVerb(CLI::App& app, Globals& g);
void addStopVerb(CLI::App& app, Globals& g);
void addExportVerb(CLI::App& app, Globals& g);
void addEstimateVerb(CLI::App& app, Globals& g);
void addHostsVerb(CLI::App& app, Globals& g);
/// `resume RUN --from STEP` (app/cli/cmd_checkpoints.cpp): a new run from that checkpoint.
[[noreturn]] void resumeFromCheckpoint(const Globals& g, const std::string& runArg, qint64 step);

}  // namespace shardscope::cli
