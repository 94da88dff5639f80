#!/usr/bin/env python3
"""`shardtrain forward` and `shardtrain train` on SFT JSONL vs transformers (label `reference`).

A tiny random Qwen2 and Qwen2-VL (GQA ratio 3, vocabulary 301) are saved by transformers with a
byte-level BPE tokenizer.json trained here (Qwen2's pre-tokenizer and special tokens, the
official Qwen2-VL chat template) and a PIL-processor preprocessor_config.json. The JSONL has a
sample with two images of different sizes and a multi-turn sample with a system turn.

Checked: forward's input ids equal the processor-built ids (the chat template through the
tokenizer, each <|image_pad|> expanded to t*h*w/merge^2 as the processor does), its labels equal
an offset-based computation, pixel_values/image_grid_thw equal the PIL image processor's, logits
within 1e-4 absolute, the `done` objective (mean loss over label tokens) within 1e-5 relative;
`train` on 1 and 2 ranks (FULL_SHARD, fp32): the first step's loss equals transformers' loss on
the same batch within 1e-5 relative; `tokenize` gives tokenizers' ids; bad input (bad JSONL line, missing or corrupt image,
truncated safetensors, unknown tokenizer model type) gives an `error` event and exit 1 before
any step.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
from PIL import Image
from safetensors.torch import load_file
from transformers import (PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, Qwen2VLConfig,
                          Qwen2VLForConditionalGeneration)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "data", "text"))
from reference_tokenizer import QWEN2VL_TEMPLATE, expected_labels, expand  # noqa: E402
from reference_tokenizer import QWEN2_PATTERN  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models  # noqa: E402
from tokenizers import normalizers, pre_tokenizers, trainers  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
from checks import check, finish, free_port  # noqa: E402

VOCAB = 301
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
           "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
TEXT = dict(vocab_size=VOCAB, hidden_size=48, intermediate_size=72, num_hidden_layers=2,
            num_attention_heads=6, num_key_value_heads=2, rms_norm_eps=1e-6)
IMAGE_CONFIG = {"min_pixels": 64, "max_pixels": 4096, "patch_size": 4, "temporal_patch_size": 2,
                "merge_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
                "image_std": [0.26862954, 0.26130258, 0.27577711]}
CORPUS = ("You are a helpful assistant. What colour is the shape? The left one is bigger. "
          "Describe the picture. red green blue square circle triangle answer briefly. "
          "Compare them. Hello there, how are you? I am fine, thank you. ") * 40


def write_tokenizer(model_dir):
    """A byte-level BPE with Qwen2's normaliser and pre-tokenizer; the specials end at 292."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=285, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([CORPUS], trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL])
    tok.save(os.path.join(model_dir, "tokenizer.json"))
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": QWEN2VL_TEMPLATE,
                   "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                   "model_max_length": 1 << 30}, f)
    return {s: tok.token_to_id(s) for s in SPECIAL}


def check_tokenize(tool, model_dir):
    """`shardtrain tokenize`: stdin as one string, specials recognised, nothing added."""
    text = ("<|im_start|>user\nHello there,  how are you?\n\n<|image_pad|>"
            "caf\u00e9 \U0001f600 x=1<|im_end|>\n")
    proc = subprocess.run([tool, "tokenize", "--tokenizer", model_dir], input=text.encode(),
                          capture_output=True, timeout=60)
    want = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json")).encode(
        text, add_special_tokens=False).ids
    got = json.loads(proc.stdout) if proc.returncode == 0 else None
    check(got == want, f"tokenize: ids equal tokenizers' ({len(want)} ids, "
                       f"{sum(1 for t in want if t >= 285)} special)"
                       + ("" if got == want else f"; got {got}, want {want}"))


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "norm" in name or "ln_q" in name:
                p.copy_(1.0 + 0.2 * noise if name.endswith("weight") else 0.1 * noise)
            else:
                p.copy_(0.08 * noise)


