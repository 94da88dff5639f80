#!/usr/bin/env python3
"""The GEMMs of a Linear, LibTorch's BLAS (MKL) against oneDNN's inner product, one thread.

For each Linear shape of a Qwen2 size (bench_fsdp2's SIZES) and rows = batch x seq_len, times the
three GEMMs of a training pass the way shardtrain's model::dense runs them:
  forward  y  = x W^T        BLAS: x @ W.t()       oneDNN: linear_pointwise(x, W)
  dx       dx = g W          BLAS: g @ W           oneDNN: linear_pointwise(g, W.t())
  dW       dW = g^T x        BLAS: g.t() @ x       oneDNN: linear_pointwise(g.t(), x.t())
                                                   (oneDNN copies g^T first; timed with it)
Median of --iters calls after --warmup, the two libraries alternating call by call so load
changes hit both; prints GFLOP/s and the ratio oneDNN / BLAS, and the largest relative
difference of the results. Figures, not a test.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_fsdp2 import SIZES  # noqa: E402


def shapes(s):
    """(name, out, in) of the size's Linears (q/k/v/o share one shape when kv heads = heads)."""
    c, i, v = s["hidden"], s["intermediate"], s["vocab"]
    return [("q, k, v, o", c, c), ("gate, up", i, c), ("down", c, i), ("lm_head", v, c)]


def timed(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", default="100m", help="one of " + ",".join(SIZES))
    p.add_argument("--iters", type=int, default=9)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    lp = getattr(getattr(torch.ops, "mkldnn", None), "_linear_pointwise", None)
    if lp is None:
        raise SystemExit("this torch has no mkldnn::_linear_pointwise (built without oneDNN)")
    s = SIZES[a.size]
    m = s["batch"] * s["seq_len"]
    gen = torch.Generator().manual_seed(0)
    print(f"{a.size}: {m} rows, 1 thread, median of {a.iters} calls; GFLOP/s")
    head = (f"{'Linear':<11} {'out x in':>11} {'GEMM':>7} {'BLAS':>7} {'oneDNN':>7} {'ratio':>6} "
            f"{'rel diff':>9}")
    print(head)
    print("-" * len(head))
    for name, n, k in shapes(s):
        x = torch.randn(m, k, generator=gen)
        w = torch.randn(n, k, generator=gen)
        g = torch.randn(m, n, generator=gen)
        cases = [("forward", lambda: x @ w.t(), lambda: lp(x, w, None, "none", [], "")),
                 ("dx", lambda: g @ w, lambda: lp(g, w.t(), None, "none", [], "")),
                 ("dW", lambda: g.t() @ x, lambda: lp(g.t(), x.t(), None, "none", [], ""))]
        flops = 2.0 * m * n * k
        for gemm, blas, dnnl in cases:
            want, got = blas(), dnnl()
            diff = ((got - want).abs().max() / want.abs().max()).item()
            tb, td = [], []
            for _ in range(a.iters):  # alternate call by call
                tb += timed(blas, 0 if tb else a.warmup, 1)
                td += timed(dnnl, 0 if td else a.warmup, 1)
            rb = flops / statistics.median(tb) / 1e9
            rd = flops / statistics.median(td) / 1e9
            print(f"{name:<11} {f'{n} x {k}':>11} {gemm:>7} {rb:7.1f} {rd:7.1f} {rd / rb:6.2f} "
                  f"{diff:9.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
