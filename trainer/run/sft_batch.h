// Model batches of prepared SFT samples (data/text/sft_prepare.h): right padding to the
// longest sample of the batch with an attention mask, and every image's patches concatenated in
// token order. Shared by `shardtrain train` (chat data) and `shardtrain forward`.
//
// Legend: B samples, T longest sample, N patches of all images, P patch width, I images.
#pragma once

#include <cstdint>
#include <vector>

#include "data/text/sft_prepare.h"
#include "trainer/model/model.h"

namespace shardscope::trainer {

/// input_ids/labels/attention_mask (B, T); pixel_values (N, P) float32 and image_grid_thw (I, 3)
/// int64 when a sample has images (undefined otherwise). Padding takes `pad_id`, label -100,
/// mask 0.
model::Batch make_sft_batch(const std::vector<data::PreparedSample>& samples,
                            const std::vector<std::int64_t>& indices, std::int64_t pad_id);

}  // namespace shardscope::trainer
