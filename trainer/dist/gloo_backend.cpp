#include "trainer/dist/gloo_backend.h"

#include <cstdlib>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace shardscope::dist {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    const std::string& bind_address,
                                                    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else if (bind_address.empty()) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(bind_address));
  }
  // One Gloo worker thread: ranks already use every core, and collectives run one at a time
  // per unit; the engine overlaps them with compute, not with each other.
  options->threads = 1;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace shardscope::dist
