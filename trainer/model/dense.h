// The models' Linear, dense(): y = x W^T + b, with at::linear's values and gradients, computed on
// CPU in float32 by oneDNN's inner product (the one LibTorch ships) instead of LibTorch's BLAS
// sgemm (MKL).
//
// Why: at a 100M Qwen2's shapes (512 rows, 768..8192 columns, one thread) on the test machines
// (AMD EPYC, Zen 4), oneDNN's forward GEMMs ran 1.36-1.57x as fast as MKL's and the backward
// ones 1.02-1.35x (bench/trainer/bench_gemm.py), and forward+backward of the whole model
// 1.10-1.14x (bench_forward.py, configuration blas). On a square 512^3 GEMM the two are within
// 5%: the gain is in these narrow shapes, where MKL on AMD runs its generic "zen" kernel. Not
// measured on Intel CPUs.
//
// Where oneDNN loses (a call costs ~12 us more, so tiny GEMMs and single-row GEMVs, as in a
// generation step), under autocast, and for every other device or dtype, the GEMM is
// at::linear's. oneDNN compiles a kernel for each new shape (~5 ms at 400 x 768 x 3072, then
// cached: 1024 by default, ONEDNN_PRIMITIVE_CACHE_CAPACITY), so a batch of a new length pays
// that once per Linear shape. SHARDSCOPE_CPU_GEMM=blas turns the oneDNN path off (side-by-side
// benchmarks).
//
// Legend: M rows (all leading dimensions of x), in / out the Linear's input / output width.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace shardscope::model {

/// x (..., in), w (out, in), b (out) or undefined -> (..., out); differentiable in all three.
at::Tensor dense(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {});

/// Whether dense() runs its CPU float32 GEMMs through oneDNN in this process: the operator is
/// present in this LibTorch and SHARDSCOPE_CPU_GEMM is not "blas".
bool onednn_dense_enabled();

/// How many GEMMs dense() and its backward have run through oneDNN in this process (the rest
/// went to at::linear): what tells a test which path a shape took.
std::int64_t onednn_dense_gemms();

}  // namespace shardscope::model
