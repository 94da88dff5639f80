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
  - the packed bytes stored as bf16 / fp16 / fp32 (quantize_4bit's quant_storage).

The weights: fp32 and bf16; shapes whose size is a multiple of 256 blocks, one that is not (the
nested absmax has a partial block), one with a partial last block and an odd size (a padding
nibble), a single partial block (its nested absmax is 0), and an all-zero row.
"""
import argparse
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


def check_config(tool, work, inputs, block, dq):
    tag = f"block {block}, double_quant {'on' if dq else 'off'}"
    out_path = os.path.join(work, f"nf4_{block}_{int(dq)}.safetensors")
    subprocess.run([tool, os.path.join(work, "inputs.safetensors"), out_path, str(block),
                    "1" if dq else "0"], check=True)
    ours = load_file(out_path)
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
    return finish()


if __name__ == "__main__":
    sys.exit(main())
