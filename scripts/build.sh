#!/usr/bin/env bash
# Configures and builds the default tree build/ (preset "release"); used by run.sh and test.sh.
# Installs nothing: run scripts/setup.sh first.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [[ ! -f build/CMakeCache.txt ]]; then
  cmake --preset release
fi
cmake --build build -j "$(getconf _NPROCESSORS_ONLN)"
