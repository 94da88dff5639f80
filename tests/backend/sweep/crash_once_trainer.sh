#!/bin/sh
# A one-rank stand-in trainer for the Slurm retry test (tst_sweep_slurm): protocol-v1 events on
# stdout, its arguments on stderr. Steps 1..5; after step 2 a `ckpt` event of kind sharded
# (ckpt/step-000002). While the file $CRASH_ONCE_MARKER does not exist it creates it and dies
# after step 3 (exit 1, no `done`). Given `--resume DIR/ckpt/step-N` it continues after step N.
echo "args: $*" >&2
seq=0
emit() {
  printf '{"v":1,"ev":"%s","rank":0,"seq":%s,"t":%s%s}\n' "$1" "$seq" "$(date +%s)" "$2"
  seq=$((seq + 1))
}
resume=
start=0
while [ $# -gt 0 ]; do
  if [ "$1" = --resume ]; then
    resume=$2
    start=$(echo "${2##*step-}" | sed 's/^0*//')
  fi
  shift
done
start=${start:-0}
if [ -n "$resume" ]; then
  emit log ",\"level\":\"info\",\"message\":\"resumed from $resume at step $start\""
fi
i=$((start + 1))
while [ "$i" -le 5 ]; do
  emit step ",\"step\":$i,\"loss\":$i.5,\"lr\":0.001,\"grad_norm\":1,\"tokens_per_s\":100,\"mfu\":0.1,\"comm_bytes\":{\"all_gather\":0,\"reduce_scatter\":0}"
  if [ "$i" -eq 2 ]; then
    mkdir -p ckpt/step-000002
    emit ckpt ',"step":2,"path":"ckpt/step-000002","kind":"sharded"'
  fi
  if [ "$i" -eq 3 ] && [ ! -e "$CRASH_ONCE_MARKER" ]; then
    touch "$CRASH_ONCE_MARKER"
    echo "dies after step 3" >&2
    exit 1
  fi
  i=$((i + 1))
done
emit done ',"status":"complete","objective":0.5,"steps":5'
