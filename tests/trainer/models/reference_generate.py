#!/usr/bin/env python3
"""`shardtrain generate` vs transformers' generate on tiny random Qwen2 / Qwen2-VL.

transformers builds tiny random models (GQA ratio 3, vocabulary 301; the Qwen2-VL one with two
images of different sizes in a sample) and saves them; the same conversations go to shardtrain
as an eval set. Each prompt is its conversation up to the first assistant answer.

Checked: greedy ids equal `model.generate(do_sample=False)` per sample (eos = <|im_end|>) on 1
rank (all prompts in one left-padded batch) and on 2 ranks under FULL_SHARD (Qwen2-VL also
SHARD_GRAD_OP and NO_SHARD); generation with the key/value cache equals recomputing the whole sequence every step
(--no-cache), greedy and sampled; sampled ids (temperature, top-p, train.seed) are the same on 1
and 2 ranks and change with the seed; exact match holds exactly on a sample whose answer is
transformers' greedy text, and the `done` objective is the exact-match rate of the answers.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import torch
from transformers import PreTrainedTokenizerFast
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference_forward as rf  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
from checks import check, finish, free_port  # noqa: E402

NEW_TOKENS = 8
LAST_ANSWERS = {}  # index -> answer line of the last run


def eval_rows(vision):
    """The reference samples plus prompts of other lengths (so a batch is left-padded)."""
    rows = rf.samples(vision)
    rows.append({"messages": [
        {"role": "user", "content": "Compare them. Hello there, what colour is the left one?"},
        {"role": "assistant", "content": "red"}]})
    if vision:
        rows.append({"messages": [
            {"role": "user", "content": [{"type": "image", "image": "img/b.png"},
                                         {"type": "text", "text": "What colour is the shape?"}]},
            {"role": "assistant", "content": "blue"}]})
    return rows


def hf_generate(model, ref, ids):
    """Greedy ids after the prompt (sample up to its first label), stop token excluded."""
    first = int((ref["labels"] != -100).nonzero()[0])
    prompt = ref["input_ids"][:first][None]
    kwargs = dict(input_ids=prompt, attention_mask=torch.ones_like(prompt))
    if "pixel_values" in ref:
        kwargs.update(pixel_values=ref["pixel_values"], image_grid_thw=ref["image_grid_thw"],
                      mm_token_type_ids=(prompt == ids["<|image_pad|>"]).int())
    with torch.no_grad():
        out = model.generate(**kwargs, max_new_tokens=NEW_TOKENS, do_sample=False,
                             eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    gen = out[0, first:].tolist()
    return gen[:gen.index(ids["<|im_end|>"])] if ids["<|im_end|>"] in gen else gen


def write_config(run_dir, arch, model_dir, data, n):
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, "trial.toml")
    with open(path, "w") as f:
        f.write(f'[experiment]\nname = "gen"\n[model]\narch = "{arch}"\npath = "{model_dir}"\n'
                f'[data]\ntrain_path = "{data}"\neval_path = "{data}"\nformat = "chat"\n'
                f'seq_len = 256\nshuffle = false\n[train]\nmax_steps = 1\nbatch_size = {n}\n'
                'lr = 1e-3\nseed = 5\nckpt_at_end = false\n[shard]\nstrategy = "FULL_SHARD"\n'
                f'[eval]\nmetrics = ["exact_match"]\nmax_new_tokens = {NEW_TOKENS}\n')
    return path


def run_generate(tool, config, run_dir, world, extra):
    """Starts `world` ranks of `shardtrain generate`; returns exit codes, answers, done event."""
    port = str(free_port())
    out = os.path.join(run_dir, "answers.jsonl")
    procs = []
    for rank in range(world):
        env = dict(os.environ)
        if world > 1:
            env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen(
            [tool, "generate", config, "--out", out] + extra, cwd=run_dir, env=env,
            stdout=subprocess.PIPE, stderr=open(os.path.join(run_dir, f"rank-{rank}.log"), "w"),
            text=True))
    outs = [p.communicate(timeout=180)[0] for p in procs]
    codes = [p.returncode for p in procs]
    with open(os.path.join(run_dir, "stdout-rank-0.jsonl"), "w") as f:
        f.write(outs[0])
    answers = {}
    for rank in range(world):
        path = out + (f".rank-{rank}" if rank else "")
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    a = json.loads(line)
                    answers[a["index"]] = a
    return codes, answers, rf.last_event(outs[0])


def generated(label, tool, config, work, world, extra):
    run_dir = os.path.join(work, label)
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    codes, answers, done = run_generate(tool, config, run_dir, world, extra)
    if codes != [0] * world:
        with open(os.path.join(run_dir, "rank-0.log")) as f:
            check(False, f"{label}: exits {codes}: {f.read()[-600:]}")
        return None
    LAST_ANSWERS.clear()
    LAST_ANSWERS.update(answers)
    # Rank 0 says how fast it generated and that the sharded parameters were gathered once for
    # the whole generation (tiny models fit), not once per token.
    with open(os.path.join(run_dir, "stdout-rank-0.jsonl")) as f:
        logs = [json.loads(line).get("message", "") for line in f
                if line.strip() and json.loads(line).get("ev") == "log"]
    speed = [m for m in logs if m.startswith("generation: ")]
    check(len(speed) == 1 and "tokens/s" in speed[0] and "parameters gathered once" in speed[0],
          f"{label}: want one 'generation: ... tokens/s ... parameters gathered once' log, "
          f"got {speed}")
    rate = sum(a["match"] for a in answers.values()) / max(1, len(answers))
    check(done.get("ev") == "done" and abs(done.get("objective", -1) - rate) < 1e-12,
          f"{label}: done objective {done.get('objective')} = exact-match rate of the answers")
    return {i: a["ids"] for i, a in answers.items()}


def check_model(kind, tool, work, data_dir, seed):
    model_dir = os.path.join(work, kind)
    os.makedirs(model_dir)
    ids = rf.write_tokenizer(model_dir)
    model = rf.make_model(kind, ids, model_dir, seed)
    rows = eval_rows(kind == "qwen2_vl")
    tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
    processor = Qwen2VLImageProcessorPil(**rf.IMAGE_CONFIG)
    want = {i: hf_generate(model, rf.reference_inputs(tok, processor, r, data_dir, ids), ids)
            for i, r in enumerate(rows)}
    # A copy of the last prompt whose answer is transformers' greedy text: an exact match.
    match_row = len(rows)
    rows.append(json.loads(json.dumps(rows[-1])))
    rows[-1]["messages"][-1]["content"] = tok.decode(want[match_row - 1]).strip()
    want[match_row] = want[match_row - 1]
    data = os.path.join(data_dir, kind + ".jsonl")
    rf.write_jsonl(data, rows)
    batch = len(rows) + len(rows) % 2  # splits over 2 ranks; 1 rank takes all in one batch
    config = write_config(os.path.join(work, kind + ".cfg"), kind, model_dir, data, batch)
    cells = [(1, "FULL_SHARD"), (2, "FULL_SHARD")]
    if kind == "qwen2_vl":
        cells += [(2, "SHARD_GRAD_OP"), (2, "NO_SHARD")]
    for world, strategy in cells:
        label = f"{kind}.greedy.{world}.{strategy}"
        got = generated(label, tool, config, work, world, ["--set", f"shard.strategy={strategy}"])
        text = rows[match_row]["messages"][-1]["content"]
        # Random tokens may decode to partial UTF-8 ("\ufffd"), which no answer text can equal.
        if got is not None and world == 1 and "\ufffd" not in text:
            matches = sorted(i for i, a in LAST_ANSWERS.items() if a["match"])
            check(matches == [match_row], f"{label}: exact match only on the sample whose answer "
                  f"is the greedy text {text!r} (matched: {matches})")
        if got is not None:
            bad = [i for i in want if got.get(i) != want[i]]
            check(not bad, f"{label}: ids of {len(want)} prompts equal transformers' generate"
                  + ("" if not bad else f"; sample {bad[0]}: {got.get(bad[0])} vs {want[bad[0]]}"))
    nocache = generated(f"{kind}.greedy.nocache", tool, config, work, 2, ["--no-cache"])
    if nocache is not None:
        check(nocache == want, f"{kind}: greedy without the cache equals transformers' too")
    sample = ["--set", "eval.do_sample=true", "--set", "eval.temperature=0.8",
              "--set", "eval.top_p=0.9", "--set", "eval.max_new_tokens=12"]
    s1 = generated(f"{kind}.sample.1", tool, config, work, 1, sample)
    s2 = generated(f"{kind}.sample.2", tool, config, work, 2, sample)
    s2n = generated(f"{kind}.sample.2.nocache", tool, config, work, 2, sample + ["--no-cache"])
    s_other = generated(f"{kind}.sample.seed", tool, config, work, 1,
                        sample + ["--set", "train.seed=6"])
    if None not in (s1, s2, s2n, s_other):
        check(s1 == s2, f"{kind}: sampled ids equal on 1 and 2 ranks ({len(s1)} prompts)")
        check(s2 == s2n, f"{kind}: sampled ids with the cache equal recomputation")
        check(s1 != s_other, f"{kind}: another train.seed samples other ids")
        check(s1 != want, f"{kind}: sampling differs from greedy")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardtrain", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    tool = os.path.abspath(args.shardtrain)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    torch.manual_seed(0)
    data_dir = os.path.join(args.work, "data")
    rf.write_images(os.path.join(data_dir, "img"))
    for kind, seed in (("qwen2", 21), ("qwen2_vl", 22)):
        check_model(kind, tool, args.work, data_dir, seed)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
