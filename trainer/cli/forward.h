// `shardtrain forward --model DIR --data FILE.jsonl --out FILE.safetensors [--dtype fp32|bf16]`:
// one unsharded forward of every SFT sample (one at a time, unpadded) with the model of a Hugging
// Face folder. For JSONL line i (from 0) the output holds input_ids.<i> and labels.<i> int64 [T_i]
// (-100 = no loss), logits.<i> float32 [T_i, V] (unshifted: position t predicts token t + 1) and,
// for samples with images, pixel_values.<i> float32 [N_i, P] and image_grid_thw.<i> int64
// [I_i, 3]. The last stdout line is a `done` event whose objective is the mean loss over every
// label token of the file.
#pragma once

#include <string>

namespace shardscope::trainer {

struct ForwardOptions {
  std::string model;           // Hugging Face model folder (config.json, safetensors, tokenizer)
  std::string data;            // SFT JSONL
  std::string out;             // safetensors file to write
  std::string dtype = "fp32";  // compute dtype of the parameters: fp32 or bf16
};

int run_forward(const ForwardOptions& options);

}  // namespace shardscope::trainer
