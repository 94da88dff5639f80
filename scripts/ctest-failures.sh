#!/usr/bin/env bash
# Prints, for each test that failed in the last ctest run of each build tree given, the last
# lines of its output (QtTest's QINFO and PASS lines left out). scripts/test.sh calls it last, so
# the end of a failed CI log says why each test failed, however long the log before it.
# Usage: scripts/ctest-failures.sh BUILD_DIR... (default: build)
set -uo pipefail
lines=${SHARDSCOPE_FAILURE_LINES:-40}
for dir in "${@:-build}"; do
  failed="$dir/Testing/Temporary/LastTestsFailed.log"
  log="$dir/Testing/Temporary/LastTest.log"
  [[ -s $failed && -f $log ]] || continue
  while IFS=: read -r _ name; do
    [[ -n $name ]] || continue
    # LastTestsFailed.log can outlive the run that wrote it: only a failure in LastTest.log counts.
    output=$(awk -v name="$name" '
      $0 ~ /^[0-9]+\/[0-9]+ Testing: / && $3 == name { on = 1; text = ""; next }
      on && index($0, "\"" name "\" end time") == 1 { on = 0; if (failed) printf "%s", text }
      on { text = text $0 "\n"; failed = ($0 ~ /^Test (Failed|Timeout)/) }' "$log")
    [[ -n $output ]] || continue
    printf '\n== failed in %s: %s (its last %s lines) ==\n' "$dir" "$name" "$lines"
    grep -v -E '^(QINFO|PASS) ' <<<"$output" | tail -n "$lines"
  done <"$failed"
done
