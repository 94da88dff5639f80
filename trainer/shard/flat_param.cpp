#include "trainer/shard/flat_param.h"

#include <c10/core/StorageImpl.h>

#include <algorithm>

namespace shardscope::shard {

std::vector<std::int64_t> FlatParam::split_sizes() const {
  std::vector<std::int64_t> sizes;
  sizes.reserve(slots.size() + 1);
  for (const auto& s : slots) {
    if (!nf4) {
      sizes.push_back(s.numel);
      continue;
    }
    std::int64_t n = 1;
    for (auto d : s.shape) n *= d;
    sizes.push_back(n);
  }
  if (!nf4 && padded > numel) sizes.push_back(padded - numel);
  return sizes;
}

std::int64_t FlatParam::full_numel() const {
  if (!nf4) return padded;
  std::int64_t n = 0;
  for (auto size : split_sizes()) n += size;
  return n;
}

void layout_flat(FlatParam& flat, int group_size, int group_rank) {
  std::int64_t offset = 0;
  for (auto& s : flat.slots) {
    s.numel = 1;
    for (auto d : s.shape) s.numel *= d;
    if (s.record > 0) s.numel = s.record;
    s.offset = offset;
    offset += s.numel;
  }
  flat.numel = offset;
  flat.shard_numel = (offset + group_size - 1) / group_size;
  flat.padded = flat.shard_numel * group_size;
  flat.shard_offset = flat.shard_numel * group_rank;
  flat.decay_ranges.clear();
  const auto lo = flat.shard_offset;
  const auto hi = flat.shard_offset + flat.shard_numel;
  for (const auto& s : flat.slots) {
    const auto b = std::max(lo, s.offset);
    const auto e = std::min(hi, s.offset + s.numel);
    if (!s.decay || b >= e) continue;
    if (!flat.decay_ranges.empty() && flat.decay_ranges.back().second == b - lo) {
      flat.decay_ranges.back().second = e - lo;
    } else {
      flat.decay_ranges.emplace_back(b - lo, e - lo);
    }
  }
}

void free_storage(const at::Tensor& t) {
  auto* impl = t.storage().unsafeGetStorageImpl();
  if (impl->nbytes() == 0) return;
  impl->set_data_ptr_noswap(at::DataPtr(nullptr, impl->device()));
  impl->set_nbytes(0);
}

void alloc_storage(const at::Tensor& t, std::size_t nbytes) {
  auto* impl = t.storage().unsafeGetStorageImpl();
  if (impl->nbytes() == nbytes) return;
  impl->set_data_ptr_noswap(impl->allocator()->allocate(nbytes));
  impl->set_nbytes(nbytes);
}

}  // namespace shardscope::shard
