"""Frozen parameters (`[train] freeze`): 2 FULL_SHARD ranks, 10 steps, with the
embedding and block 0 frozen ("model.embed_tokens.*", "model.layers.0.*").

  - frozen parameters are bit-identical in the 2-rank run, the unsharded reference run (which
    honours freeze too) and a 1-rank run of a single step at another learning rate: none of the
    three moved them, so they still hold the seed's initial values; trainable parameters moved
    (the 1-step and 10-step runs differ);
  - trainable parameters and the loss curve match the reference within 1e-5 relative;
  - the trace has no reduce-scatter for the frozen-only unit (layers.0) and one per micro-step
    for every other unit; placement records show masters for the frozen flats but no gradient
    and no optimizer state;
  - `shardtrain estimate --json` counts the frozen parameters in params but not in grads and
    optimizer: those terms equal the engine's placement bytes exactly, and params_trainable is
    the model's count minus the frozen ones;
  - a pattern that matches nothing is refused before any rank starts a collective, naming
    train.freeze.
"""
import argparse
import fnmatch
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

FREEZE = ["model.embed_tokens.*", "model.layers.0.*"]
WORLD = 2
STEPS = 10


def is_frozen(name):
    return any(fnmatch.fnmatchcase(name, g) for g in FREEZE)


def trace_records(run_dir, rank):
    path = os.path.join(run_dir, "trace.jsonl" + (f".rank-{rank}" if rank else ""))
    with open(path) as f:
        return [json.loads(line) for line in f]


def check_values(sharded, reference, one_step):
    import numpy as np
    frozen = sorted(n for n in reference if is_frozen(n))
    check(frozen, f"no parameter matches {FREEZE}: {sorted(reference)[:5]}...")
    for name in frozen:
        for label, other in (("reference", reference), ("1-step run", one_step)):
            check(np.array_equal(sharded[name], other[name]),
                  f"{name} is frozen but differs between the 2-rank run and the {label}")
    print(f"{len(frozen)} frozen parameters bit-identical in all three runs: {frozen}")
    trainable = sorted(n for n in reference if not is_frozen(n))
    moved = [n for n in trainable if not np.array_equal(sharded[n], one_step[n])]
    check(len(moved) == len(trainable),
          f"trainable parameters that did not move: {sorted(set(trainable) - set(moved))}")
    diffs = ranks.param_diffs({n: sharded[n] for n in trainable},
                              {n: reference[n] for n in trainable})
    worst = max(diffs, key=diffs.get)
    print(f"{len(trainable)} trainable parameters moved; largest relative difference to the "
          f"reference {diffs[worst]:.2e} ({worst})")
    check(diffs[worst] <= 1e-5, f"{worst}: relative difference {diffs[worst]:.3e} > 1e-5")


def check_trace(run_dir):
    held = {"params": 0, "grads": 0, "optimizer": 0}
    for rank in range(WORLD):
        records = trace_records(run_dir, rank)
        rs = {}
        for r in records:
            if r["op"] == "reduce_scatter" and r["stage"] == "issue":
                rs[r["unit"]] = rs.get(r["unit"], 0) + 1
        check("layers.0" not in rs, f"rank {rank}: the frozen-only unit layers.0 was "
                                    f"reduce-scattered {rs.get('layers.0')} times")
        for unit in ("root", "layers.1", "layers.2"):
            check(rs.get(unit) == STEPS, f"rank {rank}: {unit} reduce-scattered "
                                         f"{rs.get(unit, 0)} times, want {STEPS}")
        by = {}
        for r in records:
            if r["op"] == "placement":
                by.setdefault(r["flat"], {})[r["what"]] = r["bytes"]
        frozen = sorted(f for f in by if f.endswith("/frozen"))
        check(frozen == ["layers.0/frozen", "root/frozen"],
              f"rank {rank}: frozen flats {frozen}, want layers.0/frozen and root/frozen")
        check("layers.0/trainable" not in by, f"rank {rank}: layers.0 has a trainable flat")
        for flat in frozen:
            kinds = sorted(by[flat])
            check("master" in kinds and not {"grad", "exp_avg", "exp_avg_sq"} & set(kinds),
                  f"rank {rank}: {flat} has {kinds}; want a master and no grad or optimizer state")
        print(f"rank {rank}: reduce-scatters per unit {rs}; frozen flats {frozen} hold a master "
              "and no grad or optimizer state")
        if rank == 0:
            for kinds in by.values():
                held["params"] += kinds.get("master", 0)
                held["grads"] += kinds.get("grad", 0)
                held["optimizer"] += kinds.get("exp_avg", 0) + kinds.get("exp_avg_sq", 0)
    return held


