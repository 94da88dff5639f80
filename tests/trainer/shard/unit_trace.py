"""Sampled per-unit traces (`[trace]`, docs/trainer.md): 2 FULL_SHARD ranks on the CPU.

  --case sampled: trace.every_n_steps = 2 over 4 steps. Each rank writes trace/rank-R.jsonl in
      its run directory holding steps 2 and 4 only; in each of them every unit has, on both
      ranks, its forward all-gather issued then waited (the wait's done_ms after its ms), a
      forward compute stretch and a backward one, and every unit that trains a reduce-scatter
      issued with its bytes and then waited; every time is on the step's clock (>= 0, ends after
      starts, within the step); the compute stretches of a rank do not overlap one another.
      The same run with the default every_n_steps = 0 writes no trace/.
  --case bounded: trace.every_n_steps = 1 and max_mib = 1 on a 24-layer tiny model over enough
      steps to write several MiB: each file stops near 1 MiB (its last record says why), the run
      still completes, and each rank logs one `warn` naming trace.max_mib.
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

WORLD = 2
MIB = 1024 * 1024


def records(run_dir, rank):
    path = os.path.join(run_dir, "trace", f"rank-{rank}.jsonl")
    check(os.path.exists(path), f"rank {rank}: no {path}; trace.every_n_steps set, want the file")
    with open(path) as f:
        return path, [json.loads(line) for line in f if line.strip()]


def check_step(recs, rank, step):
    where = f"rank {rank} step {step}"
    by = collections.defaultdict(list)
    for r in recs:
        by[(r["op"], r["stage"], r["phase"], r["unit"])].append(r)
    units = [r["unit"] for r in recs if (r["op"], r["stage"], r["phase"]) ==
             ("all_gather", "issue", "forward")]
    check(len(units) >= 4, f"{where}: forward gathers of {units}, want root and 3 layer units")
    end = max(max(r["ms"], r.get("end_ms", 0), r.get("done_ms", 0)) for r in recs)
    for r in recs:
        check(r["ms"] >= 0, f"{where}: a record before the step's origin: {r}")
        for key in ("end_ms", "done_ms"):
            if key in r:
                check(r[key] >= r["ms"], f"{where}: {key} before ms in {r}")
    for unit in units:
        issue = by[("all_gather", "issue", "forward", unit)]
        wait = by[("all_gather", "wait", "forward", unit)]
        check(len(issue) == 1 and len(wait) == 1, f"{where}: {unit}: forward gather records "
                                                  f"{issue + wait}")
        check(issue[0]["bytes"] > 0, f"{where}: {unit}: gather of {issue[0]['bytes']} bytes")
        check(issue[0]["ms"] <= wait[0]["ms"] <= wait[0]["done_ms"],
              f"{where}: {unit}: issue {issue[0]['ms']}, wait {wait[0]['ms']}..."
              f"{wait[0]['done_ms']} out of order")
        for phase in ("forward", "backward"):
            spans = by[("compute", "done", phase, unit)]
            check(spans, f"{where}: no {phase} compute stretch of {unit}")
        rs_issue = by[("reduce_scatter", "issue", "backward", unit)]
        rs_wait = by[("reduce_scatter", "wait", "backward", unit)]
        check(len(rs_issue) >= 1 and len(rs_issue) == len(rs_wait),
              f"{where}: {unit}: reduce-scatter records {rs_issue + rs_wait}")
        check(all(r["bytes"] > 0 for r in rs_issue), f"{where}: {unit}: {rs_issue}")
        check(rs_issue[0]["ms"] <= rs_wait[0]["ms"] <= rs_wait[0]["done_ms"] <= end,
              f"{where}: {unit}: reduce-scatter out of order: {rs_issue[0]} {rs_wait[0]}")
        if unit != "root":  # the root gathers once: kept from forward to backward
            check(len(by[("all_gather", "issue", "backward", unit)]) == 1,
                  f"{where}: {unit} is not gathered again for backward")
    # One host thread computes: its stretches follow one another.
    spans = sorted((r["ms"], r["end_ms"], r["phase"], r["unit"]) for r in recs
                   if r["op"] == "compute")
    for a, b in zip(spans, spans[1:]):
        check(b[0] >= a[1] - 1e-6, f"{where}: compute stretches overlap: {a} and {b}")
    print(f"{where}: {len(recs)} records, {len(units)} units, {len(spans)} compute stretches, "
          f"{end:.2f} ms")


def sampled(args):
    config = ranks.setup_experiment(args.work, {"train": {"max_steps": 4}})
    run_dir = ranks.train(args.shardtrain, config, os.path.join(args.work, "run"), world=WORLD,
                          sets=["trace.every_n_steps=2"])
    for rank in range(WORLD):
        _, recs = records(run_dir, rank)
        steps = sorted({r["step"] for r in recs if "step" in r})
        check(steps == [2, 4], f"rank {rank}: records of steps {steps}, want [2, 4]")
        check(not any(r["op"] == "stopped" for r in recs), f"rank {rank}: stopped under 64 MiB")
        for step in steps:
            check_step([r for r in recs if r.get("step") == step], rank, step)
    # The default (every_n_steps = 0) records nothing.
    plain = ranks.train(args.shardtrain, config, os.path.join(args.work, "plain"), world=WORLD)
    check(not os.path.exists(os.path.join(plain, "trace")),
          "trace/ written with trace.every_n_steps = 0")


def bounded(args):
    config = ranks.setup_experiment(args.work, {
        "model": {"tiny_layers": 24},
        "train": {"max_steps": 40},
    })
    run_dir = ranks.train(args.shardtrain, config, os.path.join(args.work, "run"), world=WORLD,
                          sets=["trace.every_n_steps=1", "trace.max_mib=1"])
    for rank in range(WORLD):
        path, recs = records(run_dir, rank)
        size = os.path.getsize(path)
        steps = sorted({r["step"] for r in recs if "step" in r})
        print(f"rank {rank}: {size} bytes, steps {steps[0]}..{steps[-1]} recorded")
        check(recs[-1]["op"] == "stopped" and recs[-1]["reason"] == "max_mib",
              f"rank {rank}: the last record is {recs[-1]}, want the stopped record")
        check(sum(r["op"] == "stopped" for r in recs) == 1, f"rank {rank}: stopped twice")
        check(MIB - 64 * 1024 <= size <= MIB + 256,
              f"rank {rank}: {size} bytes, want just under 1 MiB (trace.max_mib = 1)")
        check(steps[-1] < 40, f"rank {rank}: records up to step {steps[-1]}: the bound did "
                               "not stop them (make the run longer)")
        warns = [e for e in ranks.events(run_dir, rank, "log")
                 if e.get("level") == "warn" and "trace.max_mib" in e.get("message", "")]
        check(len(warns) == 1, f"rank {rank}: {len(warns)} warn events naming trace.max_mib: "
                               f"{ranks.events(run_dir, rank, 'log')}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardtrain", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", choices=("sampled", "bounded"), required=True)
    args = ap.parse_args()
    ranks.main_guard(lambda: {"sampled": sampled, "bounded": bounded}[args.case](args))


if __name__ == "__main__":
    main()
