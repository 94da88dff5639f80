#!/usr/bin/env bash
# ctest-costs.sh seed|keep TREE: CTest starts the longest tests first, by the times it kept from
# the tree's last run (TREE/Testing/Temporary/CTestCostData.txt). A fresh clone's tree has none
# and would start them in the order they are declared, the longest perhaps last. `seed` copies
# the times the last run of a tree of that name kept (in the cache folder) into a tree that has
# none; `keep` saves the tree's times there after a run. The times steer the order only: a stale
# or missing file changes which test starts when, never a result.
set -euo pipefail
mode=$1 tree=$2
cache=${XDG_CACHE_HOME:-$HOME/.cache}/shardscope/ctest-costs
saved="$cache/$(basename "$tree").txt"
mine="$tree/Testing/Temporary/CTestCostData.txt"
case "$mode" in
  seed) if [[ -f $saved && ! -f $mine ]]; then mkdir -p "$(dirname "$mine")" && cp "$saved" "$mine"; fi ;;
  keep) if [[ -f $mine ]]; then mkdir -p "$cache" && cp "$mine" "$saved.tmp" && mv "$saved.tmp" "$saved"; fi ;;
  *) echo "ctest-costs.sh: seed or keep, then a build tree" >&2; exit 2 ;;
esac
