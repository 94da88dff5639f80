#!/usr/bin/env python3
"""Autotune benchmark: `shardscope-cli autotune` against the experiment's own (default)
configuration and against the best of a fixed grid of 36 distinct configurations over the same
fields, all on the real `shardtrain` (2 local ranks on CPU, Gloo) and one ~10.5M-parameter model.
A benchmark, not a test: it prints figures and asserts nothing.

  .venv/bin/python bench/autotune/bench_autotune.py --cli build/bin/shardscope-cli
      [--rounds 3] [--steps 6] [--warmup 3] [--work DIR]

What it does, in one script on one machine:
1. writes the model's experiment and random token data into a work folder;
2. runs every grid configuration `--rounds` times, round by round (so a slow minute of the
   machine falls on every configuration alike), each a `shardscope-cli run` of warm-up +
   measured steps; a configuration's figure is the median over rounds of each run's median
   tokens/s per rank over its measured steps (rank 0's `step` events: the value autotune
   maximises);
3. runs `shardscope-cli autotune` with the same steps and counts the candidates it started;
4. measures the default, autotune's winner and the grid's best `--rounds` times more,
   alternating, and prints their ratios.
"""
import argparse
import csv
import io
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import random

EXPERIMENT = """[experiment]
name = "bench"

[model]
arch = "tiny"
tiny_vocab_size = 4096
tiny_hidden_size = 256
tiny_layers = 8
tiny_heads = 8

[data]
train_path = "data/train.jsonl"
format = "tokens"
seq_len = 64

[train]
max_steps = 50
batch_size = 8
lr = 1e-3
lr_warmup_steps = 2
ckpt_at_end = false

[shard]
strategy = "FULL_SHARD"
device = "cpu"

[launch]
kind = "local"
nproc_per_node = 2
threads_per_rank = 1
"""

RANKS = 2  # [launch] nproc_per_node above

# The grid: every strategy valid on one node x activation checkpointing x every micro-batch that
# divides the per-rank batch (8 / 2 ranks) x two wrap policies (a unit per block, units by size;
# "none" cannot checkpoint) = 36 distinct configurations; the other searched fields keep the
# defaults.
GRID_FIELDS = {
    "shard.strategy": ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"],
    "shard.activation_checkpointing": ["true", "false"],
    "train.micro_batch_size": ["1", "2", "4"],
    "shard.wrap_policy": ["block", "size"],
}


def cpu_model():
    with open("/proc/cpuinfo") as f:
        names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    return names[0] if names else platform.machine()


class Bench:
    def __init__(self, args):
        self.cli = os.path.abspath(args.cli)
        self.work = os.path.abspath(args.work)
        self.db = os.path.join(self.work, "runs.db")
        self.exp = os.path.join(self.work, "exp.toml")
        self.steps = args.steps
        self.warmup = args.warmup
        self.runs_started = 0

    def prepare(self):
        os.makedirs(os.path.join(self.work, "data"), exist_ok=True)
        with open(self.exp, "w") as f:
            f.write(EXPERIMENT)
        rng = random.Random(1)
        with open(os.path.join(self.work, "data", "train.jsonl"), "w") as f:
            for _ in range(512):
                f.write(json.dumps({"input_ids": [rng.randrange(4096) for _ in range(64)]}) + "\n")

    def call(self, args, timeout=900):
        r = subprocess.run([self.cli, "--db", self.db] + args, capture_output=True, text=True,
                           timeout=timeout)
        return r

    def measure(self, overrides):
        """One run of `overrides`: the median tokens/s per rank over its measured steps."""
        sets = []
        for o in overrides + [f"train.max_steps={self.warmup + self.steps}"]:
            sets += ["--set", o]
        r = self.call(["--json", "run", self.exp] + sets)
        self.runs_started += 1
        if r.returncode != 0:
            return None, (r.stdout + r.stderr).strip().splitlines()[-1:]
        run_id = None
        for line in r.stdout.splitlines():
            try:
                o = json.loads(line)
            except ValueError:
                continue
            if isinstance(o, dict) and "id" in o:
                run_id = o["id"]
            if isinstance(o, dict) and "run_id" in o:
                run_id = o["run_id"]
        if run_id is None:
            return None, ["no run id in: " + r.stdout[-300:]]
        return self.tokens_per_s(run_id), None

    def tokens_per_s(self, run_id):
        r = self.call(["export", str(run_id)])
        values = []
        for row in csv.DictReader(io.StringIO(r.stdout)):
            if row["key"] == "tokens_per_s" and row["rank"] == "0" and \
                    int(row["step"]) > self.warmup:
                values.append(float(row["value"]))
        # A `step` event's tokens/s counts every rank's tokens; autotune's objective is per rank.
        return statistics.median(values) / RANKS if values else None


