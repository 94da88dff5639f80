"""Gradient accumulation and clipping on real ranks.

  --case accumulation: 2 FULL_SHARD ranks, batch 12: micro_batch_size 2 (k = 3 micro-steps per
      rank) equals micro_batch_size 6 (k = 1) within 1e-5 (every step's loss, final
      parameters), with and without shard.reduce_every_microstep; the trace proves the micro-steps
      happened (3x the forward all-gathers) and when the gradients were reduce-scattered (every
      micro-step, or only the last).
  --case clipping: grad_clip 0.05 clips every step; 3 FULL_SHARD ranks (padded shards) equal the
      unsharded reference with the same clip: loss and grad_norm of every step within 1e-5.
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

TOL = 1e-5


def trace_counts(path):
    """(op, stage, phase) -> count over one rank's trace."""
    counts = collections.Counter()
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec["op"] not in ("placement", "load", "loaded"):  # state, not collectives
                counts[(rec["op"], rec["stage"], rec["phase"])] += 1
    return counts


def accumulation(args):
    config = ranks.setup_experiment(args.work)
    steps = ranks.BASE_CONFIG["train"]["max_steps"]
    runs = {}
    for name, sets in (("k1", ["train.micro_batch_size=6"]),
                       ("k3", ["train.micro_batch_size=2"]),
                       ("k3_reduce_every", ["train.micro_batch_size=2",
                                            "shard.reduce_every_microstep=true"])):
        run_dir = os.path.join(args.work, name)
        with ranks.timed(f"{name}: 2 ranks {' '.join(sets)}"):
            ranks.train(args.shardtrain, config, run_dir, 2, sets=sets,
                        args=["--dump-params", "params.safetensors", "--trace", "trace.jsonl"])
        runs[name] = run_dir
    counts = {name: trace_counts(os.path.join(d, "trace.jsonl")) for name, d in runs.items()}
    # Units with a trainable flat parameter reduce once per reduction point.
    units = counts["k1"][("reduce_scatter", "issue", "backward")] // steps
    print(f"trace: {units} units reduce-scatter per reduction point")
    check(units >= 2, f"k1: {counts['k1']} shows fewer than 2 reduce-scattering units per step")
    for name, micro, reduces in (("k1", 1, 1), ("k3", 3, 1), ("k3_reduce_every", 3, 3)):
        fwd = counts[name][("all_gather", "issue", "forward")]
        rs = counts[name][("reduce_scatter", "issue", "backward")]
        print(f"trace {name}: {fwd} forward all-gathers, {rs} reduce-scatters over {steps} steps "
              f"(want {micro} micro-steps and {reduces} reductions per step)")
        check(fwd == micro * counts["k1"][("all_gather", "issue", "forward")],
              f"{name}: {fwd} forward all-gathers; {micro} micro-steps per step would issue "
              f"{micro}x the {counts['k1'][('all_gather', 'issue', 'forward')]} of k=1")
        check(rs == reduces * units * steps,
              f"{name}: {rs} reduce-scatters, want {reduces} x {units} units x {steps} steps")
    k1 = ranks.curve(runs["k1"])
    want = ranks.load_params(os.path.join(runs["k1"], "params.safetensors"))
    for name in ("k3", "k3_reduce_every"):
        ranks.compare_curves(f"{name} vs k1", ranks.curve(runs[name]), k1, TOL)
        diffs = ranks.param_diffs(
            ranks.load_params(os.path.join(runs[name], "params.safetensors")), want)
        worst = max(diffs, key=diffs.get)
        print(f"{name} vs k1: final parameters max|diff|/max|value| {diffs[worst]:.3e} ({worst})")
        check(diffs[worst] <= TOL, f"{name} vs k1: parameter {worst} differs by "
                                   f"{diffs[worst]:.3e} relative (> {TOL:g})")


def clipping(args):
    config = ranks.setup_experiment(args.work)
    clip = 0.05
    sets = [f"train.grad_clip={clip}"]
    ref = ranks.curve(ranks.cached_run(args.shardtrain, args.cache, config, sets))
    unclipped = ranks.curve(ranks.cached_run(args.shardtrain, args.cache, config,
                                             ["train.grad_clip=0"]))
    below = [s for s in ref if ref[s]["grad_norm"] <= clip]
    norms = [e["grad_norm"] for e in ref.values()]
    print(f"reference with grad_clip {clip}: grad_norm {min(norms):.4g}..{max(norms):.4g}; "
          f"steps not clipped: {below}")
    check(not below, f"grad_clip {clip} must clip every step; steps {below} were not clipped")
    effect = max(ranks.rel(ref[s]["loss"], unclipped[s]["loss"]) for s in ref)
    print(f"clipping changes the reference losses by up to {effect:.3e} relative")
    check(effect > 1e-3, f"clipping at {clip} changed the losses by only {effect:.3e}")
    run_dir = os.path.join(args.work, "run")
    with ranks.timed(f"clipping: 3 ranks FULL_SHARD {' '.join(sets)}"):
        ranks.train(args.shardtrain, config, run_dir, 3, sets=sets + ["shard.strategy=FULL_SHARD"])
    ranks.compare_curves("clipped FULL_SHARD 3 ranks vs reference", ranks.curve(run_dir), ref,
                         TOL, fields=("loss", "grad_norm"))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--cache", required=True, help="shared cache of reference runs")
    parser.add_argument("--case", required=True, choices=["accumulation", "clipping"])
    args = parser.parse_args()
    ranks.main_guard(lambda: {"accumulation": accumulation, "clipping": clipping}[args.case](args))


if __name__ == "__main__":
    main()
