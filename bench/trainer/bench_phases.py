#!/usr/bin/env python3
"""What the phase clock costs (`phases` events, docs/trainer.md "Phase timings").

The same 2-rank FULL_SHARD run of a tiny model on the CPU, twice per repeat, in alternating
order: the clock on (the default) and off (SHARDSCOPE_PHASES=0, the peer: no `phases` events,
every clock call returns at once). Each run's figure is the median step time of rank 0's `step`
events after the warm-up steps; the table shows each configuration's median over repeats and the
ratio on / off, with the machine's CPU model and load average. Figures, not a test.

    .venv/bin/python bench/trainer/bench_phases.py --shardtrain build/bin/shardtrain
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "trainer", "shard"))
import ranks  # noqa: E402

WARMUP = 3


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def one_run(shardtrain, work, steps, clock_on):
    config = ranks.setup_experiment(work, {
        "model": {"tiny_hidden_size": 256, "tiny_layers": 4, "tiny_heads": 4},
        "train": {"max_steps": steps, "batch_size": 16, "grad_clip": 1.0},
    })
    env = {} if clock_on else {"SHARDSCOPE_PHASES": "0"}
    run_dir = os.path.join(work, "run")
    codes = ranks.run_ranks(shardtrain, ["train", config], run_dir, 2, extra_env=env)
    if any(codes):
        sys.exit(f"a run failed ({codes}):\n{ranks.log_tail(run_dir, 2)}")
    phases = ranks.events(run_dir, 0, "phases")
    if bool(phases) != clock_on:
        sys.exit(f"clock {'on' if clock_on else 'off'} but {len(phases)} phases events")
    tokens = [e["tokens_per_s"] for e in ranks.events(run_dir, 0, "step")[WARMUP:]]
    # tokens_per_s is one step's tokens over its seconds: the same tokens every step here.
    return 1.0 / statistics.median(tokens)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shardtrain", required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    shardtrain = os.path.abspath(args.shardtrain)
    work = tempfile.mkdtemp(prefix="bench-phases-")
    times = {True: [], False: []}
    try:
        for r in range(args.repeats):
            for on in ((True, False) if r % 2 == 0 else (False, True)):
                times[on].append(one_run(shardtrain, os.path.join(work, str(on)), args.steps, on))
                print(f"repeat {r + 1}: clock {'on ' if on else 'off'} "
                      f"{times[on][-1] * 1e3:.2f} (relative step time)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(f"\nmachine: {cpu_model()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}")
    print("2 ranks FULL_SHARD, tiny model (hidden 256, 4 layers), batch 16 x 32 tokens, "
          f"{args.steps} steps ({WARMUP} warm-up), {args.repeats} repeats, medians")
    print(f"{'clock':<8}{'step time (1 / tokens/s, x1e3)':>32}")
    print(f"{'on':<8}{on * 1e3:>32.3f}")
    print(f"{'off':<8}{off * 1e3:>32.3f}")
    print(f"ratio on / off: {on / off:.4f}  (overhead {100 * (on / off - 1):+.2f}%)")
    print(json.dumps({"on": on, "off": off, "ratio": on / off}))


if __name__ == "__main__":
    main()
