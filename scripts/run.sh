#!/usr/bin/env bash
# The main job (README): installs what is missing, builds, and runs Shardscope's demo
# (scripts/demo.sh): the demo experiment's sweep (examples/demo-sweep.toml: the tiny
# Qwen2-architecture model, FULL_SHARD on 2 local ranks of shardtrain, 8 TPE trials over the
# learning rate, warm-up and weight decay) into the default run log, with the dashboard following
# it; without a display the sweep runs headless and the dashboard writes its panels as PNGs to
# build/demo/screenshots. Run it again: the study is continued (once finished, it prints the
# best trial and the panels again).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
# Only what the demo runs: the tests' executables are test.sh's to build (a cold first run is
# then the three programs' compile, not the whole tree's).
"$root/scripts/build.sh" shardscope shardscope-cli shardtrain
exec "$root/scripts/demo.sh"
