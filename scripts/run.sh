#!/usr/bin/env bash
# The main job (README): installs what is missing, builds, and runs Shardscope's demo.
# It runs the demo experiment (examples/demo.toml: the tiny Qwen2-architecture model, FULL_SHARD
# on 2 local ranks) with `shardscope-cli run` (a progress line, then the run table), then opens
# the dashboard on that run log and experiment. Without a display (no DISPLAY or WAYLAND_DISPLAY)
# the headless fallback writes the dashboard's panels as PNGs to build/demo/screenshots instead.
# The run log is build/demo/runs.db, so the demo never touches your own run log; run it again and
# it adds a run.
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
if [[ -n ${DISPLAY:-} || -n ${WAYLAND_DISPLAY:-} ]]; then
  echo "== shardscope (the dashboard; close the window to finish) =="
  exec "$root/build/bin/shardscope" --db "$db" "$root/examples/demo.toml"
fi
shots="$root/build/demo/screenshots"
echo "== no display: shardscope --screenshot $shots =="
"$root/build/bin/shardscope" --screenshot "$shots" --db "$db" "$root/examples/demo.toml"
ls "$shots"
