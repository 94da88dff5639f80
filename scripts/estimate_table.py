#!/usr/bin/env python3
"""The table of docs/config.md ("Qwen2-VL-2B and -7B"): `shardtrain estimate --json` for the
published config.json of each model (examples/models/qwen2-vl-2b, qwen2-vl-7b; no weights
needed, nothing downloaded) on 1, 2, 4 and 8 GPUs of one node, beside DeepSpeed's
estimate_zero3_model_states_mem_needs_all_cold for the same parameter counts.

DeepSpeed's numbers are computed here from its formula (deepspeed/runtime/zero/stage3.py,
estimate_zero3_model_states_mem_needs, read from the source; deepspeed is not installed): per
GPU without offload, 4 x largest_layer_params + 18 x total_params / GPUs bytes (an fp16 copy of
the parameter shard, fp32 master, gradient and two Adam moments, plus the largest layer
gathered); with offload_optimizer only, 4 x largest_layer + 2 x total / GPUs; with both, 4 x
largest_layer. largest_layer_params is its model_to_params(): the module with the most
parameters of its own (the embedding, or the untied lm_head).

Usage: scripts/estimate_table.py --shardtrain build/bin/shardtrain [--seq-len 2048]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [("Qwen2-VL-2B", "qwen2-vl-2b"), ("Qwen2-VL-7B", "qwen2-vl-7b")]
GIB = 2.0 ** 30


def largest_layer_params(config):
    """DeepSpeed's model_to_params() largest layer: the module with most parameters of its own."""
    v, c, i = config["vocab_size"], config["hidden_size"], config["intermediate_size"]
    vis = config["vision_config"]
    e = vis["embed_dim"]
    q = e * vis["spatial_merge_size"] ** 2
    mlp = int(e * vis["mlp_ratio"])
    return max(v * c, c * i, q * q + q, mlp * e + mlp, 3 * e * e + 3 * e)


def deepspeed_gpu_bytes(total, largest, gpus, offload_optimizer, offload_params):
    largest_memory = 4 * largest
    if offload_optimizer and offload_params:
        return largest_memory
    if offload_optimizer:
        return largest_memory + int(2 * total / gpus)
    return largest_memory + int(18 * total / gpus)


def estimate(shardtrain, model_dir, gpus, seq_len, offload):
    with tempfile.TemporaryDirectory() as tmp:
        exp = os.path.join(tmp, "exp.toml")
        with open(exp, "w") as f:
            f.write(f'[model]\narch = "qwen2_vl"\npath = "{model_dir}"\n'
                    f'[data]\ntrain_path = "train.jsonl"\nformat = "chat"\nseq_len = {seq_len}\n'
                    f'[train]\nbatch_size = {gpus}\nmicro_batch_size = 1\n'
                    f'[shard]\nstrategy = "FULL_SHARD"\nprecision = "bf16"\n'
                    f'activation_checkpointing = true\noffload_optimizer = {offload}\n'
                    f'device = "cpu"\n'
                    f'[launch]\nnproc_per_node = {gpus}\ndevice_memory_gib = 80\n')
        with open(os.path.join(tmp, "train.jsonl"), "w"):
            pass
        out = subprocess.run([shardtrain, "estimate", exp, "--json"], capture_output=True,
                             text=True, check=False)
        if out.returncode != 0:
            sys.exit(f"shardtrain estimate failed: {out.stderr}")
        return json.loads(out.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--seq-len", type=int, default=2048)
    args = parser.parse_args()
    print("| model | GPUs | params | states: ours (16 B/param / S) | states: DeepSpeed ZeRO-3 "
          "(18 B/param / S + 4 x largest layer) | ours: gathered + activations + logits | "
          "ours: total per GPU | ours, offload_optimizer: device / host | DeepSpeed, "
          "offload_optimizer: GPU |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, folder in MODELS:
        model_dir = os.path.join(ROOT, "examples", "models", folder)
        with open(os.path.join(model_dir, "config.json")) as f:
            config = json.load(f)
        largest = largest_layer_params(config)
        for gpus in (1, 2, 4, 8):
            e = estimate(args.shardtrain, model_dir, gpus, args.seq_len, "false")
            off = estimate(args.shardtrain, model_dir, gpus, args.seq_len, "true")
            total = e["params_total"]
            ours_states = e["params"] + e["grads"] + e["optimizer"]
            ds = deepspeed_gpu_bytes(total, largest, gpus, False, False)
            ds_off = deepspeed_gpu_bytes(total, largest, gpus, True, False)
            rest = e["gathered"] + e["activations"] + e["vision"] + e["logits"]
            print(f"| {label} | {gpus} | {total / 1e9:.3f}B | {ours_states / GIB:.1f} GiB | "
                  f"{ds / GIB:.1f} GiB | {rest / GIB:.1f} GiB | {e['total'] / GIB:.1f} GiB | "
                  f"{off['device'] / GIB:.1f} / {off['host'] / GIB:.1f} GiB | "
                  f"{ds_off / GIB:.1f} GiB |")
    print(f"\n(bf16 compute, FULL_SHARD, activation checkpointing, micro-batch 1, "
          f"{args.seq_len} tokens with one image of 1280 tokens, AdamW; largest layer: "
          f"the embedding)")


if __name__ == "__main__":
    main()
