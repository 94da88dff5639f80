"""eval.probes on real ranks: a tiny Qwen2-VL run answers its probes at every evaluation and at
the end of training.

The demo's Qwen2-VL (make-demo-data), 2 FULL_SHARD ranks, 3 steps, eval.every = 2: the probes are
answered at step 2 (an evaluation) and step 3 (the end). Four probes: two share one image, one has
another image, one is text only and has neither id nor reference. Checked:
  - one `sample` event per probe at steps 2 and 3, in file order, from rank 0 only; ids from the
    lines (the line number where a line has none);
  - the tokens within eval.probe_max_new_tokens, and rank 1's share (probes 2 and 4) answered;
  - the scores equal what this script computes from the generated text and the reference
    (exact match after stripping, SQuAD-style token F1 on white-space words, CER as Levenshtein
    distance in code points over the reference's length); no scores without a reference;
  - each distinct image copied once into the run directory as probes/<sha256><ext> (the two
    probes with the same image name one file), with the original's bytes; the events name them;
  - a log line gives the seconds the probes took at each evaluation; rank 0's human log has one
    line per answer (its newlines escaped);
  - with eval.every = 0 (no evaluation) the probes are answered once, at the end (step 3);
  - `shardscope-cli samples RUN_DIR [--step N] [--json]` prints the same samples, and so does
    `shardscope-cli samples NAME` for a run started by `shardscope-cli run` (read from its run
    log, where the events went through the monitor);
  - a probe file with a bad line fails the run before step 1 with a config error naming the line.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

MAX_TOKENS = 5


def levenshtein(a, b):
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[len(b)]


def f1(text, ref):
    got, want = text.split(), ref.split()
    if not got or not want:
        return float(got == want)
    common = sum(min(got.count(w), want.count(w)) for w in set(got))
    if common == 0:
        return 0.0
    p, r = common / len(got), common / len(want)
    return 2 * p * r / (p + r)


def user(image, text):
    content = ([{"type": "image", "image": image}] if image else []) + [{"type": "text",
                                                                        "text": text}]
    return [{"role": "user", "content": content}]


def write_probes(path, img_a, img_b):
    lines = [
        {"id": "colour", "messages": user(img_a, "What colour is the shape?"), "reference": "red"},
        {"id": "shape", "messages": user(img_a, "What shape is it?"),
         "reference": "a red circle"},
        {"messages": [{"role": "user", "content": "How many shapes are there?"}]},
        {"id": "other", "messages": user(img_b, "Describe it."), "reference": "blue square"},
    ]
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(line) for line in lines) + "\n")


def write_config(path, demo, probes, every=2):
    evaluation = [f"every = {every}", "metrics = [\"loss\"]", "batches = 1"] if every else []
    with open(path, "w") as f:
        f.write("\n".join([
            "[model]", 'arch = "qwen2_vl"', f'path = "{demo}/model"',
            "[data]", f'train_path = "{demo}/train.jsonl"',
            f'eval_path = "{demo}/eval.jsonl"', 'format = "chat"', "seq_len = 256",
            "[train]", "max_steps = 3", "batch_size = 4", "lr = 1e-3", "log_every = 1",
            "ckpt_at_end = false", "seed = 5", "threads = 1",
            "[shard]", 'strategy = "FULL_SHARD"',
            "[eval]", *evaluation, f'probes = "{probes}"',
            f"probe_max_new_tokens = {MAX_TOKENS}"]) + "\n")
    return path


def check_samples(run_dir, demo, img_a, img_b):
    samples = ranks.events(run_dir, 0, "sample")
    check(not ranks.events(run_dir, 1, "sample"), "rank 1 wrote sample events")
    steps = [s["step"] for s in samples]
    check(steps == [2] * 4 + [3] * 4, f"sample steps {steps}, want four at step 2 and 3")
    refs = {"colour": "red", "shape": "a red circle", "3": None, "other": "blue square"}
    for s in samples:
        print(f"step {s['step']} probe {s['probe']}: {s['text']!r} ({s['tokens']} tokens) "
              f"em {s.get('exact_match')} f1 {s.get('f1')} cer {s.get('cer')}")
    check([s["probe"] for s in samples[:4]] == list(refs),
          f"probe ids {[s['probe'] for s in samples[:4]]}, want {list(refs)}")
    for s in samples:
        check(0 <= s["tokens"] <= MAX_TOKENS, f"{s['probe']}: {s['tokens']} tokens")
        ref = refs[s["probe"]]
        if ref is None:
            check(all(k not in s for k in ("reference", "exact_match", "f1", "cer")),
                  f"{s['probe']} has no reference but carries scores: {s}")
            continue
        text = s["text"]
        check(s["reference"] == ref, f"{s['probe']}: reference {s['reference']!r}")
        check(s["exact_match"] == (text.strip() == ref.strip()),
              f"{s['probe']}: exact_match {s['exact_match']} for {text!r} vs {ref!r}")
        check(abs(s["f1"] - f1(text, ref)) < 1e-12,
              f"{s['probe']}: f1 {s['f1']}, want {f1(text, ref)} for {text!r} vs {ref!r}")
        cer = levenshtein(text, ref) / len(ref)
        check(abs(s["cer"] - cer) < 1e-12,
              f"{s['probe']}: cer {s['cer']}, want {cer} for {text!r} vs {ref!r}")
    # Rank 1 answers probes 2 and 4 (indices 1 and 3): their answers came back to rank 0.
    check(any(s["tokens"] > 0 for s in samples if s["probe"] in ("shape", "other")),
          "rank 1's probes have no generated tokens at any step")
    # Images: one copy per distinct image, named by its content.
    def digest(rel):
        with open(os.path.join(demo, rel), "rb") as f:
            data = f.read()
        return "probes/" + hashlib.sha256(data).hexdigest() + os.path.splitext(rel)[1].lower(), data
    (name_a, bytes_a), (name_b, bytes_b) = digest(img_a), digest(img_b)
    copies = sorted(os.listdir(os.path.join(run_dir, "probes")))
    check(copies == sorted({os.path.basename(name_a), os.path.basename(name_b)}),
          f"probes/ holds {copies}, want the two images once each")
    for name, data in ((name_a, bytes_a), (name_b, bytes_b)):
        with open(os.path.join(run_dir, name), "rb") as f:
            check(f.read() == data, f"{name} differs from its original")
    images = {s["probe"]: s["images"] for s in samples[:4]}
    check(images == {"colour": [name_a], "shape": [name_a], "3": [], "other": [name_b]},
          f"the events' images {images}")
    with open(os.path.join(run_dir, "rank-0.log")) as f:
        human = [line for line in f.read().splitlines() if line.startswith("probe ")]
    check(len(human) == len(samples) and human[0].startswith("probe colour at step 2: \"") and
          "(exact match " in human[0], f"rank-0.log's probe lines: {human}")
    logs = [e["message"] for e in ranks.events(run_dir, 0, "log")]
    for step in (2, 3):
        check(any(m.startswith(f"probes at step {step}: ") and " s, " in m for m in logs),
              f"no log line with the seconds of the probes at step {step}: {logs}")


def unmarked(printed):
    """`samples --json`'s lines without their `verdict` field, which must be null: nobody has
    marked these answers (a run directory has no run log to hold a mark)."""
    check(all(p.get("verdict", "missing") is None for p in printed),
          f"samples --json: every verdict should be null: {printed}")
    return [{k: v for k, v in p.items() if k != "verdict"} for p in printed]


def check_cli(args, run_dir):
    samples = ranks.events(run_dir, 0, "sample")
    drop = ("v", "ev", "rank", "seq", "t")
    want = [{k: v for k, v in s.items() if k not in drop} for s in samples]
    out = subprocess.run([args.cli, "samples", run_dir, "--json"], capture_output=True, text=True,
                         timeout=60)
    check(out.returncode == 0, f"samples --json exited {out.returncode}: {out.stderr}")
    got = unmarked([json.loads(line) for line in out.stdout.splitlines() if line.strip()])
    check(got == want, f"samples --json printed {got}, want {want}")
    out = subprocess.run([args.cli, "samples", run_dir, "--step", "3", "--json"],
                         capture_output=True, text=True, timeout=60)
    got = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    check([g["step"] for g in got] == [3] * 4, f"samples --step 3 printed steps {got}")
    out = subprocess.run([args.cli, "samples", run_dir, "--step", "2"], capture_output=True,
                         text=True, timeout=60)
    print(out.stdout)
    lines = out.stdout.splitlines()
    check(out.returncode == 0 and lines[0].split()[:6] == ["step", "probe", "match", "f1", "cer",
                                                           "tokens"] and len(lines) == 5,
          f"samples --step 2 printed:\n{out.stdout}{out.stderr}")
    first = samples[0]
    check(lines[1].split()[:3] == ["2", "colour", "yes" if first["exact_match"] else "no"],
          f"the first row {lines[1]!r} does not match {first}")


def check_run_log(args, work, config):
    """The same experiment through `shardscope-cli run`: the samples read back from the run log
    equal the run directory's events."""
    with open(config) as f:
        text = f.read()
    launched = os.path.join(work, "launched.toml")
    with open(launched, "w") as f:
        f.write(text + f'[launch]\nnproc_per_node = 2\ntrainer = "{args.shardtrain}"\n')
    db = os.path.join(work, "runs.db")
    out = subprocess.run([args.cli, "--db", db, "--json", "run", launched], capture_output=True,
                         text=True, timeout=600)
    check(out.returncode == 0, f"shardscope-cli run exited {out.returncode}:\n{out.stdout}"
                               f"{out.stderr}")
    name = json.loads(out.stdout.strip().splitlines()[-1])["name"]
    shown = subprocess.run([args.cli, "--db", db, "--json", "show", name], capture_output=True,
                           text=True, timeout=60)
    run_dir = json.loads(shown.stdout)["run_dir"]
    drop = ("v", "ev", "rank", "seq", "t")
    want = [{k: v for k, v in s.items() if k not in drop}
            for s in ranks.events(run_dir, 0, "sample")]
    out = subprocess.run([args.cli, "--db", db, "--json", "samples", name], capture_output=True,
                         text=True, timeout=60)
    got = unmarked([json.loads(line) for line in out.stdout.splitlines() if line.strip()])
    check(len(want) == 8 and got == want,
          f"samples {name} from the run log printed {got}, want {want}")


