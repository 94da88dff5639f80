"""Training paths against the unsharded reference on 2 and 3 ranks.

Every run is 30 steps of the tiny model with ranks.BASE_CONFIG's schedule (lr 1e-2, warmup,
cosine to 1e-3, weight decay, clipping on a third of the steps) under FULL_SHARD. Not lr 1e-5: at
1e-5 the adapters' lora_A move by ~2e-5 of their size in 30 steps, so a 1e-5 parameter comparison
could not tell a wrong gradient from a right one (parity.compare_params refuses such a cell).
"vs reference" means the plain-autograd `--reference` run of the same experiment: every step's
loss within 1e-5 relative and every final parameter within 1e-5 (max |diff| / max |value|),
except parameters whose step-1 gradient norm is below 1e-6 (listed).

  --group fp32: activation checkpointing; shard.wrap_policy "size" (blocks 0 and 1 in one unit)
      and "none" (the root only); gradient accumulation (micro-batches of 2) with activation
      checkpointing. 2 and 3 ranks each (3 pads every flat parameter).
  --group dropout: LoRA (q, v, o, down) with lora.dropout = 0.2 on 1, 2 and 3 ranks and with
      activation checkpointing on 2 and 3 (the recompute must replay the loss's masks) and with
      micro-batches of 2 on 2 ranks: losses
      and adapters within 1e-5 of the reference, so the masks do not depend on the world size
      or on the micro-batch layout; then a resume of the 2-rank run's step-10 checkpoint on 2
      ranks equals the uninterrupted run bit for bit (losses, grad norms, final adapters); and
      Qwen2-VL with vision-tower adapters on 1 and 2 ranks (vision_dropout).
  --group fp16: shard.precision = "fp16_autocast" (fp16 compute, fp32 masters and reduction, the
      loss scaler) on 2 and 3 ranks against shardtrain on 1 rank in the same mode: losses
      within 1e-3 relative; fp16 must move the losses away from fp32 (else the cell proves
      nothing), and the 1-rank run's losses (1e-3) and unscaled grad norms (1e-2) stay near the
      fp32 reference (a scaler that did not unscale would clip every step and report 65536x norms).
      The scaler's overflow path (skip the step, halve the scale) is not reached here.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402
import ranks  # noqa: E402
from ranks import check  # noqa: E402

TOL = 1e-5
FP16_TOL = 1e-3
LORA = dict(parity.LORA, dropout=0.2)
AC = "shard.activation_checkpointing=true"
# Qwen2-VL's adapters after 4 steps from lora_B = 0 are small, so reduction-order noise is large
# next to them: 1 vs 2 ranks differ by up to 6e-6 without dropout, 1.1e-5 with. A mask that
# differed would move them by ~1 (dropout 0 vs 0.2: 1.5).
VISION_TOL = 1e-4
# The tiny block (hidden 32, 3 blocks) holds 12.6k parameters: 20k puts blocks 0 and 1 in one
# unit; block 2, below the minimum, stays in the root, as FSDP's size policy leaves it.
WRAP_SIZE = ['shard.wrap_policy="size"', "shard.wrap_min_params=20000"]


def run(args, config, name, world, sets, extra=()):
    run_dir = os.path.join(args.work, name)
    with ranks.timed(f"{name}: {world} rank(s) {' '.join(sets)}"):
        ranks.train(args.shardtrain, config, run_dir, world, sets=sets,
                    args=["--dump-params", "params.safetensors", *extra])
    return run_dir


def params(run_dir):
    return ranks.load_params(os.path.join(run_dir, "params.safetensors"))


def compare(label, run_dir, ref_dir, init, exempt, only=None):
    """Losses and parameters (`only` filters names) of run_dir against ref_dir within TOL."""
    ranks.compare_curves(label, ranks.curve(run_dir), ranks.curve(ref_dir), TOL)
    got, want = params(run_dir), params(ref_dir)
    names = [n for n in want if only is None or only(n)]
    check(names, f"{label}: no parameter to compare")
    parity.compare_params(label, {n: got[n] for n in names}, {n: want[n] for n in names},
                          {n: init[n].astype("float64") for n in names}, exempt, TOL)


def units(run_dir):
    """Wrap units of a run, from its trace's placement records."""
    import json
    with open(os.path.join(run_dir, "trace.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    return sorted({r["unit"] for r in recs if r.get("op") in ("all_gather", "reduce_scatter")})


def fp32_group(args):
    config = ranks.setup_experiment(args.work)
    ref_dir = ranks.cached_run(args.shardtrain, args.cache, config)
    exempt, init = parity.tiny_grad_params(args, config)
    print(f"exempt (step-1 gradient norm < {parity.TINY_GRAD:g}): {sorted(exempt) or 'none'}")
    cells = {"ac": [AC], "wrap_size": WRAP_SIZE, "wrap_none": ['shard.wrap_policy="none"'],
             "accumulation_ac": [AC, "train.micro_batch_size=2"]}
    seen_units = {}
    for world in (2, 3):
        for name, sets in cells.items():
            cell = f"{name}_{world}"
            trace = ["--trace", "trace.jsonl"] if name.startswith("wrap") else []
            run_dir = run(args, config, cell, world, sets, trace)
            if trace:
                seen_units[cell] = units(run_dir)
                print(f"{cell}: units that communicate: {seen_units[cell]}")
            compare(f"{cell} vs reference", run_dir, ref_dir, init, exempt)
    # The wrap policies must have changed the units (else those cells repeat the block cell).
    check(len(seen_units["wrap_none_2"]) == 1,
          f"wrap_policy none: want the root only, got {seen_units['wrap_none_2']}")
    check(seen_units["wrap_size_2"] == ["layers.0-layers.1", "root"],
          f"wrap_policy size: want blocks 0 and 1 in one unit and block 2 in the root, got "
          f"{seen_units['wrap_size_2']}")


def dropout_group(args):
    config = ranks.setup_experiment(args.work, {"lora": LORA})
    ref_dir = ranks.cached_run(args.shardtrain, args.cache, config)
    init = params(ranks.cached_run(args.shardtrain, args.cache, config,
                                   parity.PROBE + ["train.lr=1e-30"]))
    # lora_B starts at zero, so the masks move the first losses little; they steer the adapters'
    # gradients, so the adapter comparison is what sees a wrong mask.
    plain = params(ranks.cached_run(args.shardtrain, args.cache, config, ["lora.dropout=0.0"]))
    ref = params(ref_dir)
    effect = max(ranks.param_diffs({n: ref[n] for n in ref if ".lora_B" in n},
                                   {n: plain[n] for n in ref if ".lora_B" in n}).values())
    print(f"lora.dropout {LORA['dropout']} moves the reference's final lora_B by up to "
          f"{effect:.3e} (max |diff| / max |value|)")
    check(effect > 100 * TOL, f"dropout changed the adapters by only {effect:.3e}: the cells "
                              "below would not see a wrong mask")
    adapter = lambda n: ".lora_" in n  # noqa: E731
    cells = (("dropout_1", 1, []), ("dropout_2", 2, []), ("dropout_3", 3, []),
             ("dropout_ac_2", 2, [AC]), ("dropout_ac_3", 3, [AC]),
             ("dropout_accumulation_2", 2, ["train.micro_batch_size=2"]))
    for cell, world, sets in cells:
        run_dir = run(args, config, cell, world, sets)
        compare(f"{cell} vs reference", run_dir, ref_dir, init, {}, adapter)
    resume(args, config)
    vision_dropout(args)


def vision_dropout(args):
    """Qwen2-VL with adapters on the vision tower (qkv, fc1) and the text stack (q_proj), dropout
    0.2 (the demo model and chat data of `make-demo-data`, images of several sizes): 4 steps on 1
    and 2 ranks agree, losses within 1e-5 and adapters within VISION_TOL, and the vision adapters
    differ from a dropout-0 run (so the vision masks were applied)."""
    import subprocess
    work = ranks.fresh_dir(os.path.join(args.work, "vision"))
    data_dir = os.path.join(work, "data")
    made = subprocess.run([args.shardtrain, "make-demo-data", data_dir, "--train", "24",
                           "--eval", "6"], capture_output=True, text=True)
    check(made.returncode == 0, f"make-demo-data failed:\n{made.stdout}\n{made.stderr}")
    config = os.path.join(work, "exp.toml")
    with open(config, "w") as f:
        f.write("\n".join([
            "[model]", 'arch = "qwen2_vl"', f'path = "{data_dir}/model"',
            "[data]", f'train_path = "{data_dir}/train.jsonl"', 'format = "chat"',
            "seq_len = 1024",
            "[train]", "max_steps = 4", "batch_size = 6", "lr = 1e-2", "adam_eps = 1e-4",
            "log_every = 1", "ckpt_at_end = false", "seed = 3", "threads = 1",
            "[shard]", 'strategy = "FULL_SHARD"',
            "[lora]", "enabled = true", "r = 4", "alpha = 8", "dropout = 0.2",
            'target_modules = ["q_proj", "qkv", "fc1"]']) + "\n")
    runs = {name: run(args, config, f"vision/{name}", world, sets)
            for name, world, sets in (("one", 1, []), ("two", 2, []),
                                      ("no_dropout", 1, ["lora.dropout=0.0"]))}
    ranks.compare_curves("qwen2_vl LoRA dropout: 2 ranks vs 1", ranks.curve(runs["two"]),
                         ranks.curve(runs["one"]), TOL)
    got, want, plain = (params(runs[n]) for n in ("two", "one", "no_dropout"))
    adapters = [n for n in want if ".lora_" in n]
    vision = [n for n in adapters if ".visual." in n and ".lora_B" in n]
    check(vision, f"no vision adapter among {adapters[:4]}...")
    effect = max(ranks.param_diffs({n: want[n] for n in vision},
                                   {n: plain[n] for n in vision}).values())
    print(f"qwen2_vl: dropout moves the vision lora_B by up to {effect:.3e}")
    check(effect > 100 * TOL, f"dropout changed the vision adapters by only {effect:.3e}")
    diffs = ranks.param_diffs({n: got[n] for n in adapters}, {n: want[n] for n in adapters})
    worst = max(diffs, key=diffs.get)
    print(f"qwen2_vl LoRA dropout: 2 ranks vs 1: {len(diffs)} adapters, worst {diffs[worst]:.3e} "
          f"({worst})")
    check(diffs[worst] <= VISION_TOL, f"qwen2_vl: adapter {worst} differs by {diffs[worst]:.3e}")


def resume(args, config):
    """A resume of step 10 on 2 ranks replays steps 11..30 bit for bit."""
    import numpy as np
    sets = ["train.ckpt_every=10", "train.ckpt_keep=0", "train.deterministic=true"]
    whole = run(args, config, "dropout_uninterrupted", 2, sets)
    ckpt = os.path.join(whole, "ckpt", "step-000010")
    check(os.path.isfile(os.path.join(ckpt, "meta.json")), f"{ckpt}: no meta.json")
    resumed = run(args, config, "dropout_resumed", 2, sets, ["--resume", ckpt])
    got, want = ranks.curve(resumed), ranks.curve(whole)
    check(sorted(got) == list(range(11, 31)), f"resumed steps {sorted(got)}, want 11..30")
    ranks.compare_curves("resumed at step 10 vs uninterrupted", got, want, 0.0,
                         fields=("loss", "grad_norm"), steps=sorted(got))
    a, b = params(resumed), params(whole)
    differ = [n for n in b if not np.array_equal(a[n], b[n])]
    print(f"resumed vs uninterrupted: {len(b) - len(differ)} of {len(b)} final parameters "
          "bit-identical")
    check(not differ, f"final parameters differ after the resume: {differ[:5]}")


def fp16_group(args):
    config = ranks.setup_experiment(args.work)
    mode = ['shard.precision="fp16_autocast"']
    base_dir = ranks.cached_run(args.shardtrain, args.cache, config, mode, reference=False,
                                world=1)
    base = ranks.curve(base_dir)
    ref = ranks.curve(ranks.cached_run(args.shardtrain, args.cache, config))
    away = max(ranks.rel(base[s]["loss"], ref[s]["loss"]) for s in ref)
    print(f"fp16_autocast on 1 rank vs fp32 reference: max relative loss difference {away:.3e}")
    check(away > 1e-6, f"fp16_autocast gives the fp32 losses ({away:.3e}): no effect")
    # The scaler multiplies the loss by 65536 and must divide the gradients back before the norm,
    # the clipping and AdamW: the unscaled grad norms and the losses stay near fp32's.
    ranks.compare_curves("fp16_autocast 1 rank vs fp32 reference", base, ref, FP16_TOL)
    ranks.compare_curves("fp16_autocast 1 rank vs fp32 reference", base, ref, 1e-2,
                         fields=("grad_norm",))
    for world in (2, 3):
        run_dir = run(args, config, f"fp16_{world}", world, mode)
        ranks.compare_curves(f"fp16_autocast {world} ranks vs 1 rank", ranks.curve(run_dir), base,
                             FP16_TOL)
        diffs = ranks.param_diffs(params(run_dir), params(base_dir))
        worst = max(diffs, key=diffs.get)
        print(f"fp16_autocast {world} ranks vs 1 rank: final parameters max|diff|/max|ref| "
              f"{diffs[worst]:.3e} ({worst}); reported, not asserted")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--cache", required=True, help="shared cache of reference runs")
    parser.add_argument("--group", required=True, choices=["fp32", "dropout", "fp16"])
    args = parser.parse_args()
    groups = {"fp32": fp32_group, "dropout": dropout_group, "fp16": fp16_group}
    ranks.main_guard(lambda: groups[args.group](args))


if __name__ == "__main__":
    main()
