#!/usr/bin/env python3
"""`shardtrain make-demo-data`: the shapes VQA set and its tiny Qwen2-VL folder.

Checked: the same seed writes byte-identical trees (images, JSONL, tokenizer, config, weights);
another seed writes other images and other weights; train and eval use different image files with
different pixels; every question type has >= 4 answer classes in each split and the stderr
summary counts the JSONL's answers; the model folder needs no download: `shardtrain tokenize`
reads its tokenizer (special tokens and whole-word answers), and `shardtrain forward` runs the
eval set through the model with a finite loss; bad arguments give an `error` event.
"""
import argparse
import collections
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
from checks import FAILURES, check, finish  # noqa: E402

TYPES = {"What colour": "colour", "What shape": "shape", "How many": "count", "Where": "position"}


def make(tool, out, *args):
    proc = subprocess.run([tool, "make-demo-data", out, *args], capture_output=True, text=True,
                          timeout=120)
    return proc


def tree(root):
    files = {}
    for base, _, names in os.walk(root):
        for n in names:
            path = os.path.join(base, n)
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return files


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def answers(rows):
    counts = collections.defaultdict(collections.Counter)
    for r in rows:
        q = r["messages"][0]["content"][1]["text"]
        kind = next(t for p, t in TYPES.items() if q.startswith(p))
        counts[kind][r["messages"][1]["content"]] += 1
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardtrain", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    tool = os.path.abspath(args.shardtrain)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    a, b, c = (os.path.join(args.work, n) for n in "abc")
    runs = [make(tool, a, "--train", "120", "--eval", "100", "--seed", "3"),
            make(tool, b, "--train", "120", "--eval", "100", "--seed", "3"),
            make(tool, c, "--train", "120", "--eval", "100", "--seed", "4")]
    for p in runs:
        check(p.returncode == 0, f"make-demo-data exits 0 ({p.returncode}: {p.stderr[-300:]})")
    if FAILURES:
        return 1
    ta, tb, tc = tree(a), tree(b), tree(c)
    check(ta == tb, f"same seed: {len(ta)} files byte-identical")
    for name in ("train.jsonl", "eval.jsonl", "model/tokenizer.json", "model/config.json",
                 "model/preprocessor_config.json", "model/model.safetensors"):
        check(name in ta, f"{name} written")
    check(ta["model/model.safetensors"] != tc["model/model.safetensors"],
          "another seed: other initial weights")
    imgs = [k for k in ta if k.startswith("img/")]
    check(sum(ta[k] != tc.get(k) for k in imgs) == len(imgs), "another seed: other images")
    train, evals = read_jsonl(os.path.join(a, "train.jsonl")), read_jsonl(os.path.join(a, "eval.jsonl"))
    check(len(train) == 120 and len(evals) == 100, f"{len(train)} train and {len(evals)} eval lines")
    img = lambda rows: {r["messages"][0]["content"][0]["image"] for r in rows}  # noqa: E731
    check(not img(train) & img(evals), "train and eval name different image files")
    pixels = lambda rows: {ta[p] for p in img(rows)}  # noqa: E731
    check(not pixels(train) & pixels(evals), "no eval image has the pixels of a train image")
    summary = json.loads(runs[0].stderr.strip().splitlines()[-1])
    for split, rows in (("train", train), ("eval", evals)):
        counts = answers(rows)
        check(set(counts) == set(TYPES.values()), f"{split}: all four question types")
        for kind, classes in sorted(counts.items()):
            check(len(classes) >= 4, f"{split} {kind}: {len(classes)} answer classes >= 4")
        check(summary[split] == {k: dict(v) for k, v in counts.items()},
              f"{split}: the printed summary counts the JSONL's answers")
    model = os.path.join(a, "model")
    tok = subprocess.run([tool, "tokenize", "--tokenizer", model],
                         input="<|im_start|>assistant\ntriangle<|im_end|>", capture_output=True,
                         text=True, timeout=60)
    ids = json.loads(tok.stdout) if tok.returncode == 0 else []
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    check(len(ids) == 5 and ids[0] >= 256 and ids[-1] == config["eos_token_id"],
          f"tokenizer: specials and a whole-word answer token ({ids})")
    fwd = subprocess.run([tool, "forward", "--model", model, "--data",
                          os.path.join(a, "eval.jsonl"), "--out", os.path.join(args.work, "f.st")],
                         capture_output=True, text=True, timeout=120)
    done = json.loads(fwd.stdout.strip().splitlines()[-1]) if fwd.stdout.strip() else {}
    loss = done.get("objective")
    check(fwd.returncode == 0 and isinstance(loss, float) and math.isfinite(loss)
          and abs(loss - math.log(config["vocab_size"])) < 1.0,
          f"forward over the eval set: loss {loss} near ln(vocab) at the random init")
    bad = make(tool, os.path.join(args.work, "bad"), "--image-size", "20")
    last = json.loads(bad.stdout.strip().splitlines()[-1]) if bad.stdout.strip() else {}
    check(bad.returncode != 0 and last.get("ev") == "error" and "56" in last.get("message", ""),
          f"a too small image size is an error event ({last.get('message')})")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
