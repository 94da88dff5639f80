#!/usr/bin/env python3
"""The export of a trained model vs transformers and peft (label `reference`).

A tiny random Qwen2 (reference_forward.py's, saved by transformers with its tokenizer) is trained
with LoRA on 2 ranks (FULL_SHARD) for 2 steps with `--export DIR`. Checked: the `ckpt` events of
kinds "full" and "adapter"; transformers loads DIR (the merged weights beside the base folder's
config and tokenizer) and peft loads DIR/adapter onto the base model with logits equal within
1e-4, and training moved them away from the base's; `shardtrain export --checkpoint auto` of the
same run on 1 process (the 2-rank checkpoint resharded) writes the same weights; and
`shardtrain forward` on DIR gives transformers' logits of DIR within 1e-4.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import Qwen2ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference_forward as rf  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
from checks import FAILURES, check, finish, free_port  # noqa: E402



def write_experiment(run_dir, model_dir, data):
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, "trial.toml")
    with open(path, "w") as f:
        f.write(f'[experiment]\nname = "export"\n[model]\narch = "qwen2"\npath = "{model_dir}"\n'
                f'[data]\ntrain_path = "{data}"\nformat = "chat"\nseq_len = 256\n'
                'shuffle = false\n[train]\nmax_steps = 2\nbatch_size = 2\nlr = 2e-2\n'
                'ckpt_at_end = true\n[shard]\nstrategy = "FULL_SHARD"\n'
                '[lora]\nenabled = true\nr = 4\nalpha = 8.0\n'
                'target_modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", '
                '"up_proj", "down_proj"]\n')
    return path


def run_ranks(tool, args, run_dir, world):
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = dict(os.environ)
        if world > 1:
            env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        out = open(os.path.join(run_dir, f"events-rank-{rank}.jsonl"), "w")
        err = open(os.path.join(run_dir, f"rank-{rank}.log"), "w")
        procs.append(subprocess.Popen([tool] + args, cwd=run_dir, env=env, stdout=out, stderr=err))
    codes = [p.wait(timeout=180) for p in procs]
    with open(os.path.join(run_dir, "events-rank-0.jsonl")) as f:
        events = [json.loads(ln) for ln in f if ln.strip()]
    if codes != [0] * world:
        with open(os.path.join(run_dir, "rank-0.log")) as f:
            print(f.read()[-1500:], file=sys.stderr)
    return codes, events


def max_diff(a, b):
    return (a.float() - b.float()).abs().max().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardtrain", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    tool = os.path.abspath(args.shardtrain)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    torch.manual_seed(0)
    model_dir = os.path.join(args.work, "base")
    os.makedirs(model_dir)
    ids = rf.write_tokenizer(model_dir)
    rf.make_model("qwen2", ids, model_dir, 21)
    data = os.path.join(args.work, "train.jsonl")
    rf.write_jsonl(data, rf.samples(False))

    run_dir = os.path.join(args.work, "run")
    config = write_experiment(run_dir, model_dir, data)
    out = os.path.join(args.work, "export")
    codes, events = run_ranks(tool, ["train", config, "--run-dir", run_dir, "--export", out],
                              run_dir, 2)
    check(codes == [0, 0], f"train with LoRA on 2 ranks and --export: exits {codes}")
    kinds = sorted(e["kind"] for e in events if e.get("ev") == "ckpt")
    check(kinds == ["adapter", "full", "sharded"], f"ckpt event kinds {kinds}")
    for name in ("model.safetensors", "config.json", "tokenizer.json",
                 "adapter/adapter_model.safetensors", "adapter/adapter_config.json"):
        check(os.path.exists(os.path.join(out, name)), f"export has {name}")
    if FAILURES:
        return 1

    x = torch.tensor([[ids["<|im_start|>"], 5, 17, 42, 99, 150, 200, 7, ids["<|im_end|>"]]])
    with torch.no_grad():
        base = Qwen2ForCausalLM.from_pretrained(model_dir).eval()
        base_logits = base(x).logits
        merged = Qwen2ForCausalLM.from_pretrained(out).eval()
        merged_logits = merged(x).logits
        adapted = PeftModel.from_pretrained(base, os.path.join(out, "adapter")).eval()
        peft_logits = adapted(x).logits
    d = max_diff(merged_logits, peft_logits)
    check(d <= 1e-4, f"transformers on the merged export vs peft on the adapter: {d:.2e} <= 1e-4")
    moved = max_diff(merged_logits, base_logits)
    check(moved > 1e-3, f"training moved the logits from the base's: {moved:.2e} > 1e-3")

    again = os.path.join(args.work, "export-1rank")
    codes, _ = run_ranks(tool, ["export", config, "--checkpoint", "auto", "--run-dir", run_dir,
                                "--out", again], run_dir, 1)
    check(codes == [0], f"`shardtrain export --checkpoint auto` on 1 process: exits {codes}")
    if codes == [0]:
        a = load_file(os.path.join(out, "model.safetensors"))
        b = load_file(os.path.join(again, "model.safetensors"))
        worst = max(max_diff(a[k], b[k]) for k in a) if a.keys() == b.keys() else float("inf")
        check(worst <= 1e-6, f"1-process export of the 2-rank checkpoint equals --export: "
                             f"{worst:.1e} <= 1e-6 over {len(a)} tensors")

    fwd = os.path.join(args.work, "forward.safetensors")
    proc = subprocess.run([tool, "forward", "--model", out, "--data", data, "--out", fwd],
                          capture_output=True, text=True, timeout=120)
    check(proc.returncode == 0, f"forward on the export: exit {proc.returncode} {proc.stderr[-300:]}")
    if proc.returncode == 0:
        got = load_file(fwd)
        worst = 0.0
        with torch.no_grad():
            for i in range(len(rf.samples(False))):
                logits = merged(got[f"input_ids.{i}"].unsqueeze(0)).logits[0]
                worst = max(worst, max_diff(logits, got[f"logits.{i}"]))
        check(worst <= 1e-4, f"forward on the export vs transformers on it: {worst:.2e} <= 1e-4")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
