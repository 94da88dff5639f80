#!/usr/bin/env python3
"""Shardscope's NF4 quantization vs bitsandbytes itself (label `reference`).

nf4_tool (C++, model::quantize_nf4) quantizes the weights this script writes, for block sizes 64
and 128 with double quantization on and off, and the script compares every tensor with
bitsandbytes.functional.quantize_4bit(quant_type="nf4") on the same weights, exactly:

  - the packed codes (two per byte, high nibble first), the absmax (fp32, or with double
    quantization the uint8 codes, the nested fp32 absmax and the offset), the NF4 level table and
    the double quantization's dynamic map;
  - the absmax the dequantization uses (bitsandbytes' dequantize_blockwise + offset);
  - the dequantized weight in fp32, bf16 and fp16 (bitsandbytes' dequantize_4bit kernel);
  - the packed bytes stored as bf16 / fp16 / fp32 (quantize_4bit's quant_storage);
  - the tensors bitsandbytes serializes (QuantState.as_dict(packed=True), what transformers saves
    for a 4-bit model) equal ours, and bitsandbytes' QuantState.from_dict reads ours back;
  - nf4_tool reads checkpoints bitsandbytes serialized (uint8 and bf16 storage) to the same
    weights, and one whose quantization the config does not describe (block size, double
    quantization, FP4, lora.quantize = "none") ends with a config error naming the field, one
    whose metadata disagrees with its tensors with a data error.

The weights: fp32 and bf16; shapes whose size is a multiple of 256 blocks, one that is not (the
nested absmax has a partial block), one with a partial last block and an odd size (a padding
nibble), a single partial block (its nested absmax is 0), and an all-zero row.
"""
import argparse
import json
import os
import subprocess
import sys

import torch
import bitsandbytes.functional as F
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
from checks import check, finish  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
CONFIGS = [(64, True), (64, False), (128, True), (128, False)]  # block size, double quant


