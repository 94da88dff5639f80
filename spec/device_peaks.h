// Dense (no sparsity) peak matrix FLOP/s of common GPUs by compute dtype, from the vendors'
// datasheets, for MFU: MFU = model FLOPs per token x tokens/s / (peak x ranks), with the model
// FLOPs of spec::training_flops_per_token (spec/model_shape.h). Torch-free, so the table is
// tested without a GPU.
#pragma once

#include <optional>
#include <string_view>

namespace shardscope::spec {

enum class PeakDType { fp32, tf32, bf16, fp16 };

/// The dense peak of the GPU whose CUDA name contains a known model ("NVIDIA H100 80GB HBM3"),
/// or nothing for an unknown device (the caller then measures a GEMM and says so).
std::optional<double> dense_peak_flops(std::string_view device_name, PeakDType dtype);

}  // namespace shardscope::spec
