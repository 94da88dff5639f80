#!/usr/bin/env bash
# run_fuzzer.sh FUZZER SEEDS WORK: runs one libFuzzer target for $SHARDSCOPE_FUZZ_SECONDS
# (default 60) from the seed corpus SEEDS (read only: new inputs go to WORK/corpus). Exits
# non-zero on any crash, leak, timeout, out-of-memory or sanitizer report; the input that broke
# it is saved under WORK/artifacts/ and named in the output.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3
seconds=${SHARDSCOPE_FUZZ_SECONDS:-60}
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "run_fuzzer.sh: SHARDSCOPE_FUZZ_SECONDS='$seconds' is not a whole number of seconds >= 1" >&2
  exit 2
fi
# The seed of libFuzzer's mutations. CI runs with a fixed one (SHARDSCOPE_FUZZ_SEED, 1 unless set)
# from an empty work corpus, so a CI run explores the same inputs as any other run of the same
# code: it fails on what a change broke, never on a bug that this run happened to reach first
# (outside CI the seed is random unless set, 0 also meaning random: a long hunt for new bugs is
# `SHARDSCOPE_FUZZ_SECONDS=1800 scripts/fuzz.sh`). A fixed seed starts from an empty work corpus,
# as a fresh clone does.
seed=${SHARDSCOPE_FUZZ_SEED:-}
if [[ -z $seed ]]; then
  if [[ ${CI:-} == true ]]; then seed=1; else seed=0; fi
fi
if ! [[ $seed =~ ^[0-9]+$ ]]; then
  echo "run_fuzzer.sh: SHARDSCOPE_FUZZ_SEED='$seed' is not a whole number (0 = random)" >&2
  exit 2
fi
if ((seed != 0)); then
  rm -rf "$work/corpus"
  # What else varied from process to process is pinned too: Qt's per-process hash seed (a
  # QHash's bucket order is instrumented code) and, in fuzz_support.h, the length of the input
  # file's path. CI's fuzz_unittrace reached a bug in 20 s that the same seed missed here in 60
  # (their coverage differed from the first input). Pinned, two runs of a seed here are the same
  # for their first ~1,800 inputs (fuzz_unittrace), then part where libFuzzer records a compared
  # value that differs per process; before, they differed from the start.
  export QT_HASH_SEED=0
fi
mkdir -p "$work/corpus" "$work/artifacts"
name=$(basename "$fuzzer")
# The target's dictionary (the keys and values its parser looks for), beside this script.
dict=()
if [[ -f "$(dirname "$0")/${name#fuzz_}.dict" ]]; then dict=(-dict="$(dirname "$0")/${name#fuzz_}.dict"); fi
status=0
# -timeout: one input may take 30 s (a hang fails; a 1-megapixel image takes ~1 s under ASan
# here, and a CI machine running two fuzzers beside other jobs can be many times slower);
# -rss_limit_mb/-malloc_limit_mb: an input that makes a parser allocate more than 2 GiB fails as
# "out-of-memory" (an unbounded allocation).
# The output is also kept in WORK/fuzzer.log: scripts/fuzz.sh repeats its verdict at the end.
"$fuzzer" -seed="$seed" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
  -print_final_stats=1 "${dict[@]}" -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" \
  > >(tee "$work/fuzzer.log") 2>&1 || status=$?
if ((status != 0)); then
  echo "run_fuzzer.sh: $name found a bug; the input is in $work/artifacts/." >&2
  echo "  Fix the parser, then copy the input into $seeds/ (a regression file that the" >&2
  echo "  fuzz_replay_${name#fuzz_} unit test replays in the regular build)." >&2
fi
exit "$status"
