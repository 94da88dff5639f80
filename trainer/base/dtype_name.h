// PyTorch's name of a floating dtype ("float32", "bfloat16", "float16": str(torch.dtype) without
// "torch."), as the trace and bitsandbytes' quant state write it.
#pragma once

#include <string>

#include <c10/core/ScalarType.h>

namespace shardscope::trainer {

/// "bfloat16", "float16", else "float32".
inline std::string torch_dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16:
      return "bfloat16";
    case at::kHalf:
      return "float16";
    default:
      return "float32";
  }
}

}  // namespace shardscope::trainer