def check_estimate(shardtrain, config, held, params):
    out = subprocess.run([shardtrain, "estimate", config, "--world-size", str(WORLD),
                          "--local-world-size", str(WORLD), "--json"],
                         capture_output=True, text=True, check=False)
    check(out.returncode == 0, f"estimate failed: {out.stderr}")
    est = json.loads(out.stdout)
    for term in ("params", "grads", "optimizer"):
        check(est[term] == held[term], f"estimate {term} = {est[term]} bytes, the engine holds "
                                       f"{held[term]}")
    frozen = sum(v.size for n, v in params.items() if is_frozen(n))
    total = sum(v.size for v in params.values())
    check(est["params_total"] == total and est["params_trainable"] == total - frozen,
          f"estimate counts {est['params_trainable']} of {est['params_total']} trainable, want "
          f"{total - frozen} of {total}")
    print(f"estimate: params {est['params']} grads {est['grads']} optimizer {est['optimizer']} "
          f"bytes = the engine's; {frozen} of {total} parameters frozen")


def check_unknown_pattern(args):
    work = os.path.join(args.work, "unknown")
    config = ranks.setup_experiment(work, {"train": {"freeze": ["model.layers.9.*"]}})
    run_dir = ranks.fresh_dir(os.path.join(work, "run"))
    codes = ranks.run_ranks(args.shardtrain, ["train", config, "--trace", "trace.jsonl"],
                            run_dir, WORLD)
    check(all(c != 0 for c in codes), f"an unknown freeze pattern was accepted: codes {codes}")
    log = ranks.log_tail(run_dir, WORLD) + json.dumps(ranks.events(run_dir, 0, "error"))
    check("train.freeze" in log and "model.layers.9.*" in log,
          f"the error does not name train.freeze and the pattern:\n{log}")
    check(not os.path.exists(os.path.join(run_dir, "trace.jsonl")) or
          not any(r["op"] != "placement" for r in trace_records(run_dir, 0)),
          "collectives were traced before the config error")
    print("an unknown pattern is refused naming train.freeze")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()

    def body():
        changes = {"train": {"max_steps": STEPS, "freeze": FREEZE}}
        config = ranks.setup_experiment(args.work, changes)
        dump = ["--dump-params", "params.safetensors"]
        sharded = ranks.train(args.shardtrain, config, os.path.join(args.work, "sharded"), WORLD,
                              args=dump + ["--trace", "trace.jsonl"])
        reference = ranks.train(args.shardtrain, config, os.path.join(args.work, "reference"),
                                1, args=dump, reference=True)
        one = ranks.train(args.shardtrain, config, os.path.join(args.work, "one_step"), 1,
                          sets=["train.max_steps=1", "train.lr_warmup_steps=1", "train.lr=0.1"],
                          args=dump)
        ranks.compare_curves("loss vs reference", ranks.curve(sharded), ranks.curve(reference),
                             1e-5)
        params = {k: ranks.load_params(os.path.join(d, "params.safetensors"))
                  for k, d in (("sharded", sharded), ("reference", reference), ("one", one))}
        check_values(params["sharded"], params["reference"], params["one"])
        held = check_trace(sharded)
        check_estimate(args.shardtrain, config, held, params["reference"])
        check_unknown_pattern(args)

    ranks.main_guard(body)


if __name__ == "__main__":
    main()
