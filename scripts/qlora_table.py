#!/usr/bin/env python3
"""The QLoRA tables of docs/config.md ("QLoRA: 70B on two 24 GB GPUs, Qwen2-VL-7B and -72B"):
`shardscope-cli --json estimate` with lora.quantize = "nf4" beside plain LoRA, for config.json
files written here (no weights: the estimate reads shapes only, nothing is downloaded):

  - Llama-2-70B's dimensions as a qwen2 config.json (hidden 8192, MLP 28672, 80 blocks, 64
    heads, 8 key/value heads, vocabulary 32000), on 2 ranks with offload_params and
    offload_optimizer, against a 24 GiB budget (fsdp_qlora's claim: a 70B fits two 24 GB GPUs);
  - Qwen2-VL-7B (examples/models/qwen2-vl-7b) and Qwen2-VL-72B (its published config.json's
    dimensions) on 1, 2, 4 and 8 ranks of one node.

Every run: bf16, FULL_SHARD, activation checkpointing, micro-batch 1, 2048 tokens (Qwen2-VL:
chat samples with one image of 1280 tokens), LoRA r = 16 on all seven text Linears.

Usage: scripts/qlora_table.py --cli build/bin/shardscope-cli
"""
import argparse
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = 2.0 ** 30
TARGETS = '["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]'

LLAMA2_70B_AS_QWEN2 = {
    "model_type": "qwen2", "hidden_size": 8192, "intermediate_size": 28672,
    "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
    "vocab_size": 32000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
}
# Qwen/Qwen2-VL-72B-Instruct's config.json, the fields the estimate reads.
QWEN2_VL_72B = {
    "model_type": "qwen2_vl", "hidden_size": 8192, "intermediate_size": 29568,
    "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
    "vocab_size": 152064, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": False,
    "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16,
                      "in_chans": 3, "hidden_size": 8192, "patch_size": 14,
                      "spatial_merge_size": 2, "spatial_patch_size": 14,
                      "temporal_patch_size": 2},
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
}


def estimate(cli, tmp, model_dir, arch, gpus, quantize, offload, budget_gib):
    fmt = "chat" if arch == "qwen2_vl" else "tokens"
    exp = os.path.join(tmp, "exp.toml")
    with open(exp, "w") as f:
        f.write(f'[model]\narch = "{arch}"\npath = "{model_dir}"\n'
                f'[data]\ntrain_path = "train.jsonl"\nformat = "{fmt}"\nseq_len = 2048\n'
                f'[train]\nbatch_size = {gpus}\nmicro_batch_size = 1\n'
                f'[shard]\nstrategy = "FULL_SHARD"\nprecision = "bf16"\n'
                f'activation_checkpointing = true\noffload_params = {offload}\n'
                f'offload_optimizer = {offload}\n'
                f'[lora]\nenabled = true\nr = 16\ntarget_modules = {TARGETS}\n'
                f'quantize = "{quantize}"\n'
                f'[launch]\nnproc_per_node = {gpus}\ndevice_memory_gib = {budget_gib}\n')
    out = subprocess.run([cli, "--json", "estimate", exp], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def gib(b):
    return f"{b / GIB:.1f} GiB"


def row(name, gpus, plain, nf4):
    p, q = plain["memory"], nf4["memory"]
    fits = "fits" if nf4["budget"]["fits"] else "does not fit"
    return (f"| {name} | {gpus} | {q['params_total'] / 1e9:.2f}B | {gib(q['nf4_packed'])} | "
            f"{gib(p['params'])} | {gib(q['params'])} | {gib(q['gathered'])} | "
            f"{gib(p['device'])} / {gib(p['host'])} | {gib(q['device'])} / {gib(q['host'])} | "
            f"{nf4['budget']['bytes'] / GIB:.0f} GiB: {fits} |")


HEADER = ("| model | GPUs | params (with adapters) | NF4 base, packed (whole model) | "
          "params per GPU: LoRA | params per GPU: QLoRA | gathered (QLoRA, dequantized) | LoRA: device / host | "
          "QLoRA: device / host | QLoRA vs budget |\n|---|---|---|---|---|---|---|---|---|---|")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "shardscope-cli"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        open(os.path.join(tmp, "train.jsonl"), "w").close()
        dirs = {}
        for name, config in (("llama2-70b-as-qwen2", LLAMA2_70B_AS_QWEN2),
                             ("qwen2-vl-72b", QWEN2_VL_72B)):
            dirs[name] = os.path.join(tmp, name)
            os.makedirs(dirs[name])
            with open(os.path.join(dirs[name], "config.json"), "w") as f:
                json.dump(config, f)
        dirs["qwen2-vl-7b"] = os.path.join(ROOT, "examples", "models", "qwen2-vl-7b")

        print("Llama-2-70B's dimensions (qwen2), 2 GPUs, offload_params + offload_optimizer:\n")
        print(HEADER)
        runs = [(q, estimate(args.cli, tmp, dirs["llama2-70b-as-qwen2"], "qwen2", 2, q, "true", 24))
                for q in ("none", "nf4")]
        print(row("70B (Llama-2 dims)", 2, runs[0][1], runs[1][1]))
        print("\nQwen2-VL, one node, no offload, 80 GiB budget:\n")
        print(HEADER)
        for name, label in (("qwen2-vl-7b", "Qwen2-VL-7B"), ("qwen2-vl-72b", "Qwen2-VL-72B")):
            for gpus in (1, 2, 4, 8):
                plain = estimate(args.cli, tmp, dirs[name], "qwen2_vl", gpus, "none", "false", 80)
                nf4 = estimate(args.cli, tmp, dirs[name], "qwen2_vl", gpus, "nf4", "false", 80)
                print(row(label, gpus, plain, nf4))


if __name__ == "__main__":
    main()
