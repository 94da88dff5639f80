// shardtrain: the trainer executable. One process per rank; see docs/ARCHITECTURE.md for the
// contract (verbs, rendezvous environment, events on stdout, logs on stderr). main() only wires.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "trainer/cli/selftest.h"
#include "trainer/run/fatal.h"
#include "trainer/spec/version.h"

int main(int argc, char** argv) {
  using namespace shardscope::trainer;
  CLI::App app{"shardtrain: the Shardscope trainer (FSDP semantics on LibTorch c10d)",
               "shardtrain"};
  app.set_version_flag("--version", std::string("shardtrain ") + shardscope::kVersion);
  app.require_subcommand(1);

  SelftestOptions selftest;
  auto* cmd = app.add_subcommand("selftest", "Start local ranks and check the collectives (Gloo)");
  cmd->add_option("--world-size", selftest.world_size, "Ranks to start when no rendezvous is set")
      ->capture_default_str();
  cmd->add_option("--timeout-s", selftest.timeout_s, "Rendezvous and collective timeout, seconds")
      ->capture_default_str();
  cmd->add_option("--fault-rank", selftest.fault_rank,
                  "This rank misbehaves, to check failure detection");
  cmd->add_option("--fault-mode", selftest.fault_mode,
                  "exit: leave before the collectives; hang: never answer")
      ->check(CLI::IsMember({"exit", "hang"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitConfig;
  }
  if (cmd->parsed()) return run_guarded([&] { return run_selftest(selftest); });
  return kExitConfig;
}
