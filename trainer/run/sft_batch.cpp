#include "trainer/run/sft_batch.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

namespace shardscope::trainer {

model::Batch make_sft_batch(const std::vector<data::PreparedSample>& samples,
                            const std::vector<std::int64_t>& indices, std::int64_t pad_id) {
  const auto B = static_cast<std::int64_t>(indices.size());
  std::int64_t T = 1;
  std::int64_t patches = 0;
  std::int64_t images = 0;
  std::int64_t width = 0;
  for (auto i : indices) {
    const auto& s = samples[static_cast<std::size_t>(i)];
    T = std::max<std::int64_t>(T, static_cast<std::int64_t>(s.input_ids.size()));
    for (const auto& im : s.images) {
      patches += im.num_patches();
      width = im.patch_dim;
      ++images;
    }
  }
  model::Batch batch;
  batch.input_ids = at::full({B, T}, pad_id, at::kLong);  // (B, T)
  batch.labels = at::full({B, T}, -100, at::kLong);       // (B, T)
  batch.attention_mask = at::zeros({B, T}, at::kLong);    // (B, T)
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& s = samples[static_cast<std::size_t>(indices[static_cast<std::size_t>(b)])];
    const auto n = static_cast<std::int64_t>(s.input_ids.size());
    std::memcpy(batch.input_ids[b].data_ptr<std::int64_t>(), s.input_ids.data(),
                n * sizeof(std::int64_t));
    std::memcpy(batch.labels[b].data_ptr<std::int64_t>(), s.labels.data(),
                n * sizeof(std::int64_t));
    batch.attention_mask[b].narrow(0, 0, n).fill_(1);
  }
  if (images == 0) return batch;
  batch.pixel_values = at::empty({patches, width}, at::kFloat);  // (N, P)
  batch.image_grid_thw = at::empty({images, 3}, at::kLong);      // (I, 3)
  auto* pixels = batch.pixel_values.data_ptr<float>();
  auto grid = batch.image_grid_thw.accessor<std::int64_t, 2>();
  std::int64_t image = 0;
  for (auto i : indices) {
    for (const auto& im : samples[static_cast<std::size_t>(i)].images) {
      std::memcpy(pixels, im.pixel_values.data(), im.pixel_values.size() * sizeof(float));
      pixels += im.pixel_values.size();
      grid[image][0] = im.grid_t;
      grid[image][1] = im.grid_h;
      grid[image][2] = im.grid_w;
      ++image;
    }
  }
  return batch;
}

}  // namespace shardscope::trainer
