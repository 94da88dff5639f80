// Builds c10d's Gloo backend. The only translation unit that includes ProcessGroupGloo.hpp
// (with trainer/dist/gloo_decl on its include path when LibTorch ships no gloo headers).
#pragma once

#include <chrono>
#include <string>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace shardscope::dist {

/// A Gloo backend over `store` bound to GLOO_SOCKET_IFNAME when set, else to `bind_address`,
/// else (empty) to this host's resolved address.
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    const std::string& bind_address,
                                                    std::chrono::milliseconds timeout);

}  // namespace shardscope::dist
