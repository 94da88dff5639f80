#!/usr/bin/env python3
"""The memory estimate against the measured peak per rank, on CPU: full fine-tuning, LoRA and
QLoRA, on the tiny text model at a few sizes and on the tiny Qwen2-VL that `shardtrain
make-demo-data` writes (Hugging Face layout, images), FULL_SHARD on 2 local ranks, fp32, a few
steps each. For each configuration it runs `shardscope-cli run` into a scratch run log and prints
the estimate (`hello.mem_estimate`, the formulas' figure; the run log's calibration is not
applied) beside the highest `mem.peak` of any rank (the trainer's counting allocator), and their
ratio. With --check TOL it exits 1 when any ratio is off by more than TOL (CTest's
tst_estimate_peak runs the small models so); --large adds bigger text models (42M, 101M and
218M parameters: minutes, and some 6 GiB of memory per rank at the largest).

Usage: bench/memory/estimate_vs_peak.py --bin build/bin [--steps 3] [--only text|vl]
           [--models text-h32,vl] [--large] [--check 0.10]
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

MIB = 1024.0 * 1024.0
# (label, tiny_hidden_size, tiny_layers, tiny_heads, tiny_vocab_size)
TEXT_SIZES = [("text-h32", 32, 2, 4, 256), ("text-h128", 128, 4, 4, 1024),
              ("text-h256", 256, 6, 8, 4096)]
LARGE_SIZES = [("text-h512", 512, 8, 8, 8192), ("text-h768", 768, 8, 12, 16384),
               ("text-h1024", 1024, 11, 16, 16384)]
MODES = {
    "full": "",
    "lora": "[lora]\nenabled = true\nr = 4\nalpha = 8\n",
    # Blocks of 32 weights: the smallest model's rows are 32 wide (the default 64 would span two).
    "qlora": "[lora]\nenabled = true\nr = 4\nalpha = 8\nquantize = \"nf4\"\nquant_block_size = 32\n",
}
VL_LORA_TARGETS = 'target_modules = ["q_proj", "v_proj", "qkv"]\n'
# The trainer's estimate (hello.mem_estimate) bounds chat rows by what the loaded samples hold
# (the longest sample; packed, a full row with as many image samples as the shortest fits). The
# demo's samples are 66-69 tokens with one image: at seq_len 70 the rows nearly fill seq_len; at
# 96 they are a third shorter (the data.seq_len bound alone was 18-45% high there); packed at 140,
# a row holds two samples and two images.
VL_SEQ_LEN = 70
VL_LOOSE_SEQ_LEN = 96
VL_PACK_SEQ_LEN = 140


def text_experiment(work, size, mode, steps, trainer):
    label, hidden, layers, heads, vocab = size
    data = os.path.join(work, f"tokens-{vocab}.jsonl")
    if not os.path.exists(data):
        with open(data, "w") as f:
            for i in range(64):
                f.write(json.dumps({"input_ids": [(i * 7 + j * (i % 5 + 1)) % vocab
                                                  for j in range(64)]}) + "\n")
    return f"""[experiment]
name = "{label}-{mode}"
[model]
arch = "tiny"
tiny_vocab_size = {vocab}
tiny_hidden_size = {hidden}
tiny_layers = {layers}
tiny_heads = {heads}
[data]
train_path = "{data}"
format = "tokens"
seq_len = 64
[train]
max_steps = {steps}
batch_size = 8
lr = 1e-3
log_every = 1
mem_every = 1
ckpt_at_end = false
[shard]
strategy = "FULL_SHARD"
device = "cpu"
{MODES[mode]}
[launch]
kind = "local"
nproc_per_node = 2
threads_per_rank = 1
trainer = "{trainer}"
"""


def vl_experiment(work, mode, steps, trainer, seq_len=VL_SEQ_LEN, pack=False):
    lora = MODES[mode] + (VL_LORA_TARGETS if mode != "full" else "")
    return f"""[experiment]
