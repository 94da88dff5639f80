#!/usr/bin/env python3
"""Forward+backward tokens/s of a Qwen2 on one process: shardtrain vs transformers.

No optimizer on either side: each timed pass is the loss forward (shardtrain's head: lm_head on
positions 0..T-2, summed cross-entropy times 1 / loss tokens) and its backward; gradients are
dropped after the pass, outside the timed span. Same config (bench_fsdp2's sizes), same batch
(the first `batch` samples of bench_fsdp2's data), one thread each. Configurations:
  ours   `shardtrain bench-step`: the model under the sharding engine on one process, as a
         1-process `train` runs it
  plain  `shardtrain bench-step --plain`: the same model as plain autograd leaves (kernels only)
  blas   `shardtrain bench-step` with SHARDSCOPE_CPU_GEMM=blas: every GEMM LibTorch's BLAS (MKL),
         as transformers runs them, instead of oneDNN's (model/dense.h)
  eager  transformers' Qwen2ForCausalLM, attn_implementation = "eager" (the issue's peer)
  sdpa   the same, attn_implementation = "sdpa"
  base   `shardtrain bench-step` of a second binary (--baseline PATH): before/after a change
Every configuration is a fresh process per run; runs alternate with a rotating order; the table
shows medians over repeats of per-run medians over the timed passes. Figures, not a test.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_fsdp2 import (REPO, SIZES, flops_per_token, measure_peak_flops,  # noqa: E402
                         param_count, read_events, write_data, write_toml)

CONFIGS = {
    "ours": "shardtrain (engine, 1 process)",
    "plain": "shardtrain (plain autograd)",
    "blas": "shardtrain (BLAS GEMMs)",
    "eager": "transformers eager",
    "sdpa": "transformers sdpa",
    "base": "baseline shardtrain (engine)",
}


def peer_child(a):
    """One transformers run (a fresh process): prints a JSON line per timed pass."""
    import torch

    from fsdp2_peer import build_model, load_samples

    torch.set_num_threads(1)
    s = SIZES[a.size]
    ns = argparse.Namespace(vocab=s["vocab"], hidden=s["hidden"], intermediate=s["intermediate"],
                            layers=s["layers"], heads=s["heads"], max_pos=max(512, s["seq_len"]),
                            seed=1234, init_from="")
    model = build_model(ns)
    model.lm.config._attn_implementation = a.attn  # read by every attention call
    model.train()
    ids, labels = load_samples(a.data, s["seq_len"])
    x, y = ids[: s["batch"]], labels[: s["batch"]]
    scale = 1.0 / max(1, int((y[:, 1:] != -100).sum()))
    for i in range(a.warmup + a.iters):
        t0 = time.perf_counter()
        loss = model(x, y, scale)
        loss.backward()
        secs = time.perf_counter() - t0
        model.zero_grad(set_to_none=True)
        if i >= a.warmup:
            print(json.dumps({"ev": "step", "loss": loss.item(),
                              "tokens_per_s": x.numel() / secs}), flush=True)
    return 0


def run_one(args, key, size, work):
    """One run of configuration `key`; returns (median tokens/s, loss of the last pass)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               SHARDSCOPE_PEAK_FLOPS=repr(args.peak_flops))
    common = ["--iters", str(args.iters), "--warmup", str(args.warmup)]
    if key == "blas":
        env["SHARDSCOPE_CPU_GEMM"] = "blas"
    if key in ("ours", "plain", "blas", "base"):
        binary = args.baseline_copy if key == "base" else args.shardtrain_copy
        cmd = [binary, "bench-step", os.path.join(work, f"{size}.toml"),
               "--set", "shard.strategy=NO_SHARD"] + common
        cmd += ["--plain"] if key == "plain" else []
    else:
        cmd = [args.python, os.path.abspath(__file__), "--child", "--size", size, "--attn", key,
               "--data", os.path.join(work, f"{size}.jsonl")] + common
    out = os.path.join(work, f"{size}-{key}.out")
    with open(out, "wb") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, env=env, cwd=work,
                              timeout=args.timeout)
    if proc.returncode != 0:
        tail = proc.stderr.decode()[-3000:]
        raise SystemExit(f"{key} ({size}) failed with exit code {proc.returncode}:\n{tail}")
    events = read_events(out)
    steps = [e for e in events if e["ev"] == "step"]
    if key == "ours":  # the one FLOPs formula, from shardtrain's hello
        args.flops_per_token = flops_per_token(events)
    return statistics.median(e["tokens_per_s"] for e in steps), steps[-1]["loss"]


