#!/usr/bin/env bash
# The main job (README): installs what is missing, builds, and runs Shardscope's demo.
# Until the dashboard lands this is `shardtrain selftest`: 2 local ranks meet over Gloo, check
# all-gather and reduce-scatter, and print their `hello`/`log`/`done` events (JSON Lines).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
echo "== shardtrain selftest (2 local ranks, Gloo) =="
OMP_NUM_THREADS=1 "$root/build/bin/shardtrain" selftest --world-size 2
