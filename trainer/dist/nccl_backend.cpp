#include "trainer/dist/nccl_backend.h"

#include "trainer/base/fatal.h"

#ifdef SHARDSCOPE_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace shardscope::dist {

#ifdef SHARDSCOPE_WITH_NCCL
bool nccl_available() { return true; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}
#else
bool nccl_available() { return false; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>&, int,
                                                    int, std::chrono::milliseconds) {
  SHARD_FAIL(spec::ErrorKind::config, "this shardtrain was built without NCCL",
             "build it against a CUDA LibTorch (docs/ARCHITECTURE.md), or use the gloo backend");
}
#endif

}  // namespace shardscope::dist