def print_table(args, size, s, runs):
    fpt = getattr(args, "flops_per_token", 0.0)
    print(f"\n{size}: {param_count(s) / 1e6:.1f}M parameters, batch {s['batch']} x seq "
          f"{s['seq_len']}, 1 process x 1 thread; forward+backward only; GEMM peak "
          f"{args.peak_flops / 1e9:.1f} GFLOP/s; medians of {args.repeats} alternating runs of "
          f"{args.iters} timed passes (+{args.warmup} warmup)")
    head = f"{'configuration':<32} {'tokens/s':>9} {'MFU':>6} {'loss':>8}  runs tokens/s"
    print(head)
    print("-" * len(head))
    med = {}
    for key, rs in runs.items():
        med[key] = statistics.median(r[0] for r in rs)
        print(f"{CONFIGS[key]:<32} {med[key]:9.1f} {100 * fpt * med[key] / args.peak_flops:5.1f}% "
              f"{rs[-1][1]:8.4f}  {[round(r[0], 1) for r in rs]}")
    print(f"\n{'ratio':<44} {'value':>7} {'target':>8}")
    for label, a, b, target in (("shardtrain / transformers eager", "ours", "eager", ">= 1.0"),
                                ("shardtrain / transformers sdpa", "ours", "sdpa", "-"),
                                ("shardtrain plain / transformers eager", "plain", "eager", "-"),
                                ("shardtrain engine / plain", "ours", "plain", "-"),
                                ("shardtrain / shardtrain BLAS GEMMs", "ours", "blas", "-"),
                                ("shardtrain BLAS GEMMs / transformers eager", "blas", "eager",
                                 "-"),
                                ("transformers eager / sdpa", "eager", "sdpa", "-"),
                                ("shardtrain / baseline", "ours", "base", "-"),
                                ("baseline / transformers eager", "base", "eager", "-")):
        if a in med and b in med:
            print(f"{label:<44} {med[a] / med[b]:7.3f} {target:>8}")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shardtrain", default=os.path.join(REPO, "build", "bin", "shardtrain"))
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"),
                   help="a Python with torch and transformers (requirements-test.txt)")
    p.add_argument("--work", default="/tmp/shardscope-bench-forward", help="scratch folder")
    p.add_argument("--sizes", default="100m", help="comma list of " + ",".join(SIZES))
    p.add_argument("--configs", default="ours,eager,sdpa",
                   help="comma list of " + ",".join(CONFIGS))
    p.add_argument("--repeats", type=int, default=3, help="alternating runs per configuration")
    p.add_argument("--iters", type=int, default=3, help="timed passes per run")
    p.add_argument("--warmup", type=int, default=1, help="untimed passes first")
    p.add_argument("--peak-flops", type=float, default=0.0,
                   help="GEMM peak FLOP/s of one thread for MFU (default: measured here)")
    p.add_argument("--baseline", default="",
                   help="another shardtrain binary, run as configuration base (before/after)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    # A child process of the runner: one transformers run.
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--size", default="100m", help=argparse.SUPPRESS)
    p.add_argument("--attn", default="eager", help=argparse.SUPPRESS)
    p.add_argument("--data", default="", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    if args.child:
        return peer_child(args)
    os.makedirs(args.work, exist_ok=True)
    # A private copy: a rebuild of the binary during the runs cannot mix binaries.
    args.shardtrain_copy = os.path.join(args.work, "shardtrain")
    shutil.copy2(args.shardtrain, args.shardtrain_copy)
    args.baseline_copy = os.path.join(args.work, "shardtrain-baseline")
    if args.baseline:
        shutil.copy2(args.baseline, args.baseline_copy)
    if not args.peak_flops:
        args.peak_flops = max(measure_peak_flops(args.python) for _ in range(3))
    keys = [k for k in args.configs.split(",") if k]
    if "base" in keys and not args.baseline:
        raise SystemExit("configuration base needs --baseline PATH (a second shardtrain binary)")
    for size in [z for z in args.sizes.split(",") if z]:
        s = SIZES[size]
        write_data(os.path.join(args.work, f"{size}.jsonl"), s)
        write_toml(os.path.join(args.work, f"{size}.toml"), s, f"{size}.jsonl")
        runs = {k: [] for k in keys}
        for rep in range(args.repeats):
            order = keys[rep % len(keys):] + keys[:rep % len(keys)]  # rotate: no fixed position
            for k in order:
                runs[k].append(run_one(args, k, size, args.work))
                print(f"#   {size} run {rep} {k}: {runs[k][-1][0]:.1f} tokens/s "
                      f"(load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
        print_table(args, size, s, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