def make_model(kind, ids, model_dir, seed):
    if kind == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**TEXT, rope_theta=5000.0, tie_word_embeddings=False))
    else:
        text = dict(TEXT, rope_parameters={"rope_type": "default", "rope_theta": 20000.0,
                                            "mrope_section": [2, 1, 1]})
        vision = dict(depth=2, embed_dim=32, num_heads=4, mlp_ratio=2, hidden_size=48,
                      patch_size=4, spatial_merge_size=2, temporal_patch_size=2)
        cfg = Qwen2VLConfig(text_config=text, vision_config=vision,
                            image_token_id=ids["<|image_pad|>"],
                            video_token_id=ids["<|video_pad|>"],
                            vision_start_token_id=ids["<|vision_start|>"],
                            vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=True)
        model = Qwen2VLForConditionalGeneration(cfg)
    randomize(model, seed)
    model.save_pretrained(model_dir)
    if kind == "qwen2_vl":
        with open(os.path.join(model_dir, "preprocessor_config.json"), "w") as f:
            json.dump(dict(IMAGE_CONFIG, image_processor_type="Qwen2VLImageProcessor"), f)
    return model.eval()


def write_images(folder):
    """Two PNGs of different sizes, multiples of 8 within [min, max]_pixels (no resize)."""
    rng = np.random.default_rng(7)
    os.makedirs(folder, exist_ok=True)
    for name, (h, w) in (("a.png", (16, 24)), ("b.png", (32, 24))):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(
            os.path.join(folder, name))


def samples(vision):
    multi = {"messages": [{"role": "system", "content": "Answer briefly."},
                          {"role": "user", "content": "Hello there, how are you?"},
                          {"role": "assistant", "content": "I am fine, thank you."},
                          {"role": "user", "content": [{"type": "text", "text": "Describe red."}]},
                          {"role": "assistant", "content": [{"type": "text", "text": "A circle."}]}]}
    if not vision:
        plain = {"messages": [{"role": "user", "content": "What colour is the square?"},
                              {"role": "assistant", "content": "green"}]}
        return [multi, plain]
    images = {"messages": [{"role": "user", "content": [
        {"type": "image", "image": "img/a.png"}, {"type": "text", "text": "Compare them."},
        {"type": "image", "image": "img/b.png"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "The left one is bigger."}]}]}
    return [images, multi]


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")


def reference_inputs(tok, processor, sample, data_dir, ids):
    """ids/labels as the processor builds them, and the PIL processor's pixels."""
    text = tok.apply_chat_template(sample["messages"], tokenize=False)
    base_ids, base_labels = expected_labels(tok, text, sample["messages"])
    paths = [c["image"] for m in sample["messages"] if isinstance(m["content"], list)
             for c in m["content"] if c["type"] == "image"]
    out = {}
    counts = []
    if paths:
        imgs = [Image.open(os.path.join(data_dir, p)).convert("RGB") for p in paths]
        proc = processor(images=imgs, return_tensors="pt")
        out["pixel_values"] = proc["pixel_values"].float()
        out["image_grid_thw"] = proc["image_grid_thw"].long()
        counts = [int(g.prod()) // 4 for g in out["image_grid_thw"]]
    pad = ids["<|image_pad|>"]
    if counts:
        expanded, labels, k = [], [], 0
        for t, l in zip(base_ids, base_labels):
            n = counts[k] if t == pad else 1
            k += 1 if t == pad else 0
            expanded += [t] * n
            labels += [-100] * n if t == pad else [l]
        base_ids, base_labels = expanded, labels
    out["input_ids"] = torch.tensor(base_ids)
    out["labels"] = torch.tensor(base_labels)
    return out


def hf_forward(model, ref, image_id):
    ids = ref["input_ids"][None]
    kwargs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ref["labels"][None])
    if "pixel_values" in ref:
        kwargs.update(pixel_values=ref["pixel_values"], image_grid_thw=ref["image_grid_thw"],
                      mm_token_type_ids=(ids == image_id).int())
    with torch.no_grad():
        out = model(**kwargs)
    n = int((ref["labels"][1:] != -100).sum())
    return out.logits[0], out.loss.item() * n, n


def last_event(stdout):
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    return json.loads(lines[-1]) if lines else {}


