#!/usr/bin/env python3
"""The shapes VQA demo end to end (issue #4): make-demo-data -> train on 2 ranks -> exact match.

--mode ci (label integration): a small set and a few steps of examples/shapes-vqa.toml on 2
ranks; checks both ranks exit 0, `step` events, and an `eval` event whose `exact_match` is finite
and in [0, 1] next to a finite loss. No accuracy claim.

--mode demo (label demo, out of CI): the full example, plus the same run on images with nothing
drawn (--blank-images). Checks the exact-match error is at most half the error of the
per-question-type majority baseline (the train set's most frequent answer of each question type,
scored on the eval set), and that the blank run stays within 5 points of that baseline. Prints
the accuracies and the wall time of each run.
"""
import argparse
import collections
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "..", "examples", "shapes-vqa.toml")
TYPES = {"What colour": "colour", "What shape": "shape", "How many": "count", "Where": "position"}
FAILURES = []

MODES = {
    # train/eval samples, then --set overrides of the example
    "ci": (64, 16, ["train.max_steps=4", "train.batch_size=8", "eval.every=4", "eval.batches=2",
                    "train.log_every=1", "train.lr_warmup_steps=1"]),
    "demo": (4000, 192, []),
}


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def qa(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    out = []
    for r in rows:
        q = r["messages"][0]["content"][1]["text"]
        out.append((next(t for p, t in TYPES.items() if q.startswith(p)),
                    r["messages"][1]["content"]))
    return out


def majority_accuracy(data_dir):
    """Exact match of answering each eval question with its type's most frequent train answer."""
    counts = collections.defaultdict(collections.Counter)
    for kind, answer in qa(os.path.join(data_dir, "train.jsonl")):
        counts[kind][answer] += 1
    majority = {k: c.most_common(1)[0][0] for k, c in counts.items()}
    evals = qa(os.path.join(data_dir, "eval.jsonl"))
    return sum(majority[k] == a for k, a in evals) / len(evals)


def train(tool, run_dir, data_dir, overrides, world=2):
    """Two ranks of `shardtrain train` on the example; returns exit codes and rank 0's events."""
    os.makedirs(run_dir, exist_ok=True)
    sets = [f"model.path={data_dir}/model", f"data.train_path={data_dir}/train.jsonl",
            f"data.eval_path={data_dir}/eval.jsonl"] + overrides
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                   OMP_NUM_THREADS="1")
        cmd = [tool, "train", os.path.abspath(EXAMPLE), "--run-dir", run_dir]
        for s in sets:
            cmd += ["--set", s]
        procs.append(subprocess.Popen(
            cmd, cwd=run_dir, env=env,
            stdout=open(os.path.join(run_dir, f"events-rank-{rank}.jsonl"), "w"),
            stderr=open(os.path.join(run_dir, f"rank-{rank}.log"), "w")))
    codes = [p.wait(timeout=3600) for p in procs]
    with open(os.path.join(run_dir, "events-rank-0.jsonl")) as f:
        events = [json.loads(line) for line in f if line.strip()]
    if codes != [0] * world:
        with open(os.path.join(run_dir, "rank-0.log")) as f:
            print(f.read()[-1500:], file=sys.stderr)
    return codes, events


def make_data(tool, out, n_train, n_eval, blank=False):
    cmd = [tool, "make-demo-data", out, "--train", str(n_train), "--eval", str(n_eval)]
    proc = subprocess.run(cmd + (["--blank-images"] if blank else []), capture_output=True,
                          text=True, timeout=600)
    check(proc.returncode == 0, f"make-demo-data {os.path.basename(out)} ({proc.stderr[-300:]})")
    return proc.returncode == 0


def run(tool, work, label, n_train, n_eval, overrides, blank=False):
    data_dir = os.path.join(work, label + "-data")
    if not make_data(tool, data_dir, n_train, n_eval, blank):
        return None, None
    t0 = time.monotonic()
    codes, events = train(tool, os.path.join(work, label), data_dir, overrides)
    secs = time.monotonic() - t0
    check(codes == [0, 0], f"{label}: both ranks exit 0 ({codes}) in {secs:.0f} s")
    steps = [e for e in events if e.get("ev") == "step"]
    evals = [e for e in events if e.get("ev") == "eval"]
    check(bool(steps), f"{label}: {len(steps)} step events, last loss "
          f"{steps[-1]['loss'] if steps else None}")
    last = evals[-1]["metrics"] if evals else {}
    em = last.get("exact_match")
    check(isinstance(em, float) and math.isfinite(em) and 0.0 <= em <= 1.0,
          f"{label}: eval event has a finite exact_match ({em})")
    check(isinstance(last.get("loss"), float) and math.isfinite(last["loss"]),
          f"{label}: and a finite loss ({last.get('loss')})")
    return em, majority_accuracy(data_dir)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardtrain", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--mode", choices=sorted(MODES), default="ci")
    args = ap.parse_args()
    tool = os.path.abspath(args.shardtrain)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    n_train, n_eval, overrides = MODES[args.mode]
    em, base = run(tool, args.work, "shapes", n_train, n_eval, overrides)
    if args.mode == "demo" and em is not None:
        check((1 - em) <= 0.5 * (1 - base),
              f"exact match {em:.3f}: error {1 - em:.3f} <= half the majority baseline's error "
              f"{1 - base:.3f} (baseline accuracy {base:.3f})")
        blank_em, blank_base = run(tool, args.work, "blank", n_train, n_eval, overrides, True)
        if blank_em is not None:
            check(abs(blank_em - blank_base) <= 0.05,
                  f"blank images: exact match {blank_em:.3f} within 5 points of the baseline "
                  f"{blank_base:.3f}")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
