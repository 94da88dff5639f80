#!/usr/bin/env python3
"""The shapes VQA demo end to end: make-demo-data -> train on 2 ranks -> exact match.

--mode ci (label integration): a small set and a few steps of examples/shapes-vqa.toml on 2
ranks; checks both ranks exit 0, `step` events, and an `eval` event whose `exact_match` is finite
and in [0, 1] next to a finite loss. No accuracy claim.

--mode demo (label demo, out of CI): the full example, plus the same run with every image's
pixel values replaced by a constant (data.blank_images = true: same samples, same image tokens,
nothing to see). After each run `shardtrain generate` answers the whole eval set from the final
checkpoint. Checks the exact-match error is at most half the error of the per-question-type
majority baseline (the train set's most frequent answer of each question type, scored on the eval
set), and that the blank run stays within 5 points of that baseline. Prints the per-type table
(baseline, trained, blanked), a few answers next to their labels, and the wall time of each run.
"""
import argparse
import collections
import json
import math
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
from checks import check, finish, free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "..", "examples", "shapes-vqa.toml")
TYPES = {"What colour": "colour", "What shape": "shape", "How many": "count", "Where": "position"}
MODES = {
    # train/eval samples, then --set overrides of the example
    "ci": (64, 16, ["train.max_steps=4", "train.batch_size=8", "eval.every=4", "eval.batches=2",
                    "train.log_every=1", "train.lr_warmup_steps=1"]),
    # 3000 train images: the trainer holds every image's pixel values in memory (168 px: 0.7 MB
    # each per rank), 600 steps of 32 see each about 6 times.
    "demo": (3000, 400, ["train.ckpt_at_end=true"]),
}


def qa(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    out = []
    for r in rows:
        q = r["messages"][0]["content"][1]["text"]
        out.append((next(t for p, t in TYPES.items() if q.startswith(p)),
                    r["messages"][1]["content"]))
    return out


def majority(data_dir):
    """Each question type's most frequent train answer."""
    counts = collections.defaultdict(collections.Counter)
    for kind, answer in qa(os.path.join(data_dir, "train.jsonl")):
        counts[kind][answer] += 1
    return {k: c.most_common(1)[0][0] for k, c in counts.items()}


def majority_accuracy(data_dir):
    """Exact match of answering each eval question with its type's most frequent train answer."""
    best = majority(data_dir)
    evals = qa(os.path.join(data_dir, "eval.jsonl"))
    return sum(best[k] == a for k, a in evals) / len(evals)


def per_type(data_dir, answers=None):
    """Exact match per question type (and "all"): of `answers` (index -> match), or of the
    majority baseline when None."""
    best = majority(data_dir)
    hits, total = collections.Counter(), collections.Counter()
    for i, (kind, answer) in enumerate(qa(os.path.join(data_dir, "eval.jsonl"))):
        ok = best[kind] == answer if answers is None else answers.get(i, False)
        for k in (kind, "all"):
            hits[k] += ok
            total[k] += 1
    return {k: hits[k] / total[k] for k in total}


def launch(tool, verb, run_dir, data_dir, overrides, extra=(), world=2):
    """`world` ranks of `shardtrain VERB` on the example; returns exit codes and rank 0's events
    (in VERB-rank-N files of the run directory)."""
    os.makedirs(run_dir, exist_ok=True)
    sets = [f"model.path={data_dir}/model", f"data.train_path={data_dir}/train.jsonl",
            f"data.eval_path={data_dir}/eval.jsonl",
            f"eval.probes={data_dir}/probes.jsonl"] + overrides
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                   OMP_NUM_THREADS="1")
        cmd = [tool, verb, os.path.abspath(EXAMPLE), "--run-dir", run_dir, *extra]
        for s in sets:
            cmd += ["--set", s]
        procs.append(subprocess.Popen(
            cmd, cwd=run_dir, env=env,
            stdout=open(os.path.join(run_dir, f"{verb}-events-rank-{rank}.jsonl"), "w"),
            stderr=open(os.path.join(run_dir, f"{verb}-rank-{rank}.log"), "w")))
    codes = [p.wait(timeout=3600) for p in procs]
    with open(os.path.join(run_dir, f"{verb}-events-rank-0.jsonl")) as f:
        events = [json.loads(line) for line in f if line.strip()]
    if codes != [0] * world:
        with open(os.path.join(run_dir, f"{verb}-rank-0.log")) as f:
            print(f.read()[-1500:], file=sys.stderr)
    return codes, events


