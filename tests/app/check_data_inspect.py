#!/usr/bin/env python3
"""`shardscope-cli data inspect` against the trainer itself, on the demo's tiny Qwen2-VL
(`shardtrain make-demo-data`):
  - for each loadable line of a crafted file (the demo's image question, a multi-turn
    conversation with a system turn and two images, a text-only one), `--line N --json` gives the
    input_ids and labels `shardtrain forward` feeds its model (its labels.<i>), byte for byte as
    int64, and a loss_mask that is labels != -100;
  - the packing efficiency equals the trainer's own `hello.pack_efficiency` on the same file;
  - `--json` on the crafted file (a line that is not JSON, a missing image, a sample longer than
    data.seq_len) counts and lists them by line, and its fields are the ones docs/cli.md lists;
  - the text output names the refused lines; a refused --line exits 1 naming file:line; chat data
    with the tiny model exits 2 naming data.format.

  check_data_inspect.py SHARDSCOPE_CLI SHARDTRAIN SOURCE_DIR WORK
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys


def check(cond, message):
    if not cond:
        print("FAIL:", message)
        sys.exit(1)


def run(cmd, code=0):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    check(r.returncode == code,
          f"{' '.join(cmd)} exited {r.returncode}, expected {code}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r


def read_safetensors(path):
    """name -> (dtype, shape, raw bytes)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        body = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], body[begin:end])
    return out


def documented(source, section):
    """The field names of the table after `<!-- json-fields: SECTION -->` in docs/cli.md."""
    with open(os.path.join(source, "docs", "cli.md")) as f:
        text = f.read()
    at = text.index(f"<!-- json-fields: {section} -->")
    fields = []
    for line in text[at:].splitlines()[1:]:
        if not line.strip():
            break
        m = re.match(r"^\| `([a-z_]+)` \|", line)
        if m:
            fields.append(m.group(1))
    return sorted(fields)


def parse_event(line):
    try:
        event = json.loads(line)
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def chat(user, answer, system=None):
    messages = [{"role": "system", "content": system}] if system else []
    return messages + [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]


def write_toml(path, model, train, extra=""):
    with open(path, "w") as f:
        f.write(f'[model]\narch = "qwen2_vl"\npath = "{model}"\n'
                f'[data]\nformat = "chat"\ntrain_path = "{train}"\n{extra}'
                '[train]\nbatch_size = 2\nmax_steps = 1\nckpt_at_end = false\nthreads = 1\n'
                '[launch]\nnproc_per_node = 1\n')  # the packing plan's world: the one process below


