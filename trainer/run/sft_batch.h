// Model batches of prepared SFT samples (data/text/sft_prepare.h): one sample a row, or packed
// rows of several (data.pack), right-padded to the longest row with an attention mask, and
// every image's patches concatenated in token order. Shared by `shardtrain train` (chat data)
// and `shardtrain forward`.
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

/// Packed rows: row r holds the samples indices[j] for j in rows[r] (data::pack_rows over their
/// lengths), one after another, padded to the longest row. Besides make_sft_batch's tensors:
/// position_ids (B, T) from 0 in each sample, seqlens (each row's samples, then its padding),
/// and each sample's first label -100 (it would be predicted from the sample before it). With
/// `keys` (keys[j] for indices[j]: training's dropout keys), batch.dropout.samples and spans key
/// each segment (padding: -1 - row); the caller sets the seed and step.
model::Batch make_packed_sft_batch(const std::vector<data::PreparedSample>& samples,
                                   const std::vector<std::int64_t>& indices,
                                   const std::vector<std::vector<std::int64_t>>& rows,
                                   std::int64_t pad_id, const std::vector<std::int64_t>& keys = {});

}  // namespace shardscope::trainer
