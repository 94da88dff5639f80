#!/usr/bin/env bash
# Keeps .clang-format and .clang-tidy clean: checks formatting of every tracked C++ file, then
# runs clang-tidy over our translation units from a compile database without precompiled headers
# (clang cannot read GCC's); units unchanged since they last passed are skipped, and units with the
# same compile flags are tidied in groups, so LibTorch's and Qt's headers are parsed once per group.
# A unit is skipped when its key (its inputs, see scripts/tidy_cached.py) is in this machine's cache
# or in the committed record .ci/tidy-passed.txt, whose keys hold on any machine: a fresh clone on a
# fresh machine tidies only the units a change touched since the record was written.
# Usage: scripts/lint.sh [--format-only] [--fix] [--per-unit] [--record] [--all]
#   --per-unit: no groups, one clang-tidy run per unit (to check a finding that only a group shows)
#   --record:   after a clean run, rewrite .ci/tidy-passed.txt (commit it with the change)
#   --all:      tidy every unit, ignoring the cache and the record (a new clang-tidy, a doubt)
# Environment: SHARDSCOPE_LINT_TREE (build tree), SHARDSCOPE_TIDY_CACHE (cache directory),
#   SHARDSCOPE_TIDY_GROUP_SIZE (most units in a group; see scripts/tidy_cached.py),
#   SHARDSCOPE_TIDY_JOBS (clang-tidy processes at once; default: the online cores)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
format_only=0 fix=0 per_unit=0 record=0 all=0
for arg in "$@"; do
  case "$arg" in
    --format-only) format_only=1 ;;
    --fix) fix=1 ;;
    --per-unit) per_unit=1 ;;
    --record) record=1 ;;
    --all) all=1 ;;
    *) echo "lint.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.hpp')
if ((fix)); then
  clang-format -i "${files[@]}"
fi
clang-format --dry-run --Werror "${files[@]}"
echo "lint: clang-format clean (${#files[@]} files)"
((format_only)) && exit 0

tree=${SHARDSCOPE_LINT_TREE:-build-lint}  # its own tree: no precompiled headers
if [[ ! -f $tree/compile_commands.json ]]; then
  cmake -S . -B "$tree" -G Ninja -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DBUILD_TESTING=OFF >/dev/null
fi
cmake --build "$tree" --target shardscope_spec >/dev/null  # generates headers the sources include
mapfile -t units < <(git ls-files '*.cpp' | grep -v '^tests/')
# A unit whose inputs are unchanged since it last passed is skipped (cache outside the clone, and
# the committed record).
opts=(--jobs "${SHARDSCOPE_TIDY_JOBS:-$(getconf _NPROCESSORS_ONLN)}")
((fix)) && opts+=(--fix)
((per_unit)) && opts+=(--group-size 1)
((record)) && opts+=(--write-record .ci/tidy-passed.txt)
if ((all)); then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  opts+=(--cache "$scratch")
else
  opts+=(--record .ci/tidy-passed.txt)
fi
python3 scripts/tidy_cached.py "$tree" "${units[@]}" "${opts[@]}"
echo "lint: clang-tidy clean (${#units[@]} translation units)"
