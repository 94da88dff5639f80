#!/usr/bin/env bash
# Times the README's two commands as a newcomer meets them: a fresh clone of HEAD in a new folder,
# then `scripts/run.sh` (the main job, headless), then `scripts/test.sh` (every test, as CI runs it),
# and prints one line per step with its seconds and the machine's CPU. Anyone can rerun it.
#   scripts/time-commands.sh          warm: this machine's ccache, clang-tidy, venv and pip caches
#   scripts/time-commands.sh --cold   cold: empty ccache, clang-tidy, venv and pip caches (Debian
#                                     packages stay installed: apt is the one cache it cannot empty)
# Options: --test-only (skip run.sh, as CI does), --run-only (skip test.sh),
#          --keep (keep the clone and its caches),
#          --out FILE (also append the lines to FILE). Exits non-zero when a command fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cold=0 test_only=0 run_only=0 keep=0 out=""
while (($#)); do
  case "$1" in
    --cold) cold=1 ;;
    --test-only) test_only=1 ;;
    --run-only) run_only=1 ;;
    --keep) keep=1 ;;
    --out) out=$2; shift ;;
    *) echo "time-commands.sh: unknown option '$1' (--cold, --test-only, --run-only, --keep, --out FILE)" >&2; exit 2 ;;
  esac
  shift
done
work=$(mktemp -d /tmp/shardscope-time.XXXXXX)
cleanup() { if ((keep)); then echo "kept: $work"; else rm -rf "$work"; fi; }
trap cleanup EXIT
git clone -q --no-hardlinks "$root" "$work/clone"
if ((cold)); then
  export CCACHE_DIR="$work/ccache" SHARDSCOPE_TIDY_CACHE="$work/tidy" PIP_CACHE_DIR="$work/pip" \
    SHARDSCOPE_VENV_CACHE="$work/venvs"
fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mode=$([[ $cold == 1 ]] && echo cold || echo warm)
say() {
  local line="$(date +%F) $mode, $(getconf _NPROCESSORS_ONLN) cores ($cpu), $(git -C "$work/clone" rev-parse --short HEAD): $*"
  echo "$line"
  if [[ -n $out ]]; then echo "$line" >>"$out"; fi
}
status=0
cd "$work/clone"
if ((!test_only)); then
  start=$SECONDS
  # No display: the main job's headless fallback (the sweep in the terminal, the panels as PNGs).
  env -u DISPLAY -u WAYLAND_DISPLAY scripts/run.sh >"$work/run.log" 2>&1 || status=$?
  say "scripts/run.sh $((SECONDS - start)) s (exit $status; log $work/run.log)"
fi
((run_only)) && exit "$status"
start=$SECONDS
test_status=0
CI=true scripts/test.sh >"$work/test.log" 2>&1 || test_status=$?
say "scripts/test.sh $((SECONDS - start)) s (exit $test_status; log $work/test.log)"
# test.sh's own step times: setup, build, tests, and the sanitizer steps.
grep -E '^== (times|sanitizers):' "$work/test.log" | while read -r line; do say "  $line"; done
grep -E '^[0-9]+% tests passed' "$work/test.log" | while read -r line; do say "  $line"; done
if ((test_status != 0)); then status=$test_status; keep=1; fi
exit "$status"
