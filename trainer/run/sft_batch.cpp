#include "trainer/run/sft_batch.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

namespace shardscope::trainer {
namespace {

// Every image of `order`'s samples, in that order, into the batch's pixel_values (N, P) and
// image_grid_thw (I, 3); nothing when they have none.
void add_images(model::Batch& batch, const std::vector<data::PreparedSample>& samples,
                const std::vector<std::int64_t>& order) {
  std::int64_t patches = 0;
  std::int64_t images = 0;
  std::int64_t width = 0;
  for (auto i : order) {
    for (const auto& im : samples[static_cast<std::size_t>(i)].images) {
      patches += im.num_patches();
      width = im.patch_dim;
      ++images;
    }
  }
  if (images == 0) return;
  batch.pixel_values = at::empty({patches, width}, at::kFloat);  // (N, P)
  batch.image_grid_thw = at::empty({images, 3}, at::kLong);      // (I, 3)
  auto* pixels = batch.pixel_values.data_ptr<float>();
  auto grid = batch.image_grid_thw.accessor<std::int64_t, 2>();
  std::int64_t image = 0;
  for (auto i : order) {
    for (const auto& im : samples[static_cast<std::size_t>(i)].images) {
      std::memcpy(pixels, im.pixel_values.data(), im.pixel_values.size() * sizeof(float));
      pixels += im.pixel_values.size();
      grid[image][0] = im.grid_t;
      grid[image][1] = im.grid_h;
      grid[image][2] = im.grid_w;
      ++image;
    }
  }
}

// Sample `s` at row b, columns [t0, t0 + its length): ids, labels, mask 1.
void place(model::Batch& batch, const data::PreparedSample& s, std::int64_t b, std::int64_t t0) {
  const auto n = static_cast<std::int64_t>(s.input_ids.size());
  std::memcpy(batch.input_ids[b].data_ptr<std::int64_t>() + t0, s.input_ids.data(),
              n * sizeof(std::int64_t));
  std::memcpy(batch.labels[b].data_ptr<std::int64_t>() + t0, s.labels.data(),
              n * sizeof(std::int64_t));
  batch.attention_mask[b].narrow(0, t0, n).fill_(1);
}

model::Batch padded(std::int64_t B, std::int64_t T, std::int64_t pad_id) {
  model::Batch batch;
  batch.input_ids = at::full({B, T}, pad_id, at::kLong);  // (B, T)
  batch.labels = at::full({B, T}, -100, at::kLong);       // (B, T)
  batch.attention_mask = at::zeros({B, T}, at::kLong);    // (B, T)
  return batch;
}

}  // namespace

model::Batch make_sft_batch(const std::vector<data::PreparedSample>& samples,
                            const std::vector<std::int64_t>& indices, std::int64_t pad_id) {
  std::int64_t T = 1;
  for (auto i : indices)
    T = std::max<std::int64_t>(
        T, static_cast<std::int64_t>(samples[static_cast<std::size_t>(i)].input_ids.size()));
  auto batch = padded(static_cast<std::int64_t>(indices.size()), T, pad_id);
  for (std::size_t b = 0; b < indices.size(); ++b)
    place(batch, samples[static_cast<std::size_t>(indices[b])], static_cast<std::int64_t>(b), 0);
  add_images(batch, samples, indices);
  return batch;
}

model::Batch make_packed_sft_batch(const std::vector<data::PreparedSample>& samples,
                                   const std::vector<std::int64_t>& indices,
                                   const std::vector<std::vector<std::int64_t>>& rows,
                                   std::int64_t pad_id, const std::vector<std::int64_t>& keys) {
  auto length = [&](std::int64_t j) {
    return static_cast<std::int64_t>(
        samples[static_cast<std::size_t>(indices[static_cast<std::size_t>(j)])].input_ids.size());
  };
  std::int64_t T = 1;
  for (const auto& row : rows) {
    std::int64_t fill = 0;
    for (auto j : row) fill += length(j);
    T = std::max(T, fill);
  }
  const auto B = static_cast<std::int64_t>(rows.size());
  auto batch = padded(B, T, pad_id);
  batch.position_ids = at::zeros({B, T}, at::kLong);  // (B, T)
  std::vector<std::int64_t> order;  // dataset indices in token order (the images' order)
  for (std::int64_t b = 0; b < B; ++b) {
    std::int64_t t0 = 0;
    for (auto j : rows[static_cast<std::size_t>(b)]) {
      const auto i = indices[static_cast<std::size_t>(j)];
      const auto n = length(j);
      place(batch, samples[static_cast<std::size_t>(i)], b, t0);
      batch.labels[b][t0].fill_(-100);
      batch.position_ids[b].narrow(0, t0, n).copy_(at::arange(n, at::kLong));
      batch.seqlens.push_back(n);
      if (!keys.empty()) batch.dropout.samples.push_back(keys[static_cast<std::size_t>(j)]);
      order.push_back(i);
      t0 += n;
    }
    if (t0 < T) {
      batch.seqlens.push_back(T - t0);
      if (!keys.empty()) batch.dropout.samples.push_back(-1 - b);
    }
  }
  if (!keys.empty()) batch.dropout.spans = batch.seqlens;
  add_images(batch, samples, order);
  return batch;
}

}  // namespace shardscope::trainer
