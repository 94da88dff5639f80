#!/usr/bin/env python3
"""Shardscope's LoRA vs peft on tiny random Qwen2 and Qwen2-VL (label `reference`).

transformers saves a tiny random base model (reference_models.py's awkward sizes); lora_tool
(C++) adds adapters with a non-zero random lora_B, runs forward and backward in float32 and
exports the adapter as a PEFT directory and the weights merged into the base. Then:

  - peft's PeftModel.from_pretrained(base, our_adapter_dir) gives logits within 1e-4 absolute,
    the loss within 1e-5 relative and every adapter gradient within 1e-4 + 1e-5 * max|grad|;
    both sides have the same adapter names (peft's minus ".default");
  - the parameter counts equal peft's get_nb_trainable_parameters() (trainable = adapters);
  - transformers loads the merged export (config.json copied beside it) with logits within 1e-4
    of the adapted model's.
Qwen2-VL adapts vision modules too (qkv, fc2), so the transformers 5 key layout is exercised.
QLoRA (qwen2vl_nf4): lora_tool quantizes the base as lora.quantize = "nf4" says
(every text Linear, and the targeted vision ones, in blocks of 64 with double quantization) and
computes with the dequantized weights; peft's base gets bitsandbytes' dequantize_4bit of its
quantize_4bit for the same weights (transformers cannot load 4-bit on the CPU), so the same
assertions hold against bitsandbytes' arithmetic, the merged export included.
"""
import argparse
import os
import shutil
import subprocess
import sys

import bitsandbytes.functional as bnbf
import torch
from peft import PeftModel
from safetensors.torch import load_file, save_file
from transformers import Qwen2ForCausalLM, Qwen2VLForConditionalGeneration

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_models as rm  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
from checks import check, finish  # noqa: E402

R, ALPHA = 4, 12.0
NF4_BLOCK = 64
TEXT_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
CASES = [  # label, class, builder, tied, vision, seed, targets, nf4
    ("qwen2_untied", Qwen2ForCausalLM, rm.qwen2, False, False, 11,
     ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], False),
    ("qwen2_tied", Qwen2ForCausalLM, rm.qwen2, True, False, 12, ["q_proj", "mlp.down_proj"],
     False),
    ("qwen2vl_untied", Qwen2VLForConditionalGeneration, rm.qwen2vl, False, True, 13,
     ["q_proj", "v_proj", "o_proj", "down_proj", "qkv", "fc2"], False),
    ("qwen2vl_nf4", Qwen2VLForConditionalGeneration, lambda t: rm.qwen2vl(t, wide=True), False,
     True, 14, ["q_proj", "v_proj", "o_proj", "down_proj", "qkv", "fc2"], True),
]


def nf4_base(model, targets):
    """Replaces the weights QLoRA quantizes (every text Linear; vision ones only where targeted)
    by bitsandbytes' NF4 round trip; returns how many."""
    count = 0
    with torch.no_grad():
        for name, module in model.named_modules():
            last = name.rsplit(".", 1)[-1]
            vision = ".visual." in f".{name}"
            if not (last in targets if vision else last in TEXT_LINEARS):
                continue
            q, state = bnbf.quantize_4bit(module.weight.data, blocksize=NF4_BLOCK,
                                          quant_type="nf4", compress_statistics=True)
            module.weight.copy_(bnbf.dequantize_4bit(q, state).reshape(module.weight.shape))
            count += 1
    return count


def forward(model, inputs):
    kwargs = dict(inputs)
    if "pixel_values" in inputs:
        kwargs["mm_token_type_ids"] = (inputs["input_ids"] == rm.IMAGE).int()
    return model(**kwargs)


def within(ours, theirs, abs_tol, rel_tol=0.0):
    d = (ours - theirs).abs().max().item()
    return d <= abs_tol + rel_tol * theirs.abs().max().item(), d


def check_case(tool, work, label, cls, build, tied, vision, seed, targets, nf4):
    base_dir = os.path.join(work, label)
    out_dir = os.path.join(work, label + ".lora")
    base = build(tied)
    rm.randomize(base, seed)
    base.save_pretrained(base_dir)
    inputs = rm.build_inputs(vision, seed)
    inputs_path = os.path.join(work, label + ".inputs.safetensors")
    save_file({k: v.contiguous() for k, v in inputs.items()}, inputs_path)
    os.makedirs(os.path.join(out_dir, "merged"))
    argv = [tool, base_dir, inputs_path, out_dir, str(R), str(ALPHA), ",".join(targets)]
    if nf4:
        argv.append(str(NF4_BLOCK))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        check(False, f"{label}: lora_tool failed: {proc.stdout}{proc.stderr}")
        return
    got = load_file(os.path.join(out_dir, "out.safetensors"))

    base_model = cls.from_pretrained(base_dir)
    if nf4:
        n = nf4_base(base_model, targets)
        check(n == 2 * (len(TEXT_LINEARS) + 2), f"{label}: {n} weights NF4 round-tripped")
    peft = PeftModel.from_pretrained(base_model, os.path.join(out_dir, "adapter"),
                                     is_trainable=True)
    peft.eval()  # no dropout anywhere (lora_dropout is 0 too)
    out = forward(peft, inputs)
    out.loss.backward()
    valid = inputs["attention_mask"].bool()
    ok, d = within(got["logits"][valid], out.logits.detach()[valid], 1e-4)
    check(ok, f"{label}: logits vs peft max |diff| {d:.2e} <= 1e-4")
    rel = abs(got["loss"].item() - out.loss.item()) / abs(out.loss.item())
    check(rel <= 1e-5, f"{label}: loss {got['loss'].item():.7f} vs peft {out.loss.item():.7f}, "
                          f"rel {rel:.1e} <= 1e-5")
    theirs = {n.replace(".default", ""): p.grad for n, p in peft.named_parameters()
              if p.requires_grad}
    ours = {k[len("grad."):]: v for k, v in got.items() if k.startswith("grad.")}
    check(set(ours) == set(theirs) and ours,
             f"{label}: same {len(theirs)} adapter names; only peft: "
             f"{sorted(set(theirs) - set(ours))[:2]}, only ours: {sorted(set(ours) - set(theirs))[:2]}")
    worst, where, bad, zero = 0.0, "", [], []
    for name in sorted(set(ours) & set(theirs)):
        ok, d = within(ours[name], theirs[name], 1e-4, 1e-5)
        if not ok:
            bad.append(name)
        if not theirs[name].abs().max().item() > 0:
            zero.append(name)
        if d >= worst:
            worst, where = d, name
    check(not bad and not zero,
             f"{label}: adapter gradients within 1e-4 + 1e-5 * max|grad|, max |diff| "
             f"{worst:.2e} ({where}); outside: {bad[:2]}; all-zero: {zero[:2]}")
    trainable, total = peft.get_nb_trainable_parameters()
    check(got["params_trainable"].item() == trainable and got["params_total"].item() == total,
             f"{label}: parameters {got['params_total'].item()} / trainable "
             f"{got['params_trainable'].item()} == peft's {total} / {trainable}")

    merged_dir = os.path.join(out_dir, "merged")
    shutil.copy(os.path.join(base_dir, "config.json"), merged_dir)
    merged = cls.from_pretrained(merged_dir)
    merged.eval()
    with torch.no_grad():
        logits = forward(merged, inputs).logits
    ok, d = within(logits[valid], out.logits.detach()[valid], 1e-4)
    check(ok, f"{label}: merged export loaded by transformers: logits max |diff| {d:.2e} <= 1e-4")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    torch.manual_seed(0)
    for case in CASES:
        check_case(args.tool, args.work, *case)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