def grid_configs():
    keys = list(GRID_FIELDS)
    for values in itertools.product(*(GRID_FIELDS[k] for k in keys)):
        yield tuple(f"{k}={v}" for k, v in zip(keys, values))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--work", default="/tmp/bench-autotune")
    ap.add_argument("--limit", type=int, default=0, help="only the first N grid configurations "
                    "(a smoke test of this script; the figures need the whole grid)")
    args = ap.parse_args()
    if os.path.exists(os.path.join(args.work, "runs.db")):
        os.remove(os.path.join(args.work, "runs.db"))
    b = Bench(args)
    b.prepare()
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs; 2 ranks on CPU (Gloo), "
          f"{args.warmup} warm-up + {args.steps} measured steps a run, {args.rounds} rounds")
    sys.stdout.flush()

    t0 = time.time()
    grid = list(grid_configs())
    if args.limit:
        grid = grid[:args.limit]
    samples = {c: [] for c in grid}
    for rnd in range(args.rounds):
        for c in grid:
            v, err = b.measure(list(c))
            if v is not None:
                samples[c].append(v)
            elif rnd == 0:
                print(f"  {' '.join(c)}: failed: {err}")
    grid_runs = b.runs_started
    medians = {c: statistics.median(v) for c, v in samples.items() if v}
    ranked = sorted(medians, key=medians.get, reverse=True)
    print(f"\ngrid: {len(grid)} configurations x {args.rounds} rounds = {grid_runs} runs, "
          f"{time.time() - t0:.0f} s")
    print("  tokens/s per rank (median of rounds)  configuration")
    for c in ranked:
        spread = f"{min(samples[c]):.0f}-{max(samples[c]):.0f}"
        print(f"  {medians[c]:9.1f} ({spread:>11})  {' '.join(s.split('.', 1)[1] for s in c)}")
    best = ranked[0]

    t1 = time.time()
    winner_path = os.path.join(b.work, "winner.toml")
    r = b.call(["--json", "autotune", b.exp, "--steps", str(args.steps), "--warmup",
                str(args.warmup), "--budget-minutes", "0", "--out", winner_path], timeout=3600)
    if r.returncode != 0:
        print("autotune failed:", r.stdout[-2000:], r.stderr[-2000:])
        return 1
    tune = json.loads(r.stdout.strip().splitlines()[-1])
    candidates = tune["candidates"]
    started = [c for c in candidates if c.get("run_id") is not None]
    winner = next(c for c in candidates if c["number"] == tune["winner"])
    winner_sets = [f"{k}={v}" if not isinstance(v, bool) else f"{k}={str(v).lower()}"
                   for k, v in winner["settings"].items()]
    print(f"\nautotune: {len(candidates)} candidates, {len(started)} runs started "
          f"(the grid: {grid_runs} runs; a third is {grid_runs // 3}), {time.time() - t1:.0f} s")
    for c in candidates:
        tps = c.get("tokens_per_s")
        print(f"  #{c['number']:2d} {c['status']:10s} "
              f"{(f'{tps:9.1f}' if isinstance(tps, (int, float)) else '        -')}  "
              + " ".join(f"{k.split('.', 1)[1]}={v}" for k, v in c["settings"].items()))
    print("  winner: #%d %s" % (winner["number"], " ".join(winner_sets)))
    # How early the search came within 10% of the grid's best (by its own measurement).
    for i, c in enumerate(started):
        tps = c.get("tokens_per_s")
        if isinstance(tps, (int, float)) and tps >= 0.9 * medians[best]:
            print(f"  first candidate within 10% of the grid's best: #{c['number']}, "
                  f"the {i + 1}th run started")
            break
    else:
        print("  no candidate came within 10% of the grid's best")

    # Head to head: the default, the winner and the grid's best, alternating.
    contenders = {"default": [], "autotune winner": winner_sets, "grid best": list(best)}
    head = {name: [] for name in contenders}
    for _ in range(args.rounds):
        for name, sets in contenders.items():
            v, _ = b.measure(sets)
            if v is not None:
                head[name].append(v)
    print("\nhead to head (median of %d alternating runs, tokens/s per rank):" % args.rounds)
    med = {n: statistics.median(v) for n, v in head.items() if v}
    for n, v in med.items():
        print(f"  {n:16s} {v:9.1f}  ({' '.join(f'{x:.0f}' for x in head[n])})")
    if all(n in med for n in contenders):
        print(f"  winner / default   {med['autotune winner'] / med['default']:.3f}")
        print(f"  winner / grid best {med['autotune winner'] / med['grid best']:.3f}")
        print(f"  runs: autotune {len(started)} vs grid {grid_runs} "
              f"({len(started) / grid_runs:.2f} of the grid's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
