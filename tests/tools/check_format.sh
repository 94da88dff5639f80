#!/usr/bin/env bash
# Fails when a tracked C++ file is not formatted as .clang-format says (fix: scripts/lint.sh --fix).
set -euo pipefail
exec "$1/scripts/lint.sh" --format-only
