#!/usr/bin/env python3
"""Shardscope's Qwen2 / Qwen2-VL vs transformers on tiny random models (label `reference`).

transformers builds tiny random models with awkward sizes (GQA ratio 3, vocabulary 301, tied
and untied embeddings), saves them with save_pretrained, and runs forward/backward in float32 on
inputs built as the processor would (two images of different sizes in one sample, each
<|image_pad|> run expanded to t*h*w/merge^2 tokens, right padding, labels with -100).
model_tool (C++) loads the same directory and inputs and writes logits, loss and gradients.

Checked: logits within 1e-4 absolute (unpadded positions), loss within 1e-5 relative, every
gradient within 1e-4, the torch-free parameter count equal to num_parameters(); the Qwen2-VL
checkpoint also in transformers 5's names (model.language_model.*, model.visual.*) split into
two shards with an index; and bad checkpoints (truncated file, lying header, config.json
disagreeing with the weights) fail with messages naming the file and tensor.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import (Qwen2Config, Qwen2ForCausalLM, Qwen2VLConfig,
                          Qwen2VLForConditionalGeneration)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
from checks import check, finish  # noqa: E402

VOCAB = 301
IMAGE, VSTART, VEND = 300, 297, 298
TEXT = dict(vocab_size=VOCAB, hidden_size=48, intermediate_size=72, num_hidden_layers=2,
            num_attention_heads=6, num_key_value_heads=2, rms_norm_eps=1e-6)


def randomize(model, seed):
    """Weights far from the init (biases non-zero, norms not one), so every term matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "norm" in name or "ln_q" in name:
                p.copy_(1.0 + 0.2 * noise if name.endswith("weight") else 0.1 * noise)
            else:
                p.copy_(0.08 * noise)


def qwen2(tied):
    cfg = Qwen2Config(**TEXT, rope_theta=5000.0, tie_word_embeddings=tied)
    return Qwen2ForCausalLM(cfg)


def qwen2vl(tied, wide=False):
    """`wide`: every Linear's in-features a multiple of 64 (NF4 blocks), not awkward sizes."""
    text = dict(TEXT, rope_parameters={"rope_type": "default", "rope_theta": 20000.0,
                                        "mrope_section": [2, 1, 1]})
    vision = dict(depth=2, embed_dim=32, num_heads=4, mlp_ratio=2, hidden_size=48, patch_size=4,
                  spatial_merge_size=2, temporal_patch_size=2)
    if wide:
        text.update(hidden_size=64, intermediate_size=128, num_attention_heads=8)
        vision.update(embed_dim=64, hidden_size=64)
    cfg = Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=IMAGE,
                        video_token_id=299, vision_start_token_id=VSTART,
                        vision_end_token_id=VEND, tie_word_embeddings=tied)
    return Qwen2VLForConditionalGeneration(cfg)


def text_ids(g, n):
    return torch.randint(0, 290, (n,), generator=g).tolist()


