// Recursive removal without std::filesystem::remove_all. PyTorch's wheels export their own copy
// of libstdc++'s filesystem functions from libtorch.so, and in a process that loads them every
// call binds there: torch 2.11's remove_all calls weak recursive_directory_iterator symbols that
// resolve to null under another libstdc++ (on the GPU machine, GCC 13, `shardtrain selftest`
// crashed in it). This walks the tree with POSIX nftw instead.
#pragma once

#include <string>

namespace shardscope::spec {

/// Removes `path` and everything below it (symbolic links are removed, never followed). A path
/// that does not exist is not an error. Returns false with `error` set on the first failure.
bool remove_tree(const std::string& path, std::string* error = nullptr);

}  // namespace shardscope::spec
