#include "spec/remove_tree.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace shardscope::spec {
namespace {

int remove_entry(const char* path, const struct stat* /*st*/, int type, struct FTW* /*ftw*/) {
  const int rc = (type == FTW_DP) ? ::rmdir(path) : ::unlink(path);
  return rc == 0 || errno == ENOENT ? 0 : errno;
}

}  // namespace

bool remove_tree(const std::string& path, std::string* error) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    if (error) *error = path + ": " + std::strerror(errno);
    return false;
  }
  // Depth first (a folder after its contents), without following links or leaving the device.
  const int rc = ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  if (rc != 0) {
    if (error) *error = path + ": " + std::strerror(rc > 0 ? rc : errno);
    return false;
  }
  return true;
}

}  // namespace shardscope::spec
