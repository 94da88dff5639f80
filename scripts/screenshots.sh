#!/usr/bin/env bash
# Regenerates the README's pictures, docs/images/{compare,plots,runs,builder,hosts}.png: runs the
# main job's demo headless (scripts/demo.sh: the demo sweep, examples/demo-sweep.toml, into a
# fresh run log, then `shardscope --screenshot`) and copies its panels, shrunk to a 256-colour
# palette with Pillow from the project venv when it has it (each well under 300 KB).
# Needs a build (scripts/build.sh). Takes about as long as the demo sweep (2-3 minutes).
#   SHARDSCOPE_BIN (default build/bin), SHARDSCOPE_SCREENSHOT_SIZE (default 1600x1000).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin=${SHARDSCOPE_BIN:-$root/build/bin}
size=${SHARDSCOPE_SCREENSHOT_SIZE:-1600x1000}
out="$root/docs/images"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

SHARDSCOPE_BIN="$bin" SHARDSCOPE_DEMO_HEADLESS=1 SHARDSCOPE_DEMO_DB="$work/runs.db" \
  SHARDSCOPE_DEMO_SHOTS="$work/shots" "$root/scripts/demo.sh" >"$work/demo.log" 2>&1 || {
  cat "$work/demo.log" >&2
  exit 1
}
if [[ $size != 1600x1000 ]]; then
  "$bin/shardscope" --screenshot "$work/shots" --db "$work/runs.db" --size "$size" >/dev/null
fi

mkdir -p "$out"
python="$root/.venv/bin/python3"
for panel in compare plots runs builder hosts; do
  src="$work/shots/$panel.png"
  [[ -f $src ]] || { echo "screenshots.sh: the demo wrote no $panel.png" >&2; exit 1; }
  if [[ -x $python ]] && "$python" -c 'import PIL' 2>/dev/null; then
    "$python" - "$src" "$out/$panel.png" <<'PY'
import sys
from PIL import Image
image = Image.open(sys.argv[1]).convert("RGB")
image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
    sys.argv[2], optimize=True)
PY
  else
    cp "$src" "$out/$panel.png"
  fi
  echo "$out/$panel.png: $(($(stat -c %s "$out/$panel.png") / 1024)) KB"
done