def main():
    cli, shardtrain, source, work = sys.argv[1:5]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    demo = os.path.join(work, "demo")
    run([shardtrain, "make-demo-data", demo, "--train", "3", "--eval", "2"])
    model = os.path.join(demo, "model")
    with open(os.path.join(demo, "train.jsonl")) as f:
        first = json.loads(f.readline())
    images = sorted(os.listdir(os.path.join(demo, "img")))
    multi = chat([{"type": "image", "image": f"img/{images[0]}"},
                  {"type": "text", "text": "What colour is the shape?"}], "red", "Answer briefly.")
    multi += [{"role": "user", "content": [{"type": "image", "image": f"img/{images[1]}"},
                                           {"type": "text", "text": "And this one?"}]},
              {"role": "assistant", "content": "blue circle"}]
    good = [first, {"messages": multi},
            {"messages": chat("How many shapes are there?", "3")}]
    with open(os.path.join(demo, "good.jsonl"), "w") as f:
        for g in good:
            f.write(json.dumps(g) + "\n")

    # The trainer's labels: `shardtrain forward` writes input_ids.<i> and labels.<i> (int64).
    fwd = os.path.join(work, "forward.safetensors")
    run([shardtrain, "forward", "--model", model, "--data", os.path.join(demo, "good.jsonl"),
         "--out", fwd])
    tensors = read_safetensors(fwd)
    lengths = [tensors[f"labels.{i}"][1][0] for i in range(len(good))]
    seq_len = max(lengths)

    # The crafted file: the good lines, then a bad line, a missing image, a sample too long.
    too_long = {"messages": chat("long", " ".join(["zebra quartz"] * 200))}
    missing = {"messages": chat([{"type": "image", "image": "img/missing.png"},
                                 {"type": "text", "text": "What?"}], "x")}
    with open(os.path.join(demo, "crafted.jsonl"), "w") as f:
        for g in good:
            f.write(json.dumps(g) + "\n")
        f.write("{not json\n")
        f.write(json.dumps(missing) + "\n")
        f.write(json.dumps(too_long) + "\n")
    exp = os.path.join(work, "crafted.toml")
    write_toml(exp, model, os.path.join(demo, "crafted.jsonl"),
               f'eval_path = "{os.path.join(demo, "eval.jsonl")}"\nseq_len = {seq_len}\n')

    # Each loadable line's labels and ids, byte for byte.
    sample_fields = documented(source, "data-inspect-line")
    for i in range(len(good)):
        out = json.loads(run([cli, "--json", "data", "inspect", exp, "--line", str(i + 1)]).stdout)
        check(sorted(out) == sample_fields, f"--line fields {sorted(out)} != docs {sample_fields}")
        for name in ("labels", "input_ids"):
            dtype, shape, raw = tensors[f"{name}.{i}"]
            check(dtype == "I64" and shape == [len(out[name])],
                  f"line {i + 1}: {name} {dtype} {shape} vs {len(out[name])} from the inspector")
            mine = struct.pack(f"<{len(out[name])}q", *out[name])
            check(mine == raw, f"line {i + 1}: the inspector's {name} differ from the trainer's")
        check(out["loss_mask"] == [int(v != -100) for v in out["labels"]],
              f"line {i + 1}: loss_mask is not labels != -100")
        check(sum(out["loss_mask"]) > 0, f"line {i + 1}: no loss tokens")
        spelled = "".join(s["text"] for s in out["segments"])
        check(spelled == out["rendered"], f"line {i + 1}: segments do not spell the rendered chat")
        loss = "".join(s["text"] for s in out["segments"] if s["loss"])
        print(f"line {i + 1}: {len(out['labels'])} tokens, loss on {loss!r}")
    multi_loss = "".join(s["text"] for s in json.loads(run(
        [cli, "--json", "data", "inspect", exp, "--line", "2"]).stdout)["segments"] if s["loss"])
    check(multi_loss == "red<|im_end|>blue circle<|im_end|>",
          f"line 2: loss on {multi_loss!r}, expected both answers and their <|im_end|>")

    # The whole inspection.
    out = json.loads(run([cli, "--json", "data", "inspect", exp]).stdout)
    fields = documented(source, "data-inspect")
    check(sorted(out) == fields, f"inspection fields {sorted(out)} != docs {fields}")
    check(out["seq_len"] == seq_len and out["packing"] and out["format"] == "chat",
          f"header: {out}")
    train, evaluation = out["files"]
    check(train["role"] == "train" and evaluation["role"] == "eval", "roles")
    check(train["lines"] == 6 and train["samples"] == 3, f"train counts: {train}")
    check(train["tokens"] - sum(lengths) > seq_len, "the long line's tokens are counted")
    check(train["refused"] == 2, f"refused: {train['refused_lines']}")
    check([(r["line"], r["kind"]) for r in train["refused_lines"]]
          == [(4, "malformed_json"), (5, "missing_image")], f"refused: {train['refused_lines']}")
    check("crafted.jsonl:5: " in train["refused_lines"][1]["reason"]
          and "missing.png" in train["refused_lines"][1]["reason"], "the missing image's reason")
    check(train["over_seq_len"] == 1 and train["over_seq_len_lines"][0]["line"] == 6,
          f"over seq_len: {train['over_seq_len_lines']}")
    check(sum(train["histogram"]["counts"]) == 4, f"histogram: {train['histogram']}")
    check(train["images"] == 3 and train["images_per_sample"] == {"0": 2, "1": 1, "2": 1},
          f"images: {train['images']} {train['images_per_sample']}")
    check(train["largest_images"][0]["tokens"] * 4
          == train["largest_images"][0]["grid_h"] * train["largest_images"][0]["grid_w"],
          f"largest image: {train['largest_images'][0]}")
    check(evaluation["samples"] == 2 and evaluation["refused"] == 0
          and evaluation["pack_efficiency"] is None, f"eval: {evaluation}")

    # Packing: the inspector's figure is the trainer's hello.pack_efficiency on the same file.
    clean = os.path.join(work, "good.toml")
    write_toml(clean, model, os.path.join(demo, "good.jsonl"), f"seq_len = {seq_len}\n")
    mine = json.loads(run([cli, "--json", "data", "inspect", clean]).stdout)["files"][0]
    os.makedirs(os.path.join(work, "run"))
    trained = run([shardtrain, "train", clean, "--run-dir", os.path.join(work, "run")])
    hello = [e for e in map(parse_event, trained.stdout.splitlines()) if e.get("ev") == "hello"]
    check(len(hello) == 1, f"the trainer wrote {len(hello)} hello events:\n{trained.stdout}")
    hello = hello[0]
    check(abs(hello["pack_efficiency"] - mine["pack_efficiency"]) < 1e-9,
          f"pack_efficiency: trainer {hello['pack_efficiency']}, inspector {mine['pack_efficiency']}")
    print(f"pack_efficiency {mine['pack_efficiency']:.4f} (the trainer's hello says the same)")

    # Text output, refusals and exit codes.
    text = run([cli, "data", "inspect", exp]).stdout
    for want in ("line 4 (malformed_json)", "line 5 (missing_image)", "line 6: ", "packing"):
        check(want in text, f"text output lacks {want!r}:\n{text}")
    bad = run([cli, "data", "inspect", exp, "--line", "4"], code=1)
    check("crafted.jsonl:4: not a JSON object" in bad.stderr, bad.stderr)
    shown = run([cli, "data", "inspect", exp, "--line", "1"]).stdout
    check("[[" in shown and "<|image_pad|> x " in shown, shown)
    tiny = os.path.join(work, "tiny.toml")
    with open(tiny, "w") as f:
        f.write(f'[data]\nformat = "chat"\ntrain_path = "{os.path.join(demo, "good.jsonl")}"\n')
    refused = run([cli, "data", "inspect", tiny], code=2)
    check('data.format = "chat"' in refused.stderr, refused.stderr)
    # The bundled demo, as a new user meets it: its data is made on first use, as `run` does.
    examples = os.path.join(work, "examples")
    os.makedirs(examples)
    shutil.copy(os.path.join(source, "examples", "demo.toml"), examples)
    first = run([cli, "data", "inspect", os.path.join(examples, "demo.toml"), "--json"])
    made = os.path.join(examples, "demo-data", "train.jsonl")
    check(os.path.exists(made) and "wrote the demo's data" in first.stderr, first.stderr)
    demo_train = json.loads(first.stdout)["files"][0]
    check(demo_train["samples"] == 512 and demo_train["refused"] == 0, f"the demo: {demo_train}")
    print("ok")


if __name__ == "__main__":
    main()
