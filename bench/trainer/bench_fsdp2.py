#!/usr/bin/env python3
"""shardtrain vs PyTorch FSDP2, side by side on this machine.

Same model (the Qwen2-architecture "tiny" model; transformers' Qwen2ForCausalLM for the peer),
same data (arithmetic progressions, pre-tokenized JSONL), same global batch, sequence length and
optimizer, 2 Gloo ranks with one thread each. Configurations:
  a  shardtrain FULL_SHARD, 2 ranks
  b  PyTorch FSDP2 (fully_shard per decoder layer + root), 2 ranks  (--peer fsdp1: FSDP1)
  c  shardtrain NO_SHARD, 2 ranks
  d  shardtrain, 1 process (no sharding, no collectives)
  e  PyTorch (same module, no wrapper), 1 process  (for the analysis: kernel cost without FSDP)
  f  shardtrain FULL_SHARD, 2 ranks, a second binary (--baseline PATH): before/after a change,
     measured in the same invocation as the others
Each configuration runs --repeats times, alternating (the machine is shared and noisy); the table
shows medians over repeats of per-run medians over the steps after --warmup. Figures, not a test.
See README.md for what is measured and the formulas.
"""
import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# Model sizes: (vocab, hidden, layers, heads, intermediate, seq_len, global batch, steps).
SIZES = {
    "10m": dict(vocab=8192, hidden=256, layers=6, heads=4, intermediate=1024, seq_len=128,
                batch=8, steps=10),
    "100m": dict(vocab=8192, hidden=768, layers=9, heads=12, intermediate=3072, seq_len=128,
                 batch=4, steps=5),
    # Qwen2's vocabulary under a small stack: where the head's logits dominate memory (the fused
    # linear cross-entropy against the peer's full fp32 logits).
    "vocab152k": dict(vocab=151936, hidden=256, layers=2, heads=4, intermediate=1024, seq_len=256,
                      batch=4, steps=6),
    # A negligible model: its peak RSS is each program's baseline (runtime, libraries, groups).
    "null": dict(vocab=256, hidden=32, layers=1, heads=2, intermediate=64, seq_len=16, batch=2,
                 steps=3),
}
CONFIGS = {
    "a": ("shardtrain FULL_SHARD", "shardtrain", 2, "FULL_SHARD"),
    "b": ("PyTorch FSDP2", "peer", 2, "fsdp2"),
    "c": ("shardtrain NO_SHARD", "shardtrain", 2, "NO_SHARD"),
    "d": ("shardtrain 1 process", "shardtrain", 1, "NO_SHARD"),
    "e": ("PyTorch 1 process", "peer", 1, "none"),
    "f": ("baseline FULL_SHARD", "baseline", 2, "FULL_SHARD"),
}
LR, WEIGHT_DECAY, GRAD_CLIP, SEED = 3e-4, 0.1, 1.0, 1234


def param_count(s):
    C, I, V, L = s["hidden"], s["intermediate"], s["vocab"], s["layers"]
    block = 4 * C * C + 3 * C + 2 * C + 3 * C * I
    return 2 * V * C + L * block + C


def flops_per_token(events):
    """The model FLOPs per token of shardtrain's hello (spec::training_flops_per_token, the one
    formula: docs/trainer.md, "MFU, one formula"), used for shardtrain and its peer alike."""
    for e in events:
        if e.get("ev") == "hello" and e.get("flops_per_token"):
            return e["flops_per_token"]
    raise SystemExit("shardtrain wrote no hello.flops_per_token: rebuild it (build/bin/shardtrain)")


def write_data(path, s):
    """Arithmetic progressions modulo the vocabulary, seq_len tokens each."""
    rng = random.Random(SEED)
    with open(path, "w") as f:
        for _ in range(s["batch"] * s["steps"]):
            a, d = rng.randrange(s["vocab"]), rng.randrange(1, 17)
            ids = [(a + d * k) % s["vocab"] for k in range(s["seq_len"])]
            f.write(json.dumps({"input_ids": ids}) + "\n")


