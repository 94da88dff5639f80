// SHA-256 (FIPS 180-4) for config hashes: small, dependency-free, not meant for bulk data.
#pragma once

#include <string>
#include <string_view>

namespace shardscope::spec {

/// The SHA-256 digest of `data` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace shardscope::spec
