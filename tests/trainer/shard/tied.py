#!/usr/bin/env python3
"""Tied embeddings under sharding: lm_head.weight tied to model.embed_tokens.weight keeps one
storage in the engine. tied_tool trains a tied tiny Qwen2 model on 2 ranks x FULL_SHARD and once
unsharded (the reference runner: one tensor for the pair, both gradients summed into it); the loss
curves and final parameters must agree within the parity tolerance, and the engine's head must
equal its embedding bit for bit after training (a copy made at init would drift apart)."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

RTOL = 1e-5  # the fp32 parity tolerance of parity.py
EMBED, HEAD = "model.embed_tokens.weight", "lm_head.weight"


def run(tool, run_dir, world, args):
    ranks.fresh_dir(run_dir)
    out = os.path.join(run_dir, "params.safetensors")
    codes = ranks.run_ranks(tool, [out] + args, run_dir, world, timeout=180)
    check(codes == [0] * world, f"{run_dir}: exit codes {codes}\n" + ranks.log_tail(run_dir, world))
    curve = {}
    with open(os.path.join(run_dir, "events-rank-0.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            curve[row["step"]] = row
    return curve, ranks.load_params(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tool", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    steps = ["--steps", str(a.steps)]

    def body():
        import numpy as np
        ref_curve, ref = run(a.tool, os.path.join(a.work, "reference"), 1, ["--reference"] + steps)
        got_curve, got = run(a.tool, os.path.join(a.work, "full_shard_2"), 2, steps)
        check(sorted(ref_curve) == list(range(1, a.steps + 1)), f"reference steps {sorted(ref_curve)}")
        ranks.compare_curves("tied full_shard_2 vs reference", got_curve, ref_curve, RTOL,
                             fields=("loss", "grad_norm"))
        check(ref_curve[a.steps]["loss"] < 0.9 * ref_curve[1]["loss"],
              f"the reference did not train: loss {ref_curve[1]['loss']} -> "
              f"{ref_curve[a.steps]['loss']}")
        diffs = ranks.param_diffs(got, ref)
        for name, d in sorted(diffs.items()):
            print(f"param {name}: max relative difference {d:.2e}")
        worst = max(diffs, key=diffs.get)
        check(diffs[worst] <= RTOL, f"{worst}: relative difference {diffs[worst]:.3e} > {RTOL}")
        for label, params in (("engine", got), ("reference", ref)):
            check(np.array_equal(params[HEAD], params[EMBED]),
                  f"{label}: {HEAD} differs from {EMBED} after training (max |diff| "
                  f"{float(np.max(np.abs(params[HEAD] - params[EMBED]))):.3e}): the tie was lost")
        print(f"{HEAD} == {EMBED} bit for bit in both runs after {a.steps} steps")

    ranks.main_guard(body)


if __name__ == "__main__":
    main()
