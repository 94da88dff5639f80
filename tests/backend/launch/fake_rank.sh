#!/bin/sh
# A stand-in trainer for the SSH and Slurm launcher tests: protocol-v1 event lines on stdout, its
# arguments and environment on stderr. FAKE_STEPS steps of FAKE_STEP_S seconds each; SIGTERM ends
# it at the next step boundary with `done` status stopped and exit code 0; FAKE_EXIT sets the
# exit code of a normal end.
rank=${RANK:-${SLURM_PROCID:-0}}
seq=0
emit() {
  printf '{"v":1,"ev":"%s","rank":%s,"seq":%s,"t":%s%s}\n' "$1" "$rank" "$seq" "$(date +%s)" "$2"
  seq=$((seq + 1))
}
stopped=0
trap 'stopped=1' TERM
echo "args: $*" >&2
env | sort | sed 's/^/env /' >&2
emit hello ",\"world_size\":${WORLD_SIZE:-${SLURM_NTASKS:-1}}"
i=1
while [ "$i" -le "${FAKE_STEPS:-5}" ]; do
  sleep "${FAKE_STEP_S:-0.05}"
  if [ "$stopped" = 1 ]; then
    emit done ',"status":"stopped","steps":'$((i - 1))
    exit 0
  fi
  emit step ",\"step\":$i,\"loss\":1.5"
  i=$((i + 1))
done
emit done ',"status":"complete","steps":'"${FAKE_STEPS:-5}"
exit "${FAKE_EXIT:-0}"
