#!/usr/bin/env bash
# CI's sanitizer run: builds the `asan-ci` preset (-O1 as ASan advises, ASan + UBSan, no LibTorch, no GUI) into
# build-asan-ci/ and runs its `unit` and `integration` tests (those that need no LibTorch: the
# preset does not build the trainer). Any ASan, LeakSanitizer or UBSan report fails the test
# that hit it. scripts/asan-all.sh runs the whole suite instead. Arguments go to ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=scripts/sanitizer-env.sh
source scripts/sanitizer-env.sh
cmake --preset asan-ci >/dev/null
cmake --build build-asan-ci -j "$(getconf _NPROCESSORS_ONLN)"
cd build-asan-ci
for label in unit integration; do
  count=$(ctest -N -L "^${label}\$" | sed -n 's/^Total Tests: //p')
  if [[ ${count:-0} -eq 0 ]]; then
    echo "asan.sh: build-asan-ci/ registers no '${label}' test: a test dependency was missing" \
      "at configure time (see 'cmake --preset asan-ci')" >&2
    exit 1
  fi
done
"$root/scripts/ctest-costs.sh" seed "$root/build-asan-ci"
status=0
ctest -L '^(unit|integration)$' -j "$(( 2 * $(getconf _NPROCESSORS_ONLN) ))" --output-on-failure --timeout 900 "$@" || status=$?
"$root/scripts/ctest-costs.sh" keep "$root/build-asan-ci"
exit "$status"