def weights():
    """name -> weight: (out, in) Linear shapes, small values with a few outliers."""
    g = torch.Generator().manual_seed(19)

    def w(shape, dtype, scale=0.02):
        t = torch.randn(shape, generator=g) * scale
        flat = t.view(-1)
        flat[torch.randint(0, flat.numel(), (max(1, flat.numel() // 500),), generator=g)] *= 40
        return t.to(dtype)

    out = {
        "mlp_bf16": w((128, 256), torch.bfloat16),      # 512 blocks of 64: 2 nested blocks
        "wide_bf16": w((300, 320), torch.bfloat16),     # 1500 / 750 blocks: a partial nested one
        "big_fp32": w((1000, 1024), torch.float32),     # 16000 blocks of 64
        "odd_fp32": w((77, 129), torch.float32),        # partial last block, odd size
        "single_fp32": w((40,), torch.float32),         # one partial block
        "rows_fp32": w((64, 96), torch.float32, 1.0),   # rows of 1.5 blocks of 64
    }
    out["mlp_bf16"][5].zero_()  # all-zero blocks
    return out


def bnb_dequant(q, absmax, shape, block, dtype):
    """bitsandbytes' dequantize_4bit kernel. Its AVX-512 CPU kernel indexes the absmax per row
    (absmax[row * (cols // block) + col // block]), which is wrong where a row is not a whole
    number of blocks (cols % 16 == 0 but cols % block != 0); the layout is flat, so such a weight
    is handed to it as (n // block, block) rows, the same blocks."""
    n = 1
    for d in shape:
        n *= d
    rows_ok = shape[-1] % block == 0 or shape[-1] % 16 != 0
    if not rows_ok:
        assert n % block == 0
        out = torch.ops.bitsandbytes.dequantize_4bit(q, absmax, block, "nf4", [n // block, block],
                                                     dtype)
        return out.reshape(shape)
    out = torch.ops.bitsandbytes.dequantize_4bit(q, absmax, block, "nf4", list(shape), dtype)
    return out.reshape(shape)


def same(a, b):
    """Bitwise equal (shape and bytes)."""
    a, b = a.contiguous(), b.contiguous()
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8)) if a.numel() else True


def serialized(name, q, st):
    """What transformers saves for weight `name` quantized by bitsandbytes."""
    out = {name: q}
    out.update({f"{name}.{k}": v for k, v in st.as_dict(packed=True).items()})
    return out


def quant_state_json(t):
    return json.loads(bytes(t.tolist()).decode("utf-8"))


def check_serialized(ours_bnb, name, q, st, w, ours, where):
    theirs = serialized(name, q, st)
    mine = {k: v for k, v in ours_bnb.items() if k == name or k.startswith(name + ".")}
    check(sorted(mine) == sorted(theirs), f"{where}: serialized keys {sorted(mine)}")
    for key, t in theirs.items():
        if key not in mine:
            continue
        if key.endswith("bitsandbytes__nf4"):
            check(quant_state_json(mine[key]) == quant_state_json(t), f"{where}: {key} JSON")
        else:
            check(same(mine[key], t), f"{where}: serialized {key[len(name):] or 'codes'}")
    # bitsandbytes reads ours back: its QuantState from our tensors dequantizes to our weight.
    state = F.QuantState.from_dict({k[len(name) + 1:]: v for k, v in mine.items() if k != name},
                                   device=torch.device("cpu"))
    if w.shape[-1] % state.blocksize == 0 or w.shape[-1] % 16 != 0:
        own = {torch.float32: "fp32", torch.bfloat16: "bf16"}[w.dtype]
        check(same(F.dequantize_4bit(mine[name], state).reshape(w.shape),
                   ours[name + ".dequant." + own]), f"{where}: QuantState.from_dict(ours)")


def read_ckpt(tool, work, label, tensors, block, dq, quantize="nf4"):
    """Runs `nf4_tool read` on `tensors`; returns (exit code, output text, result or None)."""
    ckpt = os.path.join(work, f"read_{label}.safetensors")
    out = os.path.join(work, f"read_{label}.out.safetensors")
    save_file(tensors, ckpt)
    r = subprocess.run([tool, "read", ckpt, out, str(block), "1" if dq else "0", quantize],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr, (load_file(out) if r.returncode == 0 else None)


def check_reading(tool, work, inputs):
    """Checkpoints bitsandbytes serialized: read to its weights, or refused with the field."""
    for label, name, block, dq, storage in [("u8_64_dq", "mlp_bf16", 64, True, torch.uint8),
                                            ("bf16_128", "big_fp32", 128, False, torch.bfloat16),
                                            ("u8_64_odd", "odd_fp32", 64, True, torch.uint8)]:
        w = inputs[name]
        q, st = F.quantize_4bit(w, blocksize=block, quant_type="nf4", compress_statistics=dq,
                                quant_storage=storage)
        rc, text, got = read_ckpt(tool, work, label, serialized(name, q, st), block, dq)
        where = f"read {label} ({name}, block {block}, double_quant {dq}, {storage})"
        check(rc == 0, f"{where}: exit 0 ({text.strip()[-300:]})")
        if got is not None:
            theirs = bnb_dequant(q.view(torch.uint8), F.dequantize_blockwise(st.absmax, st.state2)
                                 + st.offset if dq else st.absmax, tuple(w.shape), block, w.dtype)
            check(same(got[name + ".dequant"], theirs), f"{where}: dequantized weight")
    w = inputs["mlp_bf16"]
    q, st = F.quantize_4bit(w, blocksize=128, quant_type="nf4", compress_statistics=True)
    ckpt = serialized("w", q, st)
    qf, stf = F.quantize_4bit(w, blocksize=64, quant_type="fp4", compress_statistics=True)
    bad_shape = dict(ckpt)
    meta = quant_state_json(ckpt["w.quant_state.bitsandbytes__nf4"])
    meta["shape"] = [128, 255]
    bad_shape["w.quant_state.bitsandbytes__nf4"] = torch.tensor(list(json.dumps(meta).encode()),
                                                               dtype=torch.uint8)
    for label, tensors, block, dq, quantize, code, parts in [
            ("block", ckpt, 64, True, "nf4", 2,
             ["lora.quant_block_size", "blocks of 128", "set lora.quant_block_size = 128"]),
            ("double_quant", ckpt, 128, False, "nf4", 2,
             ["lora.double_quant", "set lora.double_quant = true"]),
            ("none", ckpt, 128, True, "none", 2,
             ["lora.quantize", "as bitsandbytes NF4", "set lora.quantize = \"nf4\""]),
            ("fp4", serialized("w", qf, stf), 64, True, "nf4", 2, ["lora.quantize", "FP4"]),
            ("shape", bad_shape, 128, True, "nf4", 1,
             ["do not fit its shape [128,255]", "disagrees with its tensors"])]:
        rc, text, _ = read_ckpt(tool, work, "bad_" + label, tensors, block, dq, quantize)
        missing = [p for p in parts if p not in text]
        check(rc == code and not missing,
              f"read with a mismatched {label}: exit {rc} (want {code}), message has {parts}"
              + (f"; missing {missing} in: {text.strip()}" if missing else ""))


def check_config(tool, work, inputs, block, dq):
    tag = f"block {block}, double_quant {'on' if dq else 'off'}"
    out_path = os.path.join(work, f"nf4_{block}_{int(dq)}.safetensors")
    bnb_path = os.path.join(work, f"nf4_{block}_{int(dq)}.bnb.safetensors")
    subprocess.run([tool, "quantize", os.path.join(work, "inputs.safetensors"), out_path,
                    bnb_path, str(block), "1" if dq else "0"], check=True)
    ours = load_file(out_path)
    ours_bnb = load_file(bnb_path)
    for name, w in inputs.items():
        q, st = F.quantize_4bit(w, blocksize=block, quant_type="nf4", compress_statistics=dq,
                                quant_storage=torch.uint8)
        where = f"{name} {tuple(w.shape)} {str(w.dtype)[6:]}, {tag}"
        check(same(ours[name + ".packed"], q.view(-1)), f"{where}: packed codes")
        check(same(ours["nf4_code"], st.code.float()), f"{where}: NF4 levels")
        check(same(ours[name + ".absmax"], st.absmax), f"{where}: absmax")
        if dq:
            check(same(ours[name + ".nested_absmax"], st.state2.absmax),
                  f"{where}: nested absmax")
            check(same(ours[name + ".offset"], st.offset.reshape(1)), f"{where}: offset")
            check(same(ours["dynamic_map"], st.state2.code), f"{where}: dynamic map")
            absmax = F.dequantize_blockwise(st.absmax, st.state2) + st.offset
        else:
            absmax = st.absmax
        check(same(ours[name + ".block_absmax"], absmax), f"{where}: dequantized absmax")
        for suffix, dtype in DTYPES.items():
            theirs = bnb_dequant(q, absmax, tuple(w.shape), block, dtype)
            check(same(ours[name + ".dequant." + suffix], theirs),
                  f"{where}: dequantized {suffix}")
        # The public entry point too, in the weight's own dtype, where its kernel is right.
        if w.shape[-1] % block == 0 or w.shape[-1] % 16 != 0:
            own = {torch.float32: "fp32", torch.bfloat16: "bf16"}[w.dtype]
            check(same(ours[name + ".dequant." + own], F.dequantize_4bit(q, st).reshape(w.shape)),
                  f"{where}: F.dequantize_4bit")
        check_serialized(ours_bnb, name, q, st, w, ours, where)
        for suffix, dtype in DTYPES.items():
            key = name + ".storage." + suffix
            if q.numel() % torch.empty(0, dtype=dtype).element_size():
                check(key not in ours, f"{where}: no {suffix} storage of an odd byte count")
                continue
            qs, _ = F.quantize_4bit(w, blocksize=block, quant_type="nf4",
                                    compress_statistics=dq, quant_storage=dtype)
            check(key in ours and same(ours[key], qs.view(-1)), f"{where}: {suffix} storage")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(1)
    inputs = weights()
    save_file(inputs, os.path.join(args.work, "inputs.safetensors"))
    for block, dq in CONFIGS:
        check_config(args.tool, args.work, inputs, block, dq)
    check_reading(args.tool, args.work, inputs)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
