// shardscope-cli: the headless front end (a GPU login node has no display). This main() only
// wires the command line to the verbs (app/cli/cmd_*.cpp); docs/cli.md documents them.
// Exit codes: 0 ok, 1 error, 2 usage or validation, 3 run failed or oom, 4 stopped or pruned.
#include <CLI/CLI.hpp>
#include <QCoreApplication>
#include <QLoggingCategory>

#include <csignal>
#include <iostream>
#include <string>

#include "app/cli/cli_common.h"
#include "backend/lifecycle/runlifecycle.h"
#include "spec/version.h"

using namespace shardscope::cli;

namespace shardscope::cli {
void addStudyVerb(CLI::App& app, Globals& g);        // app/cli/cmd_study.cpp
void addSweepVerb(CLI::App& app, Globals& g);        // app/cli/cmd_sweep.cpp
void addPbtReplayVerb(CLI::App& app, Globals& g);    // app/cli/cmd_pbt.cpp
void addExportToVerbs(CLI::App& app, Globals& g);    // app/cli/cmd_export_to.cpp
void addImportVerb(CLI::App& app, Globals& g);       // app/cli/cmd_import.cpp
void addAutotuneVerb(CLI::App& app, Globals& g);     // app/cli/cmd_autotune.cpp
void addWhyVerb(CLI::App& app, Globals& g);          // app/cli/cmd_why.cpp
void addTagNoteVerbs(CLI::App& app, Globals& g);     // app/cli/cmd_tag_note.cpp
void addGroupVerb(CLI::App& app, Globals& g);        // app/cli/cmd_group.cpp
void addSamplesVerb(CLI::App& app, Globals& g);      // app/cli/cmd_samples.cpp
void addCleanVerbs(CLI::App& app, Globals& g);       // app/cli/cmd_clean.cpp
void addDataVerb(CLI::App& app, Globals& g);         // app/cli/cmd_data.cpp
void addCheckpointVerbs(CLI::App& app, Globals& g);  // app/cli/cmd_checkpoints.cpp
}  // namespace shardscope::cli

int main(int argc, char** argv) {
  QCoreApplication qapp(argc, argv);  // the store's and launchers' timers need an event loop
  // A file-size limit or quota on the run log fails its writes with a clear "full" error (the
  // supervisor retries, losing nothing) instead of killing the process with SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  // The backend's info lines (schema migrations, rank exits) are for the GUI's log, not for a
  // terminal; QT_LOGGING_RULES brings them back.
  if (qEnvironmentVariableIsEmpty("QT_LOGGING_RULES")) {
    QLoggingCategory::setFilterRules(QStringLiteral("*.info=false"));
  }
  CLI::App app{"Shardscope: sharded fine-tuning experiments and sweeps, without the GUI.",
               "shardscope-cli"};
  app.set_version_flag("--version", std::string("shardscope-cli ") + shardscope::kVersion);
  // Verbs inherit fallthrough, so --db and --json are accepted before or after a verb.
  app.fallthrough();
  app.require_subcommand(0, 1);
  Globals g;
  g.self = QCoreApplication::applicationFilePath().toStdString();
  // The run log may come in the environment instead (SHARDSCOPE_DB, as the dashboard passes it
  // to the processes it starts): a PostgreSQL URL with a password stays out of the command line,
  // which every local user reads. Taken out of the environment at once, so the trainers and
  // other processes this one starts do not inherit it (RunLifecycle passes it on by name).
  if (const QByteArray fromEnv = qgetenv(shardscope::backend::kDbEnvironmentVariable);
      !fromEnv.isEmpty()) {
    g.dbPath = fromEnv.toStdString();
  }
  qunsetenv(shardscope::backend::kDbEnvironmentVariable);
  app.add_option("--db", g.dbPath,
                 "Run store: a SQLite file (default: in the user's data folder), or a "
                 "postgresql://user@host:port/db URL shared by several machines (a password "
                 "goes in ~/.pgpass or PGPASSWORD, not here); default: $SHARDSCOPE_DB")
      ->type_name("PATH|URL");
  app.add_flag("--json", g.json, "Machine-readable output (one JSON object a line)");
  addRunVerbs(app, g);
  addLsVerb(app, g);
  addShowVerb(app, g);
  addLogsVerb(app, g);
  addStopVerb(app, g);
  addExportVerb(app, g);
  addEstimateVerb(app, g);
  addHostsVerb(app, g);
  addStudyVerb(app, g);
  addSweepVerb(app, g);
  addPbtReplayVerb(app, g);
  addExportToVerbs(app, g);
  addImportVerb(app, g);
  addAutotuneVerb(app, g);
  addWhyVerb(app, g);
  addTagNoteVerbs(app, g);
  addGroupVerb(app, g);
  addSamplesVerb(app, g);
  addCleanVerbs(app, g);
  addDataVerb(app, g);
  addCheckpointVerbs(app, g);

  try {
    app.parse(argc, argv);
  } catch (const VerbExit& e) {
    return e.code;
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with exit code 0; exit() prints what each needs.
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  } catch (const CLI::Error& e) {
    return app.exit(e) == 0 ? kExitOk : kExitError;
  }
  if (app.get_subcommands().empty()) {
    std::cerr << app.help();
    return kExitUsage;
  }
  return kExitOk;  // a verb that returns from its callback succeeded
}