name = "vl-{mode}-{seq_len}{'-pack' if pack else ''}"
[model]
arch = "qwen2_vl"
path = "{work}/vl/model"
[data]
train_path = "{work}/vl/train.jsonl"
format = "chat"
seq_len = {seq_len}
pack = {'true' if pack else 'false'}
[train]
max_steps = {steps}
batch_size = 4
micro_batch_size = 1
lr = 1e-3
log_every = 1
mem_every = 1
ckpt_at_end = false
[shard]
strategy = "FULL_SHARD"
device = "cpu"
{lora}
[launch]
kind = "local"
nproc_per_node = 2
threads_per_rank = 1
trainer = "{trainer}"
"""


def measure(cli, db, path):
    start = time.time()
    out = subprocess.run([cli, "--db", db, "--json", "run", path], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        return None, f"run failed ({out.returncode}): {out.stderr.strip()[-300:]}"
    run_id = json.loads(out.stdout.strip().splitlines()[-1])["id"]
    with sqlite3.connect(db) as con:
        est = {}
        params = 0
        for rank, text in con.execute(
                "SELECT rank, json FROM events WHERE run_id = ? AND kind = 'hello'", (run_id,)):
            hello = json.loads(text)
            est[rank] = hello["mem_estimate"]
            params = hello["params"]["total"]
        peak = {}
        for rank, text in con.execute(
                "SELECT rank, json FROM events WHERE run_id = ? AND kind = 'mem'", (run_id,)):
            peak[rank] = max(peak.get(rank, 0), json.loads(text)["peak"])
    worst = max(peak, key=lambda r: peak[r] / est[r])
    return {"params": params, "estimate": est[worst], "peak": peak[worst],
            "seconds": time.time() - start}, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="folder with shardscope-cli and shardtrain")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--only", choices=["text", "vl"])
    ap.add_argument("--models", default="",
                    help="comma list of models to run (text-h32, text-h128, ..., vl)")
    ap.add_argument("--large", action="store_true", help="add the 42M, 101M and 218M text models")
    ap.add_argument("--check", type=float, default=0.0,
                    help="exit 1 when any estimate / peak is off 1 by more than this")
    args = ap.parse_args()
    wanted = set(filter(None, args.models.split(",")))
    cli = os.path.abspath(os.path.join(args.bin, "shardscope-cli"))
    trainer = os.path.abspath(os.path.join(args.bin, "shardtrain"))
    rows = []
    with tempfile.TemporaryDirectory() as work:
        db = os.path.join(work, "runs.db")
        configs = []
        if args.only != "vl":
            for size in TEXT_SIZES + (LARGE_SIZES if args.large else []):
                if wanted and size[0] not in wanted:
                    continue
                for mode in MODES:
                    configs.append((size[0], mode,
                                    text_experiment(work, size, mode, args.steps, trainer)))
        if args.only != "text" and (not wanted or "vl" in wanted):
            made = subprocess.run([trainer, "make-demo-data", os.path.join(work, "vl"), "--train",
                                   "16", "--eval", "0"], capture_output=True, text=True)
            if made.returncode != 0:
                sys.exit("make-demo-data failed: " + made.stderr)
            for mode in MODES:
                configs.append(("qwen2-vl-demo", mode, vl_experiment(work, mode, args.steps,
                                                                     trainer)))
            for mode in MODES:
                configs.append(("qwen2-vl-s96", mode, vl_experiment(
                    work, mode, args.steps, trainer, VL_LOOSE_SEQ_LEN)))
            for mode in ["lora"] if args.check else MODES:
                configs.append(("qwen2-vl-pack", mode, vl_experiment(
                    work, mode, args.steps, trainer, VL_PACK_SEQ_LEN, pack=True)))
        print(f"{'model':<14} {'mode':<6} {'params':>10} {'estimate MiB':>13} {'peak MiB':>9} "
              f"{'est/peak':>9}")
        for model, mode, text in configs:
            path = os.path.join(work, f"{model}-{mode}.toml")
            with open(path, "w") as f:
                f.write(text)
            got, error = measure(cli, db, path)
            if error:
                print(f"{model:<14} {mode:<6} {error}")
                rows.append({"model": model, "mode": mode, "error": error})
                continue
            ratio = got["estimate"] / got["peak"]
            rows.append({"model": model, "mode": mode, **got, "ratio": ratio})
            print(f"{model:<14} {mode:<6} {got['params']:>10} {got['estimate'] / MIB:>13.2f} "
                  f"{got['peak'] / MIB:>9.2f} {ratio:>9.3f}", flush=True)
    print(json.dumps(rows))
    if args.check > 0:
        bad = [r for r in rows if "error" in r or abs(r["ratio"] - 1) > args.check]
        for r in bad:
            print(f"off by more than {args.check:.0%}: {r['model']} {r['mode']}: "
                  f"{r.get('error') or 'estimate / peak %.3f' % r['ratio']}", file=sys.stderr)
        sys.exit(1 if bad or not rows else 0)


if __name__ == "__main__":
    main()
