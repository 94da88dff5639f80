#!/usr/bin/env bash
# The main job (README): installs what is missing, builds, and runs Shardscope's demo.
# Until the dashboard lands (#7) this is its headless fallback: `shardscope-cli run` of the demo
# experiment (examples/demo.toml: the tiny Qwen2-architecture model, FULL_SHARD on 2 local
# ranks), with a progress line, then the run table. The run log is build/demo/runs.db, so the
# demo never touches your own run log; run it again and it adds a run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
db="$root/build/demo/runs.db"
mkdir -p "$(dirname "$db")"
echo "== shardscope-cli run examples/demo.toml (2 local ranks of shardtrain, FULL_SHARD) =="
"$root/build/bin/shardscope-cli" --db "$db" run "$root/examples/demo.toml"
echo "== shardscope-cli ls =="
"$root/build/bin/shardscope-cli" --db "$db" ls
