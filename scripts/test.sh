#!/usr/bin/env bash
# The test command (README, and what .ci/run calls): installs what is missing (Debian packages,
# test servers, the LibTorch venv and the Python references), builds build/, and runs every CTest
# test with 2 jobs. Exits non-zero on any failure. Safe to run again.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
step() { printf '\n== %s (%s) ==\n' "$1" "$(date +%T)"; }
t0=$SECONDS
step "setup"
scripts/setup.sh --tests --cuda
t1=$SECONDS
step "build"
scripts/build.sh
t2=$SECONDS
step "tests"
if [[ ${CI:-} == true ]]; then
  # CI runs every kind of test: a label with no test means a dependency was not found when build/
  # was configured, and its tests would silently not run.
  for label in unit integration gui reference slow cuda-build; do
    count=$(cd build && ctest -N -L "^${label}\$" | sed -n 's/^Total Tests: //p')
    if [[ ${count:-0} -eq 0 ]]; then
      echo "test.sh: no test has the label '${label}' in build/: a test dependency was missing at" \
        "configure time (see the 'Shardscope:' lines of 'cmake --preset release')" >&2
      exit 1
    fi
  done
fi
# The sanitizer steps (below) run with the full suite (no CTest arguments) and always in CI;
# SHARDSCOPE_SANITIZERS=1 adds them to a subset, =0 leaves them out.
sanitizers=${SHARDSCOPE_SANITIZERS:-$(($# == 0))}
if [[ ${CI:-} == true ]]; then sanitizers=1; fi
prebuild=""
if [[ $sanitizers == 1 ]]; then
  # Their two trees cost about 20 minutes of compiling when ccache is cold (a first run), and the
  # tests leave part of the cores idle while they wait on servers, daemons and timeouts: so both
  # trees build beside the tests at the lowest priority, where a test keeps its share of the CPU.
  # Warm, both builds are ccache hits. fuzz.sh and asan.sh build again (a no-op when this
  # finished), so a failure here is reported there, with its compiler output.
  nice -n 19 bash -c 'source scripts/sanitizer-env.sh
    cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j "$(getconf _NPROCESSORS_ONLN)"
    cmake --preset asan-ci >/dev/null && cmake --build build-asan-ci -j "$(getconf _NPROCESSORS_ONLN)"' \
    >build/sanitizer-trees.log 2>&1 &
  prebuild=$!
  # Interrupted, the builds stop with the script (the shell, cmake and ninja below it).
  kill_tree() {
    local child
    for child in $(pgrep -P "$1" || true); do kill_tree "$child"; done
    kill "$1" 2>/dev/null || true
  }
  trap '[[ -n $prebuild ]] && kill_tree "$prebuild"; true' EXIT
fi
status=0
# Two CTest slots per core: a test holds two per core it keeps busy and one when it mostly
# waits (cmake/ShardscopeTest.cmake), so waiting tests run beside computing ones.
scripts/ctest-costs.sh seed build
(cd build && ctest -j "$(( 2 * $(getconf _NPROCESSORS_ONLN) ))" --output-on-failure --timeout 900 "$@") || status=$?
scripts/ctest-costs.sh keep build
t3=$SECONDS
# The sanitizer steps: libFuzzer on every parser ($SHARDSCOPE_FUZZ_SECONDS each, default 60)
# beside the unit and integration tests under ASan + UBSan (about 7 minutes in all); in CI a
# missing clang or libFuzzer fails their configure step.
if [[ $sanitizers == 1 ]]; then
  pre=$SECONDS
  wait "$prebuild" || echo "test.sh: building the sanitizer trees beside the tests failed" \
    "(build/sanitizer-trees.log); fuzz.sh and asan.sh build them again"
  prebuild=""
  echo "test.sh: the sanitizer trees built beside the tests; $((SECONDS - pre)) s more after them"
  # The fuzzers and the ASan tests run side by side: the ASan tests mostly wait (on PostgreSQL,
  # Slurm, sshd, timeouts: on 2 cores they keep about a third of the CPU busy), and the fuzzers,
  # one per core at nice 10, take what the tests leave. Each fuzzer still runs its full
  # $SHARDSCOPE_FUZZ_SECONDS; the fuzz log is printed after the ASan tests' so neither interleaves.
  fuzz_log=build/fuzz.log
  nice -n 10 scripts/fuzz.sh >"$fuzz_log" 2>&1 &
  fuzz=$!
  prebuild=$fuzz # stopped with the script, like the trees' builds
  step "asan (the fuzzers beside it: $fuzz_log)"
  scripts/asan.sh || status=1
  t4=$SECONDS
  fuzz_status=0
  wait "$fuzz" || fuzz_status=$?
  prebuild=""
  t5=$SECONDS
  step "fuzz (its output)"
  cat "$fuzz_log"
  if ((fuzz_status != 0)); then
    echo "test.sh: scripts/fuzz.sh failed (exit $fuzz_status); its output is above"
    status=1
  fi
  printf '\n== sanitizers: asan %ss, fuzz %ss more after it ==\n' $((t4 - t3)) $((t5 - t4))
fi
t6=$SECONDS
printf '\n== times: setup %ss, build %ss, tests %ss, total %ss ==\n' \
  $((t1 - t0)) $((t2 - t1)) $((t3 - t2)) $((t6 - t0))
if [[ $status != 0 ]]; then
  # Last, so that the end of a long log says why each test failed.
  trees=(build)
  if [[ $sanitizers == 1 ]]; then trees+=(build-asan-ci); fi
  scripts/ctest-failures.sh "${trees[@]}"
fi
exit "$status"
