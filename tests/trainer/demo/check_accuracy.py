#!/usr/bin/env python3
"""`[eval] metrics = ["accuracy"]`: token accuracy over label tokens, under every
sharding strategy.

A few steps of the shapes demo model on 2 ranks with FULL_SHARD, SHARD_GRAD_OP, NO_SHARD and
HYBRID_SHARD (4 ranks: two nodes of two), each exporting its final weights. The eval event of the last step must carry
`accuracy`, and it must equal what an independent computation gives for the exported weights:
`shardtrain forward` (one process, unsharded) writes each eval sample's logits, and this script
counts the label tokens whose argmax logit (at the position before) is the label. Near-ties may
flip between the sharded and the unsharded forward, so one token of slack is allowed. The eval
loss must equal forward's mean loss. Standard library only (safetensors read by hand).
"""
import argparse
import array
import json
import math
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
from checks import check, finish, free_port  # noqa: E402

STRATEGIES = ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"]


def config(data, strategy):
    return f"""[model]
arch = "qwen2_vl"
path = "{data}/model"
[data]
train_path = "{data}/train.jsonl"
eval_path = "{data}/eval.jsonl"
format = "chat"
seq_len = 64
[train]
max_steps = 8
batch_size = 8
lr = 3e-3
lr_warmup_steps = 1
log_every = 1
seed = 3
[shard]
strategy = "{strategy}"
[eval]
every = 8
batches = 2
metrics = ["loss", "accuracy"]
"""


def train(tool, run_dir, toml, export):
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, "exp.toml")
    with open(path, "w") as f:
        f.write(toml)
    port = str(free_port())
    procs = []
    # HYBRID_SHARD needs two "nodes" of two ranks (shard inside, replicate across).
    world, local = (4, 2) if "HYBRID_SHARD" in toml else (2, 2)
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank % local),
                   LOCAL_WORLD_SIZE=str(local), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            [tool, "train", path, "--run-dir", run_dir, "--export", export], cwd=run_dir, env=env,
            stdout=open(os.path.join(run_dir, f"events-rank-{rank}.jsonl"), "w"),
            stderr=open(os.path.join(run_dir, f"rank-{rank}.log"), "w")))
    codes = [p.wait(timeout=600) for p in procs]
    with open(os.path.join(run_dir, "events-rank-0.jsonl")) as f:
        events = [json.loads(line) for line in f if line.strip()]
    if codes != [0] * world:
        with open(os.path.join(run_dir, "rank-0.log")) as f:
            print(f.read()[-1500:], file=sys.stderr)
    return codes, events


def read_safetensors(path):
    """name -> (shape, flat list of values) for the F32 and I64 tensors of a file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = blob[8 + n + begin:8 + n + end]
        kind = {"F32": "f", "I64": "q"}.get(info["dtype"])
        if kind:
            values = array.array(kind)
            values.frombytes(raw)
            out[name] = (info["shape"], values)
    return out


def expected_accuracy(tensors):
    """Label tokens (t >= 1, label != -100) and those whose argmax logit at t - 1 is the label."""
    hits = total = 0
    i = 0
    while f"labels.{i}" in tensors:
        labels = tensors[f"labels.{i}"][1]
        (T, V), logits = tensors[f"logits.{i}"]
        for t in range(1, T):
            if labels[t] == -100:
                continue
            row = logits[(t - 1) * V:t * V]
            total += 1
            hits += max(range(V), key=row.__getitem__) == labels[t]
        i += 1
    return hits, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardtrain", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    tool = os.path.abspath(args.shardtrain)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    data = os.path.join(args.work, "data")
    # 84-pixel images (9 image tokens) keep this check's sequences within seq_len 64 and its four
    # strategies cheap; token accuracy does not depend on the layout.
    made = subprocess.run([tool, "make-demo-data", data, "--train", "64", "--eval", "16",
                           "--image-size", "84"],
                          capture_output=True, text=True, timeout=300)
    check(made.returncode == 0, f"make-demo-data ({made.stderr[-300:]})")
    for strategy in STRATEGIES if made.returncode == 0 else []:
        run_dir = os.path.join(args.work, strategy)
        export = os.path.join(run_dir, "export")
        codes, events = train(tool, run_dir, config(data, strategy), export)
        check(set(codes) == {0}, f"{strategy}: every rank exits 0 ({codes})")
        evals = [e["metrics"] for e in events if e.get("ev") == "eval"]
        metrics = evals[-1] if evals else {}
        acc = metrics.get("accuracy")
        check(isinstance(acc, float) and 0.0 <= acc <= 1.0,
              f"{strategy}: eval event has accuracy ({metrics})")
        out = os.path.join(run_dir, "forward.safetensors")
        fwd = subprocess.run([tool, "forward", "--model", export, "--data",
                              os.path.join(data, "eval.jsonl"), "--out", out],
                             capture_output=True, text=True, timeout=300)
        check(fwd.returncode == 0, f"{strategy}: forward of the export ({fwd.stderr[-300:]})")
        if fwd.returncode != 0 or not isinstance(acc, float):
            continue
        hits, total = expected_accuracy(read_safetensors(out))
        check(total > 0 and abs(acc * total - hits) <= 1.0,
              f"{strategy}: accuracy {acc:.4f} = argmax hits {hits} / {total} label tokens "
              f"({hits / max(1, total):.4f}) of the unsharded forward, within one token")
        loss = json.loads(fwd.stdout.strip().splitlines()[-1]).get("objective")
        check(math.isclose(metrics.get("loss", math.nan), loss, rel_tol=1e-4),
              f"{strategy}: eval loss {metrics.get('loss')} = forward's mean loss {loss}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
