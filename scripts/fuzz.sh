#!/usr/bin/env bash
# Builds the libFuzzer targets (preset `fuzz`: clang, ASan, UBSan) into build-fuzz/ and runs each
# for $SHARDSCOPE_FUZZ_SECONDS seconds (default 60), two at a time. Fails on any crash, leak,
# UB report, hang or out-of-memory; scripts/test.sh runs it in CI. Needs clang and libFuzzer
# (scripts/setup.sh --tests). Arguments go to ctest (e.g. -R fuzz_events).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(getconf _NPROCESSORS_ONLN)"
count=$(cd build-fuzz && ctest -N -L '^fuzz$' | sed -n 's/^Total Tests: //p')
if [[ ${count:-0} -eq 0 ]]; then
  echo "fuzz.sh: build-fuzz/ registers no fuzz test (see 'cmake --preset fuzz')" >&2
  exit 1
fi
cd build-fuzz
ctest -L '^fuzz$' -j2 --output-on-failure "$@"
