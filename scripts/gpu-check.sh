#!/usr/bin/env bash
# The GPU check of shardtrain (bench/gpu/README.md), in two calls that each fit a few minutes, on
# a machine with a CUDA torch in Python, CMake, Ninja and nvcc, but no Debian dev packages and no
# internet (DIR comes from scripts/pack-trainer-deps.sh on a Debian machine):
#   scripts/gpu-check.sh build --deps DIR --out OUT [--python PY] [--build-dir TREE]
#       configures the trainer-only preset against that torch and builds shardtrain into TREE
#       (default build-gpu/), logging to OUT/gpu-build.log
#   scripts/gpu-check.sh run --out OUT [--deps DIR] [--shardtrain PATH] [--device cuda|cpu]
#                            [--quick] [--multi] [--python PY] [--budget-s S] [-- gpu_check.py options]
#       runs bench/gpu/gpu_check.py: OUT/gpu-check.json and OUT/gpu-check.log; exit 0 when every
#       check that ran passed. --multi adds the multi-GPU proof (docs/trainer.md) when the machine
#       has several GPUs ("1 GPU: skipped" otherwise). CI runs
#       `run --device cpu --quick --shardtrain build/bin/shardtrain`.
# Safe to run again: build reuses its tree, run replaces OUT's files.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() {
  sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}
die() {
  echo "gpu-check: $*" >&2
  exit 2
}

verb=${1:-}
[[ $verb == build || $verb == run ]] || { usage; die "first argument: build or run, not '${verb}'"; }
shift
deps="" out="" shardtrain="" device=cuda quick=0 python=python3 tree="$root/build-gpu"
budget="" multi=0 extra=()
need() { [[ $# -ge 2 && -n $2 && $2 != --* ]] || die "$1 needs a value (see scripts/gpu-check.sh --help)"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --deps) need "$@"; deps=$2; shift 2 ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --shardtrain) need "$@"; shardtrain=$2; shift 2 ;;
    --device) need "$@"; device=$2; shift 2 ;;
    --python) need "$@"; python=$2; shift 2 ;;
    --build-dir) need "$@"; tree=$2; shift 2 ;;
    --budget-s) need "$@"; budget=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --multi) multi=1; shift ;;
    --help | -h) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage; die "unknown option '$1'" ;;
  esac
done
[[ -n $out ]] || die "--out OUT is required (the folder for the logs and gpu-check.json)"
[[ $device == cuda || $device == cpu ]] || die "--device $device: use cuda or cpu"
[[ -z $budget || $budget =~ ^[0-9]+$ ]] || die "--budget-s $budget: give whole seconds"
command -v "$python" >/dev/null || die "--python $python: not found (a Python with torch; on the GPU machine python3)"
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [[ -n $deps || $verb == build ]]; then
  [[ -n $deps ]] || die "build needs --deps DIR (made by scripts/pack-trainer-deps.sh DIR)"
  [[ -f $deps/shardscope-deps.txt ]] ||
    die "--deps $deps: no shardscope-deps.txt there: run scripts/pack-trainer-deps.sh $deps on a Debian 12 machine with the project's packages (scripts/setup.sh) and bring the folder along"
  deps=$(cd "$deps" && pwd)
fi

cuda_toolkit() {
  local candidate
  if [[ -n ${CUDA_HOME:-} && -x $CUDA_HOME/bin/nvcc ]]; then echo "$CUDA_HOME"; return; fi
  for candidate in /usr/local/cuda /usr/local/cuda-*; do
    if [[ -x $candidate/bin/nvcc ]]; then echo "$candidate"; return; fi
  done
  # nvcc on PATH may be a link (/usr/local/bin/nvcc): the toolkit is where it points.
  if command -v nvcc >/dev/null; then dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")"; fi
}

build() {
  local torch_dir toolkit log start
  torch_dir=$("$python" -W ignore -c 'import torch,os;print(os.path.dirname(torch.__file__))') ||
    die "--python $python cannot import torch: pass a Python whose torch has CUDA"
  "$python" -W ignore -c 'import sys,torch;sys.exit(0 if torch.version.cuda else 1)' ||
    die "the torch at $torch_dir is a CPU build: the GPU check needs a CUDA torch (--python PY)"
  toolkit=$(cuda_toolkit)
  [[ -n $toolkit ]] || die "no CUDA toolkit: set CUDA_HOME to the folder holding bin/nvcc"
  log="$out/gpu-build.log"
  start=$SECONDS
  echo "gpu-check: building shardtrain in $tree against $torch_dir (CUDA toolkit $toolkit); log $log"
  # Warnings stay warnings here: another compiler than CI's must not stop the check.
  # TORCH_CUDA_ARCH_LIST: Hopper (H100, H200); the GPU is not probed.
  if ! (cd "$root" && TORCH_CUDA_ARCH_LIST=9.0 CUDACXX="$toolkit/bin/nvcc" \
      cmake --preset trainer-only -B "$tree" -DSHARDSCOPE_WERROR=OFF -DBUILD_TESTING=OFF \
        "-DSHARDSCOPE_LIBTORCH_DIR=$torch_dir" "-DSHARDSCOPE_DEPS_DIR=$deps" \
        "-DCUDA_TOOLKIT_ROOT_DIR=$toolkit" "-DCUDAToolkit_ROOT=$toolkit" \
        "-DTORCH_CUDA_ARCH_LIST=9.0") >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "gpu-check: FAILED: configure (full log: $log)"
    exit 1
  fi
  if ! cmake --build "$tree" -j "$(nproc)" --target shardtrain >>"$log" 2>&1; then
    grep -E "error|Error" "$log" | head -n 30
    tail -n 20 "$log"
    echo "gpu-check: FAILED: build (full log: $log)"
    exit 1
  fi
  "$tree/bin/shardtrain" --version
  if ! ldd "$tree/bin/shardtrain" | grep -q libtorch_cuda.so; then
    echo "gpu-check: FAILED: $tree/bin/shardtrain does not link libtorch_cuda.so"
    exit 1
  fi
  echo "gpu-check: built $tree/bin/shardtrain in $((SECONDS - start)) s"
}

run() {
  local args=()
  shardtrain=${shardtrain:-$tree/bin/shardtrain}
  [[ -x $shardtrain ]] ||
    die "--shardtrain $shardtrain: no such executable: run scripts/gpu-check.sh build first, or pass --shardtrain PATH"
  args=(--shardtrain "$shardtrain" --out "$out" --device "$device" --python "$(command -v "$python")")
  ((quick)) && args+=(--quick)
  ((multi)) && args+=(--multi)
  [[ -n $budget ]] && args+=(--budget-s "$budget")
  # gpu_check.py keeps to its budget (230 s by default); this limit only catches a hang.
  timeout --kill-after=10 "${budget_outer:-300}" \
    "$python" "$root/bench/gpu/gpu_check.py" "${args[@]}" "${extra[@]}"
}

budget_outer=$((${budget:-230} + 60))
"$verb"
