#!/usr/bin/env bash
# The demo itself, on an existing build (scripts/run.sh installs and builds first): the demo's
# sweep (examples/demo-sweep.toml) with `shardscope-cli sweep` into the default run log, then the
# dashboard on it; without a display (no DISPLAY or WAYLAND_DISPLAY) the dashboard writes its
# panels as PNGs instead and the script prints where. Environment, for tests:
#   SHARDSCOPE_BIN (default build/bin), SHARDSCOPE_DEMO (the experiment file),
#   SHARDSCOPE_DEMO_DB (a run log other than the default one),
#   SHARDSCOPE_DEMO_SHOTS (default build/demo/screenshots).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin=${SHARDSCOPE_BIN:-$root/build/bin}
exp=${SHARDSCOPE_DEMO:-$root/examples/demo-sweep.toml}
shots=${SHARDSCOPE_DEMO_SHOTS:-$root/build/demo/screenshots}
db_args=()
[[ -n ${SHARDSCOPE_DEMO_DB:-} ]] && db_args=(--db "$SHARDSCOPE_DEMO_DB")
if [[ -n ${DISPLAY:-} || -n ${WAYLAND_DISPLAY:-} ]] && [[ -z ${SHARDSCOPE_DEMO_HEADLESS:-} ]]; then
  log="$root/build/demo/sweep.log"
  mkdir -p "$(dirname "$log")"
  echo "== shardscope-cli sweep $exp (in the background; its lines go to $log) =="
  "$bin/shardscope-cli" "${db_args[@]}" sweep "$exp" >"$log" 2>&1 &
  echo "== shardscope (the dashboard follows the sweep live; close the window to finish) =="
  exec "$bin/shardscope" "${db_args[@]}" "$exp"
fi
echo "== shardscope-cli sweep $exp (no display: the sweep runs headless) =="
"$bin/shardscope-cli" "${db_args[@]}" sweep "$exp"
echo "== shardscope --screenshot $shots =="
"$bin/shardscope" --screenshot "$shots" "${db_args[@]}" "$exp"
echo "The dashboard's panels are in $shots:"
ls "$shots"