def check_bad_line(args, work, demo):
    bad = os.path.join(demo, "bad_probes.jsonl")
    with open(bad, "w") as f:
        f.write(json.dumps({"messages": user(None, "ok")}) + "\n")
        f.write(json.dumps({"messages": user("img/missing.png", "where?")}) + "\n")
    config = write_config(os.path.join(work, "bad.toml"), demo, bad)
    run_dir = ranks.fresh_dir(os.path.join(work, "bad"))
    codes = ranks.run_ranks(args.shardtrain, ["train", config], run_dir, 2)
    check(all(c != 0 for c in codes), f"a bad probe line: exit codes {codes}")
    errors = ranks.events(run_dir, 0, "error")
    print(f"bad line: {errors}")
    check(errors and errors[0]["kind"] == "config" and
          "bad_probes.jsonl:2:" in errors[0]["message"] and "missing.png" in errors[0]["message"],
          f"the error does not name bad_probes.jsonl:2 and the image: {errors}")
    check(not ranks.events(run_dir, 0, "step"), "the run trained before failing on its probes")


def main_body(args):
    work = ranks.fresh_dir(args.work)
    demo = os.path.join(work, "demo")
    made = subprocess.run([args.shardtrain, "make-demo-data", demo, "--train", "8", "--eval", "4"],
                          capture_output=True, text=True)
    check(made.returncode == 0, f"make-demo-data failed:\n{made.stdout}\n{made.stderr}")
    img_a, img_b = sorted(f"img/{n}" for n in os.listdir(os.path.join(demo, "img")))[:2]
    probes = os.path.join(demo, "probes.jsonl")
    write_probes(probes, img_a, img_b)
    config = write_config(os.path.join(work, "exp.toml"), demo, probes)
    run_dir = os.path.join(work, "run")
    with ranks.timed("2 ranks, 3 steps, probes at steps 2 and 3"):
        ranks.train(args.shardtrain, config, run_dir, 2)
    check_samples(run_dir, demo, img_a, img_b)
    check_cli(args, run_dir)
    check_run_log(args, work, config)
    config = write_config(os.path.join(work, "end.toml"), demo, probes, every=0)
    end_dir = ranks.train(args.shardtrain, config, os.path.join(work, "end"), 2)
    steps = [s["step"] for s in ranks.events(end_dir, 0, "sample")]
    check(steps == [3] * 4, f"eval.every = 0: sample steps {steps}, want four at the end (3)")
    check_bad_line(args, work, demo)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--cli", required=True)
    args = parser.parse_args()
    ranks.main_guard(lambda: main_body(args))


if __name__ == "__main__":
    main()
