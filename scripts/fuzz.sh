#!/usr/bin/env bash
# Builds the libFuzzer targets (preset `fuzz`: clang, ASan, UBSan) into build-fuzz/ and runs each
# for $SHARDSCOPE_FUZZ_SECONDS seconds (default 60), one per core at a time. Fails on any crash, leak,
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
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
status=0
ctest -L '^fuzz$' -j "$(( 2 * $(getconf _NPROCESSORS_ONLN) ))" --output-on-failure "$@" || status=$?
# A failure's verdict and input, repeated at the end: a CI log that keeps only its tail still
# says what broke and holds the input (base64; inputs are at most 4 KiB) to replay it here.
if ((status != 0)); then
  while IFS= read -r -d '' input; do
    work=$(dirname "$(dirname "$input")")
    echo "fuzz.sh: $(basename "$work"): $(grep -m1 -E 'ERROR|out-of-memory|timeout|deadly signal|broken' \
      "$work/fuzzer.log" 2>/dev/null || echo 'see its output above')"
    echo "fuzz.sh: input $input ($(stat -c %s "$input") bytes), base64:"
    base64 -w0 "$input" && echo
  done < <(find fuzz-work -path '*/artifacts/*' -type f -newer "$stamp" -print0)
fi
exit "$status"