def make_data(tool, out, n_train, n_eval):
    cmd = [tool, "make-demo-data", out, "--train", str(n_train), "--eval", str(n_eval)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    check(proc.returncode == 0, f"make-demo-data {os.path.basename(out)} ({proc.stderr[-300:]})")
    return proc.returncode == 0


def train(tool, work, label, data_dir, overrides):
    """One training run; checks its events and returns the last eval metrics."""
    t0 = time.monotonic()
    codes, events = launch(tool, "train", os.path.join(work, label), data_dir, overrides)
    secs = time.monotonic() - t0
    check(codes == [0, 0], f"{label}: both ranks exit 0 ({codes}) in {secs:.0f} s")
    steps = [e for e in events if e.get("ev") == "step"]
    evals = [e for e in events if e.get("ev") == "eval"]
    check(bool(steps), f"{label}: {len(steps)} step events, first loss "
          f"{steps[0]['loss'] if steps else None}, last {steps[-1]['loss'] if steps else None}")
    last = evals[-1]["metrics"] if evals else {}
    for name in ("exact_match", "accuracy"):
        value = last.get(name)
        check(isinstance(value, float) and math.isfinite(value) and 0.0 <= value <= 1.0,
              f"{label}: eval event has a finite {name} in [0, 1] ({value})")
    check(isinstance(last.get("loss"), float) and math.isfinite(last["loss"]),
          f"{label}: and a finite loss ({last.get('loss')})")
    return last


def answers(tool, work, label, data_dir, overrides):
    """`shardtrain generate` of the whole eval set from the run's last checkpoint: index ->
    match, and the rows for printing."""
    run_dir = os.path.join(work, label)
    out = os.path.join(run_dir, "answers.jsonl")
    codes, _ = launch(tool, "generate", run_dir, data_dir, overrides,
                      ["--checkpoint", "auto", "--out", out])
    check(codes == [0, 0], f"{label}: generate exits 0 on both ranks ({codes})")
    rows = []
    for path in (out, out + ".rank-1"):
        if os.path.exists(path):
            with open(path) as f:
                rows += [json.loads(line) for line in f if line.strip()]
    return {r["index"]: r["match"] for r in rows}, sorted(rows, key=lambda r: r["index"])


def table(columns):
    """Prints exact match per question type, one column per (name, {type: rate})."""
    kinds = sorted(k for k in columns[0][1] if k != "all") + ["all"]
    print("type      " + "".join(f"{name:>10s}" for name, _ in columns))
    for k in kinds:
        print(f"{k:10s}" + "".join(f"{col.get(k, float('nan')):10.3f}" for _, col in columns))


def demo(tool, work, data_dir, overrides):
    """The trained and the blanked run on the same data, each answered by `generate`."""
    base = per_type(data_dir)
    results = {}
    for label, extra in (("trained", []), ("blanked", ["data.blank_images=true"])):
        t0 = time.monotonic()
        last = train(tool, work, label, data_dir, overrides + extra)
        matches, rows = answers(tool, work, label, data_dir, overrides + extra)
        results[label] = per_type(data_dir, matches)
        print(f"{label}: eval event {last}; wall time of train + generate "
              f"{time.monotonic() - t0:.0f} s", flush=True)
        for r in rows[:6]:
            print(f"  eval {r['index']}: generated {r['text']!r}, label {r['answer']!r}")
    table([("baseline", base), ("trained", results["trained"]), ("blanked", results["blanked"])])
    em, blank, b = results["trained"]["all"], results["blanked"]["all"], base["all"]
    check((1 - em) <= 0.5 * (1 - b),
          f"exact match {em:.3f}: error {1 - em:.3f} <= half the majority baseline's error "
          f"{1 - b:.3f} (baseline accuracy {b:.3f})")
    check(abs(blank - b) <= 0.05,
          f"blank images: exact match {blank:.3f} within 5 points of the baseline {b:.3f}")


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
    data_dir = os.path.join(args.work, "data")
    t0 = time.monotonic()
    if make_data(tool, data_dir, n_train, n_eval):
        if args.mode == "demo":
            demo(tool, args.work, data_dir, overrides)
        else:
            train(tool, args.work, "shapes", data_dir, overrides)
    print(f"wall time {time.monotonic() - t0:.0f} s")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