def check_forward(label, tool, model, model_dir, data_dir, rows, ids):
    tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
    processor = Qwen2VLImageProcessorPil(**IMAGE_CONFIG)
    data = os.path.join(data_dir, label + ".jsonl")
    write_jsonl(data, rows)
    out_path = os.path.join(data_dir, label + ".forward.safetensors")
    proc = subprocess.run([tool, "forward", "--model", model_dir, "--data", data, "--out",
                           out_path], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        check(False, f"{label}: forward exit {proc.returncode}: {proc.stdout}{proc.stderr}")
        return []
    got = load_file(out_path)
    total, count, refs = 0.0, 0, []
    for i, sample in enumerate(rows):
        ref = reference_inputs(tok, processor, sample, data_dir, ids)
        refs.append(ref)
        check(got[f"input_ids.{i}"].tolist() == ref["input_ids"].tolist(),
              f"{label} sample {i}: input ids equal the processor's ({len(ref['input_ids'])})")
        check(got[f"labels.{i}"].tolist() == ref["labels"].tolist(),
              f"{label} sample {i}: labels equal the offset-based labels "
              f"({int((ref['labels'] != -100).sum())} labelled)")
        if "pixel_values" in ref:
            dp = (got[f"pixel_values.{i}"] - ref["pixel_values"]).abs().max().item()
            check(dp <= 1e-5, f"{label} sample {i}: pixel_values max |diff| {dp:.1e} <= 1e-5")
            check(got[f"image_grid_thw.{i}"].tolist() == ref["image_grid_thw"].tolist(),
                  f"{label} sample {i}: image_grid_thw {ref['image_grid_thw'].tolist()}")
        logits, loss_sum, n = hf_forward(model, ref, ids["<|image_pad|>"])
        dl = (got[f"logits.{i}"] - logits).abs().max().item()
        check(got[f"logits.{i}"].shape == logits.shape and dl <= 1e-4,
              f"{label} sample {i}: logits {tuple(logits.shape)} max |diff| {dl:.1e} <= 1e-4")
        total += loss_sum
        count += n
    done = last_event(proc.stdout)
    want = total / count
    rel = abs(done.get("objective", float("nan")) - want) / want
    check(done.get("ev") == "done" and rel <= 1e-5,
          f"{label}: done objective {done.get('objective')} vs transformers {want:.7f}, "
          f"rel {rel:.1e} <= 1e-5")
    return refs


def write_experiment(run_dir, arch, model_dir, data):
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, "trial.toml")
    with open(path, "w") as f:
        f.write(f'[experiment]\nname = "ref"\n[model]\narch = "{arch}"\npath = "{model_dir}"\n'
                f'[data]\ntrain_path = "{data}"\nformat = "chat"\nseq_len = 256\n'
                'shuffle = false\n[train]\nmax_steps = 1\nbatch_size = 2\nlr = 1e-3\n'
                'ckpt_at_end = false\n[shard]\nstrategy = "FULL_SHARD"\n')
    return path


def run_train(tool, config, run_dir, world):
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = dict(os.environ)
        if world > 1:
            env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        out = open(os.path.join(run_dir, f"events-rank-{rank}.jsonl"), "w")
        err = open(os.path.join(run_dir, f"rank-{rank}.log"), "w")
        procs.append(subprocess.Popen([tool, "train", config, "--run-dir", run_dir], cwd=run_dir,
                                      env=env, stdout=out, stderr=err))
    codes = [p.wait(timeout=120) for p in procs]
    with open(os.path.join(run_dir, "events-rank-0.jsonl")) as f:
        events = [json.loads(ln) for ln in f if ln.strip()]
    return codes, events


def check_train(label, tool, arch, model_dir, data_dir, model, refs, ids, work):
    total, count = 0.0, 0
    for ref in refs:
        _, loss_sum, n = hf_forward(model, ref, ids["<|image_pad|>"])
        total += loss_sum
        count += n
    want = total / count
    for world in (1, 2):
        run_dir = os.path.join(work, f"{label}.train{world}")
        shutil.rmtree(run_dir, ignore_errors=True)
        config = write_experiment(run_dir, arch, model_dir,
                                  os.path.join(data_dir, label + ".jsonl"))
        codes, events = run_train(tool, config, run_dir, world)
        steps = [e for e in events if e.get("ev") == "step"]
        if codes != [0] * world or not steps:
            with open(os.path.join(run_dir, "rank-0.log")) as f:
                log = f.read()[-800:]
            check(False, f"{label} train on {world} rank(s): exits {codes}: {log}")
            continue
        rel = abs(steps[0]["loss"] - want) / want
        check(rel <= 1e-5, f"{label} train on {world} rank(s): step-1 loss {steps[0]['loss']:.7f}"
                           f" vs transformers {want:.7f}, rel {rel:.1e} <= 1e-5")


