"""Loss and parameter parity of the sharding engine with one unsharded process.

One cell per CTest test (parity_<cell>):
  fp32 cells  <strategy>_<ranks>: 30 AdamW steps (weight decay, warmup + cosine, clipping on
              the first steps) against the plain-autograd `--reference` run; every step's loss
              within 1e-5 relative, final parameters within 1e-5 (max |diff| / max |value|),
              except parameters whose gradient norm is below 1e-6 (listed).
  bf16 cells  <mode>_full_shard_2: 2 FULL_SHARD ranks against shardtrain on 1 rank in the same
              precision mode (fp32 reduce); losses within 1e-3 relative.
  bf16_full_shard_2: pure bf16 (bf16 reduce): reports the difference, asserts only that the run
              completes with finite losses.
  LoRA cells  lora_<strategy>_<ranks> (LoRA must work under every strategy): the same
              30 steps with adapters on q, v, o and down (base frozen) against the `--reference`
              run with the same adapters: losses and final adapters within 1e-5, every base
              parameter bit-identical to its initial value in both runs.
  QLoRA cells qlora_<strategy>_<ranks>: the same with lora.quantize = "nf4" (blocks
              of 32, double quantization; the HYBRID_SHARD cell stores the records as bfloat16):
              the engine gathers each unit's NF4 records and dequantizes them per unit; the
              reference quantizes and dequantizes each base weight once. Losses and adapters
              within 1e-5, and every base parameter (dumped dequantized) bit-identical to the
              reference's, which proves the engine's NF4 values are the reference's.
The reference runs are cached in the build tree (ranks.cached_run), shared by the cells.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

FP32_TOL = 1e-5
BF16_TOL = 1e-3
TINY_GRAD = 1e-6

# cell: (strategy, ranks, local world size, precision mode)
CELLS = {f"{s.lower()}_{n}": (s, n, n, "fp32")
         for s in ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD") for n in (1, 2, 3)}
CELLS["hybrid_shard_4"] = ("HYBRID_SHARD", 4, 2, "fp32")
for _mode in ("bf16_autocast", "bf16_buffers_autocast", "bf16"):
    CELLS[f"{_mode}_full_shard_2"] = ("FULL_SHARD", 2, 2, _mode)
for _strategy in ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"):
    CELLS[f"lora_{_strategy.lower()}_2"] = (_strategy, 2, 2, "fp32")
CELLS["lora_hybrid_shard_4"] = ("HYBRID_SHARD", 4, 2, "fp32")
for _strategy in ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"):
    CELLS[f"qlora_{_strategy.lower()}_2"] = (_strategy, 2, 2, "fp32")
CELLS["qlora_hybrid_shard_4"] = ("HYBRID_SHARD", 4, 2, "fp32")
LORA = {"enabled": True, "r": 4, "alpha": 8,
        "target_modules": ["q_proj", "v_proj", "o_proj", "down_proj"]}
QLORA = dict(LORA, quantize="nf4", quant_block_size=32)


def is_lora_cell(cell):
    return cell.startswith(("lora_", "qlora_"))

# One reference step with lr 1, eps 1, no decay and no clipping moves each element by
# -g / (|g| + 1): the step-1 gradient can be read back from the parameters.
# (cosine over one step starts at the peak lr.)
PROBE = ["train.max_steps=1", "train.lr_warmup_steps=0", "train.lr_min=0", "train.weight_decay=0",
         "train.grad_clip=0", "train.adam_eps=1"]


def tiny_grad_params(args, config):
    """Names of parameters whose step-1 gradient norm is below TINY_GRAD, from two one-step
    reference runs (lr 1e-30 leaves the initial values; lr 1 with eps 1 moves by g/(|g|+1))."""
    import numpy as np
    p0 = ranks.load_params(os.path.join(
        ranks.cached_run(args.shardtrain, args.cache, config, PROBE + ["train.lr=1e-30"]),
        "params.safetensors"))
    p1 = ranks.load_params(os.path.join(
        ranks.cached_run(args.shardtrain, args.cache, config, PROBE + ["train.lr=1"]),
        "params.safetensors"))
    tiny = {}
    for name, v0 in p0.items():
        d = np.abs(p1[name].astype(np.float64) - v0.astype(np.float64))
        g = d / np.maximum(1.0 - d, 1e-12)
        norm = float(np.sqrt(np.sum(g * g)))
        if norm < TINY_GRAD:
            tiny[name] = norm
    return tiny, p0


def check_reference_exercises(ref, clip):
    """The shared reference must clip on some steps and not on others, and learn."""
    norms = [ref[s]["grad_norm"] for s in sorted(ref)]
    clipped = [s for s in sorted(ref) if ref[s]["grad_norm"] > clip]
    print(f"reference: grad_norm {min(norms):.4g}..{max(norms):.4g}, clip {clip}: clipped at "
          f"steps {clipped}")
    check(0 < len(clipped) < len(norms),
          f"the reference must clip on some steps only (grad_clip {clip}, clipped {clipped})")
    first, last = ref[min(ref)]["loss"], ref[max(ref)]["loss"]
    print(f"reference: loss {first:.6f} -> {last:.6f}")
    check(last < first, f"the reference did not learn: loss {first} -> {last}")


def compare_params(label, got, want, init, exempt, tol):
    diffs = ranks.param_diffs(got, want)
    import numpy as np
    print(f"{label}: {'parameter':40s} {'max|diff|/max|ref|':>20s} {'moved':>10s}")
    failures = []
    for rank, name in enumerate(sorted(diffs, key=diffs.get, reverse=True)):
        w = want[name].astype(np.float64)
        moved = float(np.max(np.abs(w - init[name])) / max(float(np.max(np.abs(w))), 1e-30))
        note = " (exempt: tiny gradient)" if name in exempt else ""
        if rank < 8 or note:
            print(f"{label}: {name:40s} {diffs[name]:20.3e} {moved:10.3e}{note}")
        if name in exempt:
            continue
        if diffs[name] > tol:
            failures.append(f"{name} {diffs[name]:.3e}")
        check(moved > 100 * tol, f"{name}: training moved it by only {moved:.3e} relative; the "
                                 "parameter comparison would not prove anything")
    print(f"{label}: {len(diffs)} parameters compared, {len(exempt)} exempt, worst "
          f"{max(diffs.values()):.3e} (tolerance {tol:g})")
    check(not failures, f"{label}: parameters beyond {tol:g}: {', '.join(failures)}")


def run_cell(args, config, strategy, world, local):
    run_dir = os.path.join(args.work, "run")
    sets = [f"shard.strategy={strategy}"]
    mode = CELLS[args.cell][3]
    if mode != "fp32":
        sets.append(f"shard.precision=\"{mode}\"")
    if args.cell == "qlora_hybrid_shard_4":  # records in another storage dtype: same values
        sets.append("lora.quant_storage=\"bfloat16\"")
    with ranks.timed(f"{args.cell}: {world} rank(s) {' '.join(sets)}"):
        ranks.train(args.shardtrain, config, run_dir, world, local, sets,
                    ["--dump-params", "params.safetensors"])
    for rank in range(world):
        hello = ranks.events(run_dir, rank, "hello")
        check(hello and hello[0]["world_size"] == world,
              f"rank {rank}: hello {hello} does not report world_size {world}")
    check_comm(ranks.curve(run_dir), strategy, world, mode, is_lora_cell(args.cell))
    return run_dir, sets


# Bytes per element gathered (param dtype) and reduced (reduce dtype) in each precision mode.
PARAM_BYTES = {"fp32": 4, "bf16_autocast": 4, "bf16_buffers_autocast": 2, "bf16": 2}
REDUCE_BYTES = {"fp32": 4, "bf16_autocast": 4, "bf16_buffers_autocast": 4, "bf16": 2}


def check_comm(curve, strategy, world, mode, lora=False):
    """The step events' byte counters show the strategy ran: nothing on one rank; FULL_SHARD and
    HYBRID_SHARD gather again in backward (more elements gathered than reduced), SHARD_GRAD_OP
    gathers once per step and NO_SHARD all-reduces (no more gathered than reduced). With LoRA only
    the adapters are reduced while the frozen base is gathered too: sharded strategies gather,
    NO_SHARD only all-reduces the adapters (counted in both columns)."""
    comm = curve[max(curve)]["comm_bytes"]
    ag = comm["all_gather"] / PARAM_BYTES[mode]
    rs = comm["reduce_scatter"] / REDUCE_BYTES[mode]
    print(f"last step: {ag:.0f} elements all-gathered, {rs:.0f} reduce-scattered ({strategy}, "
          f"{world} rank(s), {mode}{', LoRA' if lora else ''})")
    if world > 1 and lora:
        gathers = strategy != "NO_SHARD"
        check(rs > 0 and (ag > rs if gathers else ag == rs),
              f"{strategy} with LoRA: unexpected bytes {comm}")
    elif world == 1:
        check(ag == 0 and rs == 0, f"one rank must not communicate: {comm}")
    elif strategy in ("FULL_SHARD", "HYBRID_SHARD"):
        check(rs > 0 and ag > rs, f"{strategy} must gather again in backward: {comm}")
    else:
        check(rs > 0 and ag <= rs, f"{strategy} must not gather again in backward: {comm}")


def fp32_cell(args, config):
    strategy, world, local, _ = CELLS[args.cell]
    ref_dir = ranks.cached_run(args.shardtrain, args.cache, config)
    ref = ranks.curve(ref_dir)
    check_reference_exercises(ref, ranks.BASE_CONFIG["train"]["grad_clip"])
    exempt, init = tiny_grad_params(args, config)
    print(f"parameters with step-1 gradient norm < {TINY_GRAD:g} (not compared): "
          f"{', '.join(f'{n} ({v:.2e})' for n, v in sorted(exempt.items())) or 'none'}")
    run_dir, _ = run_cell(args, config, strategy, world, local)
    label = f"{args.cell} vs reference"
    ranks.compare_curves(label, ranks.curve(run_dir), ref, FP32_TOL)
    compare_params(label, ranks.load_params(os.path.join(run_dir, "params.safetensors")),
                   ranks.load_params(os.path.join(ref_dir, "params.safetensors")),
                   {k: v.astype("float64") for k, v in init.items()}, exempt, FP32_TOL)


def lora_cell(args, config):
    """LoRA under a strategy vs the unsharded reference with the same adapters."""
    import numpy as np
    strategy, world, local, _ = CELLS[args.cell]
    ref_dir = ranks.cached_run(args.shardtrain, args.cache, config)
    init = ranks.load_params(os.path.join(
        ranks.cached_run(args.shardtrain, args.cache, config, PROBE + ["train.lr=1e-30"]),
        "params.safetensors"))
    run_dir, _ = run_cell(args, config, strategy, world, local)
    label = f"{args.cell} vs reference"
    ranks.compare_curves(label, ranks.curve(run_dir), ranks.curve(ref_dir), FP32_TOL)
    got = ranks.load_params(os.path.join(run_dir, "params.safetensors"))
    want = ranks.load_params(os.path.join(ref_dir, "params.safetensors"))
    adapters = sorted(n for n in want if ".lora_" in n)
    check(adapters, f"{label}: no adapter among the dumped parameters: {sorted(want)[:6]}...")
    base = sorted(n for n in want if ".lora_" not in n)
    for name in base:
        check(np.array_equal(got.get(name), init[name]) and np.array_equal(want[name], init[name]),
              f"{label}: the frozen base parameter {name} moved, or differs from the reference's")
    print(f"{label}: {len(base)} base parameters bit-identical to their initial values")
    if args.cell.startswith("qlora_"):
        # NF4 took effect in both runs: every block of a quantized weight holds at most 16
        # distinct values (levels times its absmax), which random init never gives.
        block = QLORA["quant_block_size"]
        linears = [n for n in base if n.endswith("_proj.weight")]
        check(linears, f"{label}: no quantized Linear among the base parameters")
        for name in linears:
            blocks = got[name].reshape(-1, block)
            most = max(len(np.unique(b)) for b in blocks)
            check(most <= 16, f"{label}: {name} has a block of {most} distinct values: not NF4")
        print(f"{label}: {len(linears)} quantized Linears, at most 16 values per block of {block}")
    compare_params(label, {n: got[n] for n in adapters}, {n: want[n] for n in adapters},
                   {n: init[n].astype("float64") for n in adapters}, {}, FP32_TOL)


def bf16_cell(args, config):
    strategy, world, local, mode = CELLS[args.cell]
    base_dir = ranks.cached_run(args.shardtrain, args.cache, config,
                                [f"shard.precision=\"{mode}\""], reference=False, world=1)
    base = ranks.curve(base_dir)
    ref = ranks.curve(ranks.cached_run(args.shardtrain, args.cache, config))
    away = max(ranks.rel(base[s]["loss"], ref[s]["loss"]) for s in ref)
    print(f"{mode} on 1 rank vs fp32 reference: max relative loss difference {away:.3e}")
    check(away > 1e-6, f"{mode} gives the fp32 losses (max relative difference {away:.3e}): the "
                       "precision mode had no effect, so this cell would prove nothing")
    run_dir, _ = run_cell(args, config, strategy, world, local)
    got = ranks.curve(run_dir)
    label = f"{args.cell} vs 1 rank {mode}"
    if mode == "bf16":
        # Pure bf16 reduces gradients in bf16: reported, not asserted.
        bad = [s for s in got if not math.isfinite(got[s]["loss"])]
        check(not bad and len(got) == len(base), f"{label}: non-finite or missing steps {bad}")
        ranks.compare_curves(label, got, base, math.inf)
        other = ranks.curve(ranks.cached_run(args.shardtrain, args.cache, config,
                                             ["shard.precision=\"bf16_buffers_autocast\""],
                                             reference=False, world=1))
        same = sum(base[s]["loss"] == other[s]["loss"] for s in base)
        print(f"bf16 vs bf16_buffers_autocast, both on 1 rank: {same} of {len(base)} losses "
              "bit-identical (reported, not asserted)")
    else:
        ranks.compare_curves(label, got, base, BF16_TOL)
    diffs = ranks.param_diffs(ranks.load_params(os.path.join(run_dir, "params.safetensors")),
                              ranks.load_params(os.path.join(base_dir, "params.safetensors")))
    worst = max(diffs, key=diffs.get)
    print(f"{label}: final parameters max|diff|/max|ref| {diffs[worst]:.3e} ({worst}); "
          "reported, not asserted")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True, help="this test's scratch folder")
    parser.add_argument("--cache", required=True, help="shared cache of reference runs")
    parser.add_argument("--cell", required=True, choices=sorted(CELLS))
    args = parser.parse_args()
    lora = is_lora_cell(args.cell)
    section = QLORA if args.cell.startswith("qlora_") else LORA
    config = ranks.setup_experiment(args.work, {"lora": section} if lora else None)
    cell = lora_cell if lora else fp32_cell if CELLS[args.cell][3] == "fp32" else bf16_cell
    ranks.main_guard(lambda: cell(args, config))


if __name__ == "__main__":
    main()
