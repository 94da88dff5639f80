// shardscope-cli: the headless front end (a GPU login node has no display). Verbs arrive with
// the backend pieces they drive; this main() only wires the command line to them.
// Exit codes: 0 ok, 1 error, 2 usage.
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

#include "trainer/spec/version.h"

namespace {

enum ExitCode : int { kExitOk = 0, kExitError = 1, kExitUsage = 2 };

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Shardscope: sharded fine-tuning experiments and sweeps, without the GUI.",
               "shardscope-cli"};
  app.set_version_flag("--version", std::string("shardscope-cli ") + shardscope::kVersion);
  // Verbs inherit fallthrough, so the top-level --db is accepted before or after a verb.
  app.fallthrough();
  app.require_subcommand(0, 1);
  std::string dbPath;
  app.add_option("--db", dbPath, "Run store (SQLite file); default: in the user's data folder")
      ->type_name("PATH");

  try {
    app.parse(argc, argv);
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
  // A verb runs from its callback inside parse() and reports failure by throwing
  // CLI::RuntimeError(kExitError); reaching this line means it succeeded.
  return kExitOk;
}
