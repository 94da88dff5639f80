#!/usr/bin/env bash
# Configures and builds the default tree build/ (preset "release"); used by run.sh and test.sh.
# Usage: scripts/build.sh [TARGET...]: only those targets (run.sh: the three programs), else all.
# Installs nothing: run scripts/setup.sh first. It configures every time (about 15 s of CPU): the
# tests a tree registers depend on what setup.sh installed (the reference venv, sshd, Slurm, the
# CUDA LibTorch), so a tree configured by run.sh before test.sh installed them must see them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cmake --preset release >/dev/null
targets=()
(($#)) && targets=(--target "$@")
cmake --build build -j "$(getconf _NPROCESSORS_ONLN)" "${targets[@]}"
