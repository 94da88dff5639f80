#!/usr/bin/env bash
# The whole test suite under ASan + UBSan: builds the `asan` preset (-O1, everything,
# LibTorch included) into build-asan/ and runs every test. Long (the trainer's tests run about
# 10x slower): not part of CI; run it before a release or after touching memory-heavy code.
# Arguments go to ctest (e.g. -L unit, -R tst_flat_param).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=scripts/sanitizer-env.sh
source scripts/sanitizer-env.sh
cmake --preset asan >/dev/null
cmake --build build-asan -j "$(getconf _NPROCESSORS_ONLN)"
cd build-asan
ctest -j "$(( 2 * $(getconf _NPROCESSORS_ONLN) ))" --output-on-failure --timeout 3600 "$@"
