#!/usr/bin/env bash
# Configures and builds one of the reduced build trees the README promises, and checks that it
# holds what it should and nothing it must not:
#   trainer-only  shardtrain with Qt disabled (a GPU node); must not link any Qt library
#   no-torch      dashboard, CLI and backend without LibTorch (a laptop); must not link LibTorch
#   cuda          shardtrain without Qt against a CUDA LibTorch (LIBTORCH_DIR) and this machine's
#                 CUDA toolkit: proves the CUDA build compiles and links; its selftest runs on CPU
# Usage: check_alt_build.sh SOURCE_DIR BUILD_ROOT trainer-only|no-torch|cuda [LIBTORCH_DIR]
set -euo pipefail
src=$1 root=$2 mode=$3 libtorch=${4:-}
# Beside BUILD_ROOT, at the same depth (build-alt-no-torch next to build): ccache's base dir makes
# paths relative to the tree, so the compiles this tree shares with BUILD_ROOT hit ccache there.
tree="${root%/}-alt-$mode"
mkdir -p "$tree"
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DSHARDSCOPE_WERROR=ON)
case "$mode" in
  trainer-only)
    args+=(-DSHARDSCOPE_BUILD_BACKEND=OFF -DSHARDSCOPE_BUILD_GUI=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Qt6=ON)
    [[ -n "$libtorch" ]] && args+=("-DSHARDSCOPE_LIBTORCH_DIR=$libtorch")
    targets=(shardtrain) ;;
  no-torch)
    args+=(-DSHARDSCOPE_BUILD_TRAINER=OFF)
    targets=(shardscope shardscope-cli) ;;
  cuda)
    toolkit=${CUDA_HOME:-}
    if [[ -z $toolkit ]]; then
      for candidate in /usr/local/cuda /usr/local/cuda-*; do
        [[ -x $candidate/bin/nvcc ]] && toolkit=$candidate
      done
    fi
    [[ -n $toolkit ]] || { echo "FAILED: cuda: no CUDA toolkit (set CUDA_HOME to the folder holding bin/nvcc)"; exit 1; }
    # TORCH_CUDA_ARCH_LIST: there is no GPU here to detect architectures from.
    args+=(-DSHARDSCOPE_BUILD_BACKEND=OFF -DSHARDSCOPE_BUILD_GUI=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Qt6=ON
           "-DSHARDSCOPE_LIBTORCH_DIR=$libtorch" "-DCUDA_TOOLKIT_ROOT_DIR=$toolkit"
           "-DCUDAToolkit_ROOT=$toolkit" "-DTORCH_CUDA_ARCH_LIST=8.0;9.0")
    targets=(shardtrain) ;;
  *) echo "check_alt_build.sh: unknown mode '$mode' (trainer-only, no-torch or cuda)" >&2; exit 2 ;;
esac
start=$SECONDS
cmake -S "$src" -B "$tree" "${args[@]}" >"$tree/shardscope-configure.log" 2>&1 || {
  cat "$tree/shardscope-configure.log"; echo "FAILED: $mode: configure"; exit 1; }
cmake --build "$tree" -j2 --target "${targets[@]}"
for t in "${targets[@]}"; do
  bin="$tree/bin/$t"
  [[ -x "$bin" ]] || { echo "FAILED: $mode: $bin was not built"; exit 1; }
  libs=$(ldd "$bin")
  if [[ $mode != no-torch ]] && grep -q "libQt6" <<<"$libs"; then
    echo "FAILED: $mode: $t links Qt:"; grep libQt6 <<<"$libs"; exit 1
  fi
  if [[ $mode == no-torch ]] && grep -qE "libtorch|libc10" <<<"$libs"; then
    echo "FAILED: $mode: $t links LibTorch"; exit 1
  fi
  if [[ $mode == cuda ]] && ! grep -q "libtorch_cuda.so" <<<"$libs"; then
    echo "FAILED: cuda: $t does not link libtorch_cuda.so"; exit 1
  fi
  QT_QPA_PLATFORM=offscreen "$bin" --version
done
if [[ $mode != no-torch ]]; then
  OMP_NUM_THREADS=1 "$tree/bin/shardtrain" selftest --world-size 2 >"$tree/shardscope-selftest.log"
  [[ $(grep -c '"ev":"done"' "$tree/shardscope-selftest.log") -eq 2 ]] || { echo "FAILED: selftest"; exit 1; }
fi
echo "ok: $mode build configured, built and ran in $((SECONDS - start)) s"