def build_inputs(vision, seed):
    """Two samples, right-padded: sample 0 (with images when `vision`), sample 1 text only."""
    g = torch.Generator().manual_seed(seed)
    grids = [(1, 4, 6), (1, 6, 8)] if vision else []
    row0 = text_ids(g, 5)
    for t, h, w in grids:  # the processor expands each image to t*h*w/4 pad tokens
        row0 += [VSTART] + [IMAGE] * (t * h * w // 4) + [VEND] + text_ids(g, 3)
    row0 += text_ids(g, 4)
    row1 = text_ids(g, len(row0) - 7)
    T = len(row0)
    ids = torch.zeros(2, T, dtype=torch.long)
    mask = torch.zeros(2, T, dtype=torch.long)
    for b, row in enumerate([row0, row1]):
        ids[b, :len(row)] = torch.tensor(row)
        mask[b, :len(row)] = 1
    labels = ids.clone()
    labels[torch.rand(2, T, generator=g) < 0.3] = -100
    labels[mask == 0] = -100
    labels[ids == IMAGE] = -100
    inputs = {"input_ids": ids, "labels": labels, "attention_mask": mask}
    if vision:
        patches = sum(t * h * w for t, h, w in grids)
        inputs["pixel_values"] = torch.randn(patches, 3 * 2 * 4 * 4, generator=g)
        inputs["image_grid_thw"] = torch.tensor(grids, dtype=torch.long)
    return inputs


def ours(name):
    """transformers 5 parameter names -> the published checkpoint names model_tool writes."""
    for prefix, repl in (("model.language_model.", "model."), ("model.visual.", "visual.")):
        if name.startswith(prefix):
            return repl + name[len(prefix):]
    return name


def run_tool(tool, model_dir, inputs_path, out_path):
    return subprocess.run([tool, model_dir, inputs_path, out_path], capture_output=True,
                          text=True, timeout=120)


def compare(label, model, inputs, tool, work, model_dir=None):
    """Runs transformers and model_tool on the same directory and inputs, checks the numbers."""
    model.eval()
    model.zero_grad()
    kwargs = dict(inputs)
    if "pixel_values" in inputs:
        kwargs["mm_token_type_ids"] = (inputs["input_ids"] == IMAGE).int()
    out = model(**kwargs)
    out.loss.backward()
    inputs_path = os.path.join(work, label + ".inputs.safetensors")
    out_path = os.path.join(work, label + ".out.safetensors")
    save_file({k: v.contiguous() for k, v in inputs.items()}, inputs_path)
    proc = run_tool(tool, model_dir or os.path.join(work, label), inputs_path, out_path)
    if proc.returncode != 0:
        check(False, f"{label}: model_tool failed: {proc.stdout}{proc.stderr}")
        return
    got = load_file(out_path)
    valid = inputs["attention_mask"].bool()
    dlogits = (got["logits"][valid] - out.logits.detach()[valid]).abs().max().item()
    check(dlogits <= 1e-4, f"{label}: logits max |diff| {dlogits:.2e} <= 1e-4")
    rel = abs(got["loss"].item() - out.loss.item()) / abs(out.loss.item())
    check(rel <= 1e-5, f"{label}: loss {got['loss'].item():.7f} vs {out.loss.item():.7f}, "
                       f"rel {rel:.1e} <= 1e-5")
    hf_grads = {ours(n): p.grad for n, p in model.named_parameters()}
    dead = [n for n, g in hf_grads.items() if g is None or not g.abs().max().item() > 0]
    check(not dead, f"{label}: every parameter gets a gradient from these inputs; none: {dead[:3]}")
    our_grads = {k[len("grad."):]: v for k, v in got.items() if k.startswith("grad.")}
    check(set(hf_grads) == set(our_grads),
          f"{label}: same parameter names ({len(hf_grads)}); only HF: "
          f"{sorted(set(hf_grads) - set(our_grads))[:3]}, only ours: "
          f"{sorted(set(our_grads) - set(hf_grads))[:3]}")
    worst, where = 0.0, ""
    for name in set(hf_grads) & set(our_grads):
        d = (our_grads[name] - hf_grads[name]).abs().max().item()
        if d > worst:
            worst, where = d, name
    check(worst <= 1e-4, f"{label}: gradients max |diff| {worst:.2e} ({where}) <= 1e-4")
    check(got["param_count"].item() == model.num_parameters(),
          f"{label}: parameter count {got['param_count'].item()} == transformers' "
          f"{model.num_parameters()}")


def save_renamed_sharded(model_dir, dst):
    """The checkpoint in transformers 5's names, split into two shards with an index."""
    os.makedirs(dst, exist_ok=True)
    shutil.copy(os.path.join(model_dir, "config.json"), dst)
    tensors = load_file(os.path.join(model_dir, "model.safetensors"))
    renamed = {}
    for name, t in tensors.items():
        if name.startswith("visual."):
            name = "model." + name
        elif name.startswith("model."):
            name = "model.language_model." + name[len("model."):]
        renamed[name] = t
    names = sorted(renamed)
    halves = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    for i, part in enumerate(halves):
        file = f"model-{i + 1:05d}-of-00002.safetensors"
        save_file({n: renamed[n].to(torch.bfloat16 if i == 0 else torch.float32).contiguous()
                   for n in part}, os.path.join(dst, file))
        weight_map.update({n: file for n in part})
    with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return halves[0]


def check_bf16_shards(model, tool, work, inputs, dst, bf16_names):
    """The bf16 shard loads converted: logits equal transformers on the same rounded weights."""
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n in bf16_names or n.replace("model.language_model.", "model.", 1) in bf16_names:
                p.copy_(p.to(torch.bfloat16).float())
    compare("qwen2vl_untied_v5_sharded", model, inputs, tool, work, model_dir=dst)


def expect_error(tool, work, label, model_dir, inputs_path, needles):
    proc = run_tool(tool, model_dir, inputs_path, os.path.join(work, label + ".out"))
    text = proc.stdout + proc.stderr
    ok = proc.returncode != 0 and all(n in text for n in needles)
    check(ok, f"{label}: exit {proc.returncode}, message names {needles}"
              + ("" if ok else f"; got: {text.strip()[-400:]}"))


def bad_checkpoints(tool, work, good_dir, inputs_path):
    st = "model.safetensors"
    trunc = os.path.join(work, "bad_truncated")
    shutil.copytree(good_dir, trunc, dirs_exist_ok=True)
    size = os.path.getsize(os.path.join(trunc, st))
    with open(os.path.join(trunc, st), "r+b") as f:
        f.truncate(size - 100)
    expect_error(tool, work, "truncated", trunc, inputs_path, [st, "tensor", "re-download"])

    lying = os.path.join(work, "bad_header")
    shutil.copytree(good_dir, lying, dirs_exist_ok=True)
    with open(os.path.join(lying, st), "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        header["model.norm.weight"]["shape"] = [47]
        text = json.dumps(header, separators=(",", ":")).encode()
        assert len(text) <= n, "the edited header must fit the original length"
        f.seek(8)
        f.write(text + b" " * (n - len(text)))
    expect_error(tool, work, "lying_header", lying, inputs_path,
                 [st, "tensor model.norm.weight", "data_offsets"])

    mismatch = os.path.join(work, "bad_config")
    shutil.copytree(good_dir, mismatch, dirs_exist_ok=True)
    cfg_path = os.path.join(mismatch, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["intermediate_size"] = 80
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    expect_error(tool, work, "config_mismatch", mismatch, inputs_path,
                 [st, "mlp.gate_proj.weight", "[72, 48]", "[80, 48]"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    torch.manual_seed(0)

    for label, tied, seed in (("qwen2_untied", False, 1), ("qwen2_tied", True, 2)):
        model = qwen2(tied)
        randomize(model, seed)
        model.save_pretrained(os.path.join(args.work, label))
        compare(label, model, build_inputs(False, seed), args.tool, args.work)

    for label, tied, seed in (("qwen2vl_tied", True, 3), ("qwen2vl_untied", False, 4)):
        model = qwen2vl(tied)
        randomize(model, seed)
        model.save_pretrained(os.path.join(args.work, label))
        inputs = build_inputs(True, seed)
        compare(label, model, inputs, args.tool, args.work)
    dst = os.path.join(args.work, "qwen2vl_untied_v5")
    bf16_names = save_renamed_sharded(os.path.join(args.work, "qwen2vl_untied"), dst)
    check_bf16_shards(model, args.tool, args.work, inputs, dst, set(bf16_names))

    bad_checkpoints(args.tool, args.work, os.path.join(args.work, "qwen2_untied"),
                    os.path.join(args.work, "qwen2_untied.inputs.safetensors"))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