def expect_error(label, args, needles, cwd=None):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=cwd)
    ev = last_event(proc.stdout)
    text = json.dumps(ev)
    ok = (proc.returncode == 1 and ev.get("ev") == "error"
          and all(n in text for n in needles))
    check(ok, f"bad input {label}: exit {proc.returncode}, error event names {needles}"
              + ("" if ok else f"; got exit {proc.returncode}: {proc.stdout[-500:]}"))


def bad_inputs(tool, work, model_dir, data_dir, good_rows):
    def forward(data, model=model_dir):
        return [tool, "forward", "--model", model, "--data", data, "--out",
                os.path.join(work, "bad.safetensors")]
    bad = os.path.join(data_dir, "bad_line.jsonl")
    write_jsonl(bad, [good_rows[0], '{"messages": [{"role": "user"}]}'])
    expect_error("jsonl line", forward(bad), ["bad_line.jsonl:2", "content"])
    missing = json.loads(json.dumps(good_rows[0]))
    missing["messages"][0]["content"][0]["image"] = "img/none.png"
    write_jsonl(os.path.join(data_dir, "missing.jsonl"), [missing])
    expect_error("missing image", forward(os.path.join(data_dir, "missing.jsonl")),
                 ["missing.jsonl:1", "none.png"])
    with open(os.path.join(data_dir, "img", "corrupt.png"), "wb") as f:
        f.write(open(os.path.join(data_dir, "img", "a.png"), "rb").read()[:60])
    missing["messages"][0]["content"][0]["image"] = "img/corrupt.png"
    write_jsonl(os.path.join(data_dir, "corrupt.jsonl"), [missing])
    expect_error("corrupt image", forward(os.path.join(data_dir, "corrupt.jsonl")),
                 ["corrupt.jsonl:1", "corrupt.png"])
    good = os.path.join(data_dir, "qwen2_vl.jsonl")
    trunc = os.path.join(work, "bad_truncated")
    shutil.copytree(model_dir, trunc, dirs_exist_ok=True)
    st = os.path.join(trunc, "model.safetensors")
    with open(st, "r+b") as f:
        f.truncate(os.path.getsize(st) - 100)
    expect_error("truncated safetensors", forward(good, trunc), ["model.safetensors"])
    unigram = os.path.join(work, "bad_tokenizer")
    shutil.copytree(model_dir, unigram, dirs_exist_ok=True)
    tj = os.path.join(unigram, "tokenizer.json")
    doc = json.load(open(tj))
    doc["model"]["type"] = "Unigram"
    json.dump(doc, open(tj, "w"))
    expect_error("unknown tokenizer model", forward(good, unigram), ["tokenizer.json", "Unigram"])
    run_dir = os.path.join(work, "bad_train")
    shutil.rmtree(run_dir, ignore_errors=True)
    config = write_experiment(run_dir, "qwen2_vl", model_dir, bad)
    codes, events = run_train(tool, config, run_dir, 1)
    kinds = [e.get("ev") for e in events]
    check(codes == [1] and "error" in kinds and "step" not in kinds
          and "bad_line.jsonl:2" in json.dumps(events),
          f"bad input train: exit {codes}, error event naming bad_line.jsonl:2 before any step "
          f"({kinds})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardtrain", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    args.shardtrain = os.path.abspath(args.shardtrain)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    torch.manual_seed(0)
    data_dir = os.path.join(args.work, "data")
    write_images(os.path.join(data_dir, "img"))
    for kind, seed in (("qwen2", 11), ("qwen2_vl", 12)):
        model_dir = os.path.join(args.work, kind)
        os.makedirs(model_dir)
        ids = write_tokenizer(model_dir)
        if kind == "qwen2":
            check_tokenize(args.shardtrain, model_dir)
        model = make_model(kind, ids, model_dir, seed)
        rows = samples(kind == "qwen2_vl")
        refs = check_forward(kind, args.shardtrain, model, model_dir, data_dir, rows, ids)
        if refs:
            check_train(kind, args.shardtrain, kind, model_dir, data_dir, model, refs, ids,
                        args.work)
        if kind == "qwen2_vl":
            bad_inputs(args.shardtrain, args.work, model_dir, data_dir, rows)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
