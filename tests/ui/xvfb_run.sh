#!/usr/bin/env bash
# xvfb_run.sh TEST [ARGS...]: runs a GUI test on a real X server (Xvfb, a fresh display per run
# through xvfb-run) with Qt's xcb platform, so its windows are mapped, focused and painted as on
# a desktop. Fails when Xvfb is missing instead of falling back to the offscreen platform:
# scripts/setup.sh --tests installs it.
set -euo pipefail
if ! command -v xvfb-run >/dev/null || ! command -v Xvfb >/dev/null || ! command -v xauth >/dev/null; then
  echo "xvfb_run.sh: Xvfb, xvfb-run or xauth is missing; scripts/setup.sh --tests installs them" \
    "(Debian packages xvfb and xauth)" >&2
  exit 1
fi
export QT_QPA_PLATFORM=xcb
exec xvfb-run -a -s "-screen 0 1920x1200x24 -nolisten tcp" "$@"
