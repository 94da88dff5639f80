// Builds c10d's NCCL backend (only in a build against a CUDA LibTorch; SHARDSCOPE_WITH_NCCL).
#pragma once

#include <chrono>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace shardscope::dist {

/// True when this shardtrain was built with the NCCL backend.
bool nccl_available();

/// An NCCL backend over `store`; raises a TrainerError (config) in a build without NCCL.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout);

}  // namespace shardscope::dist
