"""The straggler named (`shardscope-cli why`): a real 2-rank FULL_SHARD run on the CPU whose rank
is slowed from outside by this script (SIGSTOP and SIGCONT at a duty cycle: stopped 60 ms of every
100 ms), never by a hook in the trainer. `why RUN_DIR --json` must name the slowed rank as the
slowest on most steps, and say the other waited for it. Done twice, slowing rank 1 and then rank
0, so a verdict that always names the same rank fails.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

STEPS = 10


def slow_down(proc, stop):
    """Stops `proc` 60 ms of every 100 ms until `stop` is set or it exits."""
    while not stop.is_set() and proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(0.06)
            os.kill(proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        time.sleep(0.04)


def one_case(args, config, slowed):
    run_dir = ranks.fresh_dir(os.path.join(args.work, f"slow-rank-{slowed}"))
    procs = ranks.start_ranks(args.shardtrain, ["train", config], run_dir, 2)
    stop = threading.Event()
    slower = threading.Thread(target=slow_down, args=(procs[slowed], stop))
    slower.start()
    try:
        codes = ranks.wait_ranks(procs, timeout=300)
    finally:
        stop.set()
        slower.join()
        if procs[slowed].poll() is None:
            os.kill(procs[slowed].pid, signal.SIGCONT)
    check(codes == [0, 0], f"exit codes {codes}\n{ranks.log_tail(run_dir, 2)}")
    out = subprocess.run([args.cli, "why", run_dir, "--json"], capture_output=True, text=True,
                         timeout=60)
    check(out.returncode == 0, f"why exited {out.returncode}: {out.stderr}")
    verdict = json.loads(out.stdout)
    print(f"rank {slowed} slowed: {verdict['verdict']}")
    check(verdict["steps"] == STEPS, f"{verdict['steps']} steps in the verdict, not {STEPS}")
    slowest = verdict.get("slowest", {})
    check(slowest.get("rank") == slowed, f"the verdict names rank {slowest.get('rank')}, "
          f"not the slowed rank {slowed}: {verdict['verdict']}")
    check(slowest["share_of_steps"] >= 0.7,
          f"rank {slowed} the slowest on only {slowest['share_of_steps']:.0%} of steps")
    check(verdict["verdict"].startswith(f"rank {slowed} was the slowest"), verdict["verdict"])
    check(slowest["others_wait_share"] > 0.2,
          f"the other rank waited only {slowest['others_wait_share']:.0%} of each step")
    # The text output says the same.
    text = subprocess.run([args.cli, "why", run_dir], capture_output=True, text=True, timeout=60)
    check(text.returncode == 0 and f"rank {slowed} was the slowest" in text.stdout, text.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardtrain", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    config = ranks.setup_experiment(args.work, {
        "model": {"tiny_hidden_size": 256, "tiny_layers": 4, "tiny_heads": 4},
        "train": {"max_steps": STEPS, "batch_size": 16},
    })
    one_case(args, config, 1)
    one_case(args, config, 0)


if __name__ == "__main__":
    ranks.main_guard(main)