def write_toml(path, s, data):
    with open(path, "w") as f:
        f.write(f"""[experiment]
name = "bench"
[model]
arch = "tiny"
tiny_vocab_size = {s['vocab']}
tiny_hidden_size = {s['hidden']}
tiny_layers = {s['layers']}
tiny_heads = {s['heads']}
tiny_intermediate_size = {s['intermediate']}
tiny_max_seq_len = {max(512, s['seq_len'])}
[data]
train_path = "{data}"
seq_len = {s['seq_len']}
shuffle = false
[train]
max_steps = {s['steps']}
batch_size = {s['batch']}
lr = {LR}
lr_schedule = "constant"
lr_warmup_steps = 0
weight_decay = {WEIGHT_DECAY}
grad_clip = {GRAD_CLIP}
seed = {SEED}
log_every = 1
mem_every = 1
ckpt_at_end = false
threads = 1
[shard]
strategy = "FULL_SHARD"
""")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def proc_status(pid):
    """(VmHWM, VmRSS) in bytes, or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            vals = {}
            for line in f:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    vals[line.split(":")[0]] = int(line.split()[1]) * 1024
            return vals.get("VmHWM", 0), vals.get("VmRSS", 0)
    except OSError:
        return None


class HwmWatcher(threading.Thread):
    """Polls every rank's VmHWM (the kernel's peak RSS) until the ranks exit."""

    def __init__(self, procs):
        super().__init__(daemon=True)
        self.procs = procs
        self.hwm = [0] * len(procs)
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            for i, p in enumerate(self.procs):
                st = proc_status(p.pid) if p.poll() is None else None
                if st:
                    self.hwm[i] = max(self.hwm[i], st[0])
            time.sleep(0.01)


def read_events(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
    return out


def launch(cmd, run_dir, world, extra_env, timeout):
    """Starts `world` ranks with the torchrun environment; returns (codes, hwm per rank)."""
    os.makedirs(run_dir, exist_ok=True)
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ)
        env.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                    "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        env.update(extra_env)
        with open(os.path.join(run_dir, f"events-rank-{rank}.jsonl"), "wb") as out, \
                open(os.path.join(run_dir, f"rank-{rank}.log"), "wb") as err:
            procs.append(subprocess.Popen(cmd, cwd=run_dir, env=env, stdout=out, stderr=err,
                                          start_new_session=True))
    watcher = HwmWatcher(procs)
    watcher.start()
    deadline = time.time() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1.0, deadline - time.time())))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait())
    watcher.done.set()
    watcher.join()
    return codes, watcher.hwm


def run_one(args, key, size, s, work, tag):
    """One run of configuration `key` at `size`; returns its figures."""
    name, prog, world, mode = CONFIGS[key]
    run_dir = os.path.join(work, f"{size}-{key}-{tag}")
    shutil.rmtree(run_dir, ignore_errors=True)
    data = os.path.join(work, f"{size}.jsonl")
    env = {"SHARDSCOPE_PEAK_FLOPS": repr(args.peak_flops)}
    if prog in ("shardtrain", "baseline"):
        binary = args.shardtrain_copy if prog == "shardtrain" else args.baseline_copy
        cmd = [binary, "train", os.path.join(work, f"{size}.toml"),
               "--set", f"shard.strategy={mode}"]
    else:
        cmd = [args.python, os.path.join(HERE, "fsdp2_peer.py"), "--data", data,
               "--wrap", mode if world > 1 or mode == "none" else "none"]
        for k in ("vocab", "hidden", "layers", "heads", "intermediate", "seq_len", "batch",
                  "steps"):
            cmd += ["--" + k.replace("_", "-"), str(s[k])]
        cmd += ["--max-pos", str(max(512, s["seq_len"])), "--lr", str(LR), "--weight-decay",
                str(WEIGHT_DECAY), "--grad-clip", str(GRAD_CLIP), "--seed", str(SEED),
                "--peak-flops", repr(args.peak_flops)]
        if mode == "fsdp2" and args.peer == "fsdp1":
            cmd[cmd.index("fsdp2")] = "fsdp1"
    codes, hwm = launch(cmd, run_dir, world, env, args.timeout)
    if any(codes):
        tail = open(os.path.join(run_dir, "rank-0.log")).read()[-3000:]
        raise SystemExit(f"{name} ({size}) failed with exit codes {codes}; rank-0.log:\n{tail}")
    events0 = read_events(os.path.join(run_dir, "events-rank-0.jsonl"))
    steps = [e for e in events0 if e["ev"] == "step"]
    timed = [e for e in steps if e["step"] > args.warmup] or steps[-1:]
    mems = [e for r in range(world) for e in read_events(
        os.path.join(run_dir, f"events-rank-{r}.jsonl")) if e["ev"] == "mem" and "peak" in e]
    return {
        "tokens_per_s": statistics.median(e["tokens_per_s"] for e in timed),
        "comm_bytes": statistics.median(sum(e["comm_bytes"].values()) for e in timed),
        "all_gather": statistics.median(e["comm_bytes"]["all_gather"] for e in timed),
        "reduce_scatter": statistics.median(e["comm_bytes"]["reduce_scatter"] for e in timed),
        "hwm": max(hwm),
        "alloc_peak": max((e["peak"] for e in mems), default=0),
        "losses": [e["loss"] for e in steps],
        "flops_per_token": flops_per_token(events0) if prog == "shardtrain" else 0,
    }


def measure_peak_flops(python):
    """Best fp32 512x512 GEMM rate of one thread, the way shardtrain measures it: the faster of
    LibTorch's BLAS (torch.mm) and oneDNN's inner product (shardtrain's dense())."""
    code = ("import torch,time;torch.set_num_threads(1);n=512;a=torch.randn(n,n);"
            "b=torch.randn(n,n);c=a@b;best=1e9\n"
            "lp=getattr(getattr(torch.ops,'mkldnn',None),'_linear_pointwise',None)\n"
            "for _ in range(20):\n t=time.perf_counter();torch.mm(a,b,out=c);"
            "best=min(best,time.perf_counter()-t)\n"
            " if lp is not None:\n  t=time.perf_counter();lp(a,b,None,'none',[],'');"
            "best=min(best,time.perf_counter()-t)\n"
            "print(2*n**3/best)")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    return float(out.stdout.strip())


def mib(n):
    return n / 2**20


def median_of(runs, field):
    return statistics.median(r[field] for r in runs)


def summarize(args, size, s, runs, null_hwm):
    """One row per configuration: medians over the repeats."""
    rows = {}
    fpt = next((r["flops_per_token"] for rs in runs.values() for r in rs if r["flops_per_token"]),
               0.0)
    for key, rs in runs.items():
        world = CONFIGS[key][2]
        tps = median_of(rs, "tokens_per_s")
        rows[key] = {
            "tokens_per_s": tps,
            "tokens_per_s_runs": [round(r["tokens_per_s"], 1) for r in rs],
            "mfu": fpt * tps / (args.peak_flops * world),
            "mem_net": median_of(rs, "hwm") - null_hwm[key],
            "mem_abs": median_of(rs, "hwm"),
            "alloc_peak": median_of(rs, "alloc_peak"),
            "comm_bytes": median_of(rs, "comm_bytes"),
            "all_gather": median_of(rs, "all_gather"),
            "reduce_scatter": median_of(rs, "reduce_scatter"),
            "final_loss": statistics.median(r["losses"][-1] for r in rs),
        }
    return rows


def ratio(rows, a, b, field):
    if a not in rows or b not in rows or not rows[b][field]:
        return None
    return rows[a][field] / rows[b][field]


def print_table(args, results):
    peer = "FSDP2" if args.peer == "fsdp2" else "FSDP1"
    print(f"\nshardtrain vs PyTorch {peer}: 2 Gloo ranks x 1 thread (1-process rows: 1 thread); "
          f"GEMM peak {args.peak_flops / 1e9:.1f} GFLOP/s per thread; medians of "
          f"{args.repeats} alternating runs, steps > {args.warmup}")
    head = (f"{'size':<5} {'configuration':<22} {'tokens/s':>9} {'MFU':>6} {'peak MiB/rank':>13} "
            f"{'(abs)':>7} {'alloc MiB':>9} {'comm MB/step':>12} {'AG MB':>8} {'RS MB':>8} "
            f"{'loss':>7}  runs tokens/s")
    print(head)
    print("-" * len(head))
    for size, (s, rows) in results.items():
        for key, r in rows.items():
            alloc = f"{mib(r['alloc_peak']):9.1f}" if r["alloc_peak"] else f"{'-':>9}"
            print(f"{size:<5} {key + ' ' + CONFIGS[key][0].replace('FSDP2', peer):<22} "
                  f"{r['tokens_per_s']:9.1f} {100 * r['mfu']:5.1f}% {mib(r['mem_net']):13.1f} "
                  f"{mib(r['mem_abs']):7.0f} {alloc} {r['comm_bytes'] / 1e6:12.2f} "
                  f"{r['all_gather'] / 1e6:8.2f} {r['reduce_scatter'] / 1e6:8.2f} "
                  f"{r['final_loss']:7.4f}  {r['tokens_per_s_runs']}")
    print(f"\n{'size':<5} {'ratio':<44} {'value':>7} {'target':>8}")
    for size, (s, rows) in results.items():
        target_tps = ">= 1.25" if size == "10m" else ">= 1.0"
        for label, a, b, field, target in (
                (f"tokens/s shardtrain / {peer}", "a", "b", "tokens_per_s", target_tps),
                (f"peak memory/rank shardtrain / {peer}", "a", "b", "mem_net", "<= 0.9"),
                ("tokens/s FULL_SHARD / NO_SHARD", "a", "c", "tokens_per_s", ">= 0.85"),
                ("comm bytes FULL_SHARD / NO_SHARD", "a", "c", "comm_bytes", "~1.5"),
                ("comm bytes shardtrain / " + peer, "a", "b", "comm_bytes", "~1.0"),
                ("tokens/s shardtrain 1 proc / PyTorch 1 proc", "d", "e", "tokens_per_s", "-"),
                (f"tokens/s baseline / {peer}", "f", "b", "tokens_per_s", "-"),
                ("tokens/s shardtrain / baseline", "a", "f", "tokens_per_s", "-"),
                ("tokens/s FULL_SHARD 2 ranks / 1 process", "a", "d", "tokens_per_s", "-")):
            v = ratio(rows, a, b, field)
            if v is not None:
                print(f"{size:<5} {label:<44} {v:7.3f} {target:>8}")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shardtrain", default=os.path.join(REPO, "build", "bin", "shardtrain"))
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"),
                   help="a Python with torch and transformers (requirements-test.txt)")
    p.add_argument("--work", default="/tmp/shardscope-bench-trainer", help="scratch folder")
    p.add_argument("--sizes", default="10m,100m", help="comma list of " + ",".join(SIZES))
    p.add_argument("--configs", default="a,b,c,d,e", help="comma list of " + ",".join(CONFIGS))
    p.add_argument("--repeats", type=int, default=3, help="alternating runs per configuration")
    p.add_argument("--warmup", type=int, default=2, help="steps left out of the medians")
    p.add_argument("--steps", type=int, default=0, help="override every size's step count")
    p.add_argument("--peer", choices=["fsdp2", "fsdp1"], default="fsdp2")
    p.add_argument("--peak-flops", type=float, default=0.0,
                   help="GEMM peak FLOP/s per thread for MFU (default: measured once here)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    p.add_argument("--json", default="", help="also write the results to this file")
    p.add_argument("--baseline", default="",
                   help="another shardtrain binary, run as configuration f (before/after)")
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    # A private copy: a rebuild of build/bin/shardtrain during the runs cannot mix binaries.
    args.shardtrain_copy = os.path.join(args.work, "shardtrain")
    shutil.copy2(args.shardtrain, args.shardtrain_copy)
    args.baseline_copy = os.path.join(args.work, "shardtrain-baseline")
    if args.baseline:
        shutil.copy2(args.baseline, args.baseline_copy)
    if not args.peak_flops:
        args.peak_flops = max(measure_peak_flops(args.python) for _ in range(3))
    keys = [k for k in args.configs.split(",") if k]
    if "f" in keys and not args.baseline:
        raise SystemExit("configuration f needs --baseline PATH (a second shardtrain binary)")
    sizes = [z for z in args.sizes.split(",") if z]
    for size in sizes + ["null"]:
        s = dict(SIZES[size])
        if args.steps and size != "null":
            s["steps"] = args.steps
        SIZES[size] = s
        write_data(os.path.join(args.work, f"{size}.jsonl"), s)
        write_toml(os.path.join(args.work, f"{size}.toml"), s, f"{size}.jsonl")
    null_hwm = {k: run_one(args, k, "null", SIZES["null"], args.work, "base")["hwm"] for k in keys}
    results = {}
    for size in sizes:
        s = SIZES[size]
        print(f"# {size}: {param_count(s) / 1e6:.1f}M parameters, batch {s['batch']} x "
              f"seq {s['seq_len']}, {s['steps']} steps", file=sys.stderr)
        runs = {k: [] for k in keys}
        for rep in range(args.repeats):
            order = keys[rep % len(keys):] + keys[:rep % len(keys)]  # rotate: no fixed position
            for k in order:
                r = run_one(args, k, size, s, args.work, f"r{rep}")
                runs[k].append(r)
                print(f"#   run {rep} {k}: {r['tokens_per_s']:.1f} tokens/s, "
                      f"hwm {mib(r['hwm']):.0f} MiB", file=sys.stderr)
        results[size] = (s, summarize(args, size, s, runs, null_hwm))
    print_table(args, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"peak_flops": args.peak_flops, "null_hwm": null_hwm,
                       "results": {z: {"size": s, "rows": rows} for z, (s, rows) in
                                   results.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
